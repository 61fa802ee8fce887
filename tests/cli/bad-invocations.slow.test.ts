/**
 * Careless and hostile command lines (issue 10): each prints one line on stderr (`moetier: ...`),
 * never a stack, and exits 2 for a bad command line or 1 for a failure while running. The cases
 * run in parallel children (each spawn is ~1 s of Node start-up).
 */
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cleanEnv, cliMain, runCli } from './helpers.js';

const dir = mkdtempSync(path.join(tmpdir(), 'moetier-cli-bad-'));
const model = path.join(dir, 'tiny.gguf');
const env = cleanEnv({ MOETIER_CACHE_DIR: path.join(dir, 'cache') });
afterAll(() => rmSync(dir, { recursive: true, force: true }));
beforeAll(() => {
  expect(runCli(['gen-model', '--preset', 'tiny', '--out', model], { env }).status).toBe(0);
  mkdirSync(path.join(dir, 'folder'));
  writeFileSync(path.join(dir, 'garbage.gguf'), 'not a model at all');
  writeFileSync(path.join(dir, 'null.heat.json'), 'null');
  writeFileSync(path.join(dir, 'trace.jsonl'), '{"tok": 1, "layers": [[1, 2]]}\nnot json\n');
});

function run(args: string[]): Promise<{ code: number | null; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [cliMain, ...args], { env, stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('error', reject);
    child.on('exit', (code) => resolve({ code, stderr }));
  });
}

const m = () => model;
const d = (f: string) => path.join(dir, f);
const cases: Array<[string[], 1 | 2]> = [
  [['nosuchcommand'], 2],
  [['run'], 2],
  [['run', '-m', m()], 2],
  [['run', '-m', d('missing.gguf'), '-p', 'x'], 2],
  [['run', '-m', d('folder'), '-p', 'x'], 2],
  [['run', '-m', d('garbage.gguf'), '-p', 'x'], 1],
  [['run', '-m', m(), '-p', 'x', '-n', '-3'], 2],
  [['run', '-m', m(), '-p', 'x', '-n', 'lots'], 2],
  [['run', '-m', m(), '-p', 'x', '-t', '0'], 2],
  [['run', '-m', m(), '-p', 'x', '-c', '1'], 2],
  [['run', '-m', m(), '-p', 'x', '--seed', '4294967296'], 2],
  [['run', '-m', m(), '-p', 'x', '--temp', 'hot'], 2],
  [['run', '-m', m(), '-p', 'x', '--top-p', '2'], 2],
  [['run', '-m', m(), '-p', 'x', '--resident', '2'], 2],
  [['run', '-m', m(), '-p', 'x', '--slots-per-layer', '99'], 2],
  [['run', '-m', m(), '-p', 'x', '--trace-file', m()], 2],
  [['run', '-m', m(), '-p', 'x', '--trace-routes', d('folder')], 2],
  [['run', '-m', m(), '-p', 'x', '--trace-file', '/dev/null'], 2],
  [['run', '-m', m(), '-p', 'x', '--trace-routes', d('no/such/dir/r.jsonl')], 2],
  [['run', '-m', m(), '-p', 'x', '--resident', '0.5', '--heat', d('null.heat.json')], 1],
  [['run', '-m', m(), '-p', 'x', '--resident', '0.5', '--heat', d('folder')], 2],
  [['run', '-m', m(), '-p', 'x', '--colour', 'red'], 2],
  [['run', '-m', m(), '-p', 'x', '--heat', d('h.json')], 2], // tier flags without a tier were ignored
  [['run', '-m', m(), '-p', 'x', '--prefill-replan'], 2],
  [['run', '-m', m(), '-p', 'x', '--replan-guard', 'off'], 2], // a tier flag without a tier
  [['run', '-m', m(), '-p', 'x', '--resident', '0.5', '--replan-guard', 'maybe'], 2],
  [['run', '-m', m(), '-p', 'x', '--backend', 'fake'], 2],
  [['gen-model'], 2],
  [['gen-model', '--preset', 'huge', '--out', d('x.gguf')], 2],
  [['gen-model', '--preset', 'tiny', '--out', '/dev/null'], 2],
  [['gen-model', '--preset', 'tiny', '--out', d('folder')], 2],
  [['gen-model', '--preset', 'tiny', '--seed', '-1', '--out', d('y.gguf')], 2],
  [['replay', '--trace', d('missing.jsonl'), '--budget', '4'], 2],
  [['replay', '--trace', d('folder'), '--budget', '4'], 2],
  [['replay', '--trace', '/dev/zero', '--budget', '4'], 2],
  [['replay', '--trace', d('trace.jsonl'), '--budget', '4'], 1],
  [['replay', '--budget', 'x'], 2],
];

describe('bad invocations', () => {
  it(`${cases.length} bad command lines: one line each, no stack, exit 2 for usage and 1 for failures`, async () => {
    const results: Array<{ args: string[]; want: number; code: number | null; stderr: string }> = [];
    for (let i = 0; i < cases.length; i += 4) {
      const batch = cases.slice(i, i + 4);
      const done = await Promise.all(batch.map(([args]) => run(args)));
      done.forEach((r, k) => results.push({ args: batch[k][0], want: batch[k][1], ...r }));
    }
    const wrong = results.filter((r) => {
      const lines = r.stderr.trimEnd().split('\n');
      const usage = r.stderr.includes('usage: moetier');
      return (
        r.code !== r.want ||
        /\n\s+at /.test(r.stderr) ||
        (!usage && (lines.length !== 1 || !lines[0].startsWith('moetier: ')))
      );
    });
    expect(
      wrong.map((r) => `${r.args.join(' ')} -> exit ${r.code} (want ${r.want}): ${r.stderr.slice(0, 300)}`),
    ).toEqual([]);
  }, 240_000);
});
