/** `moetier replay --prefetch` on the real trace of ../shared/traces/: rows, the table, the flags refused. */
import { mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { replayMain } from '../../../src/cli/commands/replay.js';
import { FileFormatError, InvalidOptionError } from '../../../src/core/errors.js';
import type { PrefetchRow } from '../../../src/tiers/report/prefetch-rows.js';
import type { ReplayRow } from '../../../src/tiers/report/rows.js';

const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');
const olmoe = path.resolve(repoRoot, '../shared/traces/olmoe-1b-7b.decode.jsonl');

async function run(argv: string[]): Promise<string> {
  let text = '';
  expect(await replayMain(['--trace', olmoe, ...argv], (t) => (text += t))).toBe(0);
  return text;
}

/** A calibration snapshot a disk-like engine could have measured: 2 ms per layer, about 1 ms per expert read. */
function snapshotFile(): string {
  const file = path.join(mkdtempSync(path.join(os.tmpdir(), 'timing-')), 'calibration.json');
  writeFileSync(
    file,
    JSON.stringify({
      invocation: 3,
      bandwidthBytesPerSEwma: 3.6e9,
      transferFixedMsEwma: 0.02,
      computeMsEwma: new Array(16).fill(2),
      samplesAccepted: 100,
      samplesRejected: 0,
      samplesStale: 0,
    }),
  );
  return file;
}

describe('moetier replay --prefetch', () => {
  it('--json: one row per budget and mode; observe reads as off; enforce at recall 1 stalls less on a measured disk-like timing', async () => {
    const rows = JSON.parse(
      await run([
        '--budget',
        '16,32',
        '--prefetch',
        'off,observe,enforce',
        '--prefetch-recall',
        '1',
        '--timing',
        snapshotFile(),
        '--json',
      ]),
    ) as PrefetchRow[];
    expect(rows.map((r) => `${r.mode}@${r.budget}`)).toEqual([
      'off@16',
      'observe@16',
      'enforce@16',
      'off@32',
      'observe@32',
      'enforce@32',
    ]);
    for (const b of [16, 32]) {
      const [off, observe, enforce] = ['off', 'observe', 'enforce'].map(
        (m) => rows.find((r) => r.mode === m && r.budget === b)!,
      );
      expect([observe.stallMsPerToken, observe.readsPerToken]).toEqual([off.stallMsPerToken, off.readsPerToken]);
      expect(enforce.stallMsPerToken).toBeLessThan(off.stallMsPerToken);
      expect(enforce.prefetch.covered).toBeGreaterThan(0);
      expect(enforce.prefetch.byLayer.covered.reduce((a, x) => a + x, 0)).toBe(enforce.prefetch.covered);
      expect(observe.prefetch.wouldIssue).toBeGreaterThan(0);
      expect(enforce.tokens).toBe(299);
      expect(enforce.recall).toBe(1);
      expect(enforce.timing.computeMs[0]).toBe(2);
      // 0.8 x 2 ms - 0.02 ms fixed = 1.58 ms at 3.6 GB/s: 5.7 MB, one 3.54 MB expert.
      expect(enforce.windowExperts).toEqual(new Array(16).fill(1));
    }
  });

  it("prints a table with its assumptions: the timing, the oracle's recall as an assumption, the window", async () => {
    const text = await run(['--budget', '24', '--prefetch', 'off,enforce']);
    expect(text).toContain('timing cost: compute 0.143 ms/layer, read 0.472 ms per expert');
    expect(text).toContain('recall 0.9 (assumed, not measured)');
    // 0.8 x 0.143 ms of compute does not cover the 0.33 ms fixed cost: no window once calibrated.
    expect(text).toContain('window (transferWindowBytes, safety 0.8): 0 expert(s) per layer once calibrated');
    expect(text).toMatch(/^mode\s+budget\s+ms\/tok\s+stall ms\/tok/m);
    expect(text.split('\n').filter((l) => /^(off|enforce)\s+24\s/.test(l))).toHaveLength(2);
  });

  it('leaves the policy lab as it was without the new flags', async () => {
    const rows = JSON.parse(await run(['--budget', '16', '--policy', 'lru', '--json'])) as ReplayRow[];
    expect(rows).toHaveLength(1);
    expect(rows[0]).toHaveProperty('hitRate');
    expect(rows[0]).not.toHaveProperty('mode');
  });

  it.each([
    [['--prefetch', 'on'], /--prefetch.*off, observe, enforce/],
    [['--prefetch', 'off,off'], /--prefetch.*distinct/],
    [['--prefetch', 'enforce', '--prefetch-recall', '1.5'], /--prefetch-recall.*\[0, 1\]/],
    [['--prefetch', 'enforce', '--prefetch-recall', 'x'], /--prefetch-recall/],
    [['--prefetch', 'enforce', '--prefetch-seed', '-1'], /--prefetch-seed/],
    [['--prefetch', 'enforce', '--prefetch-safety', '0'], /--prefetch-safety.*\(0, 1\]/],
    [['--prefetch', 'enforce', '--timing', '/nonexistent/calibration.json'], /--timing.*cost, or a readable/],
    [['--prefetch-recall', '0.5'], /--prefetch-recall.*--prefetch beside it/],
    [['--timing', 'cost'], /--timing.*--prefetch beside it/],
    [['--prefetch', 'enforce', '--policy', 'lru'], /--policy.*with --prefetch/],
    [['--prefetch', 'enforce', '--offload', 'hosted'], /--offload.*hostless/],
  ])('refuses %j naming the flag', async (argv, message) => {
    const p = replayMain(['--trace', olmoe, ...argv], () => {});
    await expect(p).rejects.toThrow(InvalidOptionError);
    await expect(replayMain(['--trace', olmoe, ...argv], () => {})).rejects.toThrow(message);
  });

  it('refuses a snapshot that does not fit the trace, naming the file and the field', async () => {
    const file = path.join(mkdtempSync(path.join(os.tmpdir(), 'timing-')), 'short.json');
    writeFileSync(file, JSON.stringify({ computeMsEwma: [1, 1], bandwidthBytesPerSEwma: 1e9, transferFixedMsEwma: 0 }));
    await expect(replayMain(['--trace', olmoe, '--prefetch', 'enforce', '--timing', file], () => {})).rejects.toThrow(
      FileFormatError,
    );
    await expect(replayMain(['--trace', olmoe, '--prefetch', 'enforce', '--timing', file], () => {})).rejects.toThrow(
      /short\.json: computeMsEwma: expected an array of 16/,
    );
  });
});
