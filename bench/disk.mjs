/**
 * npm run bench -- disk [--presets q8_0,q4_0 --limits 0.75,0.5,0.3 --tokens N --llama-tokens N --update-results]
 *
 * A model bigger than RAM (issue 12): the medium preset at Q8_0 (2.03 GB) and Q4_0 (1.08 GB),
 * each engine in a memory cgroup whose limit (counting the page cache) is a share of the file,
 * the file's pages dropped from the page cache before every run:
 *   - moetier `run --memory-budget` (the limit less a stated allowance for Node's own heap), 2
 *     threads: decode and prefill tok/s, decode hit rate, bytes read from the file per decode
 *     token (the engine's counters), peak memory of the cgroup, tokens against an unlimited run
 *   - llama.cpp (node-llama-cpp in a child process, its default mmap) at 1 and 2 threads under the
 *     same limit: its best decode and prefill tok/s, or how it ended (killed by the limit)
 *   - the disk bound: a random-read probe of the cold file as the engine reads it (one expert
 *     matrix per read, the read engine's default: io_uring, O_DIRECT, 8 in flight) gives GB/s;
 *     bytes per decode token over it is the fastest decode the disk allows at the measured hit
 *     rate. The compute bound is the same engine with every expert in memory (the run without
 *     a limit), and compute + reads one after the other is the serial bound: the engine beats
 *     it by overlapping reads with compute, and meets the disk bound only when they overlap fully
 *   - both engines' contexts are sized to their run (prompt + tokens + 8), as the llama.cpp child
 *     sizes its own: a 2048-token KV cache would take 96 MiB of moetier's budget for nothing
 * Needs root for the cgroups (bench/lib/cgroup.mjs); prints one JSON line and writes
 * results/local/disk.json, or with --update-results results/disk.json and the README table.
 */
import { statSync } from 'node:fs';
import os from 'node:os';
import { memoryCgroupSupport } from './lib/cgroup.mjs';
import { ensureBenchDeps } from './lib/deps.mjs';
import { importDist, presetModel } from './lib/moetier.mjs';
import { parseBenchArgs, positiveInt } from './lib/options.mjs';
import { resultsTarget, updateReadme, writeResults } from './lib/output.mjs';
import { inCgroup, inCgroupAsync, llamaRun, moetierRun, promptIds } from './lib/runs.mjs';

const usage = 'npm run bench -- disk [--presets q8_0,q4_0 --limits 0.75,0.5,0.3 --tokens N --llama-tokens N --update-results]';
const options = {
  presets: { type: 'string', default: 'q8_0,q4_0', help: 'quants of the medium preset' },
  limits: { type: 'string', default: '0.75,0.5,0.3', help: 'memory limits as shares of the file size' },
  tokens: { type: 'string', default: '48', help: 'tokens moetier generates per run' },
  'llama-tokens': { type: 'string', default: '12', help: 'tokens llama.cpp generates per run (it thrashes under a limit)' },
};
/** Node's own heap and code, outside the engine's budget: the cgroup limit less this is the budget. */
const nodeAllowanceBytes = 96 * 2 ** 20;
const MiB = 2 ** 20;

export async function main(argv) {
  const values = parseBenchArgs(argv, { usage, options });
  if (!values) return;
  const loadAverageAtStart = os.loadavg();
  const why = memoryCgroupSupport();
  if (why) throw Object.assign(new Error(`bench disk needs memory cgroups: ${why}`), { code: 'E_CGROUP' });
  const tokens = positiveInt('tokens', values.tokens, 4096), llamaTokens = positiveInt('llama-tokens', values['llama-tokens'], 4096);
  const limits = values.limits.split(',').map(Number);
  await ensureBenchDeps();
  const native = (await importDist('src/native/binding.js')).loadNative();
  const rows = [];
  for (const quant of values.presets.split(',')) {
    const model = await presetModel({ preset: 'medium', arch: 'qwen3moe', quant });
    const fileBytes = statSync(model).size;
    const promptTokens = await promptIds(model);
    const ctx = ['-c', String(promptTokens.length + tokens + 8)];
    const ref = moetierRun(model, tokens, ctx);
    const probe = await readProbe(native, model, probeReadBytes);
    for (const share of limits) {
      const limitBytes = Math.round(fileBytes * share);
      const budgetBytes = limitBytes - nodeAllowanceBytes;
      native.dropFileCache(model);
      const ours = inCgroup(`moetier-disk-${quant}`, limitBytes, (g) => moetierRun(model, tokens, [...ctx, '--memory-budget', String(budgetBytes)], g));
      native.dropFileCache(model);
      // The same run with prefetch enforce (issue 13; bench/prefetch.mjs has off / observe / enforce in rounds).
      const prefetched = inCgroup(`moetier-disk-${quant}`, limitBytes, (g) => moetierRun(model, tokens, [...ctx, '--memory-budget', String(budgetBytes), '--prefetch', 'enforce'], g));
      const peers = [];
      for (const threads of [1, 2]) {
        native.dropFileCache(model);
        peers.push(await inCgroupAsync(`llama-disk-${quant}`, limitBytes, (g) => llamaRun(model, promptTokens, threads, llamaTokens, g)));
      }
      const r = ours.result;
      // streamedBytes counts from the stats mark after the prefill, decodeUploadBytes the uploads
      // (misses admitted into slots, swaps) settled after it: the decode's reads only.
      const bytesPerToken = r ? (r.streamedBytes + r.decodeUploadBytes) / Math.max(1, r.tokens.length - 1) : NaN;
      const best = (k) => Math.max(...peers.map((p) => p.result?.[k] ?? 0));
      rows.push({
        quant, fileBytes, share, limitBytes, budgetBytes,
        moetier: r ? { decodeTokPerS: r.decodeTokPerS, prefillTokPerS: r.prefillTokPerS, decodeHitRate: r.decodeHitRate, slotsPerLayer: r.memoryPlan?.slotsPerLayer, bytesReadPerToken: bytesPerToken, stallMsPerToken: r.stallMsPerToken, sameTokens: JSON.stringify(r.tokens) === JSON.stringify(ref.tokens), peakBytes: ours.peakBytes } : { failed: ours.failure, peakBytes: ours.peakBytes },
        moetierPrefetch: prefetched.result
          ? { decodeTokPerS: prefetched.result.decodeTokPerS, stallMsPerToken: prefetched.result.stallMsPerToken, coverage: prefetched.result.prefetch?.coverage, wastedBytes: prefetched.result.prefetch?.wastedBytes, sameTokens: JSON.stringify(prefetched.result.tokens) === JSON.stringify(ref.tokens), peakBytes: prefetched.peakBytes }
          : { failed: prefetched.failure, peakBytes: prefetched.peakBytes },
        llamaCpp: peers.map((p, i) => ({ threads: i + 1, ...(p.result ?? { failed: p.failure }), peakBytes: p.peakBytes })),
        llamaCppBestDecodeTokPerS: best('decodeTokPerS'), llamaCppBestPrefillTokPerS: best('prefillTokPerS'),
        diskGBps: probe.gbps, diskBoundTokPerS: probe.gbps * 1e9 / bytesPerToken,
        computeBoundTokPerS: ref.decodeTokPerS,
        // The engine's own count of what it read from the file (dense, uploads, streamed), and the
        // kernel's count of the process's storage reads (which adds the covering aligned ranges'
        // extra blocks, the header through the mapping, and Node's own files).
        fileReadBytes: r?.fileReadBytes, processReadBytes: r?.processReadBytes,
        serialBoundTokPerS: 1 / (1 / ref.decodeTokPerS + bytesPerToken / (probe.gbps * 1e9)),
      });
      process.stderr.write(`disk ${quant} ${share}: moetier ${r?.decodeTokPerS ?? 'failed'} tok/s, llama.cpp best ${best('decodeTokPerS').toFixed(2)}\n`);
    }
  }
  const summary = { date: new Date().toISOString(), cpus: os.cpus().length, cpuModel: os.cpus()[0]?.model, command: `npm run bench -- disk ${argv.join(' ')}`.trim(), loadAverageAtStart, loadAverageAtEnd: os.loadavg(), nodeAllowanceBytes, tokens, llamaTokens, rows };
  process.stdout.write(JSON.stringify(summary) + '\n');
  const target = resultsTarget(values['update-results']);
  writeResults(target, 'disk', JSON.stringify(summary, null, 2) + '\n');
  updateReadme(target, 'disk', diskTable(summary));
}

/** The probe's read: one matrix of a medium Q8_0 expert (256 x 768 weights at 34 bytes per 32: 204 KiB), as the engine reads them. */
const probeReadBytes = (256 * 768 / 32) * 34;

/**
 * Random expert-matrix reads of the cold file through the read engine as the engine configures
 * it (auto: io_uring; O_DIRECT: no readahead, as the engine's own reads have none; its default
 * queue depth). A buffered probe read ahead past each range and measured below what the engine
 * itself reached; one read in flight measured below what it keeps in flight.
 */
async function readProbe(native, file, bytes) {
  native.dropFileCache(file);
  const size = statSync(file).size, n = 600;
  const offsets = new Float64Array(n);
  const { mulberry32 } = await importDist('src/core/prng.js');
  const { IO_QUEUE_DEPTH_DEFAULT } = await importDist('src/native/constants.js');
  const rng = mulberry32(12345);
  for (let i = 0; i < n; i++) offsets[i] = Math.floor((rng() * (size - bytes)) / 4096) * 4096;
  const io = native.createIo(file, { engine: 'auto', direct: true, queueDepth: IO_QUEUE_DEPTH_DEFAULT });
  try {
    const p = await native.ioProbe(io, offsets, bytes);
    if (p.failed > 0) throw new Error(`disk probe: ${p.failed} reads failed: ${p.firstFailure}`);
    return { gbps: (n * bytes) / p.wallNs, reads: n, readBytes: bytes, how: `O_DIRECT, ${IO_QUEUE_DEPTH_DEFAULT} in flight` };
  } finally {
    native.destroyIo(io);
    native.dropFileCache(file);
  }
}

function diskTable(s) {
  const f = (x, d = 2) => (typeof x === 'number' && Number.isFinite(x) ? x.toFixed(d) : 'n/a');
  const rows = s.rows.map((r) => {
    const m = r.moetier;
    const ratio = m.decodeTokPerS && r.llamaCppBestDecodeTokPerS > 0 ? `${f(m.decodeTokPerS / r.llamaCppBestDecodeTokPerS, 1)}x` : 'n/a';
    const llama = r.llamaCpp.map((p) => (p.decodeTokPerS ? f(p.decodeTokPerS) : /SIGKILL/.test(p.failed ?? '') ? 'killed' : 'failed')).join(' / ');
    const ours = m.failed ? (/memory budget/.test(m.failed) ? 'refused (budget below the fixed parts)' : 'failed') : f(m.decodeTokPerS);
    const share = (bound) => (m.decodeTokPerS && bound > 0 ? `${f((100 * m.decodeTokPerS) / bound, 0)} %` : 'n/a');
    const p = r.moetierPrefetch;
    const enforce = !p ? 'n/a' : p.failed ? 'failed' : `${f(p.decodeTokPerS)} (${f(p.decodeTokPerS / m.decodeTokPerS)}x; coverage ${f(p.coverage)}${p.sameTokens ? '' : ', other tokens'})`;
    return `| medium ${r.quant} | ${(r.share * 100).toFixed(0)} % (${(r.limitBytes / MiB).toFixed(0)} MiB) | ${ours} | ${enforce} | ${f(m.prefillTokPerS, 1)} | ${llama} | ${ratio} | ${f(m.decodeHitRate, 3)} | ${f((m.bytesReadPerToken ?? NaN) / MiB, 1)} | ${f(r.diskBoundTokPerS, 1)} (${f(r.diskGBps)} GB/s): ${share(r.diskBoundTokPerS)} | ${f(r.computeBoundTokPerS, 1)} | ${f(r.serialBoundTokPerS, 1)}: ${share(r.serialBoundTokPerS)} | ${f(m.peakBytes / MiB, 0)} | ${m.failed ? 'n/a' : m.sameTokens ? 'yes' : 'no'} |`;
  });
  return [
    `Measured ${s.date.slice(0, 10)} on ${s.cpuModel} (${s.cpus} cores), load ${s.loadAverageAtStart?.[0]?.toFixed(1)} -> ${s.loadAverageAtEnd?.[0]?.toFixed(1)}; moetier ${s.tokens} tokens at 2 threads, llama.cpp ${s.llamaTokens} tokens at 1 / 2 threads; budget = limit - ${s.nodeAllowanceBytes / MiB} MiB for Node.`,
    '',
    '| model | limit (share of file) | moetier decode tok/s | with --prefetch enforce (vs off) | moetier prefill tok/s | llama.cpp decode tok/s (1 / 2 threads) | decode ratio | hit rate | MiB read / token | disk bound tok/s (probe): moetier\'s share | compute bound tok/s (no limit) | compute + reads in series tok/s: share | moetier peak MiB | same tokens |',
    '|---|---|---|---|---|---|---|---|---|---|---|---|---|---|',
    ...rows,
  ].join('\n');
}
