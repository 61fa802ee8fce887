/**
 * The prefetch ledger's invariants over seeded random traces and limits (issue 13 item 4):
 * random admits, issues, completions, failures (while issued), cancels and drops (while queued), new
 * generations, routes and evictions (in flight or landed), checked after every operation and
 * after a drain. A small shadow of the tasks the test drove predicts the counters each end moves.
 */
import { describe, expect, it } from 'vitest';
import { mulberry32, randomInt, type Rng } from '../../../src/core/prng.js';
import { PrefetchLedger, TALLY_NAMES, type Tallies } from '../../../src/tiers/prefetch-ledger.js';

function holds(ok: boolean, what: string): void {
  if (!ok) throw new Error(`invariant broken: ${what}`);
}

function eq(got: number, want: number, what: string): void {
  if (got !== want) throw new Error(`invariant broken: ${what}: got ${got}, expected ${want}`);
}

interface Shadow {
  id: number;
  key: number;
  bytes: number;
  generation: number;
  state: 'queued' | 'issued' | 'done';
  awaitedMs?: number;
  evicted: boolean;
}

/** One random ledger's run; returns its final tallies so the suite can check every path was taken. */
function runOne(rng: Rng): Tallies {
  const layers = randomInt(rng, 1, 3);
  const experts = randomInt(rng, 1, 5);
  const limits = { queueLengthMax: randomInt(rng, 1, 6), inflightBytesMax: randomInt(rng, 1, 40) };
  const l = new PrefetchLedger(layers, experts, limits);
  const tasks: Shadow[] = [];
  let now = 0;
  const expected = {
    covered: 0,
    late: 0,
    lateMs: 0,
    wasted: 0,
    cancelled: 0,
    dropped: 0,
    failedUncovered: 0,
    refused: 0,
  };
  const pick = <T>(xs: T[]): T | undefined => (xs.length === 0 ? undefined : xs[randomInt(rng, 0, xs.length - 1)]);
  const inState = (s: Shadow['state']) => tasks.filter((t) => t.state === s);
  const split = (key: number): [number, number] => [Math.floor(key / experts), key % experts];

  /** Landed, not yet routed or evicted: the shadow's view of what a route would find covered. */
  const landed = new Map<number, Shadow>();
  const complete = (t: Shadow) => {
    l.complete(t.id, now);
    t.state = 'done';
    if (t.evicted) expected.wasted++;
    else if (t.awaitedMs !== undefined) (expected.late++, (expected.lateMs += now - t.awaitedMs));
    else landed.set(t.key, t);
  };
  const fail = (t: Shadow) => {
    l.fail(t.id, now);
    t.state = 'done';
    if (t.awaitedMs !== undefined && !t.evicted) expected.failedUncovered++;
  };
  const ops: Record<string, () => void> = {
    admit: () => {
      const key = randomInt(rng, 0, layers * experts - 1);
      const bytes = randomInt(rng, 1, 12);
      const [before, queued] = [l.outstandingBytes, l.queueLength];
      const wasLive = l.liveTask(...split(key)) !== undefined;
      const id = l.admit(...split(key), bytes, now);
      if (id === undefined) {
        expected.refused++;
        // A refusal only where a rule says so: a duplicate, a full queue or no byte room.
        holds(
          wasLive || queued >= limits.queueLengthMax || before + bytes > limits.inflightBytesMax,
          'a refusal has a reason',
        );
      } else {
        holds(!wasLive, 'no second task for a live key');
        tasks.push({ id, key, bytes, generation: l.generation, state: 'queued', evicted: false });
      }
    },
    issue: () => {
      const t = pick(inState('queued'));
      if (t) (l.issue(t.id, now), (t.state = 'issued'));
    },
    complete: () => {
      const t = pick(inState('issued'));
      if (t) complete(t);
    },
    fail: () => {
      const t = pick(inState('issued'));
      if (t) fail(t);
    },
    cancel: () => {
      const t = pick(inState('queued'));
      if (t) (l.cancel(t.id, now), (t.state = 'done'), expected.cancelled++);
    },
    drop: () => {
      const t = pick(inState('queued'));
      if (t) (l.drop(t.id, now), (t.state = 'done'), expected.dropped++);
    },
    step: () => {
      const g = l.generation + randomInt(rng, 0, 1);
      const stale = inState('queued').filter((t) => t.generation < g);
      eq(l.beginStep(g, now), stale.length, 'beginStep cancels the older queued');
      for (const t of stale) t.state = 'done';
      expected.cancelled += stale.length;
    },
    route: () => {
      const key = randomInt(rng, 0, layers * experts - 1);
      const queued = inState('queued').find((t) => t.key === key);
      const flying = inState('issued').find((t) => t.key === key && !t.evicted);
      const outcome = l.route(...split(key), 7, now, rng() < 0.5);
      if (queued) (expected.cancelled++, (queued.state = 'done'));
      if (landed.has(key)) {
        holds(outcome === 'covered', 'a landed prefetch routed is covered');
        expected.covered++;
        landed.delete(key);
      } else if (flying) {
        holds(outcome === 'awaiting', 'a read in flight routed is awaited');
        flying.awaitedMs ??= now;
      } else holds(outcome === 'resident' || outcome === 'uncovered', 'no prefetch: resident or uncovered');
    },
    evict: () => {
      const key = randomInt(rng, 0, layers * experts - 1);
      l.evict(...split(key), now);
      if (landed.delete(key)) expected.wasted++;
      const flying = inState('issued').find((t) => t.key === key && !t.evicted);
      if (flying) flying.evicted = true;
    },
  };
  const names = Object.keys(ops);
  const check = () => {
    const t = l.tallies();
    const sum = (xs: Shadow[]) => xs.reduce((s, x) => s + x.bytes, 0);
    const [queued, issued] = [inState('queued'), inState('issued')];
    eq(l.outstandingBytes, sum(queued) + sum(issued), 'outstanding = queued + issued bytes');
    eq(l.inflightBytes, sum(issued), 'in flight = issued bytes');
    holds(l.outstandingBytes <= limits.inflightBytesMax, 'outstanding within its limit');
    eq(l.queueLength, queued.length, 'queue length');
    holds(l.queueLength <= limits.queueLengthMax, 'queue within its limit');
    eq(t.admitted.count, queued.length + issued.length + t.retired.count, 'admitted = queued + issued + retired');
    eq(t.admitted.bytes, l.outstandingBytes + t.retired.bytes, 'admitted bytes = outstanding + retired');
    for (const f of ['count', 'bytes'] as const)
      eq(t.retired[f], t.completed[f] + t.failed[f] + t.cancelled[f] + t.dropped[f], `retired ${f} = ends`);
    holds(
      t.completed.count + t.failed.count <= t.issued.count && t.issued.count <= t.admitted.count,
      'completed + failed <= issued <= admitted',
    );
    for (const n of ['covered', 'late', 'uncovered', 'resident'] as const)
      holds(t[n].count <= t.routed.count, `${n} <= routed`);
    holds(t.wasted.count <= t.completed.count, 'wasted <= completed');
    eq(
      t.covered.count + t.late.count + t.wasted.count + l.landedUnrouted(),
      t.completed.count,
      'each landed task resolves once',
    );
    const awaiting = issued.filter((x) => x.awaitedMs !== undefined && !x.evicted).length;
    eq(
      t.resident.count + t.covered.count + t.late.count + t.uncovered.count + awaiting,
      t.routed.count,
      'each route resolves once',
    );
    eq(t.covered.count, expected.covered, 'covered');
    eq(t.late.count, expected.late, 'late');
    eq(t.wasted.count, expected.wasted, 'wasted');
    eq(t.cancelled.count, expected.cancelled, 'cancelled');
    eq(t.dropped.count, expected.dropped, 'dropped');
    holds(Math.abs(t.lateMs - expected.lateMs) < 1e-9, 'late wait');
    eq(t.refusedQueueFull.count + t.refusedBytesFull.count + t.refusedDuplicate.count, expected.refused, 'refusals');
    const perLayer = Array.from({ length: layers }, (_, layer) => l.layerTallies(layer));
    for (const n of TALLY_NAMES)
      eq(
        perLayer.reduce((a, x) => a + x[n].bytes, 0),
        t[n].bytes,
        `${n}: layers sum to the total`,
      );
  };

  for (let i = randomInt(rng, 10, 120); i > 0; i--) {
    if (rng() < 0.6) now += rng() < 0.2 ? 0 : rng() * 3;
    ops[names[randomInt(rng, 0, names.length - 1)]]();
    check();
  }
  // Drain: a newer generation cancels the queue; every read in flight lands or fails.
  const stale = inState('queued');
  expect(l.beginStep(l.generation + 1, now)).toBe(stale.length);
  for (const t of stale) t.state = 'done';
  expected.cancelled += stale.length;
  for (const t of inState('issued')) rng() < 0.5 ? complete(t) : fail(t);
  check();
  const t = l.tallies();
  expect([l.inflightBytes, l.outstandingBytes, l.queueLength]).toEqual([0, 0, 0]);
  expect(t.retired.bytes).toBe(tasks.reduce((s, x) => s + x.bytes, 0));
  expect(t.retired.count).toBe(tasks.length);
  expect(tasks.every((x) => l.task(x.id)!.retired)).toBe(true);
  expect(t.uncovered.count).toBeGreaterThanOrEqual(expected.failedUncovered);
  return t;
}

describe('PrefetchLedger properties over random traces and limits', () => {
  it('holds its invariants after every operation and retires every byte once (600 seeded runs)', () => {
    const rng = mulberry32(0x13);
    const seen = Object.fromEntries(TALLY_NAMES.map((n) => [n, 0]));
    for (let run = 0; run < 600; run++) {
      const t = runOne(rng);
      for (const n of TALLY_NAMES) seen[n] += t[n].count;
    }
    // Not vacuous: every end, refusal and route outcome happened somewhere.
    for (const n of TALLY_NAMES) expect(seen[n], n).toBeGreaterThan(0);
  });
});
