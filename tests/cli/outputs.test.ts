/**
 * The built CLI never destroys what the user did not name as output (issue 10): a device or a
 * folder as `gen-model --out`, the model as `run --trace-file` or `--trace-routes`, are refused
 * before any work, with the flag named and exit code 2; the targets are unchanged.
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cleanEnv, runCli, type CliResult } from './helpers.js';

const dir = mkdtempSync(path.join(tmpdir(), 'moetier-cli-out-'));
const model = path.join(dir, 'tiny.gguf');
const env = cleanEnv({ MOETIER_CACHE_DIR: path.join(dir, 'cache') });
const cli = (args: string[]): CliResult => runCli(args, { env });
afterAll(() => rmSync(dir, { recursive: true, force: true }));
beforeAll(() => expect(cli(['gen-model', '--preset', 'tiny', '--out', model]).status).toBe(0));

describe('CLI outputs', () => {
  it('gen-model refuses a character device and a folder as --out, at once, and leaves them as they were', () => {
    const started = Date.now();
    const dev = cli(['gen-model', '--preset', 'medium', '--out', '/dev/null']);
    expect(dev.status).toBe(2);
    expect(dev.stderr).toMatch(/option --out: expected a regular file or a new path \(this is a character device/);
    expect(Date.now() - started).toBeLessThan(15_000); // a medium model takes minutes: nothing was generated
    expect(statSync('/dev/null').isCharacterDevice()).toBe(true);
    const folder = path.join(dir, 'folder');
    mkdirSync(folder);
    const r = cli(['gen-model', '--preset', 'tiny', '-o', folder]);
    expect(r.status).toBe(2);
    expect(r.stderr).toContain('option -o: expected a regular file or a new path (this is a directory');
    expect(statSync(folder).isDirectory()).toBe(true);
  });

  it('run refuses the model as --trace-file or --trace-routes and leaves the model intact', () => {
    const before = readFileSync(model);
    for (const flag of ['--trace-file', '--trace-routes']) {
      const r = cli(['run', '-m', model, '-p', 'red', '-n', '2', flag, model]);
      expect(r.status, r.stderr).toBe(2);
      expect(r.stderr).toContain(`option ${flag}: expected a file other than the input ${model}`);
    }
    expect(readFileSync(model).equals(before)).toBe(true);
  });
});
