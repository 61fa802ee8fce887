/** `moetier run --routes-from TRACE` in process: the simulation's report, its --trace-routes, and its refusals under the flag. */
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { runCommand } from '../../src/cli/commands/run.js';
import { InvalidOptionError } from '../../src/core/errors.js';
import { readTraces } from '../../src/routes/load.js';
import { tempDir, tinyModel } from '../engine/tier-helpers.js';
import { refusal } from './refusal.js';

const { dir, cleanup } = tempDir('moetier-cli-routes-from-');
afterAll(cleanup);
let model: string;
beforeAll(async () => {
  model = await tinyModel(dir);
});

/** rows [row][4 layers][2 sorted ids of 8]: row r, layer l -> {(r + l) mod 8, (r + 2l + 5) mod 8}, distinct. */
function writeShared(name: string, n: number, layers = 4): { file: string; rows: number[][][] } {
  const rows = Array.from({ length: n }, (_, r) =>
    Array.from({ length: layers }, (_, l) => {
      const a = (r + l) % 8;
      let b = (r + 2 * l + 5) % 8;
      if (b === a) b = (b + 1) % 8;
      return [a, b].sort((x, y) => x - y);
    }),
  );
  const file = path.join(dir, name);
  writeFileSync(file, rows.map((ls, i) => JSON.stringify({ tok: i + 1, layers: ls })).join('\n') + '\n');
  return { file, rows };
}

async function run(args: string[]): Promise<{ json: Record<string, unknown>; stderr: string }> {
  const lines: string[] = [];
  const errors: string[] = [];
  const log = vi.spyOn(console, 'log').mockImplementation((s: string) => void lines.push(s));
  const error = vi.spyOn(console, 'error').mockImplementation((s: string) => void errors.push(s));
  try {
    expect(await runCommand.run(args)).toBe(0);
  } finally {
    log.mockRestore();
    error.mockRestore();
  }
  return { json: JSON.parse(lines.at(-1)!) as Record<string, unknown>, stderr: errors.join('\n') };
}

describe('moetier run --routes-from', () => {
  it("says it is a simulation, reports the trace in --json, and --trace-routes writes back the trace's decode rows", async () => {
    const { file, rows } = writeShared('cli.decode.jsonl', 20);
    const out = path.join(dir, 'cli.routes.jsonl');
    const { json, stderr } = await run([
      '-m',
      model,
      '-p',
      'red green blue',
      '-n',
      '9',
      '-t',
      '1',
      '-c',
      '64',
      '--slots-per-layer',
      '4',
      '--heat',
      'none',
      '--routes-from',
      file,
      '--trace-routes',
      out,
      '--json',
    ]);
    expect(stderr).toMatch(/simulation: routing from .*cli\.decode\.jsonl, not the router/);
    expect(json.routesFrom).toBe(file);
    expect(json.tokens).toHaveLength(9);
    expect(typeof json.decodeHitRate).toBe('number');
    const [t] = readTraces(out, { expertsOf: () => undefined });
    expect(t.decode.map((s) => s.layers)).toEqual(rows.slice(0, 8));
    expect(t.prefill.map((s) => s.layers)).toEqual(rows.slice(0, t.prefill.length));
  });

  it('refuses a trace of another shape, a missing one, and --trace-routes over it, naming the flag', async () => {
    const base = ['-m', model, '-p', 'x', '-n', '2', '-t', '1', '-c', '64'];
    const wrong = writeShared('three.decode.jsonl', 4, 3).file;
    const e = await refusal([...base, '--routes-from', wrong]);
    expect(e.option).toBe('--routes-from');
    expect(e.message).toMatch(
      /^option --routes-from: expected a route trace of the model's shape \(4 layers x 8 experts, top-2\), got ".*three\.decode\.jsonl: 3 layers x expert ids up to 7, top-2"/,
    );
    expect((await refusal([...base, '--routes-from', path.join(dir, 'absent.jsonl')])).message).toMatch(
      /^option --routes-from: expected a readable route trace file \(ENOENT\)/,
    );
    const { file } = writeShared('kept.decode.jsonl', 4);
    expect((await refusal([...base, '--routes-from', file, '--trace-routes', file])).option).toBe('--trace-routes');
  });

  it('is in --help, marked as a simulation', () => {
    expect(runCommand.usage).toMatch(/simulation \(benchmarks only\):\n  --routes-from TRACE/);
  });
});
