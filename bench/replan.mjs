/**
 * node bench/replan.mjs [--preset medium] [--tokens 300] [--words 224] [--threads 2] [--resident 0.37]
 *                       [--backends cpu,fake] [--caps 12,uncapped] [--no-replay] [--update-results]
 *
 * Prefill replan (docs/SPEC.md section 2) against the heat-file baseline, a benchmark (not a test):
 *
 *   heat       a heat file from four other prompts (topics 4..7, other seeds), built once
 *   prompts    four long prompts of topics 0..3 (longTopicPrompt, 200-250 tokens each)
 *   cells      per backend (cpu; fake = consumer-8gb preset) x prompt: replan off vs on (cap 24),
 *              a fresh engine each (warmstart from a copy of the heat file, host copies built
 *              before the request), order alternated per prompt; the tokens of off and on must
 *              be equal (placement never changes routing or the cpu kernels' sums)
 *   ablation   cpu: caps 12 and uncapped (= nExpert) next to 24
 *   ttft       the TTFT price alone: prompt 0, --ttft-rounds alternating off/on rounds per backend
 *              (2 tokens each), medians and the median of the paired differences
 *   replay     the cpu "off" runs record route traces (--trace-routes); `moetier replay` runs
 *              lfru vs replan on them (cold start: replay takes no heat file)
 *
 * Napkin math (medium: 24 layers x 128 experts, top-8, 37 % = 47 slots per layer): a prompt of
 * one topic routes most rows to that topic's preferred experts (2 x top-k = 16 per layer), which
 * the heat of four other topics mostly misses; the cap (24) covers them, so the decode hit rate
 * should rise by up to 16 of 47 slots' share of the topic's routing. The price is the prefill's
 * uploads: 24 layers x up to 24 swaps x a Q4_0 expert (331 KB) ~ 190 MB, copied while later
 * layers compute (cpu: memcpy on the upload thread, on the same 2 cores).
 * Results: results/local/replan.json (git-ignored); with --update-results results/replan.json and
 * the replan table in README.md.
 */
import { copyFileSync, mkdtempSync, rmSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import os from 'node:os';
import path from 'node:path';
import { importDist, presetModel, repoRoot } from './lib/moetier.mjs';
import { oneOf, parseBenchArgs, positiveInt, runBenchMain } from './lib/options.mjs';
import { resultsTarget, updateReadme, writeResults } from './lib/output.mjs';
import { writeReadmeSection } from './lib/readme.mjs';

const arch = 'qwen3moe';
const quant = 'q4_0';
const measuredTopics = [0, 1, 2, 3];
const heatTopics = [4, 5, 6, 7];

const usage = `usage: node bench/replan.mjs [options]

Prefill replan against the heat-file baseline: decode hit rate, ms/token and TTFT with replan off
and on, per backend and prompt, a cap ablation and a replay of the routes (many minutes on medium).`;

const options = {
  preset: { type: 'string', default: 'medium', help: 'tiny | small | medium' },
  tokens: { type: 'string', default: '300', help: 'tokens generated per request' },
  words: { type: 'string', default: '224', help: 'words per long prompt' },
  threads: { type: 'string', default: '2', help: 'compute threads' },
  resident: { type: 'string', default: '0.37', help: 'resident fraction of experts' },
  backends: { type: 'string', default: 'cpu,fake', help: 'cpu, fake' },
  caps: { type: 'string', default: '12,uncapped', help: 'ablation caps (swaps per layer, or uncapped)' },
  'no-replay': { type: 'boolean', default: false, help: 'skip the replay of the recorded routes' },
  'ttft-rounds': { type: 'string', default: '5', help: 'alternating off/on rounds of the TTFT price' },
};

export async function main(argv) {
  const values = parseBenchArgs(argv, { usage, options });
  if (!values) return;
  const config = {
    preset: oneOf('preset', values.preset, ['tiny', 'small', 'medium']),
    routing: 'realistic synthetic',
    maxTokens: positiveInt('tokens', values.tokens, 4096),
    words: positiveInt('words', values.words, 1000),
    threads: positiveInt('threads', values.threads, 64),
    resident: Number(values.resident),
    backends: values.backends.split(',').map((b) => oneOf('backends', b, ['cpu', 'fake'])),
    ablationCaps: values.caps
      .split(',')
      .filter(Boolean)
      .map((c) => (c === 'uncapped' ? 'uncapped' : positiveInt('caps', c, 4096))),
    repetitions: 1,
    ttftRounds: positiveInt('ttft-rounds', values['ttft-rounds'], 100),
    arch,
    quant,
  };
  const machine = {
    cpus: os.cpus().length,
    cpuModel: os.cpus()[0]?.model,
    loadAverageAtStart: os.loadavg(),
    loadAverages: [],
  };
  const { openEngine } = await importDist('src/index.js');
  const { longTopicPrompt, promptText } = await importDist('src/synth/prompts.js');
  const model = await presetModel({ preset: config.preset, arch, quant });
  const scratch = mkdtempSync(path.join(os.tmpdir(), 'moetier-bench-replan-'));
  try {
    const open = (extra) =>
      openEngine({ model, threads: config.threads, contextTokens: 1024, resident: config.resident, ...extra });
    const heatFile = path.join(scratch, 'heat.json');
    const heatPrompts = heatTopics.map((t, i) => longTopicPrompt(t, config.words, 101 + i));
    await buildHeat(open, heatFile, heatPrompts, promptText, config.maxTokens);
    const prompts = measuredTopics.map((t) => longTopicPrompt(t, config.words, 1));
    const cells = [];
    let nExpert = 0;
    for (const backend of config.backends) {
      for (const [i, p] of prompts.entries()) {
        const modes = i % 2 === 0 ? ['off', 24] : [24, 'off'];
        const pair = {};
        for (const mode of modes) {
          const trace =
            backend === 'cpu' && mode === 'off' && !values['no-replay']
              ? path.join(scratch, `trace-${p.name}.jsonl`)
              : undefined;
          const r = await runCell(open, {
            backend,
            mode,
            heat: copyHeat(heatFile, `${backend}-${p.name}-${mode}`),
            prompt: p,
            promptText,
            config,
            trace,
          });
          nExpert = r.nExpert;
          pair[mode] = r;
          cells.push(r);
          machine.loadAverages.push(os.loadavg()[0]);
          process.stderr.write(
            `  ${backend} ${p.name} replan ${mode}: hit ${(r.decodeHitRate * 100).toFixed(1)} %, ${r.msPerToken.toFixed(2)} ms/token, TTFT ${r.ttftMs.toFixed(0)} ms\n`,
          );
        }
        if (pair.off.tokens.join() !== pair[24].tokens.join())
          throw new Error(`${backend} ${p.name}: replan changed the tokens: a bug, not a measurement`);
      }
    }
    const ablation = [];
    if (config.backends.includes('cpu')) {
      for (const p of prompts) {
        for (const cap of config.ablationCaps) {
          const mode = cap === 'uncapped' ? nExpert : cap;
          const r = await runCell(open, {
            backend: 'cpu',
            mode,
            heat: copyHeat(heatFile, `abl-${p.name}-${mode}`),
            prompt: p,
            promptText,
            config,
          });
          r.cap = cap;
          ablation.push(r);
          machine.loadAverages.push(os.loadavg()[0]);
          process.stderr.write(`  ablation ${p.name} cap ${cap}: hit ${(r.decodeHitRate * 100).toFixed(1)} %\n`);
        }
      }
    }
    const ttft = await measureTtft(open, heatFile, prompts[0], promptText, config, machine);
    const replay = values['no-replay']
      ? undefined
      : runReplay(
          prompts.map((p) => path.join(scratch, `trace-${p.name}.jsonl`)),
          config,
          nExpert,
        );
    machine.loadAverageAtEnd = os.loadavg();
    for (const c of [...cells, ...ablation]) delete c.tokens;
    const results = {
      bench: 'replan',
      date: new Date().toISOString(),
      config,
      machine,
      heatFrom: heatPrompts.map((p) => p.name),
      prompts: prompts.map((p) => p.name),
      cells,
      ablation,
      ttft,
      replay,
    };
    const target = resultsTarget(values['update-results']);
    writeResults(target, 'replan', `${JSON.stringify(results, null, 2)}\n`);
    updateReadme(target, 'replan', replanTable(results));
    process.stdout.write(`${replanTable(results)}\n`);
  } finally {
    rmSync(scratch, { recursive: true, force: true });
  }
}

/** The heat file: each other prompt once (prefill + decode merge into it), replan off. */
async function buildHeat(open, heatFile, prompts, promptText, maxTokens) {
  const e = await open({ heat: heatFile });
  try {
    for (const p of prompts) await generate(e, promptText(p, e.tokenizer.kind), Math.min(64, maxTokens));
  } finally {
    await e.close();
  }
}

/** TTFT off vs on, alternating rounds of 2-token requests on prompt 0 (the price is in the prefill). */
async function measureTtft(open, heatFile, prompt, promptText, config, machine) {
  const out = [];
  for (const backend of config.backends) {
    const rounds = [];
    for (let r = 0; r < config.ttftRounds; r++) {
      const round = {};
      for (const mode of r % 2 === 0 ? ['off', 24] : [24, 'off']) {
        const cell = await runCell(open, {
          backend,
          mode,
          heat: copyHeat(heatFile, `ttft-${backend}-${r}-${mode}`),
          prompt,
          promptText,
          config,
          tokens: 2,
        });
        round[mode] = { ttftMs: cell.ttftMs, prefillMs: cell.prefillMs };
      }
      rounds.push(round);
      machine.loadAverages.push(os.loadavg()[0]);
    }
    const med = (xs) => [...xs].sort((a, b) => a - b)[xs.length >> 1];
    out.push({
      backend,
      prompt: prompt.name,
      rounds,
      offMedianMs: med(rounds.map((x) => x.off.ttftMs)),
      onMedianMs: med(rounds.map((x) => x[24].ttftMs)),
      deltaMedianMs: med(rounds.map((x) => x[24].ttftMs - x.off.ttftMs)),
    });
    process.stderr.write(
      `  ttft ${backend}: off ${out.at(-1).offMedianMs.toFixed(0)} ms, on ${out.at(-1).onMedianMs.toFixed(0)} ms (medians of ${config.ttftRounds})\n`,
    );
  }
  return out;
}

/** One fresh engine, one request. mode: 'off' or the replan cap. */
async function runCell(open, { backend, mode, heat, prompt, promptText, config, trace, tokens = config.maxTokens }) {
  const e = await open({
    backend,
    heat,
    prefillReplan: mode === 'off' ? { enabled: false } : { enabled: true, maxSwapsPerLayer: mode },
  });
  try {
    await hostCopiesReady(e);
    const text = promptText(prompt, e.tokenizer.kind);
    const promptTokens = e.tokenize(text).length;
    const { tokens: ids, stats } = await generate(e, text, tokens, trace);
    const tier = e.tierStats();
    return {
      backend,
      replan: mode,
      prompt: prompt.name,
      promptTokens,
      tokens: ids,
      nExpert: e.hparams.nExpert,
      slotsPerLayer: tier.slotsBudget[0],
      decodeHitRate: stats.decodeHitRate,
      prefillHitRate: stats.prefillHitRate,
      moeMsPerToken: stats.moeMsPerToken,
      msPerToken: stats.msPerToken,
      ttftMs: stats.ttftMs,
      prefillMs: stats.prefillMs,
      uploads: stats.uploads,
      uploadBytes: stats.uploadBytes,
      failedUploads: stats.failedUploads,
      lazyMisses: tier.lazyMisses,
      layerHookCalls: tier.layerHookCalls,
      layerHookUsPerCall: tier.layerHookCalls ? tier.layerHookNs / tier.layerHookCalls / 1e3 : null,
      swapsStartedNow: tier.swapsStartedNow,
    };
  } finally {
    await e.close();
  }
}

/** Waits (up to a minute) until every non-resident expert has its host copy, so no run pays for the tier's opening. */
async function hostCopiesReady(e) {
  const hp = e.hparams;
  const slots = e.tierStats().slotsBudget.reduce((a, b) => a + b, 0);
  for (let i = 0; i < 1200; i++) {
    const h = e.hostCopies();
    if (!h || h.published >= hp.nLayer * hp.nExpert - slots) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error('host copies were not built within a minute');
}

async function generate(engine, prompt, maxTokens, traceRoutes) {
  const tokens = [];
  for await (const t of engine.generate(prompt, { maxTokens, stopAtEos: false, traceRoutes })) tokens.push(t.id);
  return { tokens, stats: engine.lastStats };
}

function copyHeat(file, tag) {
  const copy = `${file}.${tag}.json`;
  copyFileSync(file, copy);
  return copy;
}

/** `moetier replay` on the engine's traces: lfru vs replan at the engine's budget, cold start, priced by the geometry the traces carry (the model's own). */
function runReplay(traces, config, nExpert) {
  const budget = Math.min(nExpert, Math.max(1, Math.round(config.resident * nExpert)));
  const args = [
    'dist/src/cli/main.js',
    'replay',
    '--trace',
    traces.join(','),
    '--budget',
    String(budget),
    '--policy',
    'lfru,replan',
    '--start',
    'ids',
    '--json',
  ];
  const out = execFileSync(process.execPath, args, { cwd: repoRoot, encoding: 'utf8', maxBuffer: 64 << 20 });
  const rows = JSON.parse(out.slice(out.indexOf('[')));
  return {
    command: `node ${args.join(' ')}`,
    budget,
    rows: rows.map((r) => ({
      trace: path.basename(r.trace),
      policy: r.policy,
      hitRate: r.hitRate,
      uploads: r.uploads,
      ...pick(r, ['ttftMs', 'msPerToken']),
    })),
  };
}

function pick(o, keys) {
  return Object.fromEntries(keys.filter((k) => k in o).map((k) => [k, o[k]]));
}

export function replanTable(r) {
  const f = (v, d = 2) => (typeof v === 'number' && Number.isFinite(v) ? v.toFixed(d) : 'n/a');
  const pct = (v) => (typeof v === 'number' && Number.isFinite(v) ? `${(v * 100).toFixed(1)} %` : 'n/a');
  const pts = (a, b) =>
    Number.isFinite(a) && Number.isFinite(b) ? `${(b - a) * 100 >= 0 ? '+' : ''}${((b - a) * 100).toFixed(1)}` : 'n/a';
  const load = (l) => (l ? l.map((v) => v.toFixed(1)).join(' ') : 'n/a');
  const { config: c, machine: m } = r;
  const peak = m.loadAverages.length ? Math.max(...m.loadAverages).toFixed(1) : 'n/a';
  const lines = [
    `Measured ${r.date.slice(0, 10)} on ${m.cpus} cores (${m.cpuModel ?? 'unknown CPU'}), ${c.preset} ${c.arch} ${c.quant} (${c.routing ?? 'planted'} routing), ${c.threads} threads, ` +
      `${Math.round(c.resident * 100)} % resident (${r.cells[0]?.slotsPerLayer} slots per layer), ${c.maxTokens} decoded tokens, one run per cell (no repetitions); ` +
      `heat file from ${r.heatFrom.join(', ')}; load average ${load(m.loadAverageAtStart)} -> ${load(m.loadAverageAtEnd)} (1-minute peak between cells ${peak}).`,
    '',
    '| backend | prompt (tokens) | decode hit rate off -> on | gain (points) | MoE ms/token off -> on | ms/token off -> on | TTFT ms off -> on | uploads on (request) | hook us/layer |',
    '|---|---|---|---|---|---|---|---|---|',
  ];
  for (const backend of c.backends) {
    for (const p of r.prompts) {
      const off = r.cells.find((x) => x.backend === backend && x.prompt === p && x.replan === 'off');
      const on = r.cells.find((x) => x.backend === backend && x.prompt === p && x.replan === 24);
      if (!off || !on) continue;
      lines.push(
        `| ${backend} | ${p} (${on.promptTokens}) | ${pct(off.decodeHitRate)} -> ${pct(on.decodeHitRate)} | ${pts(off.decodeHitRate, on.decodeHitRate)} | ` +
          `${f(off.moeMsPerToken, 3)} -> ${f(on.moeMsPerToken, 3)} | ${f(off.msPerToken)} -> ${f(on.msPerToken)} | ${f(off.ttftMs, 0)} -> ${f(on.ttftMs, 0)} | ${on.uploads} | ${f(on.layerHookUsPerCall, 1)} |`,
      );
    }
  }
  const ttft = r.cells
    .filter((x) => x.replan === 24)
    .map(
      (on) =>
        on.ttftMs -
        r.cells.find((x) => x.backend === on.backend && x.prompt === on.prompt && x.replan === 'off').ttftMs,
    );
  if (ttft.length > 0) {
    const sorted = [...ttft].sort((a, b) => a - b);
    lines.push(
      '',
      `- TTFT on - off over the ${ttft.length} pairs of the table: median ${f(sorted[sorted.length >> 1], 0)} ms, range ${f(sorted[0], 0)} .. ${f(sorted[sorted.length - 1], 0)} ms.`,
    );
  }
  if (r.ttft?.length) lines.push('');
  for (const t of r.ttft ?? []) {
    lines.push(
      `- TTFT alone (${t.backend}, ${t.prompt}, ${t.rounds.length} alternating rounds of 2-token requests): off ${f(t.offMedianMs, 0)} ms, on ${f(t.onMedianMs, 0)} ms (medians); on - off, paired: median ${f(t.deltaMedianMs, 0)} ms.`,
    );
  }
  if (r.ablation.length > 0) {
    const caps = [...new Set(r.ablation.map((x) => x.cap))];
    lines.push(
      '',
      `| cap ablation (cpu), decode hit rate | off | 24 | ${caps.join(' | ')} |`,
      `|---|---|---|${caps.map(() => '---|').join('')}`,
    );
    for (const p of r.prompts) {
      const off = r.cells.find((x) => x.backend === 'cpu' && x.prompt === p && x.replan === 'off');
      const on = r.cells.find((x) => x.backend === 'cpu' && x.prompt === p && x.replan === 24);
      lines.push(
        `| ${p} | ${pct(off?.decodeHitRate)} | ${pct(on?.decodeHitRate)} | ${caps.map((cap) => pct(r.ablation.find((x) => x.prompt === p && x.cap === cap)?.decodeHitRate)).join(' | ')} |`,
      );
    }
  }
  if (r.replay) {
    lines.push(
      '',
      `| moetier replay on the engine's traces (budget ${r.replay.budget}, cold start) | lfru hit rate | replan hit rate | gain (points) |`,
      '|---|---|---|---|',
    );
    for (const t of [...new Set(r.replay.rows.map((x) => x.trace))]) {
      const a = r.replay.rows.find((x) => x.trace === t && x.policy === 'lfru');
      const b = r.replay.rows.find((x) => x.trace === t && x.policy === 'replan');
      lines.push(`| ${t} | ${pct(a?.hitRate)} | ${pct(b?.hitRate)} | ${pts(a?.hitRate, b?.hitRate)} |`);
    }
  }
  return lines.join('\n');
}

/** Rewrites the README table from results/replan.json (after a change to the table only). */
export async function renderReadme() {
  const { readFileSync } = await import('node:fs');
  const results = JSON.parse(readFileSync(new URL('./results/replan.json', import.meta.url), 'utf8'));
  writeReadmeSection(new URL('./README.md', import.meta.url), 'replan', replanTable(results));
}

if (import.meta.url === `file://${process.argv[1]}`) runBenchMain('replan', main);
