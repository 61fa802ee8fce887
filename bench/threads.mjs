/**
 * How to use both cores for decode: native pool threads or Node worker threads?
 *
 * One decode token of the medium model's MoE path, Q8_0:
 *   24 layers x 8 routed experts x (gate [256 x 768], up [256 x 768], down [768 x 256])
 *   = 576 matvecs of 208,896 B, plus the head [32000 x 768] (26.1 MB): ~146 MB of weights,
 *   all distinct memory (experts are not cache-resident), one barrier after every matvec
 *   (the next op needs the result), as in the forward pass.
 * Modes:
 *   native-1t          matvec on the calling thread
 *   native-2t-spin     the native pool, 2 threads, workers spin 100 us before sleeping (and the
 *                      pool sleeps for 256 jobs after it finds a worker descheduled)
 *   native-2t-spin20   the same with a 20 us spin
 *   native-2t-sleep    the native pool, 2 threads, spin 0 (every job wakes a sleeping worker)
 * The native pool hands rows out in chunks (mt_pool_for): a worker that is late takes none.
 *   workers-2          2 Node worker threads, each calls the native matvec on half the rows;
 *                      the main thread publishes each job and waits (Atomics.wait, no spinning)
 *   workers-2-spin     the same, workers spin ~100 us on Atomics.load before Atomics.wait
 *   main+worker        the main thread computes one half, one worker the other
 * Also the native streaming read bandwidth at 1 and 2 threads: the bound decode cannot beat.
 *
 * Run: npx tsc -p tsconfig.json && npm run build:native && node bench/threads.mjs [--tokens 10] [--rounds 5] [--update-results]
 * Writes bench/results/local/threads.json (git-ignored); with --update-results bench/results/threads.json.
 */
import { Worker } from 'node:worker_threads';
import { randomFillSync } from 'node:crypto';
import { readFileSync } from 'node:fs';
import os from 'node:os';
import { positiveInt, scriptArgs } from './lib/options.mjs';
import { resultsTarget, writeResults } from './lib/output.mjs';

const args = scriptArgs({
  usage: `usage: node bench/threads.mjs [options]

How to use both cores for decode: the native pool's modes against Node worker threads, on one
decode token of the medium model's MoE path (Q8_0), with the read bandwidth as the bound.`,
  options: {
    tokens: { type: 'string', default: '6', help: 'tokens per mode and round' },
    rounds: { type: 'string', default: '5', help: 'rounds (modes interleave round-robin)' },
  },
  check: (v) => ({
    ...v,
    tokens: positiveInt('tokens', v.tokens, 10_000),
    rounds: positiveInt('rounds', v.rounds, 1000),
  }),
});
const bindingUrl = new URL('../dist/src/native/binding.js', import.meta.url).href;
const { loadNative } = await import(bindingUrl);
const native = loadNative();

const Q8_0 = 8;
const ROW_BYTES_768 = (768 / 32) * 34; // 816
const ROW_BYTES_256 = (256 / 32) * 34; // 272
const { tokens, rounds } = args; // modes interleave round-robin

/** The token's matvecs: byte offset, rows, cols, which x and which y. */
function plan() {
  const mats = [];
  let offset = 0;
  for (let l = 0; l < 24; l++) {
    for (let e = 0; e < 8; e++) {
      for (const [rows, cols] of [
        [256, 768],
        [256, 768],
        [768, 256],
      ]) {
        mats.push({ offset, rows, cols });
        offset += rows * (cols === 768 ? ROW_BYTES_768 : ROW_BYTES_256);
      }
    }
  }
  mats.push({ offset, rows: 32000, cols: 768 });
  offset += 32000 * ROW_BYTES_768;
  return { mats, bytes: offset };
}

/** Valid Q8_0 blocks: random int8, scales d = f16 in [2^-8, 2^-7). */
function fillQ8(u8) {
  randomFillSync(u8);
  for (let b = 0; b < u8.length; b += 34) {
    u8[b + 1] = 0x1c | (u8[b + 1] & 0x03);
  }
}

const { mats, bytes } = plan();
const weights = new Uint8Array(new SharedArrayBuffer(bytes));
fillQ8(weights);
const xs = {
  768: new Float32Array(new SharedArrayBuffer(768 * 4)).map((_, i) => Math.sin(i)),
  256: new Float32Array(new SharedArrayBuffer(256 * 4)).map((_, i) => Math.cos(i)),
};
const ys = new Float32Array(new SharedArrayBuffer(32000 * 4));
const views = mats.map((m) => ({
  ...m,
  w: weights.subarray(m.offset, m.offset + m.rows * (m.cols === 768 ? ROW_BYTES_768 : ROW_BYTES_256)),
  x: xs[m.cols],
  y: ys.subarray(0, m.rows),
}));

function tokenNative1() {
  for (const v of views) native.matvec(Q8_0, v.w, v.rows, v.cols, v.x, v.y);
}

function tokenPool(pool) {
  for (const v of views) native.poolMatvec(pool, Q8_0, v.w, v.rows, v.cols, v.x, v.y);
}

// Worker protocol over ctl (Int32Array on a SharedArrayBuffer):
//   ctl[0] job generation, ctl[1] halves done, ctl[2] stop, ctl[3] job index (-1: none)
const workerSource = `
const { workerData, parentPort } = require('node:worker_threads');
const { bindingUrl, weights, x768, x256, ys, mats, ctl, half, halves, spinLoads } = workerData;
import(bindingUrl).then(({ loadNative }) => {
  const native = loadNative();
  const xs = { 768: new Float32Array(x768), 256: new Float32Array(x256) };
  const w8 = new Uint8Array(weights);
  const y = new Float32Array(ys);
  const jobs = mats.map((m) => {
    const rowBytes = (m.cols / 32) * 34;
    const r0 = Math.floor((m.rows * half) / halves), r1 = Math.floor((m.rows * (half + 1)) / halves);
    return { w: w8.subarray(m.offset + r0 * rowBytes, m.offset + r1 * rowBytes), rows: r1 - r0, cols: m.cols,
             x: xs[m.cols], y: y.subarray(r0, r1) };
  });
  parentPort.postMessage('ready');
  let seen = 0;
  for (;;) {
    let g = Atomics.load(ctl, 0);
    for (let i = 0; g === seen && i < spinLoads; i++) g = Atomics.load(ctl, 0);
    while (g === seen) { Atomics.wait(ctl, 0, seen); g = Atomics.load(ctl, 0); }
    seen = g;
    if (Atomics.load(ctl, 2)) break;
    const k = Atomics.load(ctl, 3);
    if (k >= 0) {
      const j = jobs[k];
      native.matvec(8, j.w, j.rows, j.cols, j.x, j.y);
    }
    Atomics.add(ctl, 1, 1);
    Atomics.notify(ctl, 1);
  }
});
`;

/** Start `count` workers that own halves [first, first + count) of `halves`. */
async function startWorkers(count, first, halves, spinLoads) {
  const ctl = new Int32Array(new SharedArrayBuffer(16));
  const workers = [];
  for (let i = 0; i < count; i++) {
    const w = new Worker(workerSource, {
      eval: true,
      workerData: {
        bindingUrl,
        weights: weights.buffer,
        x768: xs[768].buffer,
        x256: xs[256].buffer,
        ys: ys.buffer,
        mats,
        ctl,
        half: first + i,
        halves,
        spinLoads,
      },
    });
    await new Promise((resolve, reject) => {
      w.once('message', resolve);
      w.once('error', reject);
    });
    workers.push(w);
  }
  return { ctl, workers, halves };
}

// The main thread spins only when it computed a half itself: in workers-2 it would take a
// core from a worker.
function waitDone(ctl, target, spinLoads) {
  let done = Atomics.load(ctl, 1);
  for (let i = 0; done < target && i < spinLoads; i++) done = Atomics.load(ctl, 1);
  while (done < target) {
    Atomics.wait(ctl, 1, done, 10);
    done = Atomics.load(ctl, 1);
  }
}

/** One token through workers; when mainHalf is set the main thread computes that half itself. */
function tokenWorkers(team, mainJobs) {
  const { ctl, workers } = team;
  for (let k = 0; k < views.length; k++) {
    Atomics.store(ctl, 1, 0);
    Atomics.store(ctl, 3, k);
    Atomics.add(ctl, 0, 1);
    Atomics.notify(ctl, 0);
    if (mainJobs) {
      const j = mainJobs[k];
      native.matvec(Q8_0, j.w, j.rows, j.cols, j.x, j.y);
    }
    waitDone(ctl, workers.length, mainJobs ? 20000 : 0);
  }
}

async function stopWorkers(team) {
  Atomics.store(team.ctl, 2, 1);
  Atomics.add(team.ctl, 0, 1);
  Atomics.notify(team.ctl, 0);
  await Promise.all(team.workers.map((w) => w.terminate()));
}

/** One empty job (k = -1) through the workers: the hand-off and barrier alone, in us. */
function emptyJobUsWorkers(team, jobs) {
  const { ctl, workers } = team;
  const t0 = process.hrtime.bigint();
  for (let i = 0; i < jobs; i++) {
    Atomics.store(ctl, 1, 0);
    Atomics.store(ctl, 3, -1);
    Atomics.add(ctl, 0, 1);
    Atomics.notify(ctl, 0);
    waitDone(ctl, workers.length, 0);
  }
  return Number(process.hrtime.bigint() - t0) / 1e3 / jobs;
}

function emptyJobUsPool(pool, jobs) {
  const t0 = process.hrtime.bigint();
  native.poolCheck(pool, jobs);
  return Number(process.hrtime.bigint() - t0) / 1e3 / jobs;
}

/** The main thread's half 0 of 2, as views. */
function mainHalfJobs() {
  return views.map((v) => {
    const rowBytes = (v.cols / 32) * 34;
    const r1 = Math.floor(v.rows / 2);
    return { w: v.w.subarray(0, r1 * rowBytes), rows: r1, cols: v.cols, x: v.x, y: v.y.subarray(0, r1) };
  });
}

/** CPU seconds all processes spent busy so far (/proc/stat, USER_HZ = 100). */
function busySeconds() {
  const f = readFileSync('/proc/stat', 'utf8').split('\n')[0].trim().split(/\s+/).slice(1).map(Number);
  const [user, nice, system, , , irq, softirq, steal] = f;
  return (user + nice + system + irq + softirq + steal) / 100;
}

/**
 * Time `tokens` tokens after a warm-up. The machine is shared, so each round also records
 * how many cores other processes kept busy meanwhile (all busy CPU time minus ours, over wall
 * time); the decision uses the quietest round of each mode.
 */
function timeTokens(fn) {
  fn(); // warm-up: page-in and caches as in steady decode
  const ms = [];
  const busy0 = busySeconds(),
    own0 = process.cpuUsage(),
    wall0 = process.hrtime.bigint();
  for (let t = 0; t < tokens; t++) {
    const t0 = process.hrtime.bigint();
    fn();
    ms.push(Number(process.hrtime.bigint() - t0) / 1e6);
  }
  const wallS = Number(process.hrtime.bigint() - wall0) / 1e9;
  const own = process.cpuUsage(own0);
  const foreignCores = Math.max(0, (busySeconds() - busy0 - (own.user + own.system) / 1e6) / wallS);
  return { msMedian: median(ms), msMin: Math.min(...ms), foreignCores };
}

function median(a) {
  const s = [...a].sort((p, q) => p - q);
  return s[Math.floor(s.length / 2)];
}

// The result of one token must not depend on the mode: check against native-1t.
function checkSameResult(fn, label) {
  tokenNative1();
  const want = Float32Array.from(ys);
  fn();
  for (let i = 0; i < want.length; i++) {
    if (want[i] !== ys[i]) throw new Error(`${label}: y[${i}] = ${ys[i]}, native-1t gave ${want[i]}`);
  }
}

const poolSpin = native.createPool(2, 100);
const poolSpin20 = native.createPool(2, 20);
const poolSleep = native.createPool(2, 0);
// 20000 Atomics.load ~ 100 us of spinning before Atomics.wait, like the native pool.
const team2 = await startWorkers(2, 0, 2, 0);
const team2spin = await startWorkers(2, 0, 2, 20000);
const team1 = await startWorkers(1, 1, 2, 20000);
const mainJobs = mainHalfJobs();
const modes = {
  'native-1t': tokenNative1,
  'native-2t-spin': () => tokenPool(poolSpin),
  'native-2t-spin20': () => tokenPool(poolSpin20),
  'native-2t-sleep': () => tokenPool(poolSleep),
  'workers-2': () => tokenWorkers(team2, null),
  'workers-2-spin': () => tokenWorkers(team2spin, null),
  'main+worker': () => tokenWorkers(team1, mainJobs),
};
for (const [label, fn] of Object.entries(modes)) if (label !== 'native-1t') checkSameResult(fn, label);

const rounds_ = Object.fromEntries(Object.keys(modes).map((k) => [k, []]));
for (let r = 0; r < rounds; r++) for (const [label, fn] of Object.entries(modes)) rounds_[label].push(timeTokens(fn));
// The cost of one barrier (577 per token), best of 5 runs of 500 empty jobs.
const best = (f) => Math.min(...Array.from({ length: 5 }, f));
const emptyJobUs = {
  'native-2t-spin': best(() => emptyJobUsPool(poolSpin, 500)),
  'native-2t-sleep': best(() => emptyJobUsPool(poolSleep, 500)),
  'workers-2': best(() => emptyJobUsWorkers(team2, 500)),
  'workers-2-spin': best(() => emptyJobUsWorkers(team2spin, 500)),
};
await stopWorkers(team2);
await stopWorkers(team2spin);
await stopWorkers(team1);
// How often the spinning pool found its worker descheduled and fell back to sleeping.
const poolStragglerJobs = {
  spin: native.poolCheck(poolSpin, 1).stragglerJobs,
  spin20: native.poolCheck(poolSpin20, 1).stragglerJobs,
  sleep: native.poolCheck(poolSleep, 1).stragglerJobs,
};
native.freePool(poolSpin);
native.freePool(poolSpin20);
native.freePool(poolSleep);

const bandwidth = {
  threads1GBs: native.measureReadBandwidth(256 << 20, 1),
  threads2GBs: native.measureReadBandwidth(256 << 20, 2),
};
const results = Object.entries(rounds_).map(([mode, rs]) => {
  const quiet = rs.reduce((a, b) => (b.foreignCores < a.foreignCores ? b : a));
  return {
    mode,
    msPerTokenQuietest: quiet.msMedian,
    foreignCoresQuietest: quiet.foreignCores,
    weightGBsQuietest: bytes / (quiet.msMedian / 1e3) / 1e9,
    msPerTokenAllRounds: median(rs.map((r) => r.msMedian)),
    rounds: rs,
  };
});
const fastest = results.reduce((a, b) => (b.msPerTokenQuietest < a.msPerTokenQuietest ? b : a));
const out = {
  date: new Date().toISOString(),
  machine: {
    cpu: os.cpus()[0]?.model,
    cores: os.cpus().length,
    loadAvg1m: os.loadavg()[0],
    isa: native.isaName(native.isaActive()),
  },
  shape: 'Q8_0: 24 layers x 8 experts x (256x768, 256x768, 768x256) + head 32000x768, barrier after each matvec',
  weightBytesPerToken: bytes,
  matvecsPerToken: views.length,
  tokensPerRound: tokens,
  readBandwidth: bandwidth,
  decodeBoundMsPerToken: {
    threads1: bytes / (bandwidth.threads1GBs * 1e6),
    threads2: bytes / (bandwidth.threads2GBs * 1e6),
  },
  poolStragglerJobs,
  emptyJobUsBest: emptyJobUs,
  results,
  caveat:
    fastest.foreignCoresQuietest > 0.25
      ? `shared machine: other processes kept ${fastest.foreignCoresQuietest.toFixed(2)} of ${os.cpus().length} cores busy even in the ` +
        'quietest round, so 2-thread figures measure contention as much as parallelism; rerun on an idle machine'
      : null,
  decision:
    `${fastest.mode} is fastest at ${fastest.msPerTokenQuietest.toFixed(2)} ms/token ` +
    `(median of ${tokens} tokens in its quietest round, other processes using ${fastest.foreignCoresQuietest.toFixed(2)} cores)`,
};
writeResults(resultsTarget(args['update-results']), 'threads', JSON.stringify(out, null, 2) + '\n');
console.table(
  results.map((r) => ({
    mode: r.mode,
    msQuietest: +r.msPerTokenQuietest.toFixed(2),
    foreignCores: +r.foreignCoresQuietest.toFixed(2),
    GBs: +r.weightGBsQuietest.toFixed(2),
    msAllRounds: +r.msPerTokenAllRounds.toFixed(2),
  })),
);
console.log('read bandwidth GB/s', bandwidth, '\nempty job (barrier) us', emptyJobUs, '\n' + out.decision);
