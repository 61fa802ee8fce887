/**
 * libmoetier_cuda.so, the CUDA backend's device half (native/cuda/kernels), as built next to
 * moetier.node:
 *  - wherever nvcc is on PATH the build must have produced it (CMake skips it only without a CUDA
 *    compiler >= 12, when cross-compiling, or with MT_CUDA=OFF, and then says so in one line);
 *  - it exports mt_cuda_runtime_load alone and needs no libcudart at run time (static cudart);
 *  - moetier_cuda_check, run beside it, reports no-device (exit 2) on a machine without a GPU,
 *    and on one with a GPU passes: every weight type's expert FFN matches the CPU kernels.
 * The kernels' lane logic is checked on every machine, GPU or not, by cuda-kernels-emu.slow.test.ts.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';

const root = path.resolve(import.meta.dirname, '../..');
const native = path.join(root, 'native');
const library = 'libmoetier_cuda.so';

const has = (cmd: string) => spawnSync('sh', ['-c', `command -v ${cmd}`]).status === 0;
const nvccOnPath = has('nvcc');
// A GPU is visible to this machine when the NVIDIA driver made its control device.
const gpuPresent = existsSync('/dev/nvidiactl');

// The addon directories this checkout has built (release, debug, and MOETIER_ADDON's).
const addonDirs = [
  path.join(native, 'build/Release'),
  path.join(native, 'build-debug/Release'),
  ...(process.env.MOETIER_ADDON ? [path.dirname(path.resolve(process.env.MOETIER_ADDON))] : []),
].filter((d, i, all) => all.indexOf(d) === i && existsSync(path.join(d, 'moetier.node')));
const builtDirs = addonDirs.filter((d) => existsSync(path.join(d, library)));

const scratch = mkdtempSync(path.join(os.tmpdir(), 'moetier-cuda-cmake-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

describe('libmoetier_cuda.so', () => {
  it('is built next to moetier.node wherever nvcc is on PATH', () => {
    expect(addonDirs.length).toBeGreaterThan(0);
    if (nvccOnPath) expect(builtDirs).toEqual(addonDirs);
    else expect(builtDirs.every((d) => existsSync(path.join(d, 'moetier_cuda_check')))).toBe(true);
  });

  it('is skipped with one status line, and the configure still succeeds, without a CUDA compiler', () => {
    const configure = (name: string, flag: string) =>
      spawnSync('cmake', ['-S', native, '-B', path.join(scratch, name), flag], { encoding: 'utf8', timeout: 120_000 });
    for (const [name, flag, reason] of [
      ['missing', '-DCMAKE_CUDA_COMPILER=/nonexistent/nvcc', 'CUDA compiler /nonexistent/nvcc not found'],
      ['off', '-DMT_CUDA=OFF', 'MT_CUDA is OFF'],
    ]) {
      const r = configure(name, flag);
      expect(r.status, r.stderr).toBe(0);
      const lines = r.stdout.split('\n').filter((l) => l.includes('moetier: CUDA backend'));
      expect(lines).toEqual([`-- moetier: CUDA backend skipped: ${reason}`]);
    }
  }, 240_000);

  it.skipIf(builtDirs.length === 0 || !has('nm') || !has('readelf'))(
    'exports mt_cuda_runtime_load only and does not need libcudart',
    () => {
      for (const dir of builtDirs) {
        const so = path.join(dir, library);
        const nm = spawnSync('nm', ['-D', '--defined-only', so], { encoding: 'utf8' });
        expect(nm.status).toBe(0);
        const exported = nm.stdout
          .trim()
          .split('\n')
          .map((l) => l.trim().split(/\s+/).pop());
        expect(exported).toEqual(['mt_cuda_runtime_load']);
        const needed = spawnSync('readelf', ['-d', so], { encoding: 'utf8' }).stdout;
        expect(needed).toMatch(/NEEDED/);
        expect(needed).not.toMatch(/libcudart/);
      }
    },
  );

  it.skipIf(builtDirs.length === 0)(
    `moetier_cuda_check says ${gpuPresent ? 'pass' : 'no-device (exit 2)'} on this machine`,
    () => {
      for (const dir of builtDirs) {
        const r = spawnSync(path.join(dir, 'moetier_cuda_check'), [], { encoding: 'utf8', timeout: 300_000 });
        const lines = r.stdout.trim().split('\n');
        expect(lines.length, r.stderr).toBe(1);
        const report = JSON.parse(lines[0]) as { verdict: string; message?: string; cases: { pass: boolean }[] };
        if (!gpuPresent) {
          expect(report.verdict).toBe('no-device');
          // cudart's own reason (no driver, no device), through the table's error_string
          expect(report.message).toMatch(/\w+/);
          expect(report.cases).toEqual([]);
          expect(r.status).toBe(2);
        } else {
          expect(report.verdict, lines[0]).toBe('pass');
          expect(report.cases.length).toBeGreaterThanOrEqual(28);
          expect(report.cases.every((c) => c.pass)).toBe(true);
          expect(r.status).toBe(0);
        }
      }
    },
    600_000,
  );
});
