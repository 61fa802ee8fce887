/**
 * node bench/routing.mjs [--presets small,medium,olmoe-1b-7b --tokens N --update-results]
 *
 * What the presets' routing looks like beside a real model's (issue 25): greedy decodes of the
 * routing prompts (src/synth/prompts.ts ROUTING_PROMPTS) on each preset, realistic routing (the
 * default) and planted, their routes recorded (--trace-routes) and summarised by `moetier routes
 * stats` (src/tiers/route-stats.ts: decode rows, the mean over prompts of each prompt's mean over
 * layers), beside the shared OLMoE-1B-7B trace (../shared/traces/, 299 decode tokens of one prompt).
 * Same as running `moetier routes stats` on the traces by hand. Not a timing: counts only.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { importDist, presetModel, repoRoot } from './lib/moetier.mjs';
import { parseBenchArgs, positiveInt, runBenchMain } from './lib/options.mjs';
import { resultsTarget, updateReadme, writeResults } from './lib/output.mjs';

const usage = 'usage: node bench/routing.mjs [--presets small,medium,olmoe-1b-7b --tokens N --update-results]';
const options = {
  presets: { type: 'string', default: 'small,medium,olmoe-1b-7b', help: 'presets (Q8_0; olmoe-1b-7b at Q4_K_M)' },
  tokens: { type: 'string', default: '64', help: 'greedy tokens per prompt' },
};
const sharedTrace = path.resolve(repoRoot, '../shared/traces/olmoe-1b-7b.decode.jsonl');

async function main(argv) {
  const values = parseBenchArgs(argv, { usage, options });
  if (!values) return;
  const tokens = positiveInt('tokens', values.tokens, 4096);
  const { loadTraceFiles } = await importDist('src/tiers/lab.js');
  const { traceRouteStats, pooledPhase } = await importDist('src/tiers/route-stats.js');
  const rows = [];
  const shared = traceRouteStats(loadTraceFiles([sharedTrace])[0]);
  rows.push({
    source: 'OLMoE-1B-7B (real trace)',
    routing: 'real',
    layers: shared.layers,
    experts: shared.experts,
    topK: shared.topK,
    prompts: 1,
    decodeSteps: shared.decode.steps,
    mean: shared.decode.mean,
  });
  const scratch = mkdtempSync(path.join(os.tmpdir(), 'moetier-bench-routing-'));
  try {
    for (const preset of values.presets.split(',')) {
      for (const routing of ['realistic', 'planted']) {
        const quant = preset === 'olmoe-1b-7b' ? 'q4_k_m' : 'q8_0';
        const model = await presetModel({ preset, quant, routing });
        const files = await decodeTraces(model, path.join(scratch, `${preset}-${routing}`), tokens);
        const all = loadTraceFiles(files).map(traceRouteStats);
        const pooled = pooledPhase(all, 'decode');
        rows.push({
          source: `${preset} ${quant}`,
          routing: routing === 'realistic' ? 'realistic synthetic' : 'planted',
          layers: all[0].layers,
          experts: all[0].experts,
          topK: all[0].topK,
          prompts: pooled.traces,
          decodeSteps: all[0].decode.steps,
          mean: pooled.mean,
        });
        process.stderr.write(
          `routing ${preset} ${routing}: entropy ${pooled.mean.entropy.toFixed(3)}, reuse x${pooled.mean.reuseOverChance.toFixed(2)}\n`,
        );
      }
    }
  } finally {
    rmSync(scratch, { recursive: true, force: true });
  }
  const summary = {
    date: new Date().toISOString(),
    cpuModel: os.cpus()[0]?.model,
    command: `node bench/routing.mjs ${argv.join(' ')}`.trim(),
    tokens,
    rows,
  };
  process.stdout.write(JSON.stringify(summary) + '\n');
  const target = resultsTarget(values['update-results']);
  writeResults(target, 'routing', JSON.stringify(summary, null, 2) + '\n');
  updateReadme(target, 'routing', table(summary));
}

/** One route trace per routing prompt: greedy, `tokens` tokens, through the library. */
async function decodeTraces(model, prefix, tokens) {
  const { openEngine } = await importDist('src/index.js');
  const { ROUTING_PROMPTS, promptText } = await importDist('src/synth/prompts.js');
  const engine = await openEngine({ model, threads: 2, contextTokens: 256 });
  const files = [];
  try {
    for (const [i, p] of ROUTING_PROMPTS.entries()) {
      const traceRoutes = `${prefix}-${i}.jsonl`;
      for await (const _ of engine.generate(promptText(p, engine.tokenizer.kind), {
        maxTokens: tokens,
        traceRoutes,
        stopAtEos: false,
      })) {
        /* the routes are what is measured */
      }
      files.push(traceRoutes);
    }
  } finally {
    await engine.close();
  }
  return files;
}

function table(s) {
  const f = (x) => (x === null || x === undefined ? '-' : x.toFixed(3));
  return [
    `Measured ${s.date.slice(0, 10)}; ${s.tokens} greedy tokens per prompt (decode rows: one fewer), the mean over prompts of each prompt's mean over layers; LRU and Belady per layer, host-less, cold, the first 16 tokens not scored.`,
    '',
    '| model | routing | layers x experts, k | prompts x decode rows | entropy | top-E/4 share | reuse (x chance) | distinct in 16 / 64 tokens (share of E) | LRU hit at 12.5 / 25 / 37.5 / 50 % of E | Belady hit at the same |',
    '|---|---|---|---|---|---|---|---|---|---|',
    ...s.rows.map(
      (r) =>
        `| ${r.source} | ${r.routing} | ${r.layers} x ${r.experts}, ${r.topK} | ${r.prompts} x ${r.decodeSteps} | ${f(r.mean.entropy)} | ${f(r.mean.topQuarterShare)} | ${f(r.mean.reuse)} (${r.mean.reuseOverChance.toFixed(2)}) | ${f(r.mean.window16Share)} / ${f(r.mean.window64Share)} | ${r.mean.lruHitRate.map(f).join(' / ')} | ${r.mean.beladyHitRate.map(f).join(' / ')} |`,
    ),
  ].join('\n');
}

runBenchMain('routing', main);
