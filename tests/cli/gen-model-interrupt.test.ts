/**
 * Ctrl-C during `moetier gen-model` (issue 27): the write stops before its next tensor, its
 * temporary file beside the output is removed (it used to stay behind), nothing is written at the
 * output path, and the command exits with 130.
 */
import { spawn } from 'node:child_process';
import { existsSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { tempDir } from '../engine/tier-helpers.js';
import { cleanOtelEnv, cliMain } from './helpers.js';

const { dir, cleanup } = tempDir('moetier-gen-interrupt-');
afterAll(() => cleanup());

describe('Ctrl-C during moetier gen-model', () => {
  it('exits 130 and leaves neither the model nor its temporary file', async () => {
    const out = path.join(dir, 'small.gguf');
    // The small preset takes ~2 s to write here: the SIGINT comes once its temporary file exists.
    const child = spawn(process.execPath, [cliMain, 'gen-model', '--preset', 'small', '--out', out], {
      env: cleanOtelEnv({}),
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    let stderr = '';
    child.stderr!.on('data', (d: Buffer) => void (stderr += d.toString()));
    const closed = new Promise<{ status: number | null; signal: NodeJS.Signals | null }>((resolve) =>
      child.on('close', (status, signal) => resolve({ status, signal })),
    );
    let sent = false;
    const started = Date.now();
    while (!sent && child.exitCode === null && Date.now() - started < 60_000) {
      await new Promise((r) => setTimeout(r, 5));
      if (readdirSync(dir).some((f) => f.endsWith('.tmp'))) sent = child.kill('SIGINT');
    }
    const r = await closed;
    expect(sent).toBe(true);
    expect(r.signal).toBe(null); // it exited by itself
    expect(r.status).toBe(130);
    expect(stderr).toMatch(/gen-model: interrupted; nothing was written/);
    expect(existsSync(out)).toBe(false);
    expect(readdirSync(dir).filter((f) => f.endsWith('.tmp'))).toEqual([]);
  }, 90_000);
});
