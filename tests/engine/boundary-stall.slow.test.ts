/**
 * No stall at the boundary (issue 11), on the cpu backend's real clock: a swap issued after
 * layer L costs the compute thread a queue push to the tier's issuer thread, not the
 * issue itself or the copy. Read from a --trace-file of the small preset with prefill replan
 * (many swap boundaries) and a third of the experts resident.
 *
 * The bound: the median gap at swap boundaries stays within 20 us of the median gap elsewhere.
 * The post is two atomic stores (1-1.5 us measured at the median, against 0.3 us elsewhere),
 * leaving room for a loaded machine; issuing on the eval thread, as
 * before, measured 37-300 us there (the backend's copier woke onto the compute's core and the
 * eval thread's first touches of fresh memory), and a copy of one small-preset expert (408 KiB)
 * takes 15-40 us, so a copy run inside the gap fails it too. A loaded machine can preempt the
 * eval thread at any boundary, so up to three runs are tried; the issue-on-the-eval-thread
 * design failed every one of its runs.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { boundaryGaps, median, traceSpans, uploadOverlap } from '../../otel/trace-overlap.js';
import { cleanOtelEnv, runCli } from '../cli/helpers.js';

const dir = mkdtempSync(path.join(os.tmpdir(), 'moetier-boundary-'));
const model = path.join(dir, 'small.gguf');
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const boundBeyondPlainUs = 20;

beforeAll(() => {
  const r = runCli(['gen-model', '--preset', 'small', '--quant', 'q8_0', '--out', model], {
    env: cleanOtelEnv(),
    timeout: 120_000,
  });
  expect(r.status, r.stderr).toBe(0);
}, 180_000);

describe('a swap at a layer boundary', () => {
  it('costs the compute no more than a hand-off: the median swap-boundary gap stays near the others', () => {
    const tries: string[] = [];
    for (let attempt = 0; attempt < 3; attempt++) {
      const trace = path.join(dir, `trace-${attempt}.json`);
      const args = [
        'run',
        '-m',
        model,
        '-p',
        'one two three four five six seven eight nine ten',
        '-n',
        '32',
        '--resident',
        '0.37',
      ];
      const r = runCli([...args, '--heat', 'none', '--prefill-replan', '--trace-file', trace, '--json'], {
        env: cleanOtelEnv(),
        timeout: 120_000,
      });
      expect(r.status, r.stderr).toBe(0);
      const spans = traceSpans(JSON.parse(readFileSync(trace, 'utf8')));
      const gaps = boundaryGaps(spans);
      // The run really swapped at boundaries, and its copies ran beside later layers' compute.
      expect(gaps.swap.length).toBeGreaterThanOrEqual(5);
      expect(gaps.plain.length).toBeGreaterThan(100);
      expect(uploadOverlap(spans).overlapCompute).toBeGreaterThan(0);
      const swap = median(gaps.swap),
        plain = median(gaps.plain);
      tries.push(
        `swap-boundary median ${swap.toFixed(1)} us, elsewhere ${plain.toFixed(1)} us (${gaps.swap.length} / ${gaps.plain.length} gaps)`,
      );
      if (swap <= plain + boundBeyondPlainUs) break;
    }
    const last = tries[tries.length - 1];
    const [swap, plain] = [...last.matchAll(/([\d.]+) us/g)].map((m) => Number(m[1]));
    expect(swap, tries.join('; ')).toBeLessThanOrEqual(plain + boundBeyondPlainUs);
  }, 300_000);
});
