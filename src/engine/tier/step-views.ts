/**
 * The tier's steps as plain values for subscribers (engine.steps$(), the server's dashboard): per
 * layer its compute window and hits / misses, and the uploads and streamed reads that settled
 * with the step, on the monotonic clock in ms. Copied out of the layer-compute actor's ring, so a
 * subscriber may keep them; built only while someone subscribes.
 */
import { LAYER_STAT_FIELDS, type StepReport } from './port.js';

export interface StepView {
  phase: 'prefill' | 'decode';
  position: number;
  layers: Array<{ layer: number; startMs: number; endMs: number; hits: number; misses: number }>;
  /** Bytes moving into slots (uploads) or scratch (reads), each with its window. */
  transfers: Array<{
    layer: number;
    expert: number;
    bytes: number;
    startMs: number;
    endMs: number;
    kind: 'upload' | 'read';
  }>;
}

export function stepView(s: StepReport): StepView {
  const ls = s.layerStats ?? new Float64Array(0);
  const layers: StepView['layers'] = [];
  for (let l = 0; l * LAYER_STAT_FIELDS < ls.length; l++) {
    const o = l * LAYER_STAT_FIELDS;
    layers.push({ layer: l, startMs: ls[o] / 1e6, endMs: ls[o + 1] / 1e6, hits: ls[o + 4], misses: ls[o + 5] });
  }
  const transfers: StepView['transfers'] = [
    ...s.poll.uploads
      .filter((u) => u.ok)
      .map((u) => ({
        layer: u.layer,
        expert: u.expert,
        bytes: u.bytes,
        startMs: u.startNs / 1e6,
        endMs: u.endNs / 1e6,
        kind: 'upload' as const,
      })),
    ...s.poll.reads.map((r) => ({
      layer: r.layer,
      expert: r.expert,
      bytes: r.bytes,
      startMs: r.startNs / 1e6,
      endMs: r.endNs / 1e6,
      kind: 'read' as const,
    })),
  ];
  return { phase: s.phase, position: s.position, layers, transfers };
}
