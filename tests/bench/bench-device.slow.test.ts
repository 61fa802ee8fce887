/**
 * bench/device/bench-device.mjs, the device check's benchmark, run end to end here on the
 * simulated CUDA runtime (cuda-sim: the CPU's kernels) and the tiny preset, so the script a GPU
 * draw runs has run before it gets there. On the simulation the device computes with the CPU's
 * kernels, so every figure that compares with CPU-only must show no difference at all.
 */
import { spawnSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';

describe('bench-device on cuda-sim (a dry run of the GPU bench)', () => {
  it('prints one JSON summary: uploads all done, the 37 % run repeatable, logits equal to CPU-only', () => {
    const r = spawnSync('node', ['bench/device/bench-device.mjs'], {
      encoding: 'utf8',
      timeout: 120_000,
      env: { ...process.env, MOETIER_DEVICE_BACKEND: 'cuda-sim', MOETIER_DEVICE_PRESET: 'tiny' },
    });
    expect(r.status, r.stderr).toBe(0);
    const s = JSON.parse(r.stdout.trim().split('\n').pop()!);
    expect(s).toMatchObject({ backend: 'cuda-sim', model: { preset: 'tiny' } });
    expect(s.upload).toMatchObject({ uploads: 64, failed: 0 });
    expect(s.upload.gbPerS).toBeGreaterThan(0);
    expect(s.decode.partialRepeatIdentical).toBe(true);
    expect(s.decode.allResident).toMatchObject({ decodeHitRate: 1, maxLogitDiff: 0, tokensLikeCpu: 64 });
    expect(s.decode.partial.maxLogitDiff).toBe(0);
    expect(s.decode.partial.decodeHitRate).toBeLessThan(1);
    // The device's share of each layer, from the compute stream's events: present, and a part of the window.
    for (const run of [s.decode.allResident, s.decode.partial]) {
      expect(run.deviceMsEwmaMean).toBeGreaterThan(0);
      expect(run.deviceShareOfLayer).toBeGreaterThan(0);
      expect(run.deviceShareOfLayer).toBeLessThan(1);
    }
    expect(s.decode.cpuOnly.deviceShareOfLayer).toBeUndefined();
    // Under the host budget the file is read instead of the mapping: the same tokens.
    expect(s.decode.partialFromFile).toMatchObject({ maxLogitDiff: 0, tokensLikeCpu: 64, tokensLikePartial: 64 });
    expect(s.overlap.uploads).toBeGreaterThanOrEqual(0);
  });
});
