/**
 * The clock bridge: native timing events carry CLOCK_MONOTONIC nanoseconds (the clock of
 * `process.hrtime.bigint()`); OpenTelemetry wants epoch time as HrTime [seconds, nanos].
 *
 *   epochNs = monotonicNs + epochOffsetNs          (bigint: exact, no float rounding)
 *   HrTime  = [epochNs / 1e9, epochNs % 1e9]
 *
 * The offset is sampled once, at the bridge's creation, from the clock OpenTelemetry itself
 * uses for high-resolution times (`performance.timeOrigin + performance.now()`), so a span
 * built after the fact from native timestamps lands where a span timed live would. After
 * that, the conversion is exact: durations and order are preserved to the nanosecond.
 */
import type { HrTime } from '@opentelemetry/api';
import { assert } from '../core/assert.js';

/** A CLOCK_MONOTONIC timestamp in nanoseconds. bigint is exact; a number is exact up to 2^53 ns (~104 days of uptime). */
export type MonotonicNs = bigint | number;

/** One reading of both clocks, taken together. */
export interface ClockAnchor {
  readonly monotonicNs: bigint;
  readonly epochNs: bigint;
}

const nsPerSecond = 1_000_000_000n;

/** Milliseconds (a float, as performance.* gives them) to nanoseconds, without losing the integer part to float rounding. */
export function msToNs(ms: number): bigint {
  const whole = Math.trunc(ms);
  return BigInt(whole) * 1_000_000n + BigInt(Math.round((ms - whole) * 1e6));
}

/** Bracketed readings an anchor takes; the tightest bracket wins (a preempted one is wide). */
const anchorSamples = 5;

/**
 * Reads both clocks; the monotonic reading is the midpoint of two that bracket the epoch reading.
 * Of a few tries the narrowest bracket is kept: a thread preempted between its readings (on a
 * busy machine, for milliseconds) would put the anchor off by half of its bracket.
 */
export function sampleClockAnchor(): ClockAnchor {
  let best: { anchor: ClockAnchor; widthNs: bigint } | undefined;
  for (let i = 0; i < anchorSamples; i++) {
    const before = process.hrtime.bigint();
    const nowMs = performance.now();
    const after = process.hrtime.bigint();
    const widthNs = after - before;
    if (!best || widthNs < best.widthNs)
      best = {
        anchor: { monotonicNs: before + widthNs / 2n, epochNs: msToNs(performance.timeOrigin) + msToNs(nowMs) },
        widthNs,
      };
  }
  return best!.anchor;
}

export class ClockBridge {
  /** epochNs - monotonicNs. */
  readonly epochOffsetNs: bigint;

  constructor(anchor: ClockAnchor = sampleClockAnchor()) {
    this.epochOffsetNs = anchor.epochNs - anchor.monotonicNs;
  }

  toEpochNs(monotonicNs: MonotonicNs): bigint {
    return toBigInt(monotonicNs) + this.epochOffsetNs;
  }

  toHrTime(monotonicNs: MonotonicNs): HrTime {
    const epochNs = this.toEpochNs(monotonicNs);
    assert(epochNs >= 0n, `monotonic time ${monotonicNs} ns maps before the epoch`);
    return [Number(epochNs / nsPerSecond), Number(epochNs % nsPerSecond)];
  }

  /** The inverse of toHrTime: exact for every HrTime it produced. */
  toMonotonicNs(time: HrTime): bigint {
    return BigInt(time[0]) * nsPerSecond + BigInt(time[1]) - this.epochOffsetNs;
  }

  /** Now, on the monotonic clock. */
  nowNs(): bigint {
    return process.hrtime.bigint();
  }

  /** Now, as an HrTime on this bridge's timebase (for spans timed live next to converted ones). */
  nowHrTime(): HrTime {
    return this.toHrTime(this.nowNs());
  }
}

function toBigInt(ns: MonotonicNs): bigint {
  if (typeof ns === 'bigint') return ns;
  assert(Number.isSafeInteger(ns), `monotonic time must be an integer number of ns below 2^53, got ${ns}`);
  return BigInt(ns);
}

let sharedBridge: ClockBridge | undefined;

/** The process-wide bridge, anchored at first use; every moetier span is timed on it. */
export function clockBridge(): ClockBridge {
  sharedBridge ??= new ClockBridge();
  return sharedBridge;
}
