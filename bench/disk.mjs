/**
 * npm run bench -- disk [--presets q8_0,q4_0,q4_k_m --limits 0.75,0.5,0.3 --olmoe-limits 0.5,0.3
 *                        --qwen3-limit-gib 12 --tokens N --llama-tokens N --peers llama|none
 *                        --before DIR --rounds N --update-results]
 *
 * A model bigger than RAM (issues 12, 25), every model with realistic routing (gen-model's default:
 * a real trace's statistics, src/synth/routing.ts), each engine in a memory cgroup whose limit
 * (counting the page cache) is a share of the file, the file's pages dropped from the page cache
 * before every run:
 *   - the medium preset (24 x 128 experts, top-8) at each quant of --presets and each --limits share;
 *   - the OLMoE-1B-7B shape (16 x 64, top-8, hidden 2048) at Q4_K_M at each --olmoe-limits share,
 *     once on its own router and once driven by the real OLMoE trace (--routes-from
 *     ../shared/traces/olmoe-1b-7b.decode.jsonl: a simulation whose tokens mean nothing; the tier's
 *     reads, hits and stalls follow the trace);
 *   - with --qwen3-limit-gib G (0: skipped, the default: generating it takes ~15 minutes and 18 GB
 *     of disk), the Qwen3-30B-A3B shape (48 x 128, top-8) at Q4_K_M in a G GiB cgroup.
 * Per row:
 *   - moetier `run --memory-budget` (the limit less a stated allowance for Node's own heap), 2
 *     threads: decode and prefill tok/s, TTFT, decode hit rate, bytes read from the file per decode
 *     token (the engine's counters), stall ms per token, peak memory of the cgroup, tokens against
 *     an unlimited run; and the same with --prefetch enforce
 *   - llama.cpp (node-llama-cpp in a child process, its default mmap) at 1 and 2 threads under the
 *     same limit (not for trace-driven rows: llama.cpp routes by its router): its best decode and
 *     prefill tok/s, or how it ended (killed by the limit, or cut short by its time limit, whose
 *     rate is then an upper bound: it did not finish --llama-tokens in that time)
 *   - the disk bound: a random-read probe of the cold file as the engine reads it (one expert
 *     matrix per read, the read engine's default: io_uring, O_DIRECT, 8 in flight) gives GB/s;
 *     bytes per decode token over it is the fastest decode the disk allows at the measured hit
 *     rate. The compute bound is the same engine with every expert in memory (the run without
 *     a limit; for the Qwen3 shape, whose file is bigger than this machine's spare RAM, none), and
 *     compute + reads one after the other is the serial bound
 *   - both engines' contexts are sized to their run (prompt + tokens + 8), as the llama.cpp
 *     child sizes its own: a 2048-token KV cache would take 96 MiB of moetier's budget for nothing
 * With --before DIR (a checkout of an earlier commit, built: `git worktree add DIR <commit>`, then
 * `npm run build` there), each row also runs that build's moetier under the same limit, alternating
 * with this build --rounds times (each run's file pages dropped first): both builds' best decode
 * tok/s, their ratio, reads and MiB per token, stall ms per token, and whether the tokens agree.
 * --peers none leaves out the llama.cpp runs (a before/after that needs no peer).
 * Needs root for the cgroups (bench/lib/cgroup.mjs); prints one JSON line and writes
 * results/local/disk.json, or with --update-results results/disk.json and the README table.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, statSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { memoryCgroupSupport } from './lib/cgroup.mjs';
import { ensureBenchDeps } from './lib/deps.mjs';
import { importDist, presetModel, repoRoot } from './lib/moetier.mjs';
import { parseBenchArgs, positiveInt } from './lib/options.mjs';
import { resultsTarget, updateReadme, writeResults } from './lib/output.mjs';
import { inCgroup, inCgroupAsync, llamaRun, moetierRun, promptIds } from './lib/runs.mjs';

const usage =
  'npm run bench -- disk [--presets q8_0,q4_0,q4_k_m --limits 0.75,0.5,0.3 --olmoe-limits 0.5,0.3 --qwen3-limit-gib 12 --tokens N --llama-tokens N --update-results]';
const options = {
  presets: { type: 'string', default: 'q8_0,q4_0,q4_k_m', help: 'quants of the medium preset' },
  limits: { type: 'string', default: '0.75,0.5,0.3', help: 'memory limits as shares of the file size (medium)' },
  'olmoe-limits': {
    type: 'string',
    default: '0.5,0.3',
    help: 'limits for the OLMoE-1B-7B shape at Q4_K_M (none: skip)',
  },
  'qwen3-limit-gib': {
    type: 'string',
    default: '0',
    help: 'the Qwen3-30B-A3B shape at Q4_K_M in a cgroup of this many GiB (0: skip)',
  },
  tokens: { type: 'string', default: '48', help: 'tokens moetier generates per run' },
  'llama-tokens': {
    type: 'string',
    default: '12',
    help: 'tokens llama.cpp generates per run (it thrashes under a limit)',
  },
  'llama-timeout-s': { type: 'string', default: '600', help: "llama.cpp's time limit per run" },
  peers: { type: 'string', default: 'llama', help: 'llama (llama.cpp at 1 and 2 threads) or none' },
  before: {
    type: 'string',
    default: '',
    help: 'a built checkout of an earlier commit, run beside this build in every row',
  },
  rounds: { type: 'string', default: '2', help: 'with --before: runs of each build per row, alternating' },
};
/** Node's own heap and code, outside the engine's budget: the cgroup limit less this is the budget. */
const nodeAllowanceBytes = 96 * 2 ** 20;
const MiB = 2 ** 20;
const olmoeTrace = path.resolve(repoRoot, '../shared/traces/olmoe-1b-7b.decode.jsonl');

export async function main(argv) {
  const values = parseBenchArgs(argv, { usage, options });
  if (!values) return;
  const loadAverageAtStart = os.loadavg();
  const why = memoryCgroupSupport();
  if (why) throw Object.assign(new Error(`bench disk needs memory cgroups: ${why}`), { code: 'E_CGROUP' });
  const tokens = positiveInt('tokens', values.tokens, 4096),
    llamaTokens = positiveInt('llama-tokens', values['llama-tokens'], 4096);
  const llamaTimeoutMs = positiveInt('llama-timeout-s', values['llama-timeout-s'], 86_400) * 1000;
  const shares = (v) => (v === 'none' || v === '' ? [] : v.split(',').map(Number));
  const qwen3GiB = Number(values['qwen3-limit-gib']);
  if (values.peers !== 'llama' && values.peers !== 'none')
    throw Object.assign(new Error(`--peers: llama or none, got ${values.peers}`), { code: 'E_USAGE' });
  const before = values.before ? path.resolve(values.before) : undefined;
  if (before && !existsSync(path.join(before, 'dist/src/cli/main.js')))
    throw Object.assign(new Error(`--before ${before}: no built CLI there (npm run build in that checkout)`), {
      code: 'E_USAGE',
    });
  const rounds = positiveInt('rounds', values.rounds, 16);
  await ensureBenchDeps();
  const native = (await importDist('src/native/binding.js')).loadNative();
  const plans = [
    ...values.presets.split(',').map((quant) => ({
      preset: 'medium',
      arch: 'qwen3moe',
      quant,
      limits: shares(values.limits).map((share) => ({ share })),
      routings: ['router'],
    })),
    ...(shares(values['olmoe-limits']).length
      ? [
          {
            preset: 'olmoe-1b-7b',
            arch: 'olmoe',
            quant: 'q4_k_m',
            limits: shares(values['olmoe-limits']).map((share) => ({ share })),
            routings: ['router', 'olmoe-trace'],
          },
        ]
      : []),
    ...(qwen3GiB > 0
      ? [
          {
            preset: 'qwen3-30b-a3b',
            arch: 'qwen3moe',
            quant: 'q4_k_m',
            limits: [{ bytes: Math.round(qwen3GiB * 2 ** 30) }],
            routings: ['router'],
            noReference: true,
          },
        ]
      : []),
  ];
  const rows = [];
  for (const plan of plans) {
    const model = await presetModel({ preset: plan.preset, arch: plan.arch, quant: plan.quant });
    const fileBytes = statSync(model).size;
    const promptTokens = await promptIds(model);
    const ctx = ['-c', String(promptTokens.length + tokens + 8)];
    const probe = await readProbe(native, model, await expertMatrixBytes(native, model));
    const meanExpertBytes = await meanRoutedExpertBytes(native, model);
    for (const routing of plan.routings) {
      const routeArgs = routing === 'olmoe-trace' ? ['--routes-from', olmoeTrace] : [];
      const ref = plan.noReference || before ? undefined : moetierRun(model, tokens, [...ctx, ...routeArgs]);
      for (const limit of plan.limits) {
        const limitBytes = limit.bytes ?? Math.round(fileBytes * limit.share);
        const row = await measureRow({
          native,
          model,
          plan,
          routing,
          routeArgs,
          ctx,
          ref,
          probe,
          limitBytes,
          promptTokens,
          tokens,
          llamaTokens,
          llamaTimeoutMs,
          peers: values.peers === 'llama',
          before,
          rounds,
          meanExpertBytes,
        });
        rows.push({ preset: plan.preset, quant: plan.quant, fileBytes, share: limitBytes / fileBytes, ...row });
        const said = row.beforeAfter
          ? `before ${row.beforeAfter.before.decodeTokPerS ?? 'failed'} tok/s, after ${row.beforeAfter.after.decodeTokPerS ?? 'failed'} tok/s`
          : `moetier ${row.moetier.decodeTokPerS ?? 'failed'} tok/s, llama.cpp best ${row.llamaCppBestDecodeTokPerS?.toFixed(2) ?? 'n/a'}`;
        process.stderr.write(
          `disk ${plan.preset} ${plan.quant} ${routing} ${(limitBytes / MiB).toFixed(0)} MiB: ${said}\n`,
        );
      }
    }
  }
  const summary = {
    date: new Date().toISOString(),
    cpus: os.cpus().length,
    cpuModel: os.cpus()[0]?.model,
    command: `npm run bench -- disk ${argv.join(' ')}`.trim(),
    loadAverageAtStart,
    loadAverageAtEnd: os.loadavg(),
    nodeAllowanceBytes,
    tokens,
    llamaTokens,
    llamaTimeoutMs,
    before: before ? beforeCommit(before) : null,
    rows,
  };
  process.stdout.write(JSON.stringify(summary) + '\n');
  const target = resultsTarget(values['update-results']);
  // A before/after run is its own result (disk-before-after), beside the full table's.
  const name = before ? 'disk-before-after' : 'disk';
  writeResults(target, name, JSON.stringify(summary, null, 2) + '\n');
  updateReadme(target, name, before ? beforeAfterTable(summary) : diskTable(summary));
}

function beforeCommit(dir) {
  const r = spawnSync('git', ['-C', dir, 'log', '-1', '--format=%h %s'], { encoding: 'utf8' });
  return { dir, commit: r.status === 0 ? r.stdout.trim() : 'unknown' };
}

/** With --before: this build and the earlier one alternating, `rounds` runs each, the best of each kept. */
function beforeAfter(o, budgetArgs, group) {
  const runs = { after: [], before: [] };
  for (let i = 0; i < o.rounds; i++) {
    for (const which of ['before', 'after']) {
      o.native.dropFileCache(o.model);
      const run = inCgroup(group, o.limitBytes, (g) =>
        moetierRun(o.model, o.tokens, budgetArgs, g, which === 'before' ? o.before : undefined),
      );
      runs[which].push(run);
    }
  }
  const summary = (list) => {
    const ok = list.filter((x) => x.result);
    if (ok.length === 0) return { failed: list[0].failure };
    const best = ok.reduce((a, b) => (b.result.decodeTokPerS > a.result.decodeTokPerS ? b : a)).result;
    return {
      decodeTokPerS: best.decodeTokPerS,
      runs: ok.map((x) => x.result.decodeTokPerS),
      ...readFigures(best, o.meanExpertBytes),
      decodeHitRate: best.decodeHitRate,
      tokens: best.tokens,
    };
  };
  const after = summary(runs.after),
    before = summary(runs.before);
  const same = after.tokens && before.tokens ? JSON.stringify(after.tokens) === JSON.stringify(before.tokens) : null;
  delete after.tokens;
  delete before.tokens;
  return {
    after,
    before,
    ratio: after.decodeTokPerS && before.decodeTokPerS ? after.decodeTokPerS / before.decodeTokPerS : null,
    sameTokens: same,
  };
}

/** Reads and stalls per decode token from one run's JSON (the decode's reads only: see measureRow). */
function readFigures(r, meanExpertBytes) {
  const decodeTokens = Math.max(1, r.tokens.length - 1);
  const bytesReadPerToken = (r.streamedBytes + r.decodeUploadBytes) / decodeTokens;
  // Reads per token: the engine's count where the build reports it, else the bytes over the mean expert's.
  return {
    readsPerToken:
      r.decodeExpertReads !== undefined ? r.decodeExpertReads / decodeTokens : bytesReadPerToken / meanExpertBytes,
    readsCounted: r.decodeExpertReads !== undefined,
    bytesReadPerToken,
    stallMsPerToken: r.stallMsPerToken,
  };
}

function beforeAfterTable(s) {
  const f = (x, d = 2) => (typeof x === 'number' && Number.isFinite(x) ? x.toFixed(d) : 'n/a');
  const rows = s.rows.map((r) => {
    const { after: a, before: b } = r.beforeAfter;
    const limit = `${(r.share * 100).toFixed(0)} % (${(r.limitBytes / MiB).toFixed(0)} MiB)`;
    const cell = (x, k, d) => (x.failed ? 'failed' : f(x[k], d));
    return `| ${r.preset} ${r.quant} | ${r.routing} | ${limit} | ${cell(b, 'decodeTokPerS')} | ${cell(a, 'decodeTokPerS')} | ${r.beforeAfter.ratio ? `${f(r.beforeAfter.ratio)}x` : 'n/a'} | ${cell(b, 'decodeHitRate', 3)} / ${cell(a, 'decodeHitRate', 3)} | ${cell(b, 'readsPerToken', 1)}${b.readsCounted === false ? ' (from bytes)' : ''} / ${cell(a, 'readsPerToken', 1)} | ${f((b.bytesReadPerToken ?? NaN) / MiB, 1)} / ${f((a.bytesReadPerToken ?? NaN) / MiB, 1)} | ${cell(b, 'stallMsPerToken', 1)} / ${cell(a, 'stallMsPerToken', 1)} | ${r.beforeAfter.sameTokens === null ? 'n/a' : r.beforeAfter.sameTokens ? 'yes' : 'no'} |`;
  });
  return [
    `Measured ${s.date.slice(0, 10)} on ${s.cpuModel} (${s.cpus} cores), load ${s.loadAverageAtStart?.[0]?.toFixed(1)} -> ${s.loadAverageAtEnd?.[0]?.toFixed(1)}; before: ${s.before?.commit?.split(' ')[0]} (the build before issue 26); each build ${s.tokens} tokens at 2 threads under the same cgroup limit, alternating, best of the rounds (every run's tok/s in the JSON). Routing: realistic synthetic (the presets' router), or the real OLMoE-1B-7B trace driving the engine.`,
    '',
    '| model | routing | limit (share of file) | before decode tok/s | after decode tok/s | after / before | hit rate before / after | reads / token before / after | MiB read / token before / after | stall ms / token before / after | same tokens |',
    '|---|---|---|---|---|---|---|---|---|---|---|',
    ...rows,
  ].join('\n');
}

/** One (model, routing, limit) row: moetier with prefetch off and enforce, llama.cpp at 1 and 2 threads, the bounds. */
async function measureRow(o) {
  const {
    native,
    model,
    plan,
    routing,
    routeArgs,
    ctx,
    ref,
    probe,
    limitBytes,
    promptTokens,
    tokens,
    llamaTokens,
    llamaTimeoutMs,
  } = o;
  const budgetBytes = limitBytes - nodeAllowanceBytes;
  const group = `moetier-disk-${plan.preset}-${plan.quant}`;
  const budgetArgs = [...ctx, ...routeArgs, '--memory-budget', String(budgetBytes)];
  if (o.before) {
    const routingLabel = routing === 'router' ? 'realistic synthetic' : 'OLMoE-1B-7B trace (--routes-from)';
    return { routing: routingLabel, limitBytes, budgetBytes, beforeAfter: beforeAfter(o, budgetArgs, group) };
  }
  native.dropFileCache(model);
  const ours = inCgroup(group, limitBytes, (g) => moetierRun(model, tokens, budgetArgs, g));
  native.dropFileCache(model);
  // The same run with prefetch enforce (issue 13; bench/prefetch.mjs has off / observe / enforce in rounds).
  const prefetched = inCgroup(group, limitBytes, (g) =>
    moetierRun(model, tokens, [...budgetArgs, '--prefetch', 'enforce'], g),
  );
  const peers = [];
  if (routing === 'router' && o.peers) {
    for (const threads of [1, 2]) {
      native.dropFileCache(model);
      peers.push(
        await inCgroupAsync(`llama-disk-${plan.preset}-${plan.quant}`, limitBytes, (g) =>
          llamaRun(model, promptTokens, threads, llamaTokens, g, llamaTimeoutMs),
        ),
      );
    }
  }
  const r = ours.result;
  // streamedBytes counts from the stats mark after the prefill, decodeUploadBytes the uploads
  // (misses admitted into slots, swaps) settled after it: the decode's reads only.
  const bytesPerToken = r ? (r.streamedBytes + r.decodeUploadBytes) / Math.max(1, r.tokens.length - 1) : NaN;
  const best = (k) => (peers.length ? Math.max(...peers.map((p) => p.result?.[k] ?? 0)) : undefined);
  const same = (run) => (ref ? JSON.stringify(run.tokens) === JSON.stringify(ref.tokens) : null);
  const computeBound = ref?.decodeTokPerS;
  return {
    routing: routing === 'router' ? 'realistic synthetic' : 'OLMoE-1B-7B trace (--routes-from)',
    limitBytes,
    budgetBytes,
    moetier: r
      ? {
          decodeTokPerS: r.decodeTokPerS,
          prefillTokPerS: r.prefillTokPerS,
          ttftMs: r.ttftMs,
          decodeHitRate: r.decodeHitRate,
          slotsPerLayer: r.memoryPlan?.slotsPerLayer,
          bytesReadPerToken: bytesPerToken,
          stallMsPerToken: r.stallMsPerToken,
          sameTokens: same(r),
          peakBytes: ours.peakBytes,
        }
      : { failed: ours.failure, peakBytes: ours.peakBytes },
    moetierPrefetch: prefetched.result
      ? {
          decodeTokPerS: prefetched.result.decodeTokPerS,
          stallMsPerToken: prefetched.result.stallMsPerToken,
          decodeHitRate: prefetched.result.decodeHitRate,
          coverage: prefetched.result.prefetch?.coverage,
          wastedBytes: prefetched.result.prefetch?.wastedBytes,
          sameTokens: same(prefetched.result),
          peakBytes: prefetched.peakBytes,
        }
      : { failed: prefetched.failure, peakBytes: prefetched.peakBytes },
    llamaCpp: peers.map((p, i) => ({
      threads: i + 1,
      ...(p.result ?? { failed: p.failure }),
      ...(p.failure && /no reply within/.test(p.failure)
        ? { decodeTokPerSUpperBound: llamaTokens / (llamaTimeoutMs / 1000) }
        : {}),
      peakBytes: p.peakBytes,
    })),
    llamaCppBestDecodeTokPerS: best('decodeTokPerS'),
    llamaCppBestPrefillTokPerS: best('prefillTokPerS'),
    diskGBps: probe.gbps,
    diskBoundTokPerS: (probe.gbps * 1e9) / bytesPerToken,
    computeBoundTokPerS: computeBound ?? null,
    // The engine's own count of what it read from the file (dense, uploads, streamed), and the
    // kernel's count of the process's storage reads (which adds the covering aligned ranges'
    // extra blocks, the header through the mapping, and Node's own files).
    fileReadBytes: r?.fileReadBytes,
    processReadBytes: r?.processReadBytes,
    serialBoundTokPerS: computeBound ? 1 / (1 / computeBound + bytesPerToken / (probe.gbps * 1e9)) : null,
  };
}

/** The routed experts' bytes (gate, up and down of every layer) over their count: one read's mean size. */
async function meanRoutedExpertBytes(native, model) {
  const { parseGguf } = await importDist('src/model/gguf/reader.js');
  const mapped = native.mapFile(model, { access: 'random' });
  try {
    let bytes = 0,
      experts = 0;
    for (const [name, t] of parseGguf(new Uint8Array(mapped.buffer), model, mapped.size).tensors) {
      if (!/^blk\.\d+\.ffn_(gate|up|down)_exps\.weight$/.test(name)) continue;
      bytes += t.byteLength;
      if (name.includes('ffn_up_exps')) experts += t.dims[2];
    }
    return bytes / experts;
  } finally {
    native.unmapFile(mapped.handle);
  }
}

/** One expert's up matrix, in bytes: what the probe reads at a time, as the engine reads experts matrix by matrix. */
async function expertMatrixBytes(native, model) {
  const { parseGguf } = await importDist('src/model/gguf/reader.js');
  const mapped = native.mapFile(model, { access: 'random' });
  try {
    const up = parseGguf(new Uint8Array(mapped.buffer), model, mapped.size).tensors.get('blk.0.ffn_up_exps.weight');
    return up.byteLength / up.dims[2];
  } finally {
    native.unmapFile(mapped.handle);
  }
}

/**
 * Random expert-matrix reads of the cold file through the read engine as the engine configures
 * it (auto: io_uring; O_DIRECT: no readahead, as the engine's own reads have none; its default
 * queue depth). A buffered probe read ahead past each range and measured below what the engine
 * itself reached; one read in flight measured below what it keeps in flight.
 */
async function readProbe(native, file, bytes) {
  native.dropFileCache(file);
  const size = statSync(file).size,
    n = 600;
  const offsets = new Float64Array(n);
  const { mulberry32 } = await importDist('src/core/prng.js');
  const { IO_QUEUE_DEPTH_DEFAULT } = await importDist('src/native/constants.js');
  const rng = mulberry32(12345);
  for (let i = 0; i < n; i++) offsets[i] = Math.floor((rng() * (size - bytes)) / 4096) * 4096;
  const io = native.createIo(file, { engine: 'auto', direct: true, queueDepth: IO_QUEUE_DEPTH_DEFAULT });
  try {
    const p = await native.ioProbe(io, offsets, bytes);
    if (p.failed > 0) throw new Error(`disk probe: ${p.failed} reads failed: ${p.firstFailure}`);
    return {
      gbps: (n * bytes) / p.wallNs,
      reads: n,
      readBytes: bytes,
      how: `O_DIRECT, ${IO_QUEUE_DEPTH_DEFAULT} in flight`,
    };
  } finally {
    native.destroyIo(io);
    native.dropFileCache(file);
  }
}

function diskTable(s) {
  const f = (x, d = 2) => (typeof x === 'number' && Number.isFinite(x) ? x.toFixed(d) : 'n/a');
  const llamaCell = (p) => {
    if (p.decodeTokPerS) return f(p.decodeTokPerS);
    if (p.decodeTokPerSUpperBound)
      return `< ${f(p.decodeTokPerSUpperBound, 3)} (cut at ${(s.llamaTimeoutMs / 1000).toFixed(0)} s)`;
    return /SIGKILL/.test(p.failed ?? '') ? 'killed' : 'failed';
  };
  const rows = s.rows.map((r) => {
    const m = r.moetier;
    const ratio =
      m.decodeTokPerS && r.llamaCppBestDecodeTokPerS > 0
        ? `${f(m.decodeTokPerS / r.llamaCppBestDecodeTokPerS, 1)}x`
        : 'n/a';
    const llama = r.llamaCpp.length ? r.llamaCpp.map(llamaCell).join(' / ') : 'n/a (routes from a trace)';
    const ours = m.failed
      ? /memory budget/.test(m.failed)
        ? 'refused (budget below the fixed parts)'
        : 'failed'
      : f(m.decodeTokPerS);
    const share = (bound) => (m.decodeTokPerS && bound > 0 ? `${f((100 * m.decodeTokPerS) / bound, 0)} %` : 'n/a');
    const p = r.moetierPrefetch;
    const enforce = !p
      ? 'n/a'
      : p.failed
        ? 'failed'
        : `${f(p.decodeTokPerS)} (${f(p.decodeTokPerS / m.decodeTokPerS)}x; coverage ${f(p.coverage)}${p.sameTokens === false ? ', other tokens' : ''})`;
    const same = m.failed || m.sameTokens === null ? 'n/a' : m.sameTokens ? 'yes' : 'no';
    const limit = `${(r.share * 100).toFixed(0)} % (${(r.limitBytes / MiB).toFixed(0)} MiB)`;
    return `| ${r.preset} ${r.quant} | ${r.routing} | ${limit} | ${ours} | ${enforce} | ${f(m.prefillTokPerS, 1)} | ${f(m.ttftMs, 0)} | ${llama} | ${ratio} | ${f(m.decodeHitRate, 3)} | ${f((m.bytesReadPerToken ?? NaN) / MiB, 1)} | ${f(m.stallMsPerToken, 1)} | ${f(r.diskBoundTokPerS, 1)} (${f(r.diskGBps)} GB/s): ${share(r.diskBoundTokPerS)} | ${f(r.computeBoundTokPerS, 1)} | ${f(r.serialBoundTokPerS, 1)}: ${share(r.serialBoundTokPerS)} | ${f(m.peakBytes / MiB, 0)} | ${same} |`;
  });
  return [
    `Measured ${s.date.slice(0, 10)} on ${s.cpuModel} (${s.cpus} cores), load ${s.loadAverageAtStart?.[0]?.toFixed(1)} -> ${s.loadAverageAtEnd?.[0]?.toFixed(1)}; moetier ${s.tokens} tokens at 2 threads, llama.cpp ${s.llamaTokens} tokens at 1 / 2 threads; budget = limit - ${s.nodeAllowanceBytes / MiB} MiB for Node. Routing: realistic synthetic (the presets' router), or the real OLMoE-1B-7B trace driving the engine (a simulation: the tier's figures follow the trace, the tokens mean nothing).`,
    '',
    "| model | routing | limit (share of file) | moetier decode tok/s | with --prefetch enforce (vs off) | moetier prefill tok/s | TTFT ms | llama.cpp decode tok/s (1 / 2 threads) | decode ratio | hit rate | MiB read / token | stall ms / token | disk bound tok/s (probe): moetier's share | compute bound tok/s (no limit) | compute + reads in series tok/s: share | moetier peak MiB | same tokens |",
    '|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|',
    ...rows,
  ].join('\n');
}
