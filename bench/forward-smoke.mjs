/**
 * Decode (and prefill) speed of the native forward pass on a random model of the medium
 * geometry: qwen3moe, 24 layers, 128 experts top-8, hidden 768, expert FFN 256, 12 heads /
 * 4 KV heads / head dim 64, vocab 32000, Q8_0 matrices (norms and routers F32).
 *
 * Napkin math: bytes read per decoded token = attention 24 x 768 x 2048 + experts 24 x 8 x 3 x
 * 768 x 256 + head 32000 x 768, all at 34/32 bytes per weight, + routers 24 x 128 x 768 x 4
 * ~= 0.20 GB; at this machine's read bandwidth (bench/results/kernels.json, ~13 GB/s on one
 * thread) that bounds decode near 65 tok/s. llama.cpp's reference figure: ~63 tok/s on 1 thread.
 *
 * Weights are random bytes (Q8_0 scales fixed so values stay ~1/sqrt(cols)); the file is
 * written to a temp dir and deleted at the end. Greedy argmax feeds each decoded token back,
 * so routing varies from token to token as in real decoding.
 *
 * Run: npx tsc -p tsconfig.json && npm run build:native && node bench/forward-smoke.mjs [--tokens 64] [--threads 1,2]
 *      [--keep-model /path/model.bin]   (reuse one generated file across runs instead of a temp file)
 *      [--update-results]
 * Writes bench/results/local/forward-smoke.json (git-ignored); with --update-results bench/results/forward-smoke.json.
 */
import { randomFillSync } from 'node:crypto';
import { existsSync, mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { scriptArgs } from './lib/options.mjs';
import { resultsTarget, writeResults } from './lib/output.mjs';

const args = scriptArgs({
  usage: `usage: node bench/forward-smoke.mjs [options]

Decode and prefill speed of the native forward pass on a random model of the medium geometry
(writes a ~2 GB temp file unless --keep-model names one to reuse).`,
  options: {
    tokens: { type: 'string', default: '64', help: 'decode tokens per thread count' },
    threads: { type: 'string', default: '1,2', help: 'thread counts' },
    'keep-model': { type: 'string', help: 'keep the generated model at this path and reuse it on later runs' },
  },
});
const dist = (p) => new URL(`../dist/src/${p}`, import.meta.url).href;
const { loadNative } = await import(dist('native/binding.js'));
const { expectedTensors, ARCH_FLAGS } = await import(dist('model/arch.js'));
const { rowBytes, f32ToF16 } = await import(dist('model/quant.js'));
const { GGML_TYPE } = await import(dist('model/types.js'));
const native = loadNative();

const decodeTokens = Number(args.tokens);
const threadCounts = args.threads.split(',').map(Number);

const hparams = {
  arch: 'qwen3moe',
  nLayer: 24,
  nEmbd: 768,
  nHead: 12,
  nHeadKv: 4,
  headDim: 64,
  nVocab: 32000,
  nCtxTrain: 4096,
  nExpert: 128,
  nExpertUsed: 8,
  nFfExp: 256,
  nFfShexp: 0,
  rmsEps: 1e-6,
  ropeBase: 1e6,
  tiedOutput: false,
  ...ARCH_FLAGS.qwen3moe,
};

/** All tensors laid out 32-byte aligned in one buffer; Q8_0 blocks get random int8 and a fixed scale. */
function buildModel(fill) {
  const specs = expectedTensors(hparams).map((s) => ({
    ...s,
    type: s.role === 'norm' || s.role === 'router' ? 'F32' : 'Q8_0',
  }));
  let offset = 0;
  const tensors = specs.map((s) => {
    offset = Math.ceil(offset / 32) * 32;
    const rows = s.dims.slice(1).reduce((a, b) => a * b, 1);
    const t = {
      name: s.name,
      typeId: GGML_TYPE[s.type],
      dims: s.dims,
      offset,
      bytes: rowBytes(s.type, s.dims[0]) * rows,
      spec: s,
    };
    offset += t.bytes;
    return t;
  });
  const descs = tensors.map(({ name, typeId, dims, offset }) => ({ name, typeId, dims, offset }));
  const byteLength = Math.ceil(offset / 32) * 32;
  if (!fill) return { tensors: descs, byteLength, bytes: null };
  const bytes = new Uint8Array(byteLength);
  // Random bytes from a 16 MiB pool copied at shifting offsets: distinct memory per tensor
  // (nothing shared in cache), at a fraction of the cost of 2 GB of fresh randomness.
  const pool = randomFillSync(new Uint8Array(16 << 20));
  let shift = 0;
  for (const t of tensors) {
    const view = bytes.subarray(t.offset, t.offset + t.bytes);
    const cols = t.dims[0];
    if (t.spec.type === 'Q8_0') {
      for (let at = 0; at < view.length; at += pool.length - 4096) {
        shift = (shift + 4099) % 4096;
        view.set(pool.subarray(shift, shift + Math.min(pool.length - 4096, view.length - at)), at);
      }
      const scale = f32ToF16(1 / Math.sqrt(cols) / 73); // uniform int8 has std ~73
      for (let b = 0; b < view.length; b += 34) {
        view[b] = scale & 0xff;
        view[b + 1] = scale >> 8;
      }
    } else {
      const f = new Float32Array(bytes.buffer, t.offset, t.bytes / 4);
      for (let i = 0; i < f.length; i++)
        f[i] = t.spec.role === 'norm' ? 1 : (Math.random() * 2 - 1) * (3 / Math.sqrt(cols));
    }
  }
  return { tensors: descs, byteLength, bytes };
}

function argmax(v) {
  let best = 0;
  for (let i = 1; i < v.length; i++) if (v[i] > v[best]) best = i;
  return best;
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

const t0 = performance.now();
const dir = args['keep-model'] ? null : mkdtempSync(path.join(os.tmpdir(), 'moetier-forward-smoke-'));
const file = args['keep-model'] ?? path.join(dir, 'medium-q8_0.bin');
let model = buildModel(false);
const weightBytes = model.byteLength;
if (!existsSync(file) || statSync(file).size !== weightBytes) {
  model = buildModel(true);
  writeFileSync(file, model.bytes);
  model.bytes = null;
  console.error(
    `model: ${(weightBytes / 1e9).toFixed(2)} GB written in ${((performance.now() - t0) / 1e3).toFixed(1)} s`,
  );
}

const mapped = native.mapFile(file);
const results = [];
try {
  const handle = native.createModel(mapped.handle, { hparams, tensors: model.tensors });
  for (const threads of threadCounts) {
    const ctx = native.createContext(handle, { nCtx: 512, threads });
    const logits = new Float32Array(hparams.nVocab);
    const prompt = Int32Array.from({ length: 64 }, (_, i) => (i * 7919) % hparams.nVocab);
    native.evalSync(ctx, prompt, 0, logits); // warm-up: faults the mapping's pages in (most experts are routed)
    const p0 = performance.now();
    native.evalSync(ctx, prompt, 0, logits);
    const prefillMs = performance.now() - p0;
    let token = argmax(logits);
    const ms = [];
    for (let i = 0; i < decodeTokens; i++) {
      const s = performance.now();
      native.evalSync(ctx, Int32Array.of(token), prompt.length + i, logits);
      ms.push(performance.now() - s);
      token = argmax(logits);
    }
    native.freeContext(ctx);
    const row = {
      threads,
      prefillTokens: prompt.length,
      prefillTokPerS: (prompt.length / prefillMs) * 1e3,
      decodeTokens,
      decodeMsMedian: median(ms),
      decodeMsBest: Math.min(...ms),
      decodeTokPerS: 1e3 / median(ms),
      decodeWeightGBs: (bytesPerToken() / median(ms)) * 1e-6,
    };
    results.push(row);
    console.log(
      `threads ${threads}: prefill ${row.prefillTokPerS.toFixed(0)} tok/s, decode ${row.decodeTokPerS.toFixed(1)} tok/s ` +
        `(median ${row.decodeMsMedian.toFixed(2)} ms, best ${row.decodeMsBest.toFixed(2)} ms, ${row.decodeWeightGBs.toFixed(1)} GB/s of weights)`,
    );
  }
  native.freeModel(handle);
} finally {
  native.unmapFile(mapped.handle);
  if (dir) rmSync(dir, { recursive: true, force: true });
}

/** Weight bytes one decoded token reads (the napkin math above). */
function bytesPerToken() {
  const q8 = 34 / 32;
  const h = hparams;
  const attn = h.nEmbd * (2 * h.nHead * h.headDim + 2 * h.nHeadKv * h.headDim);
  const experts = h.nExpertUsed * 3 * h.nEmbd * h.nFfExp;
  return h.nLayer * ((attn + experts) * q8 + h.nExpert * h.nEmbd * 4) + h.nVocab * h.nEmbd * q8;
}

writeResults(
  resultsTarget(args['update-results']),
  'forward-smoke',
  JSON.stringify(
    {
      date: new Date().toISOString(),
      machine: {
        cpu: os.cpus()[0]?.model,
        cores: os.cpus().length,
        loadAvg1m: os.loadavg()[0],
        isa: native.isaName(native.isaActive()),
      },
      shape: 'qwen3moe 24L, 128 experts top-8, hidden 768, expert FFN 256, 12/4 heads x 64, vocab 32000, Q8_0',
      weightBytes,
      weightBytesPerToken: bytesPerToken(),
      results,
    },
    null,
    2,
  ) + '\n',
);
