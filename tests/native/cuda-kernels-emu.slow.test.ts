/**
 * The CUDA kernels without a GPU, on every machine (nvcc not needed): native/cuda/kernels' kernel
 * headers, compiled by g++ against the host warp emulator (native/cuda/kernels/emu/cuda_emu.h: a
 * warp is 32 host threads meeting at every shuffle), give native/cpu's scalar bits exactly for
 * every weight type, in the matvec (count 1) and the grouped (count 7) form, and so do six whole
 * experts run through expert_ffn's plan (ffn_plan.cuh), two of IQ4_NL / IQ4_XS and two of MXFP4 (gpt-oss's
 * experts: 17-byte blocks, rows at odd addresses). Slow (*.slow.test.ts): the emulator keeps
 * both cores busy for about 15 s, which would skew the timing tests running beside it.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';

const native = path.resolve(import.meta.dirname, '../../native');
const scratch = mkdtempSync(path.join(os.tmpdir(), 'moetier-cuda-emu-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

describe('the device kernels on the host warp emulator', () => {
  it("quantise activations, multiply and run whole experts with the CPU scalar kernels' bits, every type, count 1 and 7", () => {
    const exe = path.join(scratch, 'emu_check');
    const sources = [
      'cuda/kernels/emu/emu_check.cc',
      'cuda/kernels/check/reference.cc',
      'cpu/quant_rows.cc',
      'cpu/kernels_scalar.cc',
    ];
    execFileSync(
      'g++',
      [
        '-std=c++17',
        '-O2',
        '-ffp-contract=off',
        '-DMT_CUDA_EMU',
        '-pthread',
        `-I${native}/include`,
        `-I${native}/cpu`,
        `-I${native}/cuda/kernels`,
        '-o',
        exe,
        ...sources.map((f) => path.join(native, f)),
      ],
      { stdio: 'pipe' },
    );
    const r = spawnSync(exe, [], { encoding: 'utf8', timeout: 240_000 });
    const lines = r.stdout.trim().split('\n');
    // 15 weight types (IQ4_NL, IQ4_XS and MXFP4 among them) x counts 1 and 7.
    expect(lines.filter((l) => /: activations same, products same$/.test(l))).toHaveLength(30);
    expect(lines.filter((l) => /^iq4_(nl|xs) count [17]: activations same, products same$/.test(l))).toHaveLength(4);
    expect(lines.filter((l) => /^mxfp4 count [17]: activations same, products same$/.test(l))).toHaveLength(2);
    // Whole experts through expert_ffn's plan (layout, shared and own activation rows, swiglu), two IQ4, two MXFP4.
    expect(lines.filter((l) => /^expert .* count \d: same$/.test(l))).toHaveLength(6);
    expect(lines.filter((l) => /^expert mxfp4\/mxfp4\/(mxfp4|q8_0) count \d: same$/.test(l))).toHaveLength(2);
    expect(lines.at(-1)).toBe('emu: pass');
    expect(r.status).toBe(0);
  }, 300_000);
});
