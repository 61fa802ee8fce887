/**
 * `moetier replay` inputs (issue 10): a trace whose shape disagrees with the model's geometry is
 * refused (15 or 17 layers for the 16-layer OLMoE were priced as OLMoE); a missing file, a folder
 * or a FIFO as --trace and a device as --plot are refused by type, before reading or any work.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { InvalidOptionError } from '../../../src/core/errors.js';
import { replayMain } from '../../../src/cli/commands/replay.js';

const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');
const olmoe = path.resolve(repoRoot, '../shared/traces/olmoe-1b-7b.decode.jsonl');
const dir = mkdtempSync(path.join(os.tmpdir(), 'moetier-replay-in-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const replay = (args: string[]) => replayMain(['--budget', '16', '--policy', 'lru', ...args], () => undefined);

/** The shared trace with every step's layers cut or padded to `layers`. */
function reshaped(layers: number): string {
  const lines = readFileSync(olmoe, 'utf8')
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as { tok: number; layers: number[][] });
  const out = lines.map((s) => ({
    ...s,
    layers: Array.from({ length: layers }, (_, i) => s.layers[i % s.layers.length]),
  }));
  const file = path.join(dir, `olmoe-1b-7b.${layers}.jsonl`);
  writeFileSync(file, out.map((s) => JSON.stringify(s)).join('\n') + '\n');
  return file;
}

describe('replay inputs', () => {
  it('replays the real 16-layer trace, and refuses 15 or 17 layers for the 16-layer geometry', async () => {
    await expect(replay(['--trace', olmoe])).resolves.toBe(0);
    for (const layers of [15, 17]) {
      await expect(replay(['--trace', reshaped(layers)])).rejects.toThrow(
        new RegExp(`shape \\(16 layers x 64 experts, top-8\\), got ${layers} x 64`),
      );
    }
  });

  it('refuses rows that route 0, 7, 9 or 64 experts for the top-8 OLMoE (issue 27: they were replayed without a word)', async () => {
    const lines = readFileSync(olmoe, 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { tok: number; layers: number[][] });
    for (const k of [0, 7, 9, 64]) {
      const file = path.join(dir, `olmoe-1b-7b.k${k}.jsonl`);
      const rows = lines.map((step) => ({
        ...step,
        layers: step.layers.map(() => Array.from({ length: k }, (_, i) => i)),
      }));
      writeFileSync(file, rows.map((r) => JSON.stringify(r)).join('\n') + '\n');
      await expect(replay(['--trace', file]), `top-${k}`).rejects.toThrow(
        k === 0 ? /1 to 64 expert ids per layer/ : new RegExp(`top-8\\), got 16 x 64, top-${k}`),
      );
    }
  });

  it('refuses a missing file, a folder and a FIFO as --trace without reading them', async () => {
    const fifo = path.join(dir, 'trace.fifo');
    execFileSync('mkfifo', [fifo]);
    await expect(replay(['--trace', path.join(dir, 'missing.jsonl')])).rejects.toThrow(
      /option --trace: expected a readable trace file \(ENOENT\)/,
    );
    await expect(replay(['--trace', dir])).rejects.toThrow(/option --trace: expected a trace file \(a regular file\)/);
    await expect(replay(['--trace', fifo])).rejects.toThrow(InvalidOptionError);
  });

  it('refuses a character device or the trace itself as --plot, and writes a real plot whole', async () => {
    await expect(replay(['--trace', olmoe, '--plot', '/dev/null'])).rejects.toThrow(
      /option --plot: .*character device/,
    );
    expect(statSync('/dev/null').isCharacterDevice()).toBe(true);
    const copy = path.join(dir, 'copy.olmoe-1b-7b.jsonl');
    writeFileSync(copy, readFileSync(olmoe));
    await expect(replay(['--trace', copy, '--model', 'olmoe-1b-7b', '--plot', copy])).rejects.toThrow(
      /a file other than the input/,
    );
    const svg = path.join(dir, 'plot.svg');
    await expect(replay(['--trace', olmoe, '--plot', svg])).resolves.toBe(0);
    expect(readFileSync(svg, 'utf8')).toMatch(/^<svg[\s\S]*<\/svg>\s*$/);
  });
});
