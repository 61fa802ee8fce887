/**
 * `moetier serve` as a user runs it (the built CLI in a child process): it prints where it
 * listens, answers, and on SIGTERM stops accepting, lets the running request finish, closes and
 * exits 0.
 */
import { spawn } from 'node:child_process';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { tempDir, tinyModel } from '../engine/tier-helpers.js';

const cli = path.resolve(import.meta.dirname, '../../dist/src/cli/main.js');
const { dir, cleanup } = tempDir('moetier-serve-cli-');
let model: string;
beforeAll(async () => {
  model = await tinyModel(dir, 'q8_0', 12);
}, 120_000);
afterAll(cleanup);

describe('moetier serve (CLI)', () => {
  it('serves on a free port and exits 0 on SIGTERM after the running request', async () => {
    const child = spawn(
      process.execPath,
      [cli, 'serve', '-m', model, '--port', '0', '-t', '1', '-c', '64', '--grace-ms', '5000'],
      { stdio: ['ignore', 'ignore', 'pipe'] },
    );
    let stderr = '';
    const address = await new Promise<string>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`no address in time: ${stderr}`)), 60_000);
      child.stderr.on('data', (d: Buffer) => {
        stderr += d.toString();
        const m = /serving .* at (http:\/\/127\.0\.0\.1:\d+)/.exec(stderr);
        if (m) {
          clearTimeout(timer);
          resolve(m[1]);
        }
      });
    });
    const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
    expect(await (await fetch(`${address}/health`)).json()).toEqual({ status: 'ready' });
    // A streamed request is running (its first chunk is out) when the signal comes: it finishes.
    const res = await fetch(`${address}/v1/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ prompt: 'red green blue', max_tokens: 48, stream: true }),
    });
    const reader = res.body!.getReader();
    const first = await reader.read();
    expect(first.done).toBe(false);
    child.kill('SIGTERM');
    // The first read may already hold several chunks (a busy machine reads late): the stream is read whole.
    let text = Buffer.from(first.value!).toString();
    for (let r = await reader.read(); !r.done; r = await reader.read()) text += Buffer.from(r.value).toString();
    expect(text).toContain('data: [DONE]');
    expect(text.match(/^data: \{/gm)!.length).toBeGreaterThan(1); // token chunks, then [DONE]
    expect(await exited).toBe(0);
    expect(stderr).toContain('shutting down');
  }, 90_000);
});
