import { describe, expect, it } from 'vitest';
import { InvalidOptionError } from '../../src/core/errors.js';
import { calibrate, calibrateStep, initialCalibration, stepSamples } from '../../src/actors/calibration/logic.js';
import {
  STEP_LAYER_FIELDS,
  type CalibrationMessage,
  type CalibrationSnapshot,
  type StepTimings,
} from '../../src/actors/calibration/messages.js';
import { mulberry32, randomInt, type Rng } from '../../src/core/prng.js';
import { transferWindowBytes } from '../../src/tiers/transfer-window.js';

const config = { alpha: 0.2, nLayer: 2 };
const run = (messages: CalibrationMessage[]) =>
  messages.reduce((s, m) => calibrate(s, m, config), initialCalibration(config));
const transfer = (
  bytes: number,
  issuedNs: number,
  startNs: number,
  endNs: number,
  invocation = 1,
): CalibrationMessage => ({
  kind: 'transfer',
  invocation,
  layer: 0,
  bytes,
  issuedNs,
  startNs,
  endNs,
});

describe('calibration logic', () => {
  it('seeds with the first sample, then follows the EWMA formula', () => {
    const s = run([
      { kind: 'invocation', invocation: 1 },
      transfer(1e6, 0, 100_000, 1_100_000), // 1 MB in 1 ms = 1e9 B/s, fixed 0.1 ms
      transfer(1e6, 0, 300_000, 800_000), // 2e9 B/s, fixed 0.3 ms
      { kind: 'compute', invocation: 1, layer: 1, startNs: 0, endNs: 2_000_000 },
      { kind: 'compute', invocation: 1, layer: 1, startNs: 0, endNs: 4_000_000 },
    ]);
    expect(s.bandwidthBytesPerSEwma).toBeCloseTo(0.2 * 2e9 + 0.8 * 1e9, 0);
    expect(s.transferFixedMsEwma).toBeCloseTo(0.2 * 0.3 + 0.8 * 0.1, 9);
    expect(s.computeMsEwma[1]).toBeCloseTo(0.2 * 4 + 0.8 * 2, 9);
    expect(s.computeMsEwma[0]).toBeUndefined();
    expect(s.samplesAccepted).toBe(4);
  });

  it('rejects non-positive samples and counts stale ones without using them', () => {
    const s = run([
      { kind: 'invocation', invocation: 2 },
      transfer(1e6, 0, 5, 5, 2), // zero duration
      { kind: 'compute', invocation: 2, layer: 0, startNs: 10, endNs: 5 },
      transfer(1e6, 0, 0, 1000, 1), // older invocation
      { kind: 'compute', invocation: 2, layer: 7, startNs: 0, endNs: 10 }, // unknown layer
    ]);
    expect(s.samplesRejected).toBe(2);
    expect(s.samplesStale).toBe(2);
    expect(s.samplesAccepted).toBe(0);
    expect(s.bandwidthBytesPerSEwma).toBeUndefined();
  });

  it('derives the transfer window from the estimates, clamped and net of in-flight bytes', () => {
    const s = run([
      { kind: 'invocation', invocation: 1 },
      transfer(1e6, 0, 100_000, 1_100_000), // 1e9 B/s, fixed 0.1 ms
      { kind: 'compute', invocation: 1, layer: 0, startNs: 0, endNs: 1_000_000 }, // 1 ms
    ]);
    // (0.8 * 1 ms - 0.05 ms wait - 0.1 ms fixed) * 1e9 B/s = 650 kB, minus 150 kB in flight
    expect(transferWindowBytes(s, 0, 150_000, 0.05)).toBeCloseTo(500_000, 0);
    expect(transferWindowBytes(s, 0, 10e6, 0)).toBe(0);
    expect(transferWindowBytes(s, 0, 0, 0, { safety: 0.8, windowBytesMax: 1000 })).toBe(1000);
    expect(transferWindowBytes(s, 1, 0, 0)).toBeUndefined(); // no compute sample for layer 1 yet
  });

  it('folds a whole step at once to the same snapshot as its samples one by one', () => {
    // Random steps: current, newer and older invocations, untimed and inverted layers, zero
    // durations, failed and negative-fixed-cost uploads, layers past the model's.
    const cfg = { alpha: 0.3, nLayer: 4 };
    for (let seed = 1; seed <= 200; seed++) {
      const rng = mulberry32(seed);
      let bySample: CalibrationSnapshot = initialCalibration(cfg);
      let byStep: CalibrationSnapshot = bySample;
      for (let i = 0; i < 12; i++) {
        const step = randomStep(rng, cfg.nLayer);
        const before = byStep;
        const folded = calibrateStep(byStep, step, cfg);
        for (const m of stepSamples(step)) bySample = calibrate(bySample, m, cfg);
        byStep = folded.snapshot;
        expect(byStep).toEqual(bySample);
        expect(folded.accepted).toBe(bySample.samplesAccepted - before.samplesAccepted);
        expect(before).not.toBe(byStep); // never mutated in place: a new object every step
      }
    }
  });

  it("folds each layer's device pair into deviceComputeMsEwma beside its window, and nothing where the pair is empty", () => {
    const cfg = { alpha: 0.5, nLayer: 2 };
    const ls = new Float64Array(2 * STEP_LAYER_FIELDS);
    ls.set([1_000_000, 3_000_000], 0); // layer 0: 2 ms, no device pair
    ls.set([3_000_000, 7_000_000], STEP_LAYER_FIELDS); // layer 1: 4 ms, of which 1.5 ms on the device
    ls.set([4_000_000, 5_500_000], STEP_LAYER_FIELDS + 6);
    const step: StepTimings = { kind: 'step', invocation: 1, layerStats: ls, uploads: [], traced: false };
    const { snapshot, accepted } = calibrateStep(initialCalibration(cfg), step, cfg);
    expect(snapshot.computeMsEwma).toEqual([2, 4]);
    expect(snapshot.deviceComputeMsEwma).toEqual([undefined, 1.5]);
    expect(accepted).toBe(3);
    expect(stepSamples(step).filter((m) => m.kind === 'device-compute')).toEqual([
      { kind: 'device-compute', invocation: 1, layer: 1, startNs: 4_000_000, endNs: 5_500_000 },
    ]);
  });

  it('refuses a bad configuration', () => {
    expect(() => initialCalibration({ alpha: 0, nLayer: 2 })).toThrow(InvalidOptionError);
    expect(() => initialCalibration({ alpha: 0.2, nLayer: 0 })).toThrow(InvalidOptionError);
  });
});

function randomStep(rng: Rng, nLayer: number): StepTimings {
  const layers = randomInt(rng, 0, nLayer + 1);
  const ls = layers === 0 && rng() < 0.3 ? undefined : new Float64Array(layers * STEP_LAYER_FIELDS);
  for (let at = 0; ls && at < ls.length; at += STEP_LAYER_FIELDS) {
    const start = rng() < 0.1 ? 0 : randomInt(rng, 1, 1e9);
    ls[at] = start;
    ls[at + 1] = rng() < 0.1 ? start - 5 : rng() < 0.1 ? start : start + randomInt(rng, 1, 5e6) + 0.4;
    // The device pair: absent (a host-only layer), inverted, empty, or a span inside the layer.
    if (rng() < 0.5) {
      const deviceStart = start + randomInt(rng, 0, 1e5);
      ls[at + 6] = deviceStart;
      ls[at + 7] = rng() < 0.1 ? deviceStart - 3 : rng() < 0.1 ? deviceStart : deviceStart + randomInt(rng, 1, 4e6);
    }
  }
  const uploads = Array.from({ length: randomInt(rng, 0, 3) }, () => {
    const issuedNs = randomInt(rng, 1, 1e9);
    const startNs = issuedNs + (rng() < 0.1 ? -10 : randomInt(rng, 0, 1e5));
    return {
      layer: randomInt(rng, -1, nLayer),
      bytes: rng() < 0.1 ? 0 : randomInt(rng, 1, 1e7),
      ok: rng() < 0.85,
      issuedNs,
      startNs,
      endNs: startNs + (rng() < 0.1 ? 0 : randomInt(rng, 1, 1e7)),
    };
  });
  return { kind: 'step', invocation: randomInt(rng, 1, 3), layerStats: ls, uploads, traced: false };
}
