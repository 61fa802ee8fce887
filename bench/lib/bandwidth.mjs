/**
 * Read bandwidth with a given number of threads: what bounds decode, which streams weights once.
 * The native binding's measureReadBandwidth is the measure; when a build lacks that verb, a
 * JavaScript loop over a SharedArrayBuffer in worker threads stands in (it reads slower than
 * native code, so its figure, and the bound made from it, are lower bounds) and says so.
 */
import { Worker } from 'node:worker_threads';
import { importDist } from './moetier.mjs';

/** -> { bytesPerS, source } */
export async function measureReadBandwidth(bytes, threads) {
  const { loadNative } = await importDist('src/native/binding.js');
  const native = loadNative();
  if (typeof native.measureReadBandwidth === 'function') {
    return { bytesPerS: toBytesPerS(native.measureReadBandwidth(bytes, threads)), source: 'native measureReadBandwidth' };
  }
  return { bytesPerS: await jsReadBandwidth(bytes, threads), source: 'js fallback (lower bound: the native verb is missing)' };
}

/** The native verb reports GB/s; accept bytes/s too should it ever change unit. */
function toBytesPerS(value) {
  const figure = typeof value === 'number' ? value : (value?.bytesPerS ?? value?.gbPerS * 1e9);
  return figure < 1e5 ? figure * 1e9 : figure;
}

const workerSource = `
const { parentPort, workerData } = require('node:worker_threads');
const { buffer, start, length, passes } = workerData;
const view = new Float64Array(buffer, start, length / 8);
let best = Infinity, sink = 0;
for (let pass = 0; pass < passes; pass++) {
  const t0 = process.hrtime.bigint();
  let a = 0, b = 0, c = 0, d = 0;
  for (let i = 0; i < view.length; i += 4) { a += view[i]; b += view[i + 1]; c += view[i + 2]; d += view[i + 3]; }
  sink += a + b + c + d;
  best = Math.min(best, Number(process.hrtime.bigint() - t0));
}
parentPort.postMessage({ ns: best, sink });
`;

async function jsReadBandwidth(bytes, threads) {
  const slice = Math.floor(bytes / threads / 32) * 32;
  const buffer = new SharedArrayBuffer(slice * threads);
  new Float64Array(buffer).fill(1);
  const runs = Array.from({ length: threads }, (_, t) => {
    const worker = new Worker(workerSource, { eval: true, workerData: { buffer, start: t * slice, length: slice, passes: 5 } });
    return new Promise((resolve, reject) => {
      worker.once('message', (m) => resolve(m.ns));
      worker.once('error', reject);
    }).finally(() => worker.terminate());
  });
  const slowestNs = Math.max(...(await Promise.all(runs)));
  return (slice * threads) / (slowestNs / 1e9);
}
