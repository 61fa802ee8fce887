/**
 * Numbers TypeScript and the native code must agree on. Each is defined in C (the header named)
 * and exported by the addon as `constants`; these are the TypeScript side's copies, which pure
 * modules (the replay, the calibration logic) use without loading the addon. loadNative checks
 * them against the addon's at load: a mismatch is a stale build, refused with a NativeError.
 */

/**
 * Numbers per layer in an eval's layerStats (mt_forward.h MT_LAYER_STATS_FIELDS):
 * [startNs, endNs, moeStartNs, moeEndNs, hits, misses, deviceStartNs, deviceEndNs]; the device
 * pair is the layer's residents on a CUDA device, from its events (0: none ran there).
 */
export const LAYER_STAT_FIELDS = 8;
/** A backend slot's stride is its bytes rounded up to this (mt_backend.h MT_BACKEND_SLOT_ALIGN_BYTES): the budget counts strides. */
export const SLOT_ALIGN_BYTES = 64;
/** Upload reports and evictions a tier keeps until polled (mt_tier.h MT_TIER_REPORTS_MAX). */
export const TIER_REPORTS_MAX = 4096;

/** Prefetch tasks a tier queues at once at most (mt_tier.h MT_TIER_PREFETCH_QUEUE_MAX): prefetch.queueMax's ceiling. */
export const TIER_PREFETCH_QUEUE_MAX = 64;

/** The one gate's default budget (mt_tier.h MT_TIER_GATE_*): bytes and transfers in flight at once, swaps queued at most. */
export const TIER_GATE_DEFAULTS = {
  inflightBytesMax: 512 * 1024 * 1024,
  inflightTransfersMax: 8,
  queueDepthMax: 4096,
} as const;

/** Reads a read engine keeps in flight by default (mt_io.h MT_IO_QUEUE_DEPTH_DEFAULT): each holds one bounce buffer. */
export const IO_QUEUE_DEPTH_DEFAULT = 8;

/** Rows per chunk of an eval (mt_forward.h MT_EVAL_CHUNK_ROWS): a longer prompt runs in chunks. */
export const EVAL_CHUNK_ROWS = 256;

export interface NativeConstants {
  layerStatsFields: number;
  slotAlignBytes: number;
  tierReportsMax: number;
  evalChunkRows: number;
  ioQueueDepthDefault: number;
  tierPrefetchQueueMax: number;
  tierGateBytesDefault: number;
  tierGateTransfersDefault: number;
  tierGateQueueDefault: number;
}

export const expectedNativeConstants: NativeConstants = {
  layerStatsFields: LAYER_STAT_FIELDS,
  slotAlignBytes: SLOT_ALIGN_BYTES,
  tierReportsMax: TIER_REPORTS_MAX,
  evalChunkRows: EVAL_CHUNK_ROWS,
  ioQueueDepthDefault: IO_QUEUE_DEPTH_DEFAULT,
  tierPrefetchQueueMax: TIER_PREFETCH_QUEUE_MAX,
  tierGateBytesDefault: TIER_GATE_DEFAULTS.inflightBytesMax,
  tierGateTransfersDefault: TIER_GATE_DEFAULTS.inflightTransfersMax,
  tierGateQueueDefault: TIER_GATE_DEFAULTS.queueDepthMax,
};

/** The names whose values differ between the addon and this build of TypeScript (empty: they agree). */
export function constantMismatches(native: Partial<NativeConstants> | undefined): string[] {
  return (Object.keys(expectedNativeConstants) as Array<keyof NativeConstants>)
    .filter((k) => native?.[k] !== expectedNativeConstants[k])
    .map((k) => `${k}: addon ${native?.[k]}, TypeScript ${expectedNativeConstants[k]}`);
}
