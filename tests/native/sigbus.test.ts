/**
 * A model file truncated while its mapping is read (issue 10): the process cannot go on (a SIGBUS
 * read cannot be resumed), but it says why on stderr before it ends, instead of dying without a
 * word. The engine checks the file before each request (tests/engine/open-failures.test.ts), so
 * this is only for a truncation during an eval. Run in a child process.
 */
import { spawnSync } from 'node:child_process';
import { copyFileSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { tinyModel } from '../engine/tier-helpers.js';

const dir = mkdtempSync(path.join(tmpdir(), 'moetier-sigbus-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const binding = path.resolve(import.meta.dirname, '../../dist/src/native/binding.js');

describe('SIGBUS on a truncated mapping', () => {
  it('is reported on stderr before the process ends', async () => {
    const file = path.join(dir, 'victim.gguf');
    copyFileSync(await tinyModel(dir, 'q8_0', 2), file);
    const script = `
      import { truncateSync } from 'node:fs';
      const { loadNative } = await import(${JSON.stringify(binding)});
      const m = loadNative().mapFile(${JSON.stringify(file)});
      truncateSync(${JSON.stringify(file)}, 4096);
      const v = new Uint8Array(m.buffer);
      let s = 0;
      for (let i = 0; i < v.length; i += 4096) s += v[i];
      console.log('read past the end', s);`;
    const r = spawnSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8', timeout: 30_000 });
    expect(r.signal).toBe('SIGBUS');
    expect(r.stdout).not.toContain('read past the end');
    expect(r.stderr).toContain('moetier: SIGBUS: a memory-mapped model file was truncated while it was being read');
  });
});
