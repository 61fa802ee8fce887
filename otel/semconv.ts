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
 * Where the OpenTelemetry GenAI conventions have a name for a figure (the model, input and
 * output tokens, time to first token, time per output token) moetier uses it (`gen_ai.*`,
 * GenAiNames); what is moetier's own is `moetier.*`.
 *
 * Span tree of one request (the request span is live; the others are built after the fact from
 * monotonic timestamps, in batches, see src/engine/request-trace.ts and src/telemetry/spans.ts):
 *
 *   moetier.request                  every request
 *   ├── moetier.prefill              every request
 *   │   └── moetier.layer.compute    with a tier: one per layer, phase=prefill
 *   ├── moetier.decode_step          every request: one per token evaluated after the first
 *   │   └── moetier.layer.compute    with a tier: one per layer, phase=decode
 *   ├── moetier.upload               with a tier: expert -> device slot; overlaps later layers' compute
 *   ├── moetier.expert_read          the disk tier: a routed miss read from the model file before its
 *   │                                layer ran it (into a slot: admitted; into scratch: streamed)
 *   ├── moetier.rebuild              with a tier over Q4_0: one expert's host int8 copy
 *   └── moetier.calibration.update   with a tier: EWMA bandwidth / fixed cost / compute time
 */
import type { Attributes } from '@opentelemetry/api';

/** Instrumentation scope of every tracer and meter moetier creates. */
export const instrumentationScope = 'moetier';

export const SpanNames = {
  request: 'moetier.request',
  prefill: 'moetier.prefill',
  decodeStep: 'moetier.decode_step',
  /** A busy period of a batching engine (parallel > 1): its tier's steps and layer spans hang under it. */
  batch: 'moetier.batch',
  layerCompute: 'moetier.layer.compute',
  /** A layer's residents on a CUDA device, from the compute stream's events: a child of its layer.compute. */
  layerDevice: 'moetier.layer.device',
  upload: 'moetier.upload',
  expertRead: 'moetier.expert_read',
  rebuild: 'moetier.rebuild',
  calibrationUpdate: 'moetier.calibration.update',
} as const;

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
  /** int: bytes of one expert read from the model file. */
  readSize: 'moetier.read.size',
  /** string: 'admitted' (into a slot, kept) | 'streamed' (into scratch, for its call only) | 'prefetch' (into a slot, a layer ahead, by a prediction). */
  readMode: 'moetier.read.mode',
  /** string (metric attribute): 'covered' | 'late' | 'uncovered' | 'wasted' (moetier.prefetch.io). */
  prefetchOutcome: 'moetier.prefetch.outcome',
  /** double: microseconds from the read's issue (at bind) to its first byte range reaching the disk. */
  readQueueWait: 'moetier.read.queue_wait_us',
  /** int: bytes of the host copy one rebuild wrote. */
  rebuildSize: 'moetier.rebuild.size',
  /** double: EWMA upload bandwidth, bytes per second. */
  calibrationBandwidth: 'moetier.calibration.upload_bandwidth_bytes_per_s',
  /** double: EWMA fixed cost of one transfer, milliseconds. */
  calibrationFixedCost: 'moetier.calibration.upload_fixed_cost_ms',
  /** double[]: EWMA compute time per layer, milliseconds, indexed by layer. */
  calibrationLayerCompute: 'moetier.calibration.layer_compute_ms',
  /** double[]: EWMA of the device's share of each layer (its residents on a CUDA device), milliseconds, by layer; only on the cuda backends. */
  calibrationDeviceCompute: 'moetier.calibration.device_compute_ms',
  /** int: timing samples this update consumed. */
  calibrationSamples: 'moetier.calibration.samples',
  /** string: the device backend of the expert tier ('cpu', 'fake', 'cuda'); absent without a tier. */
  backend: 'moetier.backend',
} as const;

/** The OpenTelemetry GenAI semantic conventions' names moetier uses (semconv 1.37+, incubating). */
export const GenAiNames = {
  /** string: always 'text_completion' (a prompt in, tokens out). */
  operationName: 'gen_ai.operation.name',
  /** string: the model (GGUF general.name, else the file's name without its folder). */
  requestModel: 'gen_ai.request.model',
  requestMaxTokens: 'gen_ai.request.max_tokens',
  requestTemperature: 'gen_ai.request.temperature',
  requestTopK: 'gen_ai.request.top_k',
  requestTopP: 'gen_ai.request.top_p',
  requestSeed: 'gen_ai.request.seed',
  /** int: prompt tokens (BOS included). */
  usageInputTokens: 'gen_ai.usage.input_tokens',
  /** int: generated tokens. */
  usageOutputTokens: 'gen_ai.usage.output_tokens',
  /** string[]: one entry: 'stop' | 'length' | 'context' | 'aborted'. */
  responseFinishReasons: 'gen_ai.response.finish_reasons',
  /** string (JSON): the prompt; only when content capture is on (OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true). */
  inputMessages: 'gen_ai.input.messages',
  /** string (JSON): the generated text; only when content capture is on. */
  outputMessages: 'gen_ai.output.messages',
  /** string: 'input' | 'output', on gen_ai.client.token.usage. */
  tokenType: 'gen_ai.token.type',
  /** string: the class of the error a request failed with (OTel's general `error.type`). */
  errorType: 'error.type',
} as const;

export const genAiOperation = 'text_completion';

/** The opt-in for prompt and generated text in span attributes, as OpenTelemetry's GenAI instrumentations name it. */
export const captureContentVariable = 'OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT';

export type Phase = 'prefill' | 'decode';

/** The attributes of each span kind, typed so that call sites cannot misspell a key. */
export function layerComputeAttributes(a: {
  layer: number;
  phase: Phase;
  tokenIndex: number;
  hits: number;
  misses: number;
}): Attributes {
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

export function expertReadAttributes(a: {
  layer: number;
  expert: number;
  bytes: number;
  mode: 'admitted' | 'streamed' | 'prefetch';
  queueWaitUs: number;
}): Attributes {
  return {
    [AttrNames.layer]: a.layer,
    [AttrNames.expert]: a.expert,
    [AttrNames.readSize]: a.bytes,
    [AttrNames.readMode]: a.mode,
    [AttrNames.readQueueWait]: a.queueWaitUs,
  };
}

export function rebuildAttributes(a: { layer: number; expert: number; bytes: number }): Attributes {
  return {
    [AttrNames.layer]: a.layer,
    [AttrNames.expert]: a.expert,
    [AttrNames.rebuildSize]: a.bytes,
  };
}

export function calibrationAttributes(a: {
  bandwidthBytesPerS: number;
  fixedCostMs: number;
  layerComputeMs: readonly number[];
  /** Absent where no layer ran on a device. */
  deviceComputeMs?: readonly number[];
  samples: number;
}): Attributes {
  return {
    [AttrNames.calibrationBandwidth]: a.bandwidthBytesPerS,
    [AttrNames.calibrationFixedCost]: a.fixedCostMs,
    [AttrNames.calibrationLayerCompute]: [...a.layerComputeMs],
    ...(a.deviceComputeMs ? { [AttrNames.calibrationDeviceCompute]: [...a.deviceComputeMs] } : {}),
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
const ttftSecondsBuckets = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];
/** The conventions' advice for gen_ai.client.token.usage. */
const tokenBuckets = [1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576];

/**
 * Per-request statistics as metrics; the `moetier run --json` field each one mirrors is
 * named in brackets. Durations are recorded in seconds, as OTel's semantic conventions do,
 * while --json prints milliseconds. The gen_ai ones are recorded for every request that ended
 * without an error, with or without a tier (their buckets are ours: a token takes milliseconds
 * here, where the conventions' advice starts at 10 ms); the moetier.* ones with a tier.
 */
export const MetricSpecs = {
  /** [ttftMs] */
  timeToFirstToken: {
    name: 'gen_ai.server.time_to_first_token',
    unit: 's',
    description: 'From the call to generate() until the first generated token, per request',
    buckets: ttftSecondsBuckets,
  },
  /** [msPerToken] */
  timePerOutputToken: {
    name: 'gen_ai.server.time_per_output_token',
    unit: 's',
    description: 'Decode time per generated token after the first, per request',
    buckets: perTokenSecondsBuckets,
  },
  /** [promptTokens, generatedTokens], told apart by gen_ai.token.type */
  tokenUsage: {
    name: 'gen_ai.client.token.usage',
    unit: '{token}',
    description: 'Input (prompt) and output (generated) tokens, per request',
    buckets: tokenBuckets,
  },
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
  /** [prefetch.coveredBytes, lateBytes, uncoveredBytes, wastedBytes], told apart by moetier.prefetch.outcome */
  prefetchIo: {
    name: 'moetier.prefetch.io',
    unit: 'By',
    description:
      'Expert bytes by prefetch outcome: covered (landed in time), late, uncovered (routed, never prefetched), wasted (prefetched, never routed)',
  },
  /** [prefetch.lateMs] */
  prefetchLateTime: {
    name: 'moetier.prefetch.late.time',
    unit: 's',
    description: 'Time runs waited for prefetches that had not landed',
  },
  /** [prefetch.coverage] */
  prefetchCoverage: {
    name: 'moetier.request.prefetch.coverage',
    unit: '1',
    description: 'Routed experts that needed bytes moved whose prefetch landed in time, over all of them, per request',
    buckets: ratioBuckets,
  },
} as const satisfies Record<string, MetricSpec>;
