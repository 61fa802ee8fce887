/**
 * One set of bits everywhere, checked beyond this CPU:
 *  - native/tools/kernel_digest (native/cpu alone, no Node) prints a digest of every kernel path's
 *    output bits on fixed inputs; built for this host, every path it has prints the same digest,
 *    and so does a build without the x86 SIMD files (MT_NO_X86_SIMD: what a non-x86 CPU builds);
 *  - native/ compiles for arm64 (Debian's g++-aarch64-linux-gnu; the SIMD files are x86-only), and
 *    the arm64 digest program, run under qemu-aarch64, prints the host's scalar digest.
 * The cross steps need those Debian packages (.ci/run installs them where it can); without them
 * they are skipped and say so.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';

const root = path.resolve(import.meta.dirname, '../..');
const native = path.join(root, 'native');
const work = mkdtempSync(path.join(os.tmpdir(), 'moetier-cross-'));
afterAll(() => rmSync(work, { recursive: true, force: true }));

const has = (cmd: string) => spawnSync('sh', ['-c', `command -v ${cmd}`]).status === 0;
const crossCxx = 'aarch64-linux-gnu-g++';
const flags = ['-std=c++17', '-O2', '-ffp-contract=off', `-I${native}/include`, `-I${native}/cpu`];
const digestSources = [
  'tools/kernel_digest.cc',
  'cpu/isa.cc',
  'cpu/isa_verify.cc',
  'cpu/quant_rows.cc',
  'cpu/kernels_scalar.cc',
].map((f) => path.join(native, f));
const x86Simd = readdirSync(path.join(native, 'cpu'))
  .filter((f) => /^kernels_avx.*\.cc$/.test(f))
  .map((f) => path.join(native, 'cpu', f));

function digest(cxx: string, out: string, extra: string[], run: string[] = []): Map<string, string> {
  execFileSync(cxx, [...flags, ...extra, '-o', out, ...digestSources], { stdio: 'pipe' });
  const text = execFileSync(run[0] ?? out, run.length ? [...run.slice(1), out] : [], { encoding: 'utf8' });
  return new Map(
    text
      .trim()
      .split('\n')
      .map((line) => line.split(' ') as [string, string]),
  );
}

const isX86 = process.arch === 'x64' || process.arch === 'ia32';

describe('kernel bits across paths and machines', () => {
  let hostScalar = '';

  it('every path of this host gives the scalar digest, with and without the x86 SIMD files', () => {
    const withSimd = digest('g++', path.join(work, 'digest-host'), isX86 ? x86Simd : []);
    hostScalar = withSimd.get('scalar') ?? '';
    expect(hostScalar).toMatch(/^[0-9a-f]{16}$/);
    for (const [path_, d] of withSimd) expect(d, path_).toBe(hostScalar);
    const scalarOnly = digest('g++', path.join(work, 'digest-scalar'), ['-DMT_NO_X86_SIMD']);
    expect([...scalarOnly.keys()]).toEqual(['scalar']);
    expect(scalarOnly.get('scalar')).toBe(hostScalar);
    // Two serial g++ builds of native/cpu's kernels (the k-quant files made them ~8 s longer): on a
    // busy 2-core machine, beside the rest of the suite, they took 150 s once.
  }, 300_000);

  it.skipIf(!has(crossCxx))(
    'native/ compiles for arm64 without the x86 SIMD files',
    () => {
      const require = createRequire(import.meta.url);
      const napi = (require('node-api-headers') as { include_dir: string }).include_dir;
      const addonApi = (require('node-addon-api') as { include_dir: string }).include_dir;
      const dirs = ['addon', 'cpu', 'backend', 'cpu_backend', 'fake', 'tier', 'io'];
      const sources = dirs.flatMap((d) =>
        readdirSync(path.join(native, d))
          .filter((f) => f.endsWith('.cc'))
          .map((f) => path.join(native, d, f)),
      );
      const portable = sources.filter((f) => !x86Simd.includes(f));
      expect(portable.length).toBeGreaterThan(20);
      const args = [
        '-std=c++17',
        '-fsyntax-only',
        '-Wall',
        '-Wextra',
        '-Werror',
        '-ffp-contract=off',
        '-DNAPI_VERSION=8',
        '-DNAPI_DISABLE_CPP_EXCEPTIONS',
        `-I${napi}`,
        `-I${path.resolve(root, addonApi)}`,
        `-I${native}/include`,
      ];
      // Two at a time: the machines this runs on have two cores.
      const failures: string[] = [];
      for (let i = 0; i < portable.length; i += 2) {
        const batch = portable.slice(i, i + 2).map((f) => spawnSync(crossCxx, [...args, f], { encoding: 'utf8' }));
        batch.forEach((r, k) => r.status !== 0 && failures.push(`${portable[i + k]}: ${r.stderr.slice(0, 400)}`));
      }
      expect(failures).toEqual([]);
    },
    300_000,
  );

  it.skipIf(!has(crossCxx) || !has('qemu-aarch64'))(
    'the arm64 scalar path gives the x86 digest (under qemu-aarch64)',
    () => {
      const arm = digest(crossCxx, path.join(work, 'digest-arm64'), ['-static'], ['qemu-aarch64']);
      expect([...arm.keys()]).toEqual(['scalar']);
      if (hostScalar) expect(arm.get('scalar')).toBe(hostScalar);
      else expect(arm.get('scalar')).toMatch(/^[0-9a-f]{16}$/);
    },
    120_000,
  );
});
