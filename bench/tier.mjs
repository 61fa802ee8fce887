/**
 * npm run bench -- tier [--preset small] [--rounds R] [--tokens N] [--threads T]   (or: node bench/tier.mjs ...)
 *
 * The expert tier's cost and benefit, in one run so that every figure sees the same machine:
 *
 *   overhead   no tier  vs  tier with every expert resident (cpu backend, no heat file),
 *              alternating per round: ms/token of each, median ratio (goal <= 1.05)
 *   residency  37 % of experts resident: decode hit rate and ms/token for a fresh prompt,
 *              cold (fill by expert id) vs warm (a heat file made from three other prompts)
 *
 * Napkin math: with every expert resident the tier adds, per decode step, one route copy
 * (nLayer x k ints), per-layer stamps and a policy tick in JS (~tens of us), against a
 * step of ~ms on the small preset: the ratio should sit within noise of 1.
 * Results go to results/tier.json and the tier table in README.md.
 */
import { copyFileSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { importDist, presetModel } from './lib/moetier.mjs';
import { oneOf, positiveInt } from './lib/options.mjs';
import { writeReadmeSection } from './lib/readme.mjs';
import { median } from './lib/stats.mjs';

const arch = 'qwen3moe';
const quant = 'q4_0';

export async function main(argv) {
  const { values } = parseArgs({
    args: argv,
    options: {
      preset: { type: 'string', default: 'small' },
      rounds: { type: 'string', default: '5' },
      tokens: { type: 'string', default: '64' },
      threads: { type: 'string', default: '2' },
      resident: { type: 'string', default: '0.37' },
    },
  });
  const config = {
    preset: oneOf('preset', values.preset, ['tiny', 'small', 'medium']),
    rounds: positiveInt('rounds', values.rounds, 100),
    maxTokens: positiveInt('tokens', values.tokens, 4096),
    threads: positiveInt('threads', values.threads, 64),
    resident: Number(values.resident),
    arch,
    quant,
  };
  const machine = { cpus: os.cpus().length, cpuModel: os.cpus()[0]?.model, loadAverageAtStart: os.loadavg() };
  const { openEngine } = await importDist('src/index.js');
  const { PARITY_PROMPTS, DEMO_PROMPT, promptText } = await importDist('src/synth/prompts.js');
  const model = await presetModel({ preset: config.preset, arch, quant });
  const scratch = mkdtempSync(path.join(os.tmpdir(), 'moetier-bench-tier-'));
  try {
    const open = (extra) => openEngine({ model, threads: config.threads, contextTokens: 512, ...extra });
    const overhead = await measureOverhead(open, config, (e) => promptText(PARITY_PROMPTS[0], e.tokenizer.kind));
    const others = [DEMO_PROMPT, PARITY_PROMPTS[0], PARITY_PROMPTS[1]];
    const fresh = PARITY_PROMPTS[2];
    const residency = await measureResidency(open, config, path.join(scratch, 'heat.json'), others, fresh, promptText);
    machine.loadAverageAtEnd = os.loadavg();
    const results = { bench: 'tier', date: new Date().toISOString(), config, machine, overhead, residency };
    mkdirSync(new URL('./results/', import.meta.url), { recursive: true });
    writeFileSync(new URL('./results/tier.json', import.meta.url), `${JSON.stringify(results, null, 2)}\n`);
    writeReadmeSection(new URL('./README.md', import.meta.url), 'tier', tierTable(results));
    process.stdout.write(`${tierTable(results)}\n`);
  } finally {
    rmSync(scratch, { recursive: true, force: true });
  }
}

async function generate(engine, prompt, maxTokens) {
  const tokens = [];
  for await (const t of engine.generate(prompt, { maxTokens, stopAtEos: false })) tokens.push(t.id);
  return { tokens, stats: engine.lastStats };
}

/** Alternating rounds of the same prompt on two engines: no tier, and every expert resident. */
async function measureOverhead(open, config, promptOf) {
  const plain = await open({});
  const tiered = await open({ resident: 1, heat: false });
  try {
    const prompt = promptOf(plain);
    await generate(plain, prompt, 4); // warm-up: page cache, thread pools
    await generate(tiered, prompt, 4);
    const rounds = [];
    for (let r = 0; r < config.rounds; r++) {
      const order = r % 2 === 0 ? [plain, tiered] : [tiered, plain];
      const out = new Map();
      for (const e of order) out.set(e, await generate(e, prompt, config.maxTokens));
      const a = out.get(plain);
      const b = out.get(tiered);
      if (a.tokens.join() !== b.tokens.join()) throw new Error('the tier changed the tokens: a bug, not a measurement');
      rounds.push({ noTierMsPerToken: a.stats.msPerToken, tierMsPerToken: b.stats.msPerToken, tierDecodeHitRate: b.stats.decodeHitRate });
    }
    const noTier = median(rounds.map((x) => x.noTierMsPerToken));
    const tier = median(rounds.map((x) => x.tierMsPerToken));
    return { tierKind: tiered.tierKind, noTierMsPerToken: noTier, tierMsPerToken: tier, ratio: tier / noTier, ratioOfMedians: true, rounds };
  } finally {
    await plain.close();
    await tiered.close();
  }
}

/** Residency at config.resident: the fresh prompt cold (no heat file) vs warm (heat from other prompts). */
async function measureResidency(open, config, heatFile, others, fresh, promptText) {
  const builder = await open({ resident: config.resident, heat: heatFile });
  try {
    for (const p of others) await generate(builder, promptText(p, builder.tokenizer.kind), config.maxTokens);
  } finally {
    await builder.close();
  }
  const runs = { cold: [], warm: [] };
  for (let r = 0; r < config.rounds; r++) {
    for (const kind of r % 2 === 0 ? ['cold', 'warm'] : ['warm', 'cold']) {
      // A fresh engine each time: the warmstart is what is measured; the heat file is not merged into (copy per run).
      const heat = kind === 'cold' ? false : copyHeat(heatFile, r);
      const e = await open({ resident: config.resident, heat });
      try {
        const { stats } = await generate(e, promptText(fresh, e.tokenizer.kind), config.maxTokens);
        runs[kind].push({ decodeHitRate: stats.decodeHitRate, prefillHitRate: stats.prefillHitRate, msPerToken: stats.msPerToken, moeMsPerToken: stats.moeMsPerToken, uploads: stats.uploads });
      } finally {
        await e.close();
      }
    }
  }
  const summary = (xs) => ({
    decodeHitRate: median(xs.map((x) => x.decodeHitRate)),
    prefillHitRate: median(xs.map((x) => x.prefillHitRate)),
    msPerToken: median(xs.map((x) => x.msPerToken)),
    moeMsPerToken: median(xs.map((x) => x.moeMsPerToken)),
    uploads: median(xs.map((x) => x.uploads)),
    runs: xs,
  });
  return { resident: config.resident, heatFrom: others.map((p) => p.name), prompt: fresh.name, cold: summary(runs.cold), warm: summary(runs.warm) };
}

function copyHeat(file, round) {
  const copy = `${file}.${round}.json`;
  copyFileSync(file, copy);
  return copy;
}

export function tierTable(r) {
  const f = (v, d = 2) => (typeof v === 'number' && Number.isFinite(v) ? v.toFixed(d) : 'n/a');
  const pct = (v) => (typeof v === 'number' && Number.isFinite(v) ? `${(v * 100).toFixed(1)} %` : 'n/a');
  const load = (l) => (l ? l.map((v) => v.toFixed(1)).join(' ') : 'n/a');
  const { config: c, machine: m, overhead: o, residency: s } = r;
  return [
    `Measured ${r.date.slice(0, 10)} on ${m.cpus} cores (${m.cpuModel ?? 'unknown CPU'}), ${c.preset} ${c.arch} ${c.quant}, ${c.threads} threads, ` +
      `${c.maxTokens} tokens, medians of ${c.rounds} alternating rounds, ${o.tierKind} tier on the cpu backend; load average ${load(m.loadAverageAtStart)} -> ${load(m.loadAverageAtEnd)}.`,
    '',
    '| overhead (every expert resident) | no tier ms/token | tier ms/token | ratio (goal <= 1.05) |',
    '|---|---|---|---|',
    `| ${c.preset} | ${f(o.noTierMsPerToken)} | ${f(o.tierMsPerToken)} | ${f(o.ratio, 3)} |`,
    '',
    `| ${Math.round(s.resident * 100)} % resident, prompt ${s.prompt} | decode hit rate | prefill hit rate | ms/token | MoE ms/token | uploads |`,
    '|---|---|---|---|---|---|',
    `| cold start (by expert id) | ${pct(s.cold.decodeHitRate)} | ${pct(s.cold.prefillHitRate)} | ${f(s.cold.msPerToken)} | ${f(s.cold.moeMsPerToken, 3)} | ${s.cold.uploads} |`,
    `| heat file from ${s.heatFrom.join(', ')} | ${pct(s.warm.decodeHitRate)} | ${pct(s.warm.prefillHitRate)} | ${f(s.warm.msPerToken)} | ${f(s.warm.moeMsPerToken, 3)} | ${s.warm.uploads} |`,
  ].join('\n');
}

if (import.meta.url === `file://${process.argv[1]}`) {
  main(process.argv.slice(2)).catch((error) => {
    process.stderr.write(`bench tier failed: ${error.code ? error.message : (error.stack ?? error)}\n`);
    process.exitCode = 1;
  });
}
