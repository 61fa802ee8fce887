/**
 * The built CLI as users run it (dist/src/cli/main.js in a child process): llama-cli's short
 * flags beside the long ones, --version, text on stdout and figures on stderr, exit code 2 for
 * a bad command line and 1 for a failure while running. Each spawn costs ~1 s of Node start-up,
 * so the flag parsing itself is tested in process (tests/unit/cli/).
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cleanEnv, repoRoot, runCli, type CliResult } from './helpers.js';

const dir = mkdtempSync(path.join(tmpdir(), 'moetier-cli-'));
const model = path.join(dir, 'tiny.gguf');
const env = cleanEnv({ MOETIER_CACHE_DIR: path.join(dir, 'cache') });
const cli = (args: string[]): CliResult => runCli(args, { env });
afterAll(() => rmSync(dir, { recursive: true, force: true }));

beforeAll(() => {
  const r = cli(['gen-model', '--preset', 'tiny', '--out', model]);
  expect(r.status, r.stderr).toBe(0);
  // Not a terminal: plain progress lines, no carriage-return redraws.
  expect(r.stderr).toMatch(/gen-model: 100% [\d.]+ \/ [\d.]+ MB\n/);
  expect(r.stderr).not.toContain('\r');
});

describe('moetier CLI', () => {
  it('--version prints the package version', () => {
    const r = cli(['--version']);
    expect(r.status).toBe(0);
    expect(r.stdout.trim()).toBe(
      (JSON.parse(readFileSync(path.join(repoRoot, 'package.json'), 'utf8')) as { version: string }).version,
    );
  });

  it('takes the short flags llama-cli users type; the text goes to stdout, the statistics to stderr', () => {
    const longRun = cli([
      'run',
      '--model',
      model,
      '--prompt',
      'red green blue',
      '--max-tokens',
      '5',
      '--threads',
      '1',
      '--ctx',
      '64',
      '--temperature',
      '0.9',
      '--top-k',
      '4',
      '--top-p',
      '0.9',
      '--seed',
      '7',
      '--json',
    ]);
    expect(longRun.status, longRun.stderr).toBe(0);
    const long = JSON.parse(longRun.stdout) as { text: string; generatedTokens: number };
    expect(long.generatedTokens).toBe(5);
    const short = cli([
      'run',
      '-m',
      model,
      '-p',
      'red green blue',
      '-n',
      '5',
      '-t',
      '1',
      '-c',
      '64',
      '--temp',
      '0.9',
      '--top-k',
      '4',
      '--top-p',
      '0.9',
      '-s',
      '7',
    ]);
    expect(short.status, short.stderr).toBe(0);
    expect(short.stdout).toBe(long.text); // only the text: `> out.txt` keeps nothing else
    expect(short.stderr).toMatch(/generated 5 .*\nTTFT [\d.]+ ms \| prefill [\d.]+ tok\/s \| decode [\d.]+ tok\/s/);
  });

  it('exits 2 for a bad command line, naming the flag as typed, not the API option', () => {
    const slots = cli(['run', '-m', model, '-p', 'x', '--slots-per-layer', '48']); // the tiny model has 8 experts
    expect(slots.status).toBe(2);
    expect(slots.stderr).toMatch(/^moetier: option --slots-per-layer: expected an integer in \[1, 8\]/);
    expect(slots.stderr).not.toContain('slotsPerLayer');
    const unknown = cli(['run', '-m', model, '-p', 'x', '--colour', 'red']);
    expect(unknown.status).toBe(2);
    expect(unknown.stderr).toMatch(/option --colour: /);
    const none = cli([]);
    expect(none.status).toBe(2);
    expect(none.stderr).toMatch(/usage: moetier <command>/);
  });

  it('exits 1 for a failure while running (a corrupt model file)', () => {
    const bad = path.join(dir, 'bad.gguf');
    writeFileSync(bad, Buffer.from('GGUF but not really a model file'));
    const r = cli(['run', '-m', bad, '-p', 'x']);
    expect(r.status).toBe(1);
    expect(r.stderr).toMatch(/^moetier: .*bad\.gguf/m);
  });
});
