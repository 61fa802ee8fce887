/**
 * Every span, attribute and metric name moetier emits, in one place.
 *
 * Names follow the OpenTelemetry conventions: lowercase, dot-separated namespaces,
 * snake_case words; metric units live in the instrument's metadata (UCUM: `s`, `By`,
 * `1`, `{upload}`), not in the metric name. Span attributes have no unit field, so an
 * attribute whose unit is not obvious says it in its last word (`..._ms`), as
 * `gen_ai.usage.input_tokens` does.
 *
 * This file imports only types from `@opentelemetry/api`, so library code in `src/`
 * may import it without pulling in the SDK.
 *
 * Span tree of one request (timed spans are built after each step from the backend's
 * timing events, see src/telemetry/spans.ts):
 *
 *   moetier.request
 *   ├── moetier.prefill
 *   │   └── moetier.layer.compute  (one per layer, phase=prefill)
 *   ├── moetier.decode_step        (one per generated token)
 *   │   └── moetier.layer.compute  (one per layer, phase=decode)
 *   ├── moetier.upload             (expert -> device slot; overlaps later layers' compute)
 *   ├── moetier.rebuild            (host int8 copies of evicted experts)
 *   └── moetier.calibration.update (EWMA bandwidth / fixed cost / compute time)
 */
import type { Attributes } from '@opentelemetry/api';

/** Instrumentation scope of every tracer and meter moetier creates. */
export const instrumentationScope = 'moetier';

export const SpanNames = {
  request: 'moetier.request',
  prefill: 'moetier.prefill',
  decodeStep: 'moetier.decode_step',
  layerCompute: 'moetier.layer.compute',
  upload: 'moetier.upload',
  rebuild: 'moetier.rebuild',
  calibrationUpdate: 'moetier.calibration.update',
} as const;
export type SpanName = (typeof SpanNames)[keyof typeof SpanNames];

export const AttrNames = {
  /** int: transformer layer index, 0-based. */
  layer: 'moetier.layer',
  /** int: expert index within its layer, 0-based. */
  expert: 'moetier.expert',
  /** string: 'prefill' | 'decode'. */
  phase: 'moetier.phase',
  /** int: position of the token in the request (prompt tokens first), 0-based. */
  tokenIndex: 'moetier.token.index',
  /** int: routed (token, expert) pairs of this layer call served by a resident expert. */
  expertHits: 'moetier.expert.hits',
  /** int: routed pairs served by the host runner (the expert was not resident). */
  expertMisses: 'moetier.expert.misses',
  /** int: bytes moved by one upload. */
  uploadSize: 'moetier.upload.size',
  /** bool: the newcomer overwrote the victim's slot (true) or went free-then-upload (false). */
  uploadInPlace: 'moetier.upload.in_place',
  /** int: experts whose host int8 copy one rebuild made. */
  rebuildExpertCount: 'moetier.rebuild.expert_count',
  /** int: bytes of host copies one rebuild wrote. */
  rebuildSize: 'moetier.rebuild.size',
  /** double: EWMA upload bandwidth, bytes per second. */
  calibrationBandwidth: 'moetier.calibration.upload_bandwidth_bytes_per_s',
  /** double: EWMA fixed cost of one transfer, milliseconds. */
  calibrationFixedCost: 'moetier.calibration.upload_fixed_cost_ms',
  /** double[]: EWMA compute time per layer, milliseconds, indexed by layer. */
  calibrationLayerCompute: 'moetier.calibration.layer_compute_ms',
  /** int: timing samples this update consumed. */
  calibrationSamples: 'moetier.calibration.samples',
  /** string: the device backend ('cpu', 'fake', 'cuda'). */
  backend: 'moetier.backend',
  /** int: prompt tokens of a request. */
  promptTokens: 'moetier.request.prompt_tokens',
} as const;

export type Phase = 'prefill' | 'decode';

/** The attributes of each span kind, typed so that call sites cannot misspell a key. */
export function layerComputeAttributes(a: { layer: number; phase: Phase; tokenIndex: number; hits: number; misses: number }): Attributes {
  return {
    [AttrNames.layer]: a.layer,
    [AttrNames.phase]: a.phase,
    [AttrNames.tokenIndex]: a.tokenIndex,
    [AttrNames.expertHits]: a.hits,
    [AttrNames.expertMisses]: a.misses,
  };
}

export function uploadAttributes(a: { layer: number; expert: number; bytes: number; inPlace: boolean }): Attributes {
  return {
    [AttrNames.layer]: a.layer,
    [AttrNames.expert]: a.expert,
    [AttrNames.uploadSize]: a.bytes,
    [AttrNames.uploadInPlace]: a.inPlace,
  };
}

export function rebuildAttributes(a: { layer: number; expertCount: number; bytes: number }): Attributes {
  return {
    [AttrNames.layer]: a.layer,
    [AttrNames.rebuildExpertCount]: a.expertCount,
    [AttrNames.rebuildSize]: a.bytes,
  };
}

export function calibrationAttributes(a: {
  bandwidthBytesPerS: number;
  fixedCostMs: number;
  layerComputeMs: readonly number[];
  samples: number;
}): Attributes {
  return {
    [AttrNames.calibrationBandwidth]: a.bandwidthBytesPerS,
    [AttrNames.calibrationFixedCost]: a.fixedCostMs,
    [AttrNames.calibrationLayerCompute]: [...a.layerComputeMs],
    [AttrNames.calibrationSamples]: a.samples,
  };
}

/** One metric instrument: its name, unit (UCUM) and description. */
export interface MetricSpec {
  readonly name: string;
  readonly unit: string;
  readonly description: string;
  /** Histogram bucket boundaries suited to the value's range (OTel's defaults suit milliseconds). */
  readonly buckets?: readonly number[];
}

const ratioBuckets = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95];
const perTokenSecondsBuckets = [0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2];
const ttftSecondsBuckets = [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];

/**
 * Per-request statistics as metrics; the `moetier run --json` field each one mirrors is
 * named in brackets. Durations are recorded in seconds, as OTel's semantic conventions do
 * (`gen_ai.server.time_to_first_token`), while --json prints milliseconds.
 */
export const MetricSpecs = {
  /** [decodeHitRate] */
  decodeHitRatio: {
    name: 'moetier.request.decode.hit_ratio',
    unit: '1',
    description: 'Resident hits over routed (token, expert) pairs, counted from the first decode token, per request',
    buckets: ratioBuckets,
  },
  /** [prefillHitRate] */
  prefillHitRatio: {
    name: 'moetier.request.prefill.hit_ratio',
    unit: '1',
    description: 'Resident hits over routed (token, expert) pairs during the prefill, per request',
    buckets: ratioBuckets,
  },
  /** [moeMsPerToken] */
  moeTimePerToken: {
    name: 'moetier.request.moe.time_per_output_token',
    unit: 's',
    description: 'Time spent in the MoE FFNs (resident and host runner) per generated token, per request',
    buckets: perTokenSecondsBuckets,
  },
  /** [msPerToken] */
  timePerToken: {
    name: 'moetier.request.time_per_output_token',
    unit: 's',
    description: 'Decode time per generated token, per request',
    buckets: perTokenSecondsBuckets,
  },
  /** [ttftMs] */
  timeToFirstToken: {
    name: 'moetier.request.time_to_first_token',
    unit: 's',
    description: 'From the call to generate() until the first generated token, per request',
    buckets: ttftSecondsBuckets,
  },
  /** [uploads] */
  uploads: {
    name: 'moetier.expert.uploads',
    unit: '{upload}',
    description: 'Experts uploaded into device slots',
  },
  /** [uploadBytes] */
  uploadIo: {
    name: 'moetier.expert.upload.io',
    unit: 'By',
    description: 'Bytes uploaded into device slots',
  },
} as const satisfies Record<string, MetricSpec>;
