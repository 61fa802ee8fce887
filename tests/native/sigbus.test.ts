/**
 * A model file truncated while its mapping is read (issue 27, item 3): the SIGBUS guard
 * (native/addon/sigbus_guard.cc) answers a read past the new end with zeros, counts it
 * (mappedFaults), and the process goes on; a SIGBUS that is no read of a model mapping keeps its
 * default action. Child processes: without the guard the runner itself would die.
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

function runModule(script: string): ReturnType<typeof spawnSync> & { stdout: string; stderr: string } {
  return spawnSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8', timeout: 30_000 });
}

describe('SIGBUS on a truncated mapping', () => {
  it('reads zeros past the new end, counts the faults, and the process goes on', async () => {
    const file = path.join(dir, 'victim.gguf');
    copyFileSync(await tinyModel(dir, 'q8_0', 2), file);
    const script = `
      import { truncateSync } from 'node:fs';
      const { loadNative } = await import(${JSON.stringify(binding)});
      const native = loadNative();
      const m = native.mapFile(${JSON.stringify(file)});
      const v = new Uint8Array(m.buffer);
      let before = 0;
      for (let i = 8192; i < v.length; i += 4096) before += v[i] !== 0 ? 1 : 0;
      truncateSync(${JSON.stringify(file)}, 8192);
      let nonZero = 0;
      for (let i = 8192; i < v.length; i++) nonZero += v[i] !== 0 ? 1 : 0;
      console.log(JSON.stringify({ guarded: m.guarded, before, nonZero, head: v[0], faults: native.mappedFaults(m.handle), size: m.size }));
      native.unmapFile(m.handle);`;
    const r = runModule(script);
    expect(r.signal, r.stderr).toBeNull();
    expect(r.status, r.stderr).toBe(0);
    const out = JSON.parse(r.stdout.trim()) as {
      guarded: boolean;
      before: number;
      nonZero: number;
      head: number;
      faults: number;
    };
    expect(out.guarded).toBe(true);
    expect(out.before, 'pages past 8 KiB held data before the truncation').toBeGreaterThan(0);
    expect(out.nonZero, 'bytes past the new end read after it').toBe(0);
    expect(out.head, "the file's first page still reads as the file ('G' of GGUF)").toBe(0x47);
    expect(out.faults).toBeGreaterThanOrEqual(1);
  });

  it('keeps the default action for a SIGBUS that is no read of a model mapping', async () => {
    const file = path.join(dir, 'bystander.gguf');
    copyFileSync(await tinyModel(dir, 'q8_0', 2), file);
    const script = `
      const { loadNative } = await import(${JSON.stringify(binding)});
      loadNative().mapFile(${JSON.stringify(file)});
      process.kill(process.pid, 'SIGBUS');
      await new Promise((r) => setTimeout(r, 1000));
      console.log('survived a SIGBUS sent to it');`;
    const r = runModule(script);
    expect(r.signal).toBe('SIGBUS');
    expect(r.stdout).not.toContain('survived');
    expect(r.stderr).toContain('moetier: SIGBUS outside any model mapping');
  });
});
