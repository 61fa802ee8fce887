/**
 * npm run device-check on a machine without a GPU (every CI machine here): it must reach a
 * clear verdict, not crash. With the CUDA library built (nvcc was found) that verdict is
 * "no-device" from the kernel check; without it, "not-built". Both exit 2 and leave one JSON
 * summary whose last step says why.
 */
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
// @ts-expect-error plain .mjs bench module without declarations
import { CUDA_LIBRARY } from '../../bench/device/device-check.mjs';

const hasGpu = existsSync('/dev/nvidia0');

describe.skipIf(hasGpu)('device-check without a GPU', () => {
  it('stops with verdict no-device (library built) or not-built (no nvcc at build time), exit 2', () => {
    const r = spawnSync('node', ['bench/device/device-check.mjs', '--no-build'], { encoding: 'utf8', timeout: 90_000 });
    expect(r.status, r.stderr).toBe(2);
    const summary = JSON.parse(r.stdout.trim().split('\n').pop()!);
    const built = existsSync(CUDA_LIBRARY);
    expect(summary.verdict).toBe(built ? 'no-device' : 'not-built');
    const last = summary.steps.at(-1);
    expect(last.name).toBe(built ? 'kernels' : 'library');
    expect(last.status).toBe(summary.verdict);
    expect(last.detail).toMatch(built ? /device|driver/i : /nvcc/);
  });

  it('refuses an unknown flag with exit 2 before any work', () => {
    const r = spawnSync('node', ['bench/device/device-check.mjs', '--frobnicate'], {
      encoding: 'utf8',
      timeout: 30_000,
    });
    expect(r.status).toBe(2);
    expect(r.stderr).toContain('--frobnicate');
  });
});
