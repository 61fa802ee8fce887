/**
 * Kernel throughput per ISA path and weight type, as GB/s of weight bytes streamed:
 *   matvec      one activation row, W [rows, 4096] of ~48 MB (larger than the caches:
 *               decode streams weights from memory, so read bandwidth is the ceiling)
 *   matmul n=64 64 activation rows, W of ~3 MB: each weight row is read once for all 64 rows,
 *               so this is compute-bound; GFLOP/s = 2 rows cols n / t
 * Baselines in the same run: the scalar path (speedup column) and the native streaming read
 * bandwidth at 1 thread (the decode ceiling). The best path is also run on the 2-thread pool.
 * One-thread runs also report figures from process CPU time (*Cpu), which a shared, busy
 * machine disturbs far less than wall time.
 *
 * Decode shapes (results.decodeShapes): one thread, the medium qwen3moe preset's matvecs per token:
 *   experts  24 layers x 8 routed x (gate, up: W [256, 768]; down: W [768, 256]) picked from 96
 *            distinct experts (more than the caches hold, as in decode), activation prepared per call
 *   head     W [32000, 768]
 * as ms per token and GB/s of weights, per quantised type and path (Q8_0, Q4_0 and the k-quants
 * Q2_K..Q6_K, whose 256-element super-blocks divide 768 and 256).
 *
 * Run: npx tsc -p tsconfig.json && npm run build:native && node bench/kernels.mjs [--types Q4_0,Q4_K] [--update-results]
 * Writes bench/results/local/kernels.json (git-ignored); with --update-results bench/results/kernels.json.
 */
import { randomFillSync } from 'node:crypto';
import os from 'node:os';
import { scriptArgs } from './lib/options.mjs';
import { resultsTarget, writeResults } from './lib/output.mjs';

const args = scriptArgs({
  usage: `usage: node bench/kernels.mjs [options]

Kernel throughput per ISA path and weight type (matvec from memory, matmul n=64), the medium
preset's decode shapes, and the streaming read bandwidth (needs a build).`,
  options: {
    types: { type: 'string', help: 'comma-separated weight types to run (default: all), e.g. Q4_0,Q4_K' },
  },
});
const { loadNative } = await import(new URL('../dist/src/native/binding.js', import.meta.url).href);
const native = loadNative();

const ALL_TYPES = {
  F32: [0, 4, 1],
  F16: [1, 2, 1],
  BF16: [30, 2, 1],
  Q8_0: [8, 34, 32],
  Q4_0: [2, 18, 32],
  Q2_K: [10, 84, 256],
  Q3_K: [11, 110, 256],
  Q4_K: [12, 144, 256],
  Q5_K: [13, 176, 256],
  Q6_K: [14, 210, 256],
}; // id, block bytes, block elements
// Byte offsets of the f16 scales d (and dmin) inside a k-quant super-block (ggml's block_q*_K).
const K_SCALES = { Q2_K: [80, 82], Q3_K: [108], Q4_K: [0, 2], Q5_K: [0, 2], Q6_K: [208] };
const TYPES = Object.fromEntries(
  Object.entries(ALL_TYPES).filter(([t]) => !args.types || args.types.split(',').includes(t)),
);
const COLS = 4096;
const MATVEC_BYTES = 48 << 20;
const MATMUL_BYTES = 3 << 20;
const N = 64;

/** W [rows, COLS] of `type` with finite values (f16 / bf16 / scale bit patterns kept in range). */
function weightsFor(type, targetBytes) {
  const [, blockBytes, blockElems] = TYPES[type];
  const rowBytes = (COLS / blockElems) * blockBytes;
  const rows = Math.max(1, Math.floor(targetBytes / rowBytes));
  const w = new Uint8Array(rows * rowBytes);
  randomFillSync(w);
  if (type === 'F32') for (let i = 3; i < w.length; i += 4) w[i] = (w[i] & 0x80) | 0x3e; // |v| < 1
  if (type === 'F16') for (let i = 1; i < w.length; i += 2) w[i] = (w[i] & 0x83) | 0x30; // |v| < 1
  if (type === 'BF16') for (let i = 1; i < w.length; i += 2) w[i] = (w[i] & 0x80) | 0x3e;
  if (blockElems === 32) for (let b = 0; b < w.length; b += blockBytes) w[b + 1] = 0x1c; // d ~ 2^-8
  if (blockElems === 256)
    for (let b = 0; b < w.length; b += blockBytes) for (const at of K_SCALES[type]) w[b + at + 1] = 0x1c;
  return { w, rows };
}

/**
 * Median wall seconds and median process CPU seconds per call, after one warm-up. The machine
 * may be shared: for one thread, CPU time is what the call costs on a core of its own.
 */
function timeIt(fn, minSeconds) {
  fn();
  const wall = [],
    cpu = [];
  const start = performance.now();
  while (wall.length < 3 || (performance.now() - start) / 1e3 < minSeconds) {
    const c0 = process.cpuUsage(),
      t0 = performance.now();
    fn();
    wall.push((performance.now() - t0) / 1e3);
    const c = process.cpuUsage(c0);
    cpu.push((c.user + c.system) / 1e6);
    if (wall.length >= 50) break;
  }
  const med = (a) => a.sort((p, q) => p - q)[Math.floor(a.length / 2)];
  return { s: med(wall), cpuS: med(cpu) };
}

const paths = [0, 1, 2].filter((isa) => isa <= native.isaBest());
const pool = native.createPool(2);
const results = [];
for (const type of Object.keys(TYPES)) {
  const id = TYPES[type][0];
  const mv = weightsFor(type, MATVEC_BYTES);
  const mm = weightsFor(type, MATMUL_BYTES);
  const x = Float32Array.from({ length: N * COLS }, (_, i) => Math.sin(i));
  const y = new Float32Array(N * mv.rows);
  const runs = [];
  for (const isa of paths) {
    native.isaSet(isa);
    runs.push({
      isa,
      threads: 1,
      op: 'matvec',
      n: 1,
      m: mv,
      fn: () => native.matvec(id, mv.w, mv.rows, COLS, x.subarray(0, COLS), y.subarray(0, mv.rows)),
    });
    runs.push({
      isa,
      threads: 1,
      op: 'matmul',
      n: N,
      m: mm,
      fn: () => native.matmul(id, mm.w, mm.rows, COLS, x, N, y.subarray(0, N * mm.rows)),
    });
  }
  const best = native.isaBest();
  runs.push({
    isa: best,
    threads: 2,
    op: 'matvec',
    n: 1,
    m: mv,
    fn: () => native.poolMatvec(pool, id, mv.w, mv.rows, COLS, x.subarray(0, COLS), y.subarray(0, mv.rows)),
  });
  runs.push({
    isa: best,
    threads: 2,
    op: 'matmul',
    n: N,
    m: mm,
    fn: () => native.poolMatmul(pool, id, mm.w, mm.rows, COLS, x, N, y.subarray(0, N * mm.rows)),
  });
  for (const r of runs) {
    native.isaSet(r.isa);
    const { s, cpuS } = timeIt(r.fn, r.isa === 0 ? 0.2 : 0.5);
    // CPU-time figures only for one thread (the pool's CPU time counts both threads and their spinning).
    const perCpu = r.threads === 1 && cpuS > 0 ? cpuS : null;
    results.push({
      type,
      path: native.isaName(r.isa),
      op: r.op,
      n: r.n,
      threads: r.threads,
      rows: r.m.rows,
      cols: COLS,
      weightBytes: r.m.w.length,
      ms: s * 1e3,
      weightGBs: r.m.w.length / s / 1e9,
      gflops: (2 * r.m.rows * COLS * r.n) / s / 1e9,
      cpuMs: perCpu && perCpu * 1e3,
      weightGBsCpu: perCpu && r.m.w.length / perCpu / 1e9,
      gflopsCpu: perCpu && (2 * r.m.rows * COLS * r.n) / perCpu / 1e9,
    });
  }
}
native.freePool(pool);
native.isaSet(native.isaBest());

for (const r of results) {
  const base = results.find((b) => b.type === r.type && b.op === r.op && b.path === 'scalar' && b.threads === 1);
  r.speedupVsScalar = base ? base.ms / r.ms : null;
  r.speedupVsScalarCpu = base && r.cpuMs ? base.cpuMs / r.cpuMs : null;
}
/** Decode-like matvecs of the medium preset (see the header), per quantised type and path. */
function decodeShapes() {
  const E = 768,
    F = 256,
    V = 32000,
    experts = 96,
    layers = 24,
    routed = 8;
  const out = [];
  for (const type of Object.keys(TYPES).filter((t) => TYPES[t][2] > 1)) {
    const [id, blockBytes, blockElems] = TYPES[type];
    const upBytes = ((F * E) / blockElems) * blockBytes,
      downBytes = ((E * F) / blockElems) * blockBytes;
    const mats = Array.from({ length: experts }, () => {
      const w = new Uint8Array(2 * upBytes + downBytes);
      randomFillSync(w);
      for (let b = 0; b < w.length; b += blockBytes) for (const at of K_SCALES[type] ?? [0]) w[b + at + 1] = 0x1c;
      return { gate: w.subarray(0, upBytes), up: w.subarray(upBytes, 2 * upBytes), down: w.subarray(2 * upBytes) };
    });
    const head = weightsFor(type, ((V * E) / blockElems) * blockBytes);
    const x = Float32Array.from({ length: E }, (_, i) => Math.sin(i)),
      g = new Float32Array(F),
      u = new Float32Array(F),
      y = new Float32Array(E);
    const logits = new Float32Array(V);
    let t = 0;
    const token = () => {
      for (let l = 0; l < layers; l++)
        for (let k = 0; k < routed; k++) {
          const m = mats[(l * 37 + k * 11 + t * 5) % experts];
          native.matvec(id, m.gate, F, E, x, g);
          native.matvec(id, m.up, F, E, x, u);
          native.matvec(id, m.down, E, F, g, y);
        }
      t++;
    };
    for (const isa of paths) {
      native.isaSet(isa);
      const ex = timeIt(token, isa === 0 ? 0.3 : 0.6);
      const hd = timeIt(() => native.matvec(id, head.w, V, E, x, logits), 0.3);
      const expertBytes = layers * routed * (2 * upBytes + downBytes);
      out.push({
        type,
        path: native.isaName(isa),
        expertsMs: ex.s * 1e3,
        expertsCpuMs: ex.cpuS * 1e3,
        expertsGBsCpu: expertBytes / ex.cpuS / 1e9,
        headMs: hd.s * 1e3,
        headCpuMs: hd.cpuS * 1e3,
        headGBsCpu: head.w.length / hd.cpuS / 1e9,
      });
    }
  }
  native.isaSet(native.isaBest());
  return out;
}

const decode = decodeShapes();
const readGBs = {
  threads1: native.measureReadBandwidth(256 << 20, 1),
  threads2: native.measureReadBandwidth(256 << 20, 2),
};
const out = {
  date: new Date().toISOString(),
  machine: {
    cpu: os.cpus()[0]?.model,
    cores: os.cpus().length,
    loadAvg1m: os.loadavg()[0],
    isaBest: native.isaName(native.isaBest()),
  },
  readBandwidthGBs: readGBs,
  results,
  decodeShapes: decode,
};
writeResults(resultsTarget(args['update-results']), 'kernels', JSON.stringify(out, null, 2) + '\n');
console.table(
  results.map((r) => ({
    type: r.type,
    path: r.path,
    op: r.op,
    threads: r.threads,
    ms: +r.ms.toFixed(2),
    weightGBs: +r.weightGBs.toFixed(2),
    gflops: +r.gflops.toFixed(1),
    speedup: r.speedupVsScalar && +r.speedupVsScalar.toFixed(1),
    GBsCpu: r.weightGBsCpu && +r.weightGBsCpu.toFixed(2),
    gflopsCpu: r.gflopsCpu && +r.gflopsCpu.toFixed(1),
    speedupCpu: r.speedupVsScalarCpu && +r.speedupVsScalarCpu.toFixed(1),
  })),
);
console.table(
  decode.map((r) => ({
    type: r.type,
    path: r.path,
    expertsMs: +r.expertsMs.toFixed(2),
    expertsCpuMs: +r.expertsCpuMs.toFixed(2),
    expertsGBsCpu: +r.expertsGBsCpu.toFixed(1),
    headMs: +r.headMs.toFixed(2),
    headCpuMs: +r.headCpuMs.toFixed(2),
    headGBsCpu: +r.headGBsCpu.toFixed(1),
  })),
);
console.log('read bandwidth GB/s', readGBs, 'load', os.loadavg()[0]);
