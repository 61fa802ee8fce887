/**
 * The expert tier on a backend whose slots the host cannot read (issue 17 point 2), on the
 * simulated CUDA runtime (cuda-sim: the cuda host code, streams as threads, the CPU's kernels as
 * the expert kernel). Residents are bound remote: the forward pass hands their rows to the tier's
 * remote worker, which runs them on the backend (run_expert) while the CPU computes the misses,
 * and their outputs are combined in the same rank order. With the CPU's kernels on the device
 * side the tokens must be exactly the engine's without a tier, whatever the budget; the real
 * cuda kind is refused here, where there is no GPU, with DeviceUnavailableError and nothing left
 * open.
 */
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DeviceUnavailableError } from '../../src/core/errors.js';
import { openEngine, type EngineOptions } from '../../src/engine/engine.js';
import { collect, referenceRun, tempDir, tinyModel } from './tier-helpers.js';

const { dir, cleanup } = tempDir('moetier-cuda-sim-');
afterAll(cleanup);
const maxTokens = 20;
const text = 'the ship will sail across the sea and the rocket will launch into the sky tonight';
const models: Record<'q8_0' | 'q4_0', { path: string; prompt: number[]; reference: number[] }> = {} as never;

beforeAll(async () => {
  for (const quant of ['q8_0', 'q4_0'] as const) {
    const path = await tinyModel(dir, quant);
    models[quant] = { path, ...(await referenceRun(path, text, maxTokens)) };
  }
}, 60_000);

describe('tier on cuda-sim: residents computed by the backend', () => {
  const cases: Array<[string, 'q8_0' | 'q4_0', Partial<EngineOptions>]> = [
    ['q8_0, 1 slot', 'q8_0', { slotsPerLayer: 1 }],
    ['q8_0, 37 %, replan', 'q8_0', { resident: 0.37, prefillReplan: { enabled: true } }],
    ['q8_0, every expert', 'q8_0', { slotsPerLayer: 8 }],
    ['q4_0, 3 slots (host copies for the misses)', 'q4_0', { slotsPerLayer: 3 }],
    ['q4_0, 2 slots, dlfu', 'q4_0', { slotsPerLayer: 2, placementPolicy: 'dlfu' }],
  ];
  it.each(cases)('%s: the tokens of the engine without a tier', async (_name, quant, o) => {
    const m = models[quant];
    const e = await openEngine({ model: m.path, threads: 2, contextTokens: 128, heat: false, backend: 'cuda-sim', ...o });
    try {
      expect(await collect(e, m.prompt, { maxTokens, stopAtEos: false })).toEqual(m.reference);
      const stats = e.lastStats!;
      expect(stats.decodeHitRate).toBeGreaterThan(0); // some experts really ran on the backend
      if (o.slotsPerLayer === 8) expect(stats.decodeHitRate).toBe(1);
      else expect(stats.decodeHitRate).toBeLessThan(1);
    } finally {
      await e.close();
    }
  });

  it('the same tokens on a second engine (the remote path is deterministic)', async () => {
    const m = models.q8_0;
    const run = async () => {
      const e = await openEngine({ model: m.path, threads: 2, contextTokens: 128, heat: false, backend: 'cuda-sim', slotsPerLayer: 3 });
      try {
        return await collect(e, m.prompt, { maxTokens, stopAtEos: false });
      } finally {
        await e.close();
      }
    };
    expect(await run()).toEqual(await run());
  });
});

describe('the real cuda kind without a GPU', () => {
  it('openEngine with backend cuda is refused with DeviceUnavailableError, nothing left mapped', async () => {
    const m = models.q8_0;
    const error = await openEngine({ model: m.path, threads: 1, heat: false, backend: 'cuda', slotsPerLayer: 2 }).then(
      async (e) => { await e.close(); return undefined; },
      (err: unknown) => err,
    );
    if (error === undefined) return; // a machine with a device: the kind opened (tests/device covers it)
    expect(error).toBeInstanceOf(DeviceUnavailableError);
    expect(['not-built', 'load-failed', 'no-driver', 'no-device']).toContain((error as DeviceUnavailableError).reason);
    const maps = readFileSync('/proc/self/maps', 'utf8').split('\n').filter((l) => l.endsWith(m.path));
    expect(maps).toHaveLength(0);
  });
});
