/**
 * node bench/device/bench-device.mjs   (run by npm run device-check, on a GPU; at most ~2 minutes)
 *
 * The CUDA backend's figures, each against a baseline of the same run:
 *   upload     bytes / (end - start) of expert-sized uploads from pageable memory, read from
 *              the CUDA events, against the bus's nominal rate (nvidia-smi's PCIe gen x width)
 *   decode     tok/s on the medium Q4_0 preset: every expert resident on the device, 37 % of them
 *              resident, and CPU-only (no tier), same prompt, same threads; the 37 % run twice,
 *              whose tokens must be byte-identical; the logits' largest difference from CPU-only;
 *              per layer (EWMA, averaged over layers) its wall window and the device's share of it;
 *              the 37 % run again under a 1 GiB host budget (misses and uploads read the file)
 *   overlap    at 37 %: the uploads whose copy ran beside layer L + 1's compute, from the trace
 *              (otel/trace-overlap.ts), on the events' clock
 * Prints one JSON line (the last line of stdout).
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { importDist, presetModel, repoRoot } from '../lib/moetier.mjs';

// MOETIER_DEVICE_PRESET=tiny with MOETIER_DEVICE_BACKEND=cuda-sim: the script's own test (tests/bench/bench-device.slow.test.ts).
const PRESET = { preset: process.env.MOETIER_DEVICE_PRESET ?? 'medium', arch: 'qwen3moe', quant: 'q4_0', seed: 1 };
const PROMPT = 'one two three four five six seven eight nine ten';
const TOKENS = 64;
const PARTIAL_RESIDENT = 0.37;
const THREADS = Math.min(8, os.cpus().length);
const UPLOAD_SLOTS = 64;
/** The host budget of the from-file run: the dense weights, KV cache and buffers fit; no expert is held in RAM. */
const FROM_FILE_BUDGET_BYTES = 1024 ** 3;
/** cuda; cuda-sim runs the whole script here, without a GPU, on the simulated runtime (a dry run of the script, not a measurement). */
const BACKEND = process.env.MOETIER_DEVICE_BACKEND ?? 'cuda';
/** GB/s per lane by PCIe generation (after line coding), for the nominal bus rate. */
const PCIE_LANE_GBPS = { 3: 0.985, 4: 1.969, 5: 3.938, 6: 7.563 };

async function main() {
  const model = await presetModel(PRESET);
  const summary = {
    date: new Date().toISOString(),
    backend: BACKEND,
    model: PRESET,
    threads: THREADS,
    bus: nominalBus(),
  };
  summary.upload = await uploadBandwidth();
  summary.upload.fractionOfNominal = summary.bus.gbPerS ? summary.upload.gbPerS / summary.bus.gbPerS : null;
  summary.decode = await decodeRuns(model);
  summary.overlap = await overlapAtPartial(model);
  process.stdout.write(`${JSON.stringify(summary)}\n`);
}

function nominalBus() {
  const r = spawnSync(
    'nvidia-smi',
    ['--query-gpu=name,pcie.link.gen.max,pcie.link.width.max', '--format=csv,noheader'],
    { encoding: 'utf8', timeout: 10_000 },
  );
  if (r.status !== 0) return { source: 'nvidia-smi unavailable', gbPerS: null };
  const [name, gen, width] = r.stdout
    .trim()
    .split('\n')[0]
    .split(',')
    .map((s) => s.trim());
  const lane = PCIE_LANE_GBPS[Number(gen)];
  return {
    source: 'nvidia-smi',
    name,
    pcieGen: Number(gen),
    pcieWidth: Number(width),
    gbPerS: lane ? lane * Number(width) : null,
  };
}

/** Expert-sized uploads (gate | up | down of one medium Q4_0 expert) from pageable memory. */
async function uploadBandwidth() {
  const { Backend } = await importDist('src/native/backend.js');
  const { presetHParams } = await importDist('src/synth/presets.js');
  const { GGML_BLOCK } = await importDist('src/model/types.js');
  const hp = presetHParams(PRESET.preset, PRESET.arch);
  const bytes = (3 * hp.nFfExp * hp.nEmbd * GGML_BLOCK.Q4_0.bytes) / GGML_BLOCK.Q4_0.elements;
  const slotBytes = Math.ceil(bytes / 64) * 64;
  const b = Backend.create(BACKEND, { budgetBytes: UPLOAD_SLOTS * slotBytes });
  try {
    const first = b.reserve(UPLOAD_SLOTS, slotBytes);
    const source = Buffer.alloc(bytes, 7); // pageable, as the mapping is
    const events = [];
    for (let s = 0; s < UPLOAD_SLOTS; s++) events.push(b.upload(first + s, [source], { label: s }));
    const done = [];
    for (const e of events) done.push(await b.wait(e));
    const failed = done.filter((d) => d.state !== 'done').length;
    const start = Math.min(...done.map((d) => Number(d.startNs))),
      end = Math.max(...done.map((d) => Number(d.endNs)));
    const each = done.map((d) => bytes / (Number(d.endNs) - Number(d.startNs)));
    return {
      uploads: UPLOAD_SLOTS,
      bytesEach: bytes,
      failed,
      gbPerS: (UPLOAD_SLOTS * bytes) / (end - start),
      medianOneGbPerS: median(each),
    };
  } finally {
    b.destroy();
  }
}

async function decodeRuns(model) {
  const { openEngine } = await importDist('src/index.js');
  const run = async (tier) => {
    const engine = await openEngine({ model, threads: THREADS, contextTokens: 256, heat: false, ...tier });
    let calibration;
    const sub = tier.backend ? engine.calibration$().subscribe((s) => (calibration = s)) : undefined;
    try {
      const ids = engine.tokenize(PROMPT);
      const tokens = [];
      for await (const t of engine.generate(ids, { maxTokens: TOKENS, temperature: 0, stopAtEos: false }))
        tokens.push(t.id);
      const stats = engine.lastStats;
      const logits = await engine.logits(ids);
      return {
        tokens,
        decodeTokPerS: stats.decodeTokPerS,
        prefillTokPerS: stats.prefillTokPerS,
        decodeHitRate: stats.decodeHitRate,
        logits,
        ...layerShares(calibration),
      };
    } finally {
      sub?.unsubscribe();
      await engine.close();
    }
  };
  const cpu = await run({});
  const all = await run({ backend: BACKEND, resident: 1 });
  const partial = await run({ backend: BACKEND, resident: PARTIAL_RESIDENT });
  const again = await run({ backend: BACKEND, resident: PARTIAL_RESIDENT });
  // The same share under a host memory budget: misses and uploads read the file, not the mapping.
  const fromFile = await run({
    backend: BACKEND,
    resident: PARTIAL_RESIDENT,
    memoryBudgetBytes: FROM_FILE_BUDGET_BYTES,
  });
  const shown = ({ logits, tokens, ...r }) => ({ ...r, tokensLikeCpu: sameCount(tokens, cpu.tokens) });
  return {
    cpuOnly: shown(cpu),
    allResident: {
      ...shown(all),
      vsCpu: all.decodeTokPerS / cpu.decodeTokPerS,
      maxLogitDiff: maxDiff(all.logits, cpu.logits),
    },
    partial: {
      resident: PARTIAL_RESIDENT,
      ...shown(partial),
      vsCpu: partial.decodeTokPerS / cpu.decodeTokPerS,
      maxLogitDiff: maxDiff(partial.logits, cpu.logits),
    },
    partialRepeatIdentical:
      partial.tokens.length === again.tokens.length && partial.tokens.every((t, i) => t === again.tokens[i]),
    partialFromFile: {
      resident: PARTIAL_RESIDENT,
      memoryBudgetBytes: FROM_FILE_BUDGET_BYTES,
      ...shown(fromFile),
      maxLogitDiff: maxDiff(fromFile.logits, cpu.logits),
      vsPartial: fromFile.decodeTokPerS / partial.decodeTokPerS,
      tokensLikePartial: sameCount(fromFile.tokens, partial.tokens),
    },
  };
}

async function overlapAtPartial(model) {
  const t = await importDist('otel/trace-overlap.js');
  const dir = mkdtempSync(path.join(os.tmpdir(), 'moetier-device-'));
  try {
    const trace = path.join(dir, 'trace.json');
    execFileSync(
      process.execPath,
      [
        path.join(repoRoot, 'dist/src/cli/main.js'),
        'run',
        '-m',
        model,
        '-p',
        PROMPT,
        '-n',
        String(TOKENS),
        '--backend',
        BACKEND,
        '--resident',
        String(PARTIAL_RESIDENT),
        '--heat',
        'none',
        '--prefill-replan',
        '--threads',
        String(THREADS),
        '--trace-file',
        trace,
        '--json',
      ],
      { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'], timeout: 60_000 },
    );
    const o = t.uploadOverlap(t.traceSpans(JSON.parse(readFileSync(trace, 'utf8'))));
    return { uploads: o.uploads, besideNextLayer: o.overlapNextLayer, besideAnyCompute: o.overlapCompute };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * The calibration's per-layer EWMAs, averaged over layers: the layer's window on the wall clock,
 * and the device's share of it (its residents' runs, from the compute stream's events).
 */
function layerShares(snapshot) {
  if (!snapshot) return {};
  const mean = (v) => (v.length === 0 ? null : v.reduce((a, b) => a + b, 0) / v.length);
  const layerMs = mean(snapshot.computeMsEwma.filter((v) => v !== undefined));
  const deviceMs = mean(snapshot.deviceComputeMsEwma.filter((v) => v !== undefined));
  return {
    layerMsEwmaMean: layerMs,
    deviceMsEwmaMean: deviceMs,
    deviceShareOfLayer: layerMs && deviceMs !== null ? deviceMs / layerMs : null,
  };
}

const median = (v) => [...v].sort((a, b) => a - b)[Math.floor(v.length / 2)];
const sameCount = (a, b) => a.filter((t, i) => t === b[i]).length;
function maxDiff(a, b) {
  let worst = 0;
  for (let i = 0; i < a.length; i++) worst = Math.max(worst, Math.abs(a[i] - b[i]));
  return worst;
}

main().catch((error) => {
  process.stderr.write(`bench-device failed: ${error.stack ?? error}\n`);
  process.exitCode = 1;
});
