/**
 * npm run bench -- tier [--preset small] [--quant q4_0] [--rounds R] [--tokens N] [--threads 1,2]
 *                       [--parts overhead,residency] [--settle-ms 500] [--warmup-requests 40] [--update-results]
 *                                                                           (or: node bench/tier.mjs ...)
 *
 * The expert tier's cost and benefit, in one run so that every figure sees the same machine:
 *
 *   overhead   no tier  vs  tier with every expert resident (cpu backend, a fresh heat file), per
 *              thread count, after --warmup-requests requests of each engine, rotating per
 *              round: ms/token of each, the median of the per-round ratios (goal <= 1.05) and
 *              their quartiles, a second engine without a tier as the noise floor, the ratio of
 *              the medians, CPU time, load average per round
 *   residency  37 % of experts resident: decode hit rate and ms/token for a fresh prompt,
 *              cold (fill by expert id) vs warm (a heat file made from three other prompts), each
 *              with the replan guard on (the default) and off (docs/SPEC.md's plain LFRU), and warm
 *              with decayed LFU: how long a heat file that misleads can hurt (issue 15)
 *
 * Napkin math (small preset, 8 layers, top-4, ~1.2-1.5 ms/token): with every expert resident
 * the tier adds per decode step 32 slot leases (a lock each, < 0.1 us), the layer-compute
 * actor's report on the bus and the placement's check (~10-20 us of JavaScript, most of it
 * cache misses: the eval evicts that code every token), and every 8 steps the route log, spans
 * and calibration fold of those steps (~11-26 us a step); the LFRU tick has nothing to decide
 * when every expert is resident and is skipped. Goal: within 5 %.
 * Results go to results/local/tier.json (git-ignored; one entry per preset and quant, replaced on
 * a rerun); with --update-results to results/tier.json and the tier table in README.md.
 */
import { copyFileSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { importDist, presetModel } from './lib/moetier.mjs';
import { oneOf, parseBenchArgs, positiveInt, runBenchMain } from './lib/options.mjs';
import { readResults as readTarget, resultsTarget, updateReadme, writeResults } from './lib/output.mjs';
import { median, quantile } from './lib/stats.mjs';

const arch = 'qwen3moe';

const usage = `usage: npm run bench -- tier [options]   (or: node bench/tier.mjs [options])

The expert tier's cost (no tier vs every expert resident, ms/token per thread count) and benefit
(37 % resident: decode hit rate, cold start vs a heat file). Minutes on the small preset; the
tiny preset with --rounds 1 --warmup-requests 1 is a quick smoke run.`;

const options = {
  preset: { type: 'string', default: 'small', help: 'tiny | small | medium' },
  quant: { type: 'string', default: 'q4_0', help: 'q4_0 | q8_0' },
  rounds: { type: 'string', default: '7', help: 'rounds (engines rotate per round)' },
  tokens: { type: 'string', default: '64', help: 'tokens generated per request' },
  threads: { type: 'string', default: '1,2', help: 'thread counts of the overhead part' },
  resident: { type: 'string', default: '0.37', help: 'resident fraction of the residency part' },
  parts: { type: 'string', default: 'overhead,residency', help: 'overhead, residency' },
  'settle-ms': { type: 'string', default: '500', help: 'pause between rounds' },
  'warmup-requests': { type: 'string', default: '40', help: 'requests per engine before measuring' },
};

export async function main(argv) {
  const values = parseBenchArgs(argv, { usage, options });
  if (!values) return;
  const parts = values.parts.split(',').map((p) => oneOf('parts', p, ['overhead', 'residency']));
  const config = {
    preset: oneOf('preset', values.preset, ['tiny', 'small', 'medium']),
    quant: oneOf('quant', values.quant, ['q4_0', 'q8_0']),
    rounds: positiveInt('rounds', values.rounds, 1000),
    maxTokens: positiveInt('tokens', values.tokens, 4096),
    threads: values.threads.split(',').map((t) => positiveInt('threads', t, 64)),
    resident: Number(values.resident),
    settleMs: Number(values['settle-ms']),
    warmupRequests: positiveInt('warmup-requests', values['warmup-requests'], 1000),
    parts,
    arch,
    routing: 'realistic synthetic',
  };
  const machine = { cpus: os.cpus().length, cpuModel: os.cpus()[0]?.model, loadAverageAtStart: os.loadavg() };
  const { openEngine } = await importDist('src/index.js');
  const { PARITY_PROMPTS, DEMO_PROMPT, promptText } = await importDist('src/synth/prompts.js');
  const model = await presetModel({ preset: config.preset, arch, quant: config.quant });
  const scratch = mkdtempSync(path.join(os.tmpdir(), 'moetier-bench-tier-'));
  try {
    const run = { date: new Date().toISOString(), config, machine, overhead: [], residency: undefined };
    for (const threads of parts.includes('overhead') ? config.threads : []) {
      const open = (extra) => openEngine({ model, threads, contextTokens: 512, ...extra });
      const heat = path.join(scratch, `overhead-${threads}.heat.json`);
      run.overhead.push(
        await measureOverhead(open, threads, config, (e) => promptText(PARITY_PROMPTS[0], e.tokenizer.kind), heat),
      );
    }
    if (parts.includes('residency')) {
      const open = (extra) => openEngine({ model, threads: config.threads.at(-1), contextTokens: 512, ...extra });
      const others = [DEMO_PROMPT, PARITY_PROMPTS[0], PARITY_PROMPTS[1]];
      run.residency = await measureResidency(
        open,
        config,
        path.join(scratch, 'heat.json'),
        others,
        PARITY_PROMPTS[2],
        promptText,
      );
    }
    machine.loadAverageAtEnd = os.loadavg();
    const target = resultsTarget(values['update-results']);
    const results = mergeRun(readResults(target), run);
    writeResults(target, 'tier', `${compactJson(results)}\n`);
    updateReadme(target, 'tier', tierTable(results));
    process.stdout.write(`${tierTable(results)}\n`);
  } finally {
    rmSync(scratch, { recursive: true, force: true });
  }
}

/** Pretty JSON with every flat object (a round) and every flat array on one line: hundreds of rounds stay readable. */
export function compactJson(value) {
  return JSON.stringify(value, null, 2)
    .replace(/\{\n\s+([^{}[\]]*?)\n\s+\}/g, (_, body) => `{ ${body.split(/,\n\s+/).join(', ')} }`)
    .replace(/\[\n\s+([^{}[\]]*?)\n\s+\]/g, (_, body) => `[${body.split(/,\n\s+/).join(', ')}]`);
}

/** The target's tier.json: { bench, runs: [one per preset and quant] }; a file of another shape is replaced. */
function readResults(target) {
  const old = readTarget(target, 'tier');
  return Array.isArray(old?.runs) ? old : { bench: 'tier', runs: [] };
}

function mergeRun(results, run) {
  const key = (r) => `${r.config.preset}/${r.config.quant}`;
  const prior = results.runs.find((r) => key(r) === key(run));
  // A rerun of one part keeps the other part's last figures.
  if (prior && run.overhead.length === 0) run.overhead = prior.overhead;
  if (prior && !run.residency) run.residency = prior.residency;
  const runs = [...results.runs.filter((r) => key(r) !== key(run)), run];
  runs.sort((a, b) => key(a).localeCompare(key(b)));
  return { bench: 'tier', runs };
}

/**
 * cpuMsPerToken: the process's CPU time (every thread: JS, eval, pool, transfers, workers) from
 * the first token to the last, per decode token, the window of stats.msPerToken. Wall time on a
 * shared machine moves with the others' load; CPU time much less, so both are reported.
 */
async function generate(engine, prompt, maxTokens) {
  const tokens = [];
  let cpuStart;
  for await (const t of engine.generate(prompt, { maxTokens, stopAtEos: false })) {
    if (tokens.length === 0) cpuStart = process.cpuUsage();
    tokens.push(t.id);
  }
  const cpu = process.cpuUsage(cpuStart);
  const cpuMsPerToken = tokens.length > 1 ? (cpu.user + cpu.system) / 1000 / (tokens.length - 1) : Number.NaN;
  return { tokens, stats: engine.lastStats, cpuMsPerToken };
}

/**
 * Rotating rounds of the same prompt on three engines: no tier (A), every expert resident, and
 * a second engine without a tier (B). B against A is the noise floor of the procedure: two
 * identical engines that differ only in which one they are (memory placement, order).
 */
async function measureOverhead(open, threads, config, promptOf, heatFile) {
  // The tier as users run it: with a heat file (a fresh one; every expert is resident, so it
  // changes no placement), whose route log is kept per step and merged after each request.
  const engines = { plain: await open({}), tier: await open({ resident: 1, heat: heatFile }), control: await open({}) };
  try {
    const prompt = promptOf(engines.plain);
    // Warm-up: page cache, thread pools, and V8's optimizing compilers, which tier a function up
    // after some thousand calls (a per-token function runs interpreted for the first requests;
    // a server runs warm). Both engines get the same warm-up.
    for (let i = 0; i < config.warmupRequests; i++)
      for (const e of Object.values(engines)) await generate(e, prompt, config.maxTokens);
    // The int8-rebuild actor's first worker boots right after open (piscina minThreads 1): let
    // it finish before timing, or it takes one of the two cores from the first rounds.
    await sleep(config.settleMs);
    const names = Object.keys(engines);
    const rounds = [];
    for (let r = 0; r < config.rounds; r++) {
      const out = {};
      for (let i = 0; i < names.length; i++) {
        const name = names[(r + i) % names.length];
        out[name] = await generate(engines[name], prompt, config.maxTokens);
      }
      if (out.plain.tokens.join() !== out.tier.tokens.join())
        throw new Error('the tier changed the tokens: a bug, not a measurement');
      rounds.push({
        noTierMsPerToken: out.plain.stats.msPerToken,
        tierMsPerToken: out.tier.stats.msPerToken,
        controlMsPerToken: out.control.stats.msPerToken,
        ratio: out.tier.stats.msPerToken / out.plain.stats.msPerToken,
        controlRatio: out.control.stats.msPerToken / out.plain.stats.msPerToken,
        noTierCpuMsPerToken: out.plain.cpuMsPerToken,
        tierCpuMsPerToken: out.tier.cpuMsPerToken,
        controlCpuMsPerToken: out.control.cpuMsPerToken,
        tierDecodeHitRate: out.tier.stats.decodeHitRate,
        loadAverage1m: os.loadavg()[0],
      });
    }
    const m = (field) => median(rounds.map((x) => x[field]));
    return {
      threads,
      date: new Date().toISOString(),
      maxTokens: config.maxTokens,
      tierBackend: engines.tier.config.tier?.backend,
      noTierMsPerToken: m('noTierMsPerToken'),
      tierMsPerToken: m('tierMsPerToken'),
      ratio: m('tierMsPerToken') / m('noTierMsPerToken'),
      medianRoundRatio: m('ratio'),
      roundRatioQuartiles: [
        quantile(
          rounds.map((x) => x.ratio),
          0.25,
        ),
        quantile(
          rounds.map((x) => x.ratio),
          0.75,
        ),
      ],
      controlRatio: m('controlMsPerToken') / m('noTierMsPerToken'),
      medianRoundControlRatio: m('controlRatio'),
      noTierCpuMsPerToken: m('noTierCpuMsPerToken'),
      tierCpuMsPerToken: m('tierCpuMsPerToken'),
      cpuRatio: m('tierCpuMsPerToken') / m('noTierCpuMsPerToken'),
      controlCpuRatio: m('controlCpuMsPerToken') / m('noTierCpuMsPerToken'),
      loadAverage1m: {
        min: Math.min(...rounds.map((x) => x.loadAverage1m)),
        max: Math.max(...rounds.map((x) => x.loadAverage1m)),
      },
      rounds,
    };
  } finally {
    for (const e of Object.values(engines)) await e.close();
  }
}

/** Residency at config.resident: the fresh prompt cold (no heat file) vs warm (heat from other prompts), guard on / off, and dlfu. */
async function measureResidency(open, config, heatFile, others, fresh, promptText) {
  const loadAverageAtStart = os.loadavg();
  const builder = await open({ resident: config.resident, heat: heatFile });
  try {
    for (const p of others) await generate(builder, promptText(p, builder.tokenizer.kind), config.maxTokens);
  } finally {
    await builder.close();
  }
  // Each cell a fresh engine (the warmstart is what is measured; the heat file is not merged into: a copy per run).
  // guard: the replan guard (default on; with replan off it holds the prompt's replan in reserve and takes it
  // where the first decode tokens favour it); off: docs/SPEC.md's plain LFRU baseline. dlfu: decayed LFU.
  const cells = {
    cold: { heat: false },
    coldUnguarded: { heat: false, prefillReplan: { guard: false } },
    warm: { heat: true },
    warmUnguarded: { heat: true, prefillReplan: { guard: false } },
    warmDlfu: { heat: true, placementPolicy: 'dlfu' },
  };
  const runs = Object.fromEntries(Object.keys(cells).map((k) => [k, []]));
  const kinds = Object.keys(cells);
  for (let r = 0; r < config.rounds; r++) {
    for (const kind of r % 2 === 0 ? kinds : [...kinds].reverse()) {
      const { heat, ...extra } = cells[kind];
      const e = await open({ resident: config.resident, heat: heat ? copyHeat(heatFile, r) : false, ...extra });
      try {
        const { stats } = await generate(e, promptText(fresh, e.tokenizer.kind), config.maxTokens);
        runs[kind].push({
          decodeHitRate: stats.decodeHitRate,
          prefillHitRate: stats.prefillHitRate,
          msPerToken: stats.msPerToken,
          moeMsPerToken: stats.moeMsPerToken,
          uploads: stats.uploads,
          replanGuard: stats.replanGuard ?? null,
        });
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
  return {
    date: new Date().toISOString(),
    threads: config.threads.at(-1),
    rounds: config.rounds,
    maxTokens: config.maxTokens,
    loadAverageAtStart,
    loadAverageAtEnd: os.loadavg(),
    resident: config.resident,
    heatFrom: others.map((p) => p.name),
    prompt: fresh.name,
    ...Object.fromEntries(kinds.map((k) => [k, summary(runs[k])])),
  };
}

function copyHeat(file, round) {
  const copy = `${file}.${round}.json`;
  copyFileSync(file, copy);
  return copy;
}

export function tierTable(results) {
  const f = (v, d = 2) => (typeof v === 'number' && Number.isFinite(v) ? v.toFixed(d) : 'n/a');
  const pct = (v) => (typeof v === 'number' && Number.isFinite(v) ? `${(v * 100).toFixed(1)} %` : 'n/a');
  const load = (l) => (l ? l.map((v) => v.toFixed(1)).join(' ') : 'n/a');
  const lines = [
    'Overhead: every expert resident (native tier, cpu backend, a fresh heat file, merged after each request) against no tier, same prompt, ms per decode token, ' +
      'after a warm-up of both engines (V8 optimizes per-token code after some thousand calls). ' +
      "The goal figure is the median of the per-round ratios: the engines of a round run back to back and share the machine's " +
      "state of the moment, while the same engine's ms/token moves by up to 2x over seconds on this shared machine; the " +
      'quartiles of those ratios say how wide they spread. Control: a second engine without a tier in the same rotation, ' +
      "against the first (median round ratio): the noise floor of the procedure. Ratio of medians: the medians of each engine's rounds. " +
      "CPU: the process's CPU time (all threads) over the same window. Load: the 1-minute load average over the rounds.",
    '',
    '| model | threads | tokens x rounds | no tier ms/token | tier ms/token | median round ratio (goal <= 1.05) | round ratio quartiles | control (noise) | ratio of medians | CPU ms/token no tier / tier | CPU ratio | load 1m | measured |',
    '|---|---|---|---|---|---|---|---|---|---|---|---|---|',
  ];
  for (const r of results.runs) {
    for (const o of r.overhead) {
      const quartiles = o.roundRatioQuartiles
        ? `${f(o.roundRatioQuartiles[0], 3)}-${f(o.roundRatioQuartiles[1], 3)}`
        : 'n/a';
      lines.push(
        `| ${r.config.preset} ${r.config.arch} ${r.config.quant} | ${o.threads} | ${o.maxTokens ?? r.config.maxTokens} x ${o.rounds.length} | ${f(o.noTierMsPerToken)} | ${f(o.tierMsPerToken)} | ` +
          `${f(o.medianRoundRatio, 3)} | ${quartiles} | ${f(o.medianRoundControlRatio, 3)} | ${f(o.ratio, 3)} | ${f(o.noTierCpuMsPerToken)} / ${f(o.tierCpuMsPerToken)} | ${f(o.cpuRatio, 3)} | ${f(o.loadAverage1m.min, 1)}-${f(o.loadAverage1m.max, 1)} | ${(o.date ?? r.date).slice(0, 16)}Z |`,
      );
    }
  }
  for (const r of results.runs) {
    const s = r.residency;
    if (!s) continue;
    const c = r.config;
    lines.push(
      '',
      `Residency, ${c.preset} ${c.arch} ${c.quant} (${c.routing ?? 'planted'} routing), ${s.threads} threads, ${s.maxTokens ?? c.maxTokens} tokens, medians of ${s.rounds} alternating rounds, ` +
        `measured ${s.date.slice(0, 16)}Z; load average ${load(s.loadAverageAtStart)} -> ${load(s.loadAverageAtEnd)}.`,
      '',
      `| ${Math.round(s.resident * 100)} % resident, prompt ${s.prompt} | decode hit rate | prefill hit rate | ms/token | MoE ms/token | uploads |`,
      '|---|---|---|---|---|---|',
      ...[
        ['cold start (by expert id), guard on (the default)', s.cold],
        ["cold start, guard off (docs/SPEC.md's plain LFRU)", s.coldUnguarded],
        [`heat file from ${s.heatFrom.join(', ')}, guard on (the default)`, s.warm],
        ["same heat file, guard off (docs/SPEC.md's plain LFRU)", s.warmUnguarded],
        ['same heat file, decayed LFU (--placement dlfu)', s.warmDlfu],
      ]
        .filter(([, x]) => x)
        .map(
          ([label, x]) =>
            `| ${label} | ${pct(x.decodeHitRate)} | ${pct(x.prefillHitRate)} | ${f(x.msPerToken)} | ${f(x.moeMsPerToken, 3)} | ${x.uploads} |`,
        ),
    );
    const late = s.warm?.runs?.[0]?.replanGuard;
    if (late)
      lines.push(
        '',
        `The guard on the warm start (first round): ${late.appliedLate} of ${late.appliedLate + late.kept + late.watching} watched layers took the prompt's held-back replan; a layer decides by decode token 32 (its last checkpoint), so a heat file that misleads costs at most those tokens' hits on it.`,
      );
  }
  return lines.join('\n');
}

if (import.meta.url === `file://${process.argv[1]}`) runBenchMain('tier', main);
