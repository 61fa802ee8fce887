import { hrTime, hrTimeToNanoseconds } from '@opentelemetry/core';
import { describe, expect, it } from 'vitest';
import { ClockBridge, clockBridge, msToNs, sampleClockAnchor } from '../../src/telemetry/clock.js';

/** A small seeded generator (mulberry32), so the round-trip cases are reproducible. */
function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = Math.imul(a ^ (a >>> 15), a | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 2 ** 32;
  };
}

describe('clock bridge (CLOCK_MONOTONIC ns -> OTel HrTime)', () => {
  it('maps the anchor to its epoch time exactly', () => {
    const bridge = new ClockBridge({ monotonicNs: 5_000_000_007n, epochNs: 1_718_000_000_123_456_789n });
    expect(bridge.toHrTime(5_000_000_007n)).toEqual([1_718_000_000, 123_456_789]);
    expect(bridge.toHrTime(5_000_000_007n + 876_543_211n)).toEqual([1_718_000_001, 0]);
    expect(bridge.toHrTime(5_000_000_006n)).toEqual([1_718_000_000, 123_456_788]);
  });

  it('round-trips every timestamp exactly, bigint or number', () => {
    const bridge = clockBridge();
    const random = rng(7);
    const now = process.hrtime.bigint();
    for (let i = 0; i < 500; i++) {
      // From boot to ~100 days of uptime, at nanosecond resolution.
      const ns = BigInt(Math.floor(random() * 2 ** 30)) * BigInt(Math.floor(random() * 2 ** 23)) + BigInt(i);
      const hr = bridge.toHrTime(ns);
      expect(hr[1]).toBeGreaterThanOrEqual(0);
      expect(hr[1]).toBeLessThan(1e9);
      expect(bridge.toMonotonicNs(hr)).toBe(ns);
      if (ns <= BigInt(Number.MAX_SAFE_INTEGER)) expect(bridge.toHrTime(Number(ns))).toEqual(hr);
    }
    expect(bridge.toMonotonicNs(bridge.toHrTime(now))).toBe(now);
  });

  it('is monotonic and keeps every duration to the nanosecond', () => {
    const bridge = clockBridge();
    const hrNs = (t: readonly [number, number]) => BigInt(t[0]) * 1_000_000_000n + BigInt(t[1]);
    let previous = process.hrtime.bigint();
    let previousHr = bridge.toHrTime(previous);
    for (const step of [1n, 999n, 1_000n, 999_999_999n, 1_000_000_000n, 1_000_000_001n, 3n]) {
      const next = previous + step;
      const nextHr = bridge.toHrTime(next);
      expect(hrNs(nextHr) - hrNs(previousHr)).toBe(step);
      previous = next;
      previousHr = nextHr;
    }
    const readings = Array.from({ length: 50 }, () => bridge.nowHrTime());
    for (let i = 1; i < readings.length; i++) expect(hrNs(readings[i]) >= hrNs(readings[i - 1])).toBe(true);
  });

  it('lands on the clock OpenTelemetry times live spans with', () => {
    const bridge = new ClockBridge(sampleClockAnchor());
    const theirsBefore = hrTimeToNanoseconds(hrTime());
    const ours = hrTimeToNanoseconds(bridge.toHrTime(process.hrtime.bigint()));
    const theirsAfter = hrTimeToNanoseconds(hrTime());
    // Same underlying clocks: ours lies between two readings of theirs (float ns: within 0.1 ms
    // of that bracket, whatever the thread's preemption between the readings).
    expect(ours).toBeGreaterThan(theirsBefore - 1e5);
    expect(ours).toBeLessThan(theirsAfter + 1e5);
    expect(Math.abs(ours / 1e6 - Date.now())).toBeLessThan(1000);
  });

  it('converts float milliseconds to nanoseconds without losing the integer part', () => {
    expect(msToNs(1.5)).toBe(1_500_000n);
    expect(msToNs(0.000001)).toBe(1n);
    expect(msToNs(1_718_000_000_123)).toBe(1_718_000_000_123_000_000n);
    const origin = performance.timeOrigin;
    // The fraction rounds to the nearest ns (a fraction of x.5 ns may go either way in float).
    expect(
      Math.abs(Number(msToNs(origin) - BigInt(Math.trunc(origin)) * 1_000_000n) - (origin % 1) * 1e6),
    ).toBeLessThanOrEqual(0.5 + 1e-6);
  });
});
