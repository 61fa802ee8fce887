/**
 * npm run bench -- prefill [--quant q8_0 --share 0.5 --lengths 16,64,256,1024 --cross 16,32,64,128,256
 *                           --rounds 2 --prefix 1024 --llama-lengths 16,64,256,1024 --update-results]
 *
 * Time to first token on the disk tier (issue 14): the medium preset in a memory cgroup at `share`
 * of its file, the file's pages dropped before every run, moetier in a child process
 * (bench/lib/prefill-child.mjs) generating one token:
 *   - crossover: for prompts of `cross` tokens, the on-demand path (--short-prefill-tokens above
 *     the prompt) against the whole-layer path (0), `rounds` interleaved rounds; the largest length
 *     up to which on-demand is never slower is the measured crossover (the 'auto' default is set
 *     from it: src/engine/tier/prefill-path.ts SHORT_PREFILL_TOKENS_AUTO)
 *   - the table: prompts of `lengths` tokens, fresh and as a second turn of a conversation over a
 *     `prefix`-token first turn, on-demand, whole-layer and llama.cpp (node-llama-cpp in a child, 2
 *     threads, under the same limit; its second turn continues the same sequence); bytes moetier
 *     read from the file during the prefill and its reads per distinct expert
 * Needs root for the cgroups; writes results/local/prefill.json, or with --update-results
 * results/prefill.json and the README table.
 */
import { spawnSync } from 'node:child_process';
import { statSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { cgroupCommand, createMemoryCgroup, memoryCgroupSupport } from './lib/cgroup.mjs';
import { ensureBenchDeps } from './lib/deps.mjs';
import { importDist, presetModel, repoRoot } from './lib/moetier.mjs';
import { oneOf, parseBenchArgs, positiveInt } from './lib/options.mjs';
import { resultsTarget, updateReadme, writeResults } from './lib/output.mjs';
import { median } from './lib/stats.mjs';
import { runLlamaCpp } from './llamacpp/runner.mjs';

const usage =
  'npm run bench -- prefill [--quant q8_0 --share 0.5 --lengths 16,64,256,1024 --cross 16,32,64,128,256 --rounds 2 --prefix 1024 --llama-lengths 16,64,256,1024 --update-results]';
const options = {
  quant: { type: 'string', default: 'q8_0', help: 'quant of the medium preset (q8_0 | q4_0)' },
  share: { type: 'string', default: '0.5', help: 'the memory limit as a share of the file' },
  lengths: { type: 'string', default: '16,64,256,1024', help: 'prompt lengths of the table' },
  cross: { type: 'string', default: '16,32,64,128,256', help: 'prompt lengths of the crossover search' },
  rounds: { type: 'string', default: '2', help: 'interleaved rounds of each crossover cell' },
  prefix: { type: 'string', default: '1024', help: 'tokens of the first turn a second turn continues' },
  'llama-lengths': {
    type: 'string',
    default: '16,64,256,1024',
    help: 'prompt lengths llama.cpp runs (it is slow under the limit)',
  },
};
const nodeAllowanceBytes = 96 * 2 ** 20;
const MiB = 2 ** 20;
const onDemandN = 1 << 30;
const text =
  'The ocean is deep and the waves roll over the sand while the tide comes in and the birds fly low over the grey water';

export async function main(argv) {
  const values = parseBenchArgs(argv, { usage, options });
  if (!values) return;
  const loadAverageAtStart = os.loadavg();
  const why = memoryCgroupSupport();
  if (why) throw Object.assign(new Error(`bench prefill needs memory cgroups: ${why}`), { code: 'E_CGROUP' });
  const quant = oneOf('quant', values.quant, ['q8_0', 'q4_0']);
  const share = Number(values.share);
  if (!(share > 0 && share <= 1))
    throw Object.assign(new Error(`--share: expected a share in (0, 1], got ${values.share}`), { code: 'E_OPTION' });
  const ints = (name) => values[name].split(',').map((v) => positiveInt(name, v, 1 << 16));
  const lengths = ints('lengths'),
    cross = ints('cross'),
    llamaLengths = ints('llama-lengths');
  const rounds = positiveInt('rounds', values.rounds, 20),
    prefixTokens = positiveInt('prefix', values.prefix, 1 << 16);
  await ensureBenchDeps();
  const native = (await importDist('src/native/binding.js')).loadNative();
  const model = await presetModel({ preset: 'medium', arch: 'qwen3moe', quant });
  const fileBytes = statSync(model).size;
  const limitBytes = Math.round(fileBytes * share);
  const base = await baseIds(model);
  const ids = (n, offset = 0) => Array.from({ length: n }, (_, i) => base[(i + offset) % base.length]);
  const run = (promptIds, n, prefixIds) => {
    native.dropFileCache(model);
    return moetierPrefill(model, limitBytes, promptIds, n, prefixIds);
  };

  const crossRuns = cross.map((len) => ({ len, onDemand: [], whole: [] }));
  for (let round = 0; round < rounds; round++) {
    for (const cell of crossRuns) {
      cell.onDemand.push(run(ids(cell.len), onDemandN));
      cell.whole.push(run(ids(cell.len), 0));
      process.stderr.write(
        `prefill crossover ${cell.len}: on-demand ${cell.onDemand.at(-1).ttftMs?.toFixed(0)} ms, whole-layer ${cell.whole.at(-1).ttftMs?.toFixed(0)} ms\n`,
      );
    }
  }
  const crossover = crossoverOf(crossRuns);
  const measuredCrossover = crossoverTokens(crossover);

  const rows = [];
  for (const len of lengths) {
    for (const turn of ['fresh', 'second']) {
      const prefixIds = turn === 'second' ? ids(prefixTokens, 7) : undefined;
      const onDemand = run(ids(len), onDemandN, prefixIds);
      const whole = run(ids(len), 0, prefixIds);
      rows.push({ len, turn, onDemand, whole });
      process.stderr.write(
        `prefill ${len} ${turn}: on-demand ${onDemand.ttftMs?.toFixed(0)} ms, whole-layer ${whole.ttftMs?.toFixed(0)} ms\n`,
      );
    }
  }
  native.dropFileCache(model);
  const llama = await llamaPrefill(model, limitBytes, llamaLengths, ids, prefixTokens);
  for (const r of rows) r.llamaCpp = llama.find((l) => l.len === r.len && l.turn === r.turn) ?? { skipped: true };

  const summary = {
    date: new Date().toISOString(),
    cpus: os.cpus().length,
    cpuModel: os.cpus()[0]?.model,
    command: `npm run bench -- prefill ${argv.join(' ')}`.trim(),
    loadAverageAtStart,
    routing: 'realistic synthetic',
    loadAverageAtEnd: os.loadavg(),
    quant,
    fileBytes,
    share,
    limitBytes,
    nodeAllowanceBytes,
    rounds,
    prefixTokens,
    crossover,
    measuredCrossover,
    crossRuns,
    rows,
  };
  process.stdout.write(JSON.stringify(summary) + '\n');
  const target = resultsTarget(values['update-results']);
  writeResults(target, 'prefill', JSON.stringify(summary, null, 2) + '\n');
  updateReadme(target, 'prefill', prefillTable(summary));
}

/** Per length, the median TTFT of each path over the rounds. */
export function crossoverOf(crossRuns) {
  return crossRuns.map((c) => ({
    len: c.len,
    onDemandTtftMs: med(c.onDemand, 'ttftMs'),
    wholeLayerTtftMs: med(c.whole, 'ttftMs'),
  }));
}

/** The largest length up to which on demand is never slower (0: whole layers won at the shortest). */
export function crossoverTokens(crossover) {
  let tokens = 0;
  for (const c of [...crossover].sort((a, b) => a.len - b.len)) {
    if (!(c.onDemandTtftMs <= c.wholeLayerTtftMs)) break;
    tokens = c.len;
  }
  return tokens;
}

function med(runs, key) {
  const xs = runs.map((r) => r[key]).filter((x) => typeof x === 'number' && Number.isFinite(x));
  return xs.length ? median(xs) : undefined;
}

async function baseIds(model) {
  const { openEngine } = await importDist('src/engine/engine.js');
  const engine = await openEngine({ model, threads: 1, contextTokens: 64 });
  try {
    return engine.tokenize(text);
  } finally {
    await engine.close();
  }
}

function moetierPrefill(model, limitBytes, promptIds, shortPrefillTokens, prefixIds) {
  const g = createMemoryCgroup('moetier-prefill', limitBytes);
  try {
    const contextTokens = (prefixIds?.length ?? 0) + promptIds.length + 16;
    const request = {
      model,
      promptIds,
      prefixIds,
      maxTokens: 1,
      options: { memoryBudgetBytes: limitBytes - nodeAllowanceBytes, contextTokens, shortPrefillTokens },
    };
    const [cmd, args] = cgroupCommand(g, [process.execPath, path.join(repoRoot, 'bench/lib/prefill-child.mjs')]);
    const r = spawnSync(cmd, args, { encoding: 'utf8', input: JSON.stringify(request), maxBuffer: 1 << 24 });
    if (r.status !== 0)
      return { failed: `${r.signal ?? `exit ${r.status}`}: ${r.stderr.slice(-300)}`, peakBytes: g.peakBytes() };
    return { ...JSON.parse(r.stdout), peakBytes: g.peakBytes() };
  } finally {
    g.remove();
  }
}

/** llama.cpp under the same limit: every fresh prompt in one child, each second turn in a child of its own (its prefix costs most of the time). */
async function llamaPrefill(model, limitBytes, lengths, ids, prefixTokens) {
  const out = [];
  const child = async (runs) => {
    const g = createMemoryCgroup('llama-prefill', limitBytes);
    try {
      const reply = await runLlamaCpp(
        { modelPath: model, threads: 2, maxTokens: 1, logitsMode: 'none', runs },
        { timeoutMs: 900_000, wrap: (argv) => cgroupCommand(g, argv) },
      );
      return { results: reply.results, peakBytes: g.peakBytes() };
    } catch (err) {
      return { failed: String(err.message).split('\n')[0], peakBytes: g.peakBytes() };
    } finally {
      g.remove();
    }
  };
  const fresh = await child(lengths.map((len) => ({ promptTokens: ids(len) })));
  lengths.forEach((len, i) =>
    out.push({
      len,
      turn: 'fresh',
      ...(fresh.failed ? { failed: fresh.failed } : { ttftMs: fresh.results[i].timings.ttftMs }),
      peakBytes: fresh.peakBytes,
    }),
  );
  for (const len of lengths) {
    const second = await child([{ promptTokens: ids(len), prefixTokens: ids(prefixTokens, 7) }]);
    out.push({
      len,
      turn: 'second',
      ...(second.failed ? { failed: second.failed } : { ttftMs: second.results[0].timings.ttftMs }),
      peakBytes: second.peakBytes,
    });
    process.stderr.write(
      `prefill llama.cpp ${len} second: ${second.failed ?? second.results[0].timings.ttftMs.toFixed(0)}\n`,
    );
  }
  return out;
}

function prefillTable(s) {
  const f = (x, d = 0) => (typeof x === 'number' && Number.isFinite(x) ? x.toFixed(d) : 'n/a');
  const cell = (r) =>
    r.failed ? (/SIGKILL|killed/.test(r.failed) ? 'killed' : 'failed') : r.skipped ? 'n/a' : f(r.ttftMs);
  const perDistinct = (r) =>
    r.prefillDistinctExpertsRead ? f(r.prefillExpertReads / r.prefillDistinctExpertsRead, 2) : 'n/a';
  const row = (r) =>
    `| ${r.len} | ${r.turn === 'fresh' ? 'fresh' : `2nd turn (${s.prefixTokens} cached)`} | ${cell(r.onDemand)} | ${cell(r.whole)} | ${cell(r.llamaCpp)} | ${f((r.onDemand.fileReadBytes ?? NaN) / MiB)} / ${f((r.whole.fileReadBytes ?? NaN) / MiB)} | ${perDistinct(r.onDemand)} |`;
  const crossRow = (c) =>
    `| ${c.len} | ${f(c.onDemandTtftMs)} | ${f(c.wholeLayerTtftMs)} | ${c.onDemandTtftMs <= c.wholeLayerTtftMs ? 'on-demand' : 'whole-layer'} |`;
  return [
    `Measured ${s.date.slice(0, 10)} on ${s.cpuModel} (${s.cpus} cores), load ${s.loadAverageAtStart?.[0]?.toFixed(1)} -> ${s.loadAverageAtEnd?.[0]?.toFixed(1)}; medium ${s.quant} in a cgroup at ${(s.share * 100).toFixed(0)} % of the file (${(s.limitBytes / MiB).toFixed(0)} MiB; moetier's budget = limit - ${s.nodeAllowanceBytes / MiB} MiB), page cache dropped before each run, 2 threads. Routing: ${s.routing ?? 'planted'}.`,
    '',
    `Crossover (TTFT ms, medians of ${s.rounds} interleaved rounds): on demand up to **${s.measuredCrossover}** tokens, whole layers beyond.`,
    '',
    '| prompt tokens | on-demand | whole-layer | faster |',
    '|---|---|---|---|',
    ...s.crossover.map(crossRow),
    '',
    'TTFT ms (one run each):',
    '',
    '| prompt tokens | turn | moetier on-demand | moetier whole-layer | llama.cpp | MiB read (on-demand / whole-layer) | on-demand reads per distinct expert |',
    '|---|---|---|---|---|---|---|',
    ...s.rows.map(row),
  ].join('\n');
}
