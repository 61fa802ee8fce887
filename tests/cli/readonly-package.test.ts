/**
 * An install in a read-only node_modules: the package folder (dist/, the addon, package.json)
 * is chmod'ed read-only, and a tier request with the default heat file still runs, its heat
 * landing in ~/.cache/moetier and nothing new in the package. With the cache folder read-only
 * too, the request still succeeds and says on stderr that the heat was not saved. As root,
 * chmod alone would not stop a write, so the child then runs as `nobody`.
 */
import { chmodSync, cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { writeSynthModel } from '../../src/synth/generate.js';
import { cleanEnv, repoRoot, runCli, type CliResult } from './helpers.js';

const dir = mkdtempSync(path.join(tmpdir(), 'moetier-ro-'));
const pkg = path.join(dir, 'pkg');
const model = path.join(dir, 'model.gguf');
afterAll(() => {
  chmodTree(pkg, 0o755, 0o644);
  rmSync(dir, { recursive: true, force: true });
});

function chmodTree(root: string, dirMode: number, fileMode: number): void {
  for (const entry of readdirSync(root, { withFileTypes: true })) {
    const p = path.join(root, entry.name);
    if (entry.isSymbolicLink()) continue;
    if (entry.isDirectory()) chmodTree(p, dirMode, fileMode);
    else chmodSync(p, fileMode);
  }
  chmodSync(root, dirMode);
}

function listTree(root: string): string[] {
  return readdirSync(root, { recursive: true })
    .map(String)
    .filter((p) => !p.startsWith('node_modules'))
    .sort();
}

beforeAll(async () => {
  chmodSync(dir, 0o755); // mkdtemp makes 0700; `nobody` must reach the model and the package
  cpSync(path.join(repoRoot, 'dist'), path.join(pkg, 'dist'), { recursive: true });
  mkdirSync(path.join(pkg, 'native', 'build', 'Release'), { recursive: true });
  cpSync(
    path.join(repoRoot, 'native', 'build', 'Release', 'moetier.node'),
    path.join(pkg, 'native', 'build', 'Release', 'moetier.node'),
  );
  cpSync(path.join(repoRoot, 'package.json'), path.join(pkg, 'package.json'));
  symlinkSync(path.join(repoRoot, 'node_modules'), path.join(pkg, 'node_modules'));
  await writeSynthModel({ preset: 'tiny', arch: 'qwen3moe', quant: 'q8_0', seed: 1 }, model);
  chmodSync(model, 0o644);
  chmodTree(pkg, 0o555, 0o444);
});

/** A tier request from the read-only package, with HOME at `home` (mode `homeMode`). */
function tierRequest(home: string, homeMode: number): CliResult {
  mkdirSync(home);
  chmodSync(home, homeMode);
  const asNobody = process.getuid?.() === 0 ? { uid: 65534, gid: 65534 } : {};
  return runCli(['run', '-m', model, '-p', 'red green blue', '-n', '3', '--resident', '0.5', '--json'], {
    main: path.join(pkg, 'dist', 'src', 'cli', 'main.js'),
    cwd: home,
    env: cleanEnv({ HOME: home }),
    ...asNobody,
  });
}

describe('a read-only package folder', () => {
  it('runs a tier request with the default heat file, written to the user cache', () => {
    const before = listTree(pkg);
    const home = path.join(dir, 'home');
    const r = tierRequest(home, 0o777);
    expect(r.stderr).not.toMatch(/EACCES|EROFS|warning/);
    expect(r.status, r.stderr).toBe(0);
    const out = JSON.parse(r.stdout) as { generatedTokens: number; decodeHitRate: number };
    expect(out.generatedTokens).toBe(3);
    expect(out).toHaveProperty('decodeHitRate');
    const heat = readdirSync(path.join(home, '.cache', 'moetier', 'heat'));
    expect(heat).toHaveLength(1);
    expect(heat[0]).toMatch(/^[0-9a-f]{32}\.heat\.json$/);
    expect(listTree(pkg)).toEqual(before);
  });

  it('with a read-only cache folder too: the request succeeds and says the heat was not saved', () => {
    const home = path.join(dir, 'home-ro');
    const r = tierRequest(home, 0o555);
    expect(r.status, r.stderr).toBe(0);
    expect((JSON.parse(r.stdout) as { generatedTokens: number }).generatedTokens).toBe(3);
    expect(r.stderr).toMatch(/^moetier: warning: heat file not saved \(.*EACCES/m);
    expect(existsSync(path.join(home, '.cache'))).toBe(false);
  });
});
