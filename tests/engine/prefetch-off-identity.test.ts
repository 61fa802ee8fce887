/**
 * Off is today's path byte for byte, and observe issues exactly what off issues (issue 13 item 3):
 * the sequence of transfers a request makes (every upload and every expert read, in order, with its
 * layer, expert, bytes and kind, from the trace file) is the same with no prefetch option, with
 * prefetch off and with observe; enforce adds reads of its own (its kind says so). The fake card's
 * clock is virtual and no upload limit holds a swap back, so its order is deterministic and compared as is (but for the last boundary's swaps, which may settle after the request: expectSameTransfers); the disk tier's admissions are
 * the eval thread's (no LFRU swaps), but the reads of one bind land in the disk's order, so its
 * transfers are compared as a multiset.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AttrNames, SpanNames } from '../../otel/semconv.js';
import { startTelemetry } from '../../otel/setup.js';
import type { EngineOptions } from '../../src/engine/engine.js';
import { useOtelEnv } from '../otel/env.js';
import { referenceRun, tempDir, tinyModel } from './tier-helpers.js';
import { maxTokens, promptText, runPrefetch } from './prefetch-helpers.js';

const { dir, cleanup } = tempDir('moetier-prefetch-identity-');
let restoreEnv: () => void;
let model: string;
let prompt: number[];
let reference: number[];
beforeAll(async () => {
  restoreEnv = useOtelEnv({ OTEL_TRACES_EXPORTER: 'none', OTEL_METRICS_EXPORTER: 'none' });
  model = await tinyModel(dir, 'q8_0', 29);
  ({ prompt, reference } = await referenceRun(model, promptText, maxTokens));
});
afterAll(() => {
  restoreEnv();
  cleanup();
});

interface TraceEvent {
  name: string;
  ph: string;
  ts: number;
  args?: Record<string, unknown>;
}

let runs = 0;
/** The request's transfers in start order: "kind layer/expert bytes". */
async function transfers(
  options: Partial<EngineOptions>,
  ordered: boolean,
): Promise<{ tokens: number[]; sequence: string[] }> {
  const traceFile = path.join(dir, `trace-${runs++}.json`);
  const telemetry = startTelemetry({ traceFile });
  let tokens: number[];
  try {
    ({ tokens } = await runPrefetch(model, prompt, options));
  } finally {
    await telemetry.shutdown();
  }
  const events = (JSON.parse(readFileSync(traceFile, 'utf8')).traceEvents as TraceEvent[]).filter(
    (e) => e.ph === 'X' && (e.name === SpanNames.upload || e.name === SpanNames.expertRead),
  );
  events.sort((a, b) => a.ts - b.ts);
  const sequence = events.map((e) => {
    const a = e.args ?? {};
    const kind = e.name === SpanNames.upload ? 'upload' : String(a[AttrNames.readMode]);
    return `${kind} ${a[AttrNames.layer]}/${a[AttrNames.expert]} ${a[AttrNames.uploadSize] ?? a[AttrNames.readSize]}`;
  });
  return { tokens, sequence: ordered ? sequence : sequence.sort() };
}

/**
 * The fake card copies on a real thread: a swap issued at the last boundary may still be in flight
 * at the request's final poll, and is then reported to the next request, not traced in this one (a
 * loaded machine shows it). So on the fake tier the sequences agree up to the shorter one, and only
 * such a tail (at most every slot's swap: 4 layers x 3 slots) may be missing. The disk tier's reads
 * end inside the eval that issued them: its multisets must be equal.
 */
const LAST_BOUNDARY_SWAPS_MAX = 4 * 3;
function expectSameTransfers(actual: string[], expected: string[], ordered: boolean): void {
  if (!ordered) return void expect(actual).toEqual(expected);
  const n = Math.min(actual.length, expected.length);
  expect(actual.slice(0, n)).toEqual(expected.slice(0, n));
  expect(Math.abs(actual.length - expected.length)).toBeLessThanOrEqual(LAST_BOUNDARY_SWAPS_MAX);
  expect(n).toBeGreaterThan(0);
}

describe.each([
  // Upload limits no swap reaches: the policy's swaps are issued as decided, never held back by an
  // upload that has not settled yet (the fake card's copies run on a real thread), so their order is the policy's.
  [
    'fake',
    { backend: 'fake', lfru: { tickTokens: 2 }, upload: { inflightTransfersMax: 4096, inflightBytesMax: 2 ** 40 } },
    true,
  ],
  ['disk', { backend: 'disk', lfru: { tickTokens: 100000 } }, false],
] as const)('prefetch off on the %s tier', (_name, base, ordered) => {
  it('makes the same transfers as no prefetch at all, and observe makes them too; enforce adds its own reads', async () => {
    const none = await transfers({ ...base }, ordered);
    const off = await transfers({ ...base, prefetch: { mode: 'off' } }, ordered);
    const observe = await transfers({ ...base, prefetch: { mode: 'observe' } }, ordered);
    const enforce = await transfers({ ...base, prefetch: { mode: 'enforce' } }, ordered);
    for (const r of [none, off, observe, enforce]) expect(r.tokens).toEqual(reference);
    expect(none.sequence.length).toBeGreaterThan(0);
    expectSameTransfers(off.sequence, none.sequence, ordered);
    expectSameTransfers(observe.sequence, none.sequence, ordered);
    expect(none.sequence.some((s) => s.startsWith('prefetch'))).toBe(false);
    expect(enforce.sequence.some((s) => s.startsWith('prefetch'))).toBe(true);
  });
});
