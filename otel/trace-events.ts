/**
 * Spans -> Chrome / Perfetto trace-event JSON (the "JSON Object Format" that
 * ui.perfetto.dev and chrome://tracing load):
 *
 *   { "traceEvents": [
 *       { "ph": "M", "name": "thread_name", "pid": 1, "tid": 2, "args": { "name": "layer compute" } },
 *       { "ph": "X", "name": "moetier.layer.compute", "cat": "layer compute", "pid": 1, "tid": 2,
 *         "ts": 12.5, "dur": 300, "args": { "moetier.layer": 3, ... } }, ... ],
 *     "displayTimeUnit": "ns", "otherData": { "epochNsAtZero": "1718000000123456789", ... } }
 *
 * `ts` and `dur` are microseconds (fractions keep the nanoseconds); `ts` counts from the
 * earliest span, whose epoch time is in otherData, so that the numbers stay exact doubles.
 * One track (tid) per kind of span. Complete events on one track must nest; where spans
 * of one kind overlap without nesting (two uploads in flight), the later one goes to a
 * second lane of that kind ("uploads #2", tid = kind + 10 * lane).
 */
import { SpanNames } from './semconv.js';

/** What the exporter keeps of a span: small, and with exact nanosecond times. */
export interface SpanRecord {
  readonly name: string;
  readonly startEpochNs: bigint;
  readonly endEpochNs: bigint;
  readonly traceId: string;
  readonly spanId: string;
  readonly parentSpanId?: string;
  readonly attributes: Readonly<Record<string, unknown>>;
}

export interface TraceEvent {
  ph: 'X' | 'M';
  name: string;
  pid: number;
  tid: number;
  ts?: number;
  dur?: number;
  cat?: string;
  args?: Record<string, unknown>;
}

export interface TraceEventFile {
  traceEvents: TraceEvent[];
  displayTimeUnit: 'ns';
  otherData: Record<string, string | number>;
}

/** The tracks, in display order; tid = index + 1 for lane 0. */
export const tracks = [
  'request',
  'layer compute',
  'device compute',
  'uploads',
  'expert reads',
  'rebuilds',
  'calibration',
  'other',
] as const;
export type Track = (typeof tracks)[number];
const lanesTidStride = 10;
const pid = 1;

export function trackOf(spanName: string): Track {
  switch (spanName) {
    case SpanNames.request:
    case SpanNames.prefill:
    case SpanNames.decodeStep:
      return 'request';
    case SpanNames.layerCompute:
      return 'layer compute';
    case SpanNames.layerDevice:
      return 'device compute';
    case SpanNames.upload:
      return 'uploads';
    case SpanNames.expertRead:
      return 'expert reads';
    case SpanNames.rebuild:
      return 'rebuilds';
    case SpanNames.calibrationUpdate:
      return 'calibration';
    default:
      return 'other';
  }
}

export function tidOf(track: Track, lane: number): number {
  return tracks.indexOf(track) + 1 + lanesTidStride * lane;
}

export function toTraceEventFile(
  spans: readonly SpanRecord[],
  processName: string,
  droppedSpans: number,
): TraceEventFile {
  const zeroNs = spans.reduce((min, s) => (s.startEpochNs < min ? s.startEpochNs : min), spans[0]?.startEpochNs ?? 0n);
  const sorted = [...spans].sort(
    (a, b) => compareBigInt(a.startEpochNs, b.startEpochNs) || compareBigInt(b.endEpochNs, a.endEpochNs),
  );
  const lanes = new Map<Track, LaneSet>();
  const complete: TraceEvent[] = [];
  for (const span of sorted) {
    const track = trackOf(span.name);
    let laneSet = lanes.get(track);
    if (!laneSet) lanes.set(track, (laneSet = new LaneSet()));
    const lane = laneSet.place(span.startEpochNs, span.endEpochNs);
    complete.push({
      ph: 'X',
      name: span.name,
      cat: track,
      pid,
      tid: tidOf(track, lane),
      ts: nsToUs(span.startEpochNs - zeroNs),
      dur: nsToUs(span.endEpochNs - span.startEpochNs),
      args: {
        ...span.attributes,
        trace_id: span.traceId,
        span_id: span.spanId,
        ...(span.parentSpanId ? { parent_span_id: span.parentSpanId } : {}),
      },
    });
  }
  return {
    traceEvents: [...metadataEvents(processName, lanes), ...complete],
    displayTimeUnit: 'ns',
    otherData: { epochNsAtZero: zeroNs.toString(), spans: spans.length, droppedSpans },
  };
}

/** Process and thread names, and a sort index so the tracks show in `tracks` order. */
function metadataEvents(processName: string, lanes: Map<Track, LaneSet>): TraceEvent[] {
  const events: TraceEvent[] = [{ ph: 'M', name: 'process_name', pid, tid: 0, args: { name: processName } }];
  for (const track of tracks) {
    const count = lanes.get(track)?.count ?? 0;
    for (let lane = 0; lane < count; lane++) {
      const tid = tidOf(track, lane);
      const name = lane === 0 ? track : `${track} #${lane + 1}`;
      events.push({ ph: 'M', name: 'thread_name', pid, tid, args: { name } });
      events.push({ ph: 'M', name: 'thread_sort_index', pid, tid, args: { sort_index: tid } });
    }
  }
  return events;
}

/**
 * Lanes of one track. Each lane is a stack of the end times of its open spans; a span
 * fits a lane if, once the spans that ended by its start are popped, it nests inside the
 * top one (or the lane is idle). Spans arrive sorted by start, longest first on ties.
 */
class LaneSet {
  private readonly open: bigint[][] = [];

  get count(): number {
    return this.open.length;
  }

  place(startNs: bigint, endNs: bigint): number {
    for (let lane = 0; lane < this.open.length; lane++) {
      const stack = this.open[lane];
      while (stack.length > 0 && stack[stack.length - 1] <= startNs) stack.pop();
      if (stack.length === 0 || stack[stack.length - 1] >= endNs) {
        stack.push(endNs);
        return lane;
      }
    }
    this.open.push([endNs]);
    return this.open.length - 1;
  }
}

function nsToUs(ns: bigint): number {
  return Number(ns) / 1000;
}

function compareBigInt(a: bigint, b: bigint): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
