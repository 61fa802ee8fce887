/**
 * node bench/builds.mjs --before DIR [--after DIR] [--quants q8_0,q4_0,q4_k_m] [--rounds 3] [--update-results]
 *
 * Two builds of moetier against each other (a change's before and after, no peer): decode and
 * prefill tok/s on the medium qwen3moe preset (realistic synthetic routing) at 1 and 2 threads,
 * before and after alternating within each round, every run a fresh engine in its own process
 * (bench/lib/builds-child.mjs, the decode bench's protocol). DIR is a checkout with `npm run build`
 * done, e.g. `git worktree add /tmp/before <rev> && cd /tmp/before && ln -s $PWD/../main/node_modules
 * && npm run build`; --after defaults to this checkout. Medians per (build, threads); ratios after /
 * before. Writes results/local/builds.json, or with --update-results results/builds.json.
 */
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { BenchOptionError, oneOf, parseBenchArgs, positiveInt, runBenchMain } from './lib/options.mjs';
import { presetModel, repoRoot } from './lib/moetier.mjs';
import { resultsTarget, writeResults } from './lib/output.mjs';
import { median } from './lib/stats.mjs';

const QUANTS = ['q8_0', 'q4_0', 'q4_k_m', 'q5_k_m', 'q6_k'];
const child = fileURLToPath(new URL('./lib/builds-child.mjs', import.meta.url));
const usage = `usage: node bench/builds.mjs --before DIR [options]

Two builds of moetier (each a checkout with npm run build done) on the medium preset, decode and
prefill, 1 and 2 threads, alternating runs.`;
const options = {
  before: { type: 'string', help: 'the checkout measured as "before" (required)' },
  after: { type: 'string', default: repoRoot, help: 'the checkout measured as "after"' },
  quants: { type: 'string', default: 'q8_0,q4_0,q4_k_m', help: `comma-separated, among ${QUANTS.join(', ')}` },
  rounds: { type: 'string', default: '3', help: 'alternating rounds' },
  'prompt-tokens': { type: 'string', default: '128', help: 'prompt length' },
  tokens: { type: 'string', default: '64', help: 'tokens generated per run' },
};

function checkout(option, dir) {
  if (dir === undefined) throw new BenchOptionError(option, 'a checkout folder', dir);
  const resolved = path.resolve(dir);
  if (!existsSync(path.join(resolved, 'dist/src/index.js')))
    throw new BenchOptionError(option, 'a checkout with `npm run build` done (dist/src/index.js)', dir);
  return resolved;
}

export async function main(argv) {
  const values = parseBenchArgs(argv, { usage, options });
  if (!values) return;
  const builds = { before: checkout('before', values.before), after: checkout('after', values.after) };
  const rounds = positiveInt('rounds', values.rounds, 50);
  const promptTokens = positiveInt('prompt-tokens', values['prompt-tokens'], 4096);
  const maxTokens = positiveInt('tokens', values.tokens, 4096);
  const quants = values.quants.split(',').map((q) => oneOf('quants', q.trim(), QUANTS));
  const machine = { cpus: os.cpus().length, cpuModel: os.cpus()[0]?.model, loadAverageAtStart: os.loadavg() };
  const cases = [];
  for (const quant of quants) {
    const model = await presetModel({ preset: 'medium', arch: 'qwen3moe', quant, seed: 1 });
    const runs = {};
    for (let round = 0; round < rounds; round++)
      for (const threads of [1, 2])
        for (const build of ['before', 'after']) {
          const args = [child, builds[build], model, String(threads), String(promptTokens), String(maxTokens)];
          const out = execFileSync(process.execPath, args, { encoding: 'utf8' }).trim().split('\n').pop();
          const run = JSON.parse(out);
          (runs[`${build}@${threads}`] ??= []).push(run);
          process.stderr.write(
            `builds: ${quant} round ${round + 1}/${rounds} ${build} ${threads}T: decode ${run.decodeTokPerS.toFixed(1)}, prefill ${run.prefillTokPerS.toFixed(1)} tok/s\n`,
          );
        }
    cases.push(summarize(quant, runs));
  }
  machine.loadAverageAtEnd = os.loadavg();
  const results = {
    bench: 'builds',
    date: new Date().toISOString(),
    builds,
    routing: 'realistic synthetic',
    promptTokens,
    maxTokens,
    rounds,
    machine,
    cases,
  };
  writeResults(resultsTarget(values['update-results']), 'builds', JSON.stringify(results, null, 2) + '\n');
  process.stdout.write(`${table(results)}\n`);
}

/** Medians per (build, threads) of decode and prefill, and after / before. */
export function summarize(quant, runs) {
  const medianOf = (key, field) => median(runs[key].map((r) => r[field]));
  const row = { quant, medians: {}, runs };
  for (const threads of [1, 2])
    for (const field of ['decodeTokPerS', 'prefillTokPerS']) {
      const before = medianOf(`before@${threads}`, field),
        after = medianOf(`after@${threads}`, field);
      row.medians[`${field}@${threads}`] = { before, after, ratio: after / before };
    }
  return row;
}

export function table(results) {
  const lines = [
    `| model | decode 1T before / after | decode 2T before / after | 2T / 1T after | prefill 1T before / after | prefill 2T before / after |`,
    '|---|---|---|---|---|---|',
  ];
  const pair = (m) => `${m.before.toFixed(1)} / ${m.after.toFixed(1)} (${m.ratio.toFixed(2)}x)`;
  for (const c of results.cases) {
    const m = c.medians;
    lines.push(
      `| medium ${c.quant} | ${pair(m['decodeTokPerS@1'])} | ${pair(m['decodeTokPerS@2'])} | ${(m['decodeTokPerS@2'].after / m['decodeTokPerS@1'].after).toFixed(2)} | ${pair(m['prefillTokPerS@1'])} | ${pair(m['prefillTokPerS@2'])} |`,
    );
  }
  return lines.join('\n');
}

if (import.meta.url === `file://${process.argv[1]}`) runBenchMain('builds', main);
