import { describe, expect, it } from 'vitest';
import { boundaryGaps, lostCompute, median, traceSpans, uploadOverlap } from '../../../otel/trace-overlap.js';

const layer = (l: number, phase: string, token: number, ts: number, dur: number) => ({
  ph: 'X',
  name: 'moetier.layer.compute',
  ts,
  dur,
  args: { 'moetier.layer': l, 'moetier.phase': phase, 'moetier.token.index': token },
});
const upload = (l: number, ts: number, dur: number) => ({
  ph: 'X',
  name: 'moetier.upload',
  ts,
  dur,
  args: { 'moetier.layer': l },
});

// Two decode steps of three layers (each 100 us, 1 us apart); in step 2 a swap of layer 0 copies
// from 150 to 190 us after it (beside layer 1, which takes 130 us then), and the gap after layer 0 is 9 us.
const trace = {
  traceEvents: [
    layer(0, 'decode', 1, 0, 100),
    layer(1, 'decode', 1, 101, 100),
    layer(2, 'decode', 1, 202, 100),
    layer(0, 'decode', 2, 1000, 100),
    layer(1, 'decode', 2, 1109, 130),
    layer(2, 'decode', 2, 1240, 100),
    upload(0, 1150, 40),
    { ph: 'M', name: 'thread_name', args: {} },
  ],
};

describe('trace overlap analysis', () => {
  const spans = traceSpans(trace);
  it('reads the layer and upload spans', () => {
    expect(spans.layers.map((s) => s.layer)).toEqual([0, 1, 2, 0, 1, 2]);
    expect(spans.uploads).toEqual([{ layer: 0, startUs: 1150, endUs: 1190 }]);
  });
  it('splits boundary gaps at the boundary the swap followed', () => {
    expect(boundaryGaps(spans)).toEqual({ plain: [1, 1, 1], swap: [9] });
  });
  it('counts uploads beside layer L + 1 and the compute they cost', () => {
    expect(uploadOverlap(spans)).toEqual({ uploads: 1, overlapNextLayer: 1, overlapCompute: 1 });
    const lost = lostCompute(spans);
    expect(lost.overlappedSpans).toBe(1);
    expect(lost.lostUs).toBe(30);
    expect(lost.decodeSteps).toBe(2);
    expect(lost.decodeLostMsPerToken).toBeCloseTo(0.015, 6);
  });
  it('medians', () => {
    expect(median([3, 1, 2])).toBe(2);
    expect(median([4, 1, 2, 3])).toBe(2.5);
    expect(median([])).toBeNaN();
  });
});
