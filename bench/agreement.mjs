/**
 * node bench/agreement.mjs [--budgets 1600M,2600M --tokens 300 --update-results]
 *
 * The engine agrees with its replay (issue 26, item 4): the OLMoE-1B-7B-shape preset (Q4_K_M) on the
 * disk tier, driven by the real OLMoE trace (--routes-from ../shared/traces/olmoe-1b-7b.decode.jsonl,
 * 299 decode rows of one prompt), under each --memory-budget; its routes recorded (--trace-routes);
 * then `moetier replay` of that recording at the engine's slots per layer, the engine's start (a cold
 * start fills each layer's slots with its lowest ids: --start ids), every decode token scored. Per
 * budget: the engine's reads per decode token (its own count: misses read by their call, admitted or
 * streamed) against the replay's for the engine's policy (dlfu, the disk tier's default) and, for
 * scale, lru and Belady's MIN. The prompt reads whole layers (--short-prefill-tokens 0), as the
 * replay's prefill keeps no miss. Counts only, not a timing. Routing: the real OLMoE trace.
 */
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { importDist, presetModel, repoRoot } from './lib/moetier.mjs';
import { parseBenchArgs, positiveInt, runBenchMain } from './lib/options.mjs';
import { resultsTarget, updateReadme, writeResults } from './lib/output.mjs';
import { moetierRun } from './lib/runs.mjs';

const usage = 'usage: node bench/agreement.mjs [--budgets 1600M,2600M --tokens 300 --update-results]';
const options = {
  budgets: { type: 'string', default: '1600M,2600M', help: 'memory budgets (moetier run --memory-budget)' },
  tokens: { type: 'string', default: '300', help: 'tokens per run (300: every decode row of the trace once)' },
};
const olmoeTrace = path.resolve(repoRoot, '../shared/traces/olmoe-1b-7b.decode.jsonl');
/** The engine's policy where misses are read (src/tiers/policies/index.ts engineDefaultPolicy.hostless). */
const policies = ['dlfu', 'lru', 'belady'];

async function main(argv) {
  const values = parseBenchArgs(argv, { usage, options });
  if (!values) return;
  const tokens = positiveInt('tokens', values.tokens, 4096);
  const { loadTraceFiles, runLab } = await importDist('src/tiers/lab.js');
  const { engineDefaultPolicy } = await importDist('src/tiers/policies/index.js');
  const model = await presetModel({ preset: 'olmoe-1b-7b', arch: 'olmoe', quant: 'q4_k_m' });
  const scratch = mkdtempSync(path.join(os.tmpdir(), 'moetier-bench-agreement-'));
  const rows = [];
  try {
    for (const budget of values.budgets.split(',')) {
      const recorded = path.join(scratch, `routes-${budget}.jsonl`);
      const run = moetierRun(model, tokens, [
        '-c',
        String(tokens + 64),
        '--routes-from',
        olmoeTrace,
        '--trace-routes',
        recorded,
        '--memory-budget',
        budget,
        '--short-prefill-tokens',
        '0',
      ]);
      const slots = run.memoryPlan.slotsPerLayer;
      const decodeTokens = run.tokens.length - 1;
      const replayed = runLab(loadTraceFiles([recorded]), {
        budgets: [slots],
        policies,
        offload: 'hostless',
        scope: 'layer',
        start: 'ids',
        scoreFrom: 0,
        geometry: 'olmoe-1b-7b-q4k',
      });
      const readsOf = (name) => replayed.find((r) => r.policy === name).readsPerToken;
      const engineReads = run.decodeExpertReads / decodeTokens;
      rows.push({
        budget,
        slotsPerLayer: slots,
        decodeTokens,
        engineReadsPerToken: engineReads,
        engineHitRate: run.decodeHitRate,
        replay: Object.fromEntries(policies.map((p) => [p, readsOf(p)])),
        policy: engineDefaultPolicy.hostless,
        engineOverReplay: engineReads / readsOf(engineDefaultPolicy.hostless),
      });
      process.stderr.write(
        `agreement ${budget}: ${slots} slots, engine ${engineReads.toFixed(2)} reads/token, replay dlfu ${readsOf('dlfu').toFixed(2)}\n`,
      );
    }
  } finally {
    rmSync(scratch, { recursive: true, force: true });
  }
  const summary = {
    date: new Date().toISOString(),
    cpuModel: os.cpus()[0]?.model,
    command: `node bench/agreement.mjs ${argv.join(' ')}`.trim(),
    model: path.basename(model),
    modelBytes: statSync(model).size,
    trace: path.basename(olmoeTrace),
    tokens,
    rows,
  };
  process.stdout.write(JSON.stringify(summary) + '\n');
  const target = resultsTarget(values['update-results']);
  writeResults(target, 'agreement', JSON.stringify(summary, null, 2) + '\n');
  updateReadme(target, 'agreement', table(summary));
}

function table(s) {
  const f = (x, d = 2) => (typeof x === 'number' && Number.isFinite(x) ? x.toFixed(d) : 'n/a');
  return [
    `Measured ${s.date.slice(0, 10)}; ${s.model}, driven by the real ${s.trace} (--routes-from), ${s.tokens} tokens; the replay is of the engine's own recorded routes at its slots and start. Counts, not timings.`,
    '',
    "| --memory-budget | slots per layer | engine reads / token | replay dlfu (the engine's policy) | engine / replay | replay lru | Belady MIN | engine hit rate |",
    '|---|---|---|---|---|---|---|---|',
    ...s.rows.map(
      (r) =>
        `| ${r.budget} | ${r.slotsPerLayer} | ${f(r.engineReadsPerToken)} | ${f(r.replay.dlfu)} | ${f(r.engineOverReplay, 4)} | ${f(r.replay.lru)} | ${f(r.replay.belady)} | ${f(r.engineHitRate, 3)} |`,
    ),
  ].join('\n');
}

runBenchMain('agreement', main);
