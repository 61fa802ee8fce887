/**
 * node bench/guard.mjs [--preset small] [--tokens 96] [--resident 0.37] [--rounds 2] [--update-results]
 *
 * The replan guard (issue 15) as a new user meets it: `moetier run` itself, in a child process per
 * request, on the small preset with a heat file from one code prompt outside the synthetic topics.
 *
 *   prompts   stars, fisherman: outside the topics, the model writes the same filler whatever the
 *             prompt, so the decode routes like the heat file and unlike the prefill (replan misleads);
 *             rocket, captain: on the synthetic topics, the prefill predicts the decode (replan helps)
 *   cells     replan off with the guard off (docs/SPEC.md's plain LFRU), off with the guard (the default:
 *             the replan held in reserve), on unguarded (docs/SPEC.md section 2), on guarded (the default
 *             with --prefill-replan); a fresh copy of the heat file each, cells alternated per round
 *   figures   decode hit rate (medians over rounds), the guard's layers, ms/token
 *
 * Goal (the issue's done-when): guarded replan on within 2 points of off on stars and fisherman, and
 * on rocket and captain keeping replan's gain. Napkin: a wrong replan at 37 % (12 of 32 slots) swaps
 * up to 12 experts per layer on a short prompt's noise; the guard decides at decode token 1 or 2 and
 * its 96 swaps back land at the upload queue's 8 per token, so the loss is the first ~12 tokens' share
 * of the difference (0.5 x 12 / 95 ~ 6 points unguarded-to-off worst case, less as the most-routed
 * experts come back first).
 * Results: results/local/guard.json (git-ignored); with --update-results results/guard.json and the
 * guard table in README.md.
 */
import { execFileSync } from 'node:child_process';
import { copyFileSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { presetModel, repoRoot } from './lib/moetier.mjs';
import { oneOf, parseBenchArgs, positiveInt, runBenchMain } from './lib/options.mjs';
import { resultsTarget, updateReadme, writeResults } from './lib/output.mjs';
import { median } from './lib/stats.mjs';

const usage = `usage: node bench/guard.mjs [options]

The replan guard through moetier run: decode hit rate with replan off / on, guard off / on, on the
small preset with a heat file from a code prompt (a few minutes).`;

const options = {
  preset: { type: 'string', default: 'small', help: 'tiny | small | medium' },
  tokens: { type: 'string', default: '96', help: 'tokens generated per request' },
  resident: { type: 'string', default: '0.37', help: 'resident fraction of experts' },
  rounds: { type: 'string', default: '2', help: 'rounds (cells alternate per round)' },
  threads: { type: 'string', default: '2', help: 'compute threads' },
};

const heatPrompt = 'write a python function that sorts a list';
const prompts = [
  { name: 'stars', kind: 'misleading prefill', text: 'tell me about the stars' },
  { name: 'fisherman', kind: 'misleading prefill', text: 'write a story about a fisherman' },
  { name: 'rocket', kind: 'on topic', text: 'the rocket will launch into orbit around the moon and the planet' },
  { name: 'captain', kind: 'on topic', text: 'the captain and the crew sail the ship across the sea to the harbor' },
];
const cells = {
  offPlain: ['--replan-guard', 'off'],
  off: [],
  onUnguarded: ['--prefill-replan', '--replan-guard', 'off'],
  on: ['--prefill-replan'],
};

export async function main(argv) {
  const values = parseBenchArgs(argv, { usage, options });
  if (!values) return;
  const config = {
    preset: oneOf('preset', values.preset, ['tiny', 'small', 'medium']),
    routing: 'realistic synthetic',
    maxTokens: positiveInt('tokens', values.tokens, 4096),
    resident: Number(values.resident),
    rounds: positiveInt('rounds', values.rounds, 100),
    threads: positiveInt('threads', values.threads, 64),
    quant: 'q8_0',
    heatPrompt,
  };
  const model = await presetModel({ preset: config.preset, arch: 'qwen3moe', quant: config.quant });
  const scratch = mkdtempSync(path.join(os.tmpdir(), 'moetier-bench-guard-'));
  const cli = path.join(repoRoot, 'dist/src/cli/main.js');
  const run = (heat, prompt, extra) => {
    const out = execFileSync(
      process.execPath,
      [
        cli,
        'run',
        '--model',
        model,
        '--prompt',
        prompt,
        '--resident',
        String(config.resident),
        '--max-tokens',
        String(config.maxTokens),
        '--threads',
        String(config.threads),
        '--heat',
        heat,
        '--json',
        ...extra,
      ],
      { encoding: 'utf8', maxBuffer: 64 << 20 },
    );
    return JSON.parse(out.trim().split('\n').at(-1));
  };
  try {
    const heat = path.join(scratch, 'heat.json');
    run(heat, heatPrompt, ['--replan-guard', 'off']);
    const runs = Object.fromEntries(
      prompts.map((p) => [p.name, Object.fromEntries(Object.keys(cells).map((c) => [c, []]))]),
    );
    let copy = 0;
    for (let r = 0; r < config.rounds; r++) {
      for (const p of prompts) {
        const order = r % 2 === 0 ? Object.keys(cells) : Object.keys(cells).reverse();
        for (const c of order) {
          const h = path.join(scratch, `heat-${copy++}.json`);
          copyFileSync(heat, h);
          const j = run(h, p.text, cells[c]);
          runs[p.name][c].push({
            decodeHitRate: j.decodeHitRate,
            msPerToken: j.msPerToken,
            uploads: j.uploads,
            replanGuard: j.replanGuard ?? null,
          });
          process.stderr.write(`${p.name} ${c}: ${j.decodeHitRate}\n`);
        }
      }
    }
    const rows = prompts.map((p) => ({
      prompt: p.name,
      kind: p.kind,
      text: p.text,
      ...Object.fromEntries(
        Object.keys(cells).map((c) => {
          const xs = runs[p.name][c];
          return [
            c,
            {
              decodeHitRate: median(xs.map((x) => x.decodeHitRate)),
              msPerToken: median(xs.map((x) => x.msPerToken)),
              uploads: median(xs.map((x) => x.uploads)),
              replanGuard: xs[0].replanGuard,
              runs: xs,
            },
          ];
        }),
      ),
    }));
    const result = {
      bench: 'guard',
      date: new Date().toISOString(),
      config,
      machine: { cpus: os.cpus().length, cpuModel: os.cpus()[0]?.model, loadAverage: os.loadavg() },
      rows,
    };
    const target = resultsTarget(values['update-results']);
    writeResults(target, 'guard', `${JSON.stringify(result, null, 2)}\n`);
    const table = guardTable(result);
    updateReadme(target, 'guard', table);
    process.stdout.write(`${table}\n`);
  } finally {
    rmSync(scratch, { recursive: true, force: true });
  }
}

export function guardTable(r) {
  const pct = (v) => (typeof v === 'number' ? `${(v * 100).toFixed(1)} %` : 'n/a');
  const pts = (a, b) => `${((a - b) * 100).toFixed(1)}`;
  const g = (x) =>
    x.replanGuard ? `${x.replanGuard.kept} kept / ${x.replanGuard.reverted + x.replanGuard.appliedLate} switched` : '-';
  const c = r.config;
  const lines = [
    `The replan guard through \`moetier run\` (a child process per request): ${c.preset} ${c.quant}, ${c.routing ?? 'planted'} routing, ${Math.round(c.resident * 100)} % resident, ${c.maxTokens} tokens, ` +
      `heat file from one run of "${c.heatPrompt}", a fresh copy per request, medians of ${c.rounds} rounds, measured ${r.date.slice(0, 16)}Z. ` +
      "Off plain: docs/SPEC.md's LFRU (`--replan-guard off`); off: the default (the replan held in reserve); on unguarded: docs/SPEC.md section 2 (`--prefill-replan --replan-guard off`); on: `--prefill-replan`. Goal: on within 2 points of off where the prefill misleads; on keeps replan's gain on topic.",
    '',
    '| prompt | case | off plain | off (default) | on unguarded | on (guarded) | on - off, points | guard layers (on) | ms/token off / on |',
    '|---|---|---|---|---|---|---|---|---|',
  ];
  for (const row of r.rows) {
    lines.push(
      `| ${row.prompt} | ${row.kind} | ${pct(row.offPlain.decodeHitRate)} | ${pct(row.off.decodeHitRate)} | ${pct(row.onUnguarded.decodeHitRate)} | ${pct(row.on.decodeHitRate)} | ` +
        `${pts(row.on.decodeHitRate, row.off.decodeHitRate)} (vs plain ${pts(row.on.decodeHitRate, row.offPlain.decodeHitRate)}) | ${g(row.on)} | ${row.off.msPerToken.toFixed(2)} / ${row.on.msPerToken.toFixed(2)} |`,
    );
  }
  return lines.join('\n');
}

if (import.meta.url === `file://${process.argv[1]}`) runBenchMain('guard', main);
