/**
 * The prefetch ledger (issue 13 item 4): one failure or end injected at each state, and the
 * counter it must move; the limits refuse and count; bad arguments are typed errors; a second
 * retirement is an assertion.
 */
import { describe, expect, it } from 'vitest';
import { InvalidOptionError } from '../../../src/core/errors.js';
import { PrefetchLedger, type TallyName } from '../../../src/tiers/prefetch-ledger.js';

const B = 100;

function ledger(queueLengthMax = 8, inflightBytesMax = 10 * B): PrefetchLedger {
  return new PrefetchLedger(2, 8, { queueLengthMax, inflightBytesMax });
}

/** The counts of these tallies, for a compact expectation. */
function counts(l: PrefetchLedger, names: TallyName[]): Record<string, number> {
  const t = l.tallies();
  return Object.fromEntries(names.map((n) => [n, t[n].count]));
}

describe('PrefetchLedger: each state and its end', () => {
  it('queued -> issued -> completed -> routed is covered; the bytes retire once, at landing', () => {
    const l = ledger();
    const id = l.admit(1, 3, B, 0)!;
    expect([l.outstandingBytes, l.inflightBytes, l.queueLength]).toEqual([B, 0, 1]);
    l.issue(id, 1);
    expect([l.outstandingBytes, l.inflightBytes, l.queueLength]).toEqual([B, B, 0]);
    l.complete(id, 2);
    expect([l.outstandingBytes, l.inflightBytes, l.landedUnrouted()]).toEqual([0, 0, 1]);
    expect(l.route(1, 3, B, 3, true)).toBe('covered');
    expect(counts(l, ['admitted', 'issued', 'completed', 'retired', 'covered', 'late', 'uncovered', 'wasted'])).toEqual(
      {
        admitted: 1,
        issued: 1,
        completed: 1,
        retired: 1,
        covered: 1,
        late: 0,
        uncovered: 0,
        wasted: 0,
      },
    );
    expect(l.tallies().covered.bytes).toBe(B);
    expect(l.layerTallies(1).covered.count).toBe(1);
    expect(l.layerTallies(0).covered.count).toBe(0);
  });

  it('routed while in flight is late as it lands, with the wait it cost', () => {
    const l = ledger();
    const id = l.admit(0, 1, B, 0)!;
    l.issue(id, 0);
    expect(l.route(0, 1, B, 5, true)).toBe('awaiting');
    expect(l.tallies().late.count).toBe(0);
    l.complete(id, 12.5);
    const t = l.tallies();
    expect([t.late.count, t.late.bytes, t.lateMs, t.covered.count]).toEqual([1, B, 7.5, 0]);
  });

  it('fail while issued: failed moves, the bytes retire, a route waiting on it becomes uncovered', () => {
    const l = ledger();
    const a = l.admit(0, 1, B, 0)!;
    const b = l.admit(0, 2, 2 * B, 0)!;
    l.issue(a, 0);
    l.issue(b, 0);
    l.route(0, 2, 2 * B, 1, true);
    l.fail(a, 2);
    l.fail(b, 3);
    expect(counts(l, ['failed', 'retired', 'late', 'uncovered', 'completed'])).toEqual({
      failed: 2,
      retired: 2,
      late: 0,
      uncovered: 1,
      completed: 0,
    });
    expect(l.tallies().uncovered.bytes).toBe(2 * B);
    expect([l.outstandingBytes, l.inflightBytes]).toEqual([0, 0]);
    expect(l.liveTask(0, 1)).toBeUndefined();
  });

  it('cancel while queued: cancelled moves, the bytes retire, nothing was issued', () => {
    const l = ledger();
    const id = l.admit(1, 7, B, 0)!;
    l.cancel(id, 1);
    expect(counts(l, ['cancelled', 'retired', 'issued'])).toEqual({ cancelled: 1, retired: 1, issued: 0 });
    expect([l.outstandingBytes, l.queueLength]).toEqual([0, 0]);
    expect(l.task(id)!.state).toBe('cancelled');
  });

  it('drop while queued (no slot took it): dropped moves, the bytes retire, a route finds no prefetch', () => {
    const l = ledger();
    const id = l.admit(1, 6, B, 0)!;
    l.drop(id, 1);
    expect(counts(l, ['dropped', 'cancelled', 'retired', 'issued'])).toEqual({
      dropped: 1,
      cancelled: 0,
      retired: 1,
      issued: 0,
    });
    expect([l.outstandingBytes, l.queueLength]).toEqual([0, 0]);
    expect(l.route(1, 6, B, 2, false)).toBe('uncovered');
  });

  it('beginStep cancels the queued tasks of older generations only, never one in flight', () => {
    const l = ledger();
    const issued = l.admit(0, 0, B, 0)!;
    l.issue(issued, 0);
    l.admit(0, 1, B, 0);
    l.admit(1, 1, B, 0);
    expect(l.beginStep(1, 1)).toBe(2);
    const young = l.admit(1, 2, B, 1)!;
    expect(l.beginStep(1, 2)).toBe(0); // the same generation: nothing is older
    expect(l.task(young)!.state).toBe('queued');
    expect(l.task(issued)!.state).toBe('issued');
    expect(l.tallies().cancelled.count).toBe(2);
  });

  it('a route that overtakes a queued read cancels it and is uncovered (the demand read goes first)', () => {
    const l = ledger();
    const id = l.admit(0, 4, B, 0)!;
    expect(l.route(0, 4, B, 1, false)).toBe('uncovered');
    expect(l.task(id)!.state).toBe('cancelled');
    expect(counts(l, ['cancelled', 'uncovered', 'routed'])).toEqual({ cancelled: 1, uncovered: 1, routed: 1 });
  });

  it('evict after completion is wasted; evict while in flight is wasted as it lands (not on a failure)', () => {
    const l = ledger();
    const landed = l.admit(0, 1, B, 0)!;
    const flying = l.admit(0, 2, B, 0)!;
    const failing = l.admit(0, 3, B, 0)!;
    for (const id of [landed, flying, failing]) l.issue(id, 0);
    l.complete(landed, 1);
    l.evict(0, 1, 2);
    expect(l.tallies().wasted.count).toBe(1);
    l.evict(0, 2, 2);
    l.evict(0, 3, 2);
    expect(l.tallies().wasted.count).toBe(1);
    l.complete(flying, 3);
    l.fail(failing, 3);
    expect(counts(l, ['wasted', 'completed', 'failed', 'covered'])).toEqual({
      wasted: 2,
      completed: 2,
      failed: 1,
      covered: 0,
    });
    // Routed after it left: a demand read, no longer the prefetch's.
    expect(l.route(0, 2, B, 4, false)).toBe('uncovered');
  });

  it('a route waiting on a read that is then evicted is uncovered, and the read lands wasted', () => {
    const l = ledger();
    const id = l.admit(0, 5, B, 0)!;
    l.issue(id, 0);
    l.route(0, 5, B, 1, true);
    l.evict(0, 5, 2);
    l.complete(id, 3);
    expect(counts(l, ['uncovered', 'wasted', 'late'])).toEqual({ uncovered: 1, wasted: 1, late: 0 });
  });

  it('routes without a prefetch: resident, or uncovered with its bytes', () => {
    const l = ledger();
    expect(l.route(1, 0, B, 0, true)).toBe('resident');
    expect(l.route(1, 1, 3 * B, 0, false)).toBe('uncovered');
    const t = l.tallies();
    expect([t.routed.count, t.resident.count, t.uncovered.count, t.uncovered.bytes]).toEqual([2, 1, 1, 3 * B]);
  });
});

describe('PrefetchLedger: limits, errors, assertions', () => {
  it('refuses (counted, no throw) a full queue, too many outstanding bytes and a duplicate', () => {
    const l = ledger(2, 3 * B);
    const a = l.admit(0, 0, B, 0)!;
    l.admit(0, 1, B, 0);
    expect(l.admit(0, 2, B, 0)).toBeUndefined(); // queue full (2)
    l.issue(a, 0);
    expect(l.admit(0, 3, 2 * B, 0)).toBeUndefined(); // 2 B outstanding + 2 B > 3 B
    expect(l.admit(0, 1, B, 0)).toBeUndefined(); // already queued
    expect(l.admit(0, 0, B, 0)).toBeUndefined(); // already in flight
    expect(l.admit(0, 3, B, 0)).toBeDefined(); // exactly the limit
    expect(counts(l, ['refusedQueueFull', 'refusedBytesFull', 'refusedDuplicate', 'admitted'])).toEqual({
      refusedQueueFull: 1,
      refusedBytesFull: 1,
      refusedDuplicate: 2,
      admitted: 3,
    });
    expect(l.outstandingBytes).toBe(3 * B);
  });

  it('bad arguments are InvalidOptionErrors and change nothing', () => {
    const l = ledger();
    expect(() => l.admit(2, 0, B, 0)).toThrow(InvalidOptionError);
    expect(() => l.admit(0, 8, B, 0)).toThrow(InvalidOptionError);
    expect(() => l.admit(0, 0, 0, 0)).toThrow(InvalidOptionError);
    expect(() => l.admit(0, 0, 1.5, 0)).toThrow(InvalidOptionError);
    expect(() => l.admit(0, 0, B, NaN)).toThrow(InvalidOptionError);
    l.admit(0, 0, B, 5);
    expect(() => l.route(0, 0, B, 4, false)).toThrow(/time never goes back/);
    expect(() => l.beginStep(-1, 5)).toThrow(InvalidOptionError);
    expect(() => new PrefetchLedger(0, 8)).toThrow(InvalidOptionError);
    expect(() => new PrefetchLedger(1, 8, { queueLengthMax: 0, inflightBytesMax: B })).toThrow(/queueLengthMax/);
    expect(() => new PrefetchLedger(1, 8, { queueLengthMax: 1, inflightBytesMax: 0.5 })).toThrow(/inflightBytesMax/);
    expect(l.tallies().admitted.count).toBe(1);
    expect(l.outstandingBytes).toBe(B);
  });

  it('a task retires its bytes once: every second end is an assertion, and the counts stay', () => {
    const l = ledger();
    const done = l.admit(0, 0, B, 0)!;
    l.issue(done, 0);
    l.complete(done, 1);
    const gone = l.admit(0, 1, B, 1)!;
    l.cancel(gone, 1);
    expect(() => l.complete(done, 2)).toThrow(/assertion failed/);
    expect(() => l.fail(done, 2)).toThrow(/assertion failed/);
    expect(() => l.cancel(done, 2)).toThrow(/assertion failed/);
    expect(() => l.issue(gone, 2)).toThrow(/assertion failed/);
    expect(() => l.cancel(gone, 2)).toThrow(/assertion failed/);
    expect(() => l.drop(gone, 2)).toThrow(/assertion failed/);
    expect(() => l.complete(999, 2)).toThrow(/assertion failed/);
    const t = l.tallies();
    expect([t.retired.count, t.retired.bytes, l.outstandingBytes]).toEqual([2, 2 * B, 0]);
  });
});
