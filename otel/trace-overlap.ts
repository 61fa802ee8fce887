/**
 * What a `--trace-file` (Chrome/Perfetto JSON) says about swaps on the wall clock: the gap
 * between one layer's end and the next layer's start at the boundaries where a swap was issued
 * and elsewhere, how many uploads of layer L overlapped layer L + 1's compute, and the compute
 * time lost while copies ran. Pure: the boundary-stall test and bench/overlap.mjs both read
 * traces through it.
 *
 *   swap boundary   the end of the last layer-L compute before an upload of layer L started
 *                   (the swap was issued there, or later by the issuer: its copy followed it)
 *   lost compute    for each layer span a copy overlapped: its duration less the median of
 *                   that layer's spans (same phase) that no copy overlapped
 */

export interface LayerSpan {
  layer: number;
  phase: string;
  token: number;
  startUs: number;
  endUs: number;
}

export interface UploadSpan {
  layer: number;
  startUs: number;
  endUs: number;
}

export interface TraceSpans {
  layers: LayerSpan[];
  uploads: UploadSpan[];
}

interface ChromeEvent {
  name?: string;
  ph?: string;
  ts?: number;
  dur?: number;
  args?: Record<string, unknown>;
}

/** The layer-compute and upload spans of a Chrome trace, in start order. */
export function traceSpans(trace: unknown): TraceSpans {
  const events: ChromeEvent[] = Array.isArray(trace)
    ? trace
    : ((trace as { traceEvents?: ChromeEvent[] })?.traceEvents ?? []);
  const layers: LayerSpan[] = [];
  const uploads: UploadSpan[] = [];
  for (const e of events) {
    if (e.ph !== 'X' || typeof e.ts !== 'number' || typeof e.dur !== 'number') continue;
    const layer = Number(e.args?.['moetier.layer']);
    if (!Number.isInteger(layer)) continue;
    if (e.name === 'moetier.layer.compute') {
      layers.push({
        layer,
        phase: String(e.args?.['moetier.phase']),
        token: Number(e.args?.['moetier.token.index']),
        startUs: e.ts,
        endUs: e.ts + e.dur,
      });
    } else if (e.name === 'moetier.upload') {
      uploads.push({ layer, startUs: e.ts, endUs: e.ts + e.dur });
    }
  }
  layers.sort((a, b) => a.startUs - b.startUs);
  uploads.sort((a, b) => a.startUs - b.startUs);
  return { layers, uploads };
}

export interface BoundaryGaps {
  /** Gaps (us) between layer L's end and L + 1's start where no swap of L was issued. */
  plain: number[];
  /** The same at swap boundaries (each counted once, however many swaps it issued). */
  swap: number[];
}

/** Layer-to-next-layer gaps of one step, split by whether a swap was issued at the boundary. */
export function boundaryGaps({ layers, uploads }: TraceSpans): BoundaryGaps {
  const swapEnds = new Set<LayerSpan>();
  for (const u of uploads) {
    let last: LayerSpan | undefined;
    for (const s of layers) if (s.layer === u.layer && s.endUs <= u.startUs) last = s;
    if (last) swapEnds.add(last);
  }
  const gaps: BoundaryGaps = { plain: [], swap: [] };
  for (let i = 0; i + 1 < layers.length; i++) {
    const a = layers[i],
      b = layers[i + 1];
    if (b.layer !== a.layer + 1) continue; // a step's end (the next step starts at layer 0)
    (swapEnds.has(a) ? gaps.swap : gaps.plain).push(b.startUs - a.endUs);
  }
  return gaps;
}

export interface UploadOverlap {
  uploads: number;
  /** Uploads of layer L whose copy overlapped (on the wall clock) the next compute of layer L + 1. */
  overlapNextLayer: number;
  /** Uploads whose copy overlapped any layer's compute. */
  overlapCompute: number;
}

export function uploadOverlap({ layers, uploads }: TraceSpans): UploadOverlap {
  const out: UploadOverlap = { uploads: uploads.length, overlapNextLayer: 0, overlapCompute: 0 };
  for (const u of uploads) {
    const next = layers.find((s) => s.layer === u.layer + 1 && s.endUs > u.startUs);
    if (next && next.startUs < u.endUs) out.overlapNextLayer++;
    if (layers.some((s) => s.startUs < u.endUs && s.endUs > u.startUs)) out.overlapCompute++;
  }
  return out;
}

export interface LostCompute {
  /** Layer spans a copy overlapped. */
  overlappedSpans: number;
  /** Their time beyond the median of the same layer's spans without a copy (us, summed; >= 0 each). */
  lostUs: number;
  decodeSteps: number;
  /** lostUs of decode spans / decode steps, in ms. */
  decodeLostMsPerToken: number;
}

export function lostCompute({ layers, uploads }: TraceSpans): LostCompute {
  const overlapped = (s: LayerSpan) => uploads.some((u) => u.startUs < s.endUs && u.endUs > s.startUs);
  const clean = new Map<string, number[]>();
  for (const s of layers) {
    if (overlapped(s)) continue;
    const key = `${s.phase}/${s.layer}`;
    (clean.get(key) ?? clean.set(key, []).get(key)!).push(s.endUs - s.startUs);
  }
  let lostUs = 0,
    decodeLostUs = 0,
    overlappedSpans = 0;
  for (const s of layers) {
    if (!overlapped(s)) continue;
    overlappedSpans++;
    const base = median(clean.get(`${s.phase}/${s.layer}`) ?? []);
    if (!Number.isFinite(base)) continue;
    const lost = Math.max(0, s.endUs - s.startUs - base);
    lostUs += lost;
    if (s.phase === 'decode') decodeLostUs += lost;
  }
  const decodeSteps = new Set(layers.filter((s) => s.phase === 'decode').map((s) => s.token)).size;
  return {
    overlappedSpans,
    lostUs,
    decodeSteps,
    decodeLostMsPerToken: decodeSteps > 0 ? decodeLostUs / 1000 / decodeSteps : Number.NaN,
  };
}

export function median(values: readonly number[]): number {
  if (values.length === 0) return Number.NaN;
  const s = [...values].sort((a, b) => a - b);
  const mid = s.length >> 1;
  return s.length % 2 === 1 ? s[mid] : (s[mid - 1] + s[mid]) / 2;
}
