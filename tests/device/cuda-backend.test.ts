/**
 * The CUDA backend on a real GPU (issue 17 point 4): run only by `npm run device-check`
 * (MOETIER_DEVICE=cuda, vitest project "device"); a machine without a GPU never includes it.
 * MOETIER_DEVICE=cuda-sim npx vitest run --project device: the same suite on the simulated runtime.
 *
 *   uploads     pageable sources through the pinned staging ring, byte-exact (read back), one
 *               bigger than the whole ring, in-place overwrite
 *   events      upload times on CLOCK_MONOTONIC (inside the hrtime read around them), compute
 *               markers resolved in order on the same clock
 *   kernels     run_expert for every container type the CPU has, 1 and 7 rows, against the CPU
 *               kernels: max |gpu - cpu| / max |cpu| < KERNEL_TOLERANCE (the same quantised
 *               activations and summation order; only expf differs), and two runs give the
 *               same bits
 *   generation  64 greedy tokens on the medium preset at 37 % residency, twice: byte-identical
 *   file mode   uploads read from the model file into the staging ring, byte-exact
 */
import { mkdirSync, mkdtempSync, rmSync, statfsSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { openEngine } from '../../src/engine/engine.js';
import { ensurePresetModel } from '../../src/model/cache.js';
import { Backend } from '../../src/native/backend.js';
import { loadDiagnostics } from '../../src/native/diagnostics.js';
import { GGML_TYPE, type GgmlTypeName } from '../../src/model/types.js';
import { mulberry32 } from '../../src/core/prng.js';
import { concat, pattern } from '../native/backend-helpers.js';
import { cpuExpert, expertPieces } from '../native/cuda-expert.js';
import { sameBits } from '../native/kernel-paths.js';

const native = loadDiagnostics();
const MiB = 1 << 20;
/** cuda on a GPU; cuda-sim for a dry run of this suite without one (MOETIER_DEVICE=cuda-sim). */
const KIND = process.env.MOETIER_DEVICE === 'cuda-sim' ? 'cuda-sim' : 'cuda';
/**
 * GPU vs CPU expert output. The kernels quantise activations to the CPU's bytes and sum in its
 * order (the host warp emulator shows them bit-exact), so only expf inside silu differs: CUDA's is
 * within 2 ulp, glibc's 1, which can move one value of silu(g) * u across a rounding boundary of
 * Down's activation quantiser, about 1e-4 to 5e-4 of max |y| each; a kernel bug is 1e-2 or more.
 */
const KERNEL_TOLERANCE = 1e-3;

function relativeError(actual: Float32Array, expected: Float32Array): number {
  let worst = 0,
    scale = 0;
  for (let i = 0; i < expected.length; i++) {
    worst = Math.max(worst, Math.abs(actual[i] - expected[i]));
    scale = Math.max(scale, Math.abs(expected[i]));
  }
  return worst / scale;
}

function withCuda<T>(budgetBytes: number, body: (b: Backend) => Promise<T>): Promise<T> {
  const b = Backend.create(KIND, { budgetBytes });
  return body(b).finally(() => b.destroy());
}

function readBack(b: Backend, slot: number, bytes: number): Uint8Array {
  const out = new Uint8Array(bytes);
  expect(b.readDevice(slot, out)).toBe(bytes);
  return out;
}

describe('cuda: uploads and overwrite', () => {
  it('lands pieces byte-exact, one upload bigger than the staging ring too, and overwrites in place', () =>
    withCuda(256 * MiB, async (b) => {
      const limits = native.cudaLimits();
      const big = limits.stagingBuffers * limits.stagingBufferBytes + 3 * MiB + 5;
      const slot = b.reserve(2, big);
      const pieces = [pattern(big - 1000, 1), pattern(1000, 2)];
      expect((await b.waitUploaded(b.upload(slot, pieces))).state).toBe('done');
      expect(Buffer.compare(readBack(b, slot, big), concat(pieces))).toBe(0);
      const newcomer = pattern(big, 3);
      expect((await b.waitUploaded(b.upload(slot, newcomer, { overwrite: true }))).state).toBe('done');
      expect(Buffer.compare(readBack(b, slot, big), newcomer)).toBe(0);
      expect(b.stats()).toMatchObject({ hostVisible: false, uploadsFailed: 0 });
    }));
});

describe('cuda: uploads read from the model file (file mode)', () => {
  it('fills the staging ring by reads of the file: byte-exact past the ring, the mapping left out of the page cache', async () => {
    const limits = native.cudaLimits();
    const big = limits.stagingBuffers * limits.stagingBufferBytes + 3 * MiB + 160;
    // Not on tmpfs: its pages are the file, resident whatever the reads do.
    const tmpfs = statfsSync(os.tmpdir()).type === 0x01021994;
    const base = tmpfs ? path.resolve(import.meta.dirname, '../../.ci') : os.tmpdir();
    mkdirSync(base, { recursive: true });
    const dir = mkdtempSync(path.join(base, 'moetier-device-file-'));
    const file = path.join(dir, 'experts.bin');
    const content = pattern(big + 4096, 7);
    writeFileSync(file, content);
    native.dropFileCache(file);
    const mapped = native.mapFile(file, { access: 'random' });
    const b = Backend.create(KIND, { budgetBytes: 2 * big, file: mapped.handle });
    try {
      const slot = b.reserve(1, big);
      expect((await b.waitUploaded(b.upload(slot, [new Uint8Array(mapped.buffer, 32, big)]))).state).toBe('done');
      expect(Buffer.compare(readBack(b, slot, big), content.subarray(32, 32 + big))).toBe(0);
      expect(native.mappedResidency(mapped.handle).resident).toBeLessThanOrEqual(4);
    } finally {
      b.destroy();
      native.unmapFile(mapped.handle);
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('cuda: events on CLOCK_MONOTONIC', () => {
  it('upload times lie inside the hrtime read around them; compute markers resolve in order', () =>
    withCuda(64 * MiB, async (b) => {
      const first = b.reserve(4, 8 * MiB);
      for (let i = 0; i < 4; i++) {
        const before = process.hrtime.bigint();
        const e = await b.waitUploaded(b.upload(first + i, pattern(8 * MiB, 10 + i)));
        const after = process.hrtime.bigint();
        expect(e.startNs >= before && e.endNs >= e.startNs && e.endNs <= after).toBe(true);
      }
      const before = process.hrtime.bigint();
      const markers = await Promise.all([b.recordCompute(1, 0), b.recordCompute(2, 0)].map((id) => b.wait(id)));
      const after = process.hrtime.bigint();
      expect(markers.map((m) => m.state)).toEqual(['done', 'done']);
      for (const m of markers) expect(m.startNs >= before && m.startNs <= after).toBe(true);
      expect(markers[1].startNs >= markers[0].startNs).toBe(true);
    }));
});

describe('cuda: run_expert against the CPU kernels', () => {
  const nEmbd = 256,
    nFf = 512;
  const types: GgmlTypeName[] = [
    'Q8_0',
    'Q4_0',
    'Q5_0',
    'Q5_1',
    'Q2_K',
    'Q3_K',
    'Q4_K',
    'Q5_K',
    'Q6_K',
    'F32',
    'F16',
    'BF16',
  ];
  for (const type of types) {
    it(`${type}: 1 and 7 rows within ${KERNEL_TOLERANCE}, the same bits twice`, () =>
      withCuda(64 * MiB, async (b) => {
        const e = expertPieces(type, nEmbd, nFf, 17);
        const slot = b.reserve(
          1,
          e.pieces.reduce((n, p) => n + p.length, 0),
        );
        await b.waitUploaded(b.upload(slot, e.pieces));
        const lease = b.lease(slot);
        try {
          for (const count of [1, 7]) {
            const rng = mulberry32(5 + count);
            const x = Float32Array.from({ length: count * nEmbd }, () => rng() * 2 - 1);
            const run = () => {
              const y = new Float32Array(count * nEmbd);
              const id = GGML_TYPE[type];
              b.runExpert(slot, {
                x,
                y,
                count,
                gateType: id,
                upType: id,
                downType: id,
                gateBytes: e.gateBytes,
                upBytes: e.gateBytes,
                downBytes: e.downBytes,
                nEmbd,
                nFf,
              });
              return y;
            };
            const y = run();
            const expected = cpuExpert(GGML_TYPE[type], e.pieces, nEmbd, nFf, x, count);
            expect(relativeError(y, expected), `${type} x${count}`).toBeLessThan(KERNEL_TOLERANCE);
            expect(sameBits(run(), y)).toBe(true);
          }
        } finally {
          b.release(lease);
        }
      }));
  }
});

describe('cuda: run_experts (a layer in one call)', () => {
  const nEmbd = 256,
    nFf = 512;
  it("gives each run what run_expert gives, bit for bit, and the device's span inside the call", () =>
    withCuda(64 * MiB, async (b) => {
      const types: GgmlTypeName[] = ['Q4_0', 'Q8_0', 'Q4_K', 'Q6_K'];
      const experts = types.map((type, i) => expertPieces(type, nEmbd, nFf, 30 + i));
      const first = b.reserve(
        types.length,
        Math.max(...experts.map((e) => e.pieces.reduce((n, p) => n + p.length, 0))),
      );
      for (let i = 0; i < types.length; i++) await b.waitUploaded(b.upload(first + i, experts[i].pieces));
      const leases = types.map((_, i) => b.lease(first + i));
      try {
        const rng = mulberry32(3);
        const runs = types.map((type, i) => {
          const count = 1 + i;
          const id = GGML_TYPE[type];
          const x = Float32Array.from({ length: count * nEmbd }, () => rng() * 2 - 1);
          const e = experts[i];
          return {
            slot: first + i,
            args: {
              x,
              y: new Float32Array(count * nEmbd),
              count,
              gateType: id,
              upType: id,
              downType: id,
              gateBytes: e.gateBytes,
              upBytes: e.gateBytes,
              downBytes: e.downBytes,
              nEmbd,
              nFf,
            },
          };
        });
        const before = process.hrtime.bigint();
        const span = b.runExperts(runs);
        const after = process.hrtime.bigint();
        for (const r of runs) {
          const alone = { ...r.args, y: new Float32Array(r.args.y.length) };
          b.runExpert(r.slot, alone);
          expect(sameBits(r.args.y, alone.y), `slot ${r.slot}`).toBe(true);
        }
        expect(span.endNs).toBeGreaterThan(span.startNs);
        // The clock's base is stamped late by at most its calibration round (cuda_clock.h).
        expect(span.startNs).toBeGreaterThanOrEqual(Number(before) - 200_000);
        expect(span.endNs).toBeLessThanOrEqual(Number(after) + 200_000);
      } finally {
        for (const l of leases) b.release(l);
      }
    }));
});

describe('cuda: generation', () => {
  it('64 tokens on the medium preset at 37 % residency, twice: byte-identical', async () => {
    const model = await ensurePresetModel({ preset: 'medium', arch: 'qwen3moe', quant: 'q4_0', seed: 1 }, () => {});
    const run = async () => {
      const e = await openEngine({ model, threads: 8, contextTokens: 256, heat: false, backend: KIND, resident: 0.37 });
      try {
        const tokens: number[] = [];
        for await (const t of e.generate(e.tokenize('one two three four five six seven eight'), {
          maxTokens: 64,
          temperature: 0,
          stopAtEos: false,
        }))
          tokens.push(t.id);
        expect(e.lastStats!.decodeHitRate).toBeGreaterThan(0);
        return tokens;
      } finally {
        await e.close();
      }
    };
    const first = await run();
    expect(first).toHaveLength(64);
    expect(await run()).toEqual(first);
  }, 120_000);
});
