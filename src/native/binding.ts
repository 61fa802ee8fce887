/**
 * The whole native binding in one place: the only file that loads the `.node`.
 * Every verb the addon exports is declared here; optional verbs are marked optional.
 */
import { constantMismatches, type NativeConstants } from './constants.js';
import { createRequire } from 'node:module';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import path from 'node:path';
import { NativeError } from '../core/errors.js';

/**
 * The string `code` of every error the addon throws or rejects with (native/addon/errors.h says
 * when each is used); the class stays Error, TypeError (a wrong type or handle) or RangeError (a
 * value out of range). A backend refusal also keeps `backendStatus` (src/native/backend.ts).
 */
export type NativeErrorCode =
  | 'MT_BAD_ARGUMENT'
  | 'MT_FREED'
  | 'MT_BUSY'
  | 'MT_IO'
  | 'MT_NO_MEMORY'
  | 'MT_NO_THREADS'
  | `MT_BACKEND_${'BUDGET' | 'BUSY' | 'NO_OVERWRITE' | 'STATE' | 'NO_MEMORY' | 'UNSUPPORTED' | 'CLOSED'}`
  /** A cuda backend has no usable device; the error keeps `deviceUnavailable` (src/native/backend.ts). */
  | 'MT_DEVICE_UNAVAILABLE'
  | 'MT_TIER_FAILED'
  | 'MT_EVAL_FAILED'
  /** A C++ exception caught at the boundary (the eval worker): a bug, not an input error. */
  | 'MT_INTERNAL';

/** Opaque handles: the addon owns the memory, JS only passes these back. */
export type MappedFileHandle = { readonly __brand: 'MappedFile' };
export type NativeModelHandle = { readonly __brand: 'NativeModel' };
export type NativeContextHandle = { readonly __brand: 'NativeContext' };
export type NativePoolHandle = { readonly __brand: 'NativePool' };
export type NativeBackendHandle = { readonly __brand: 'NativeBackend' };
export type NativeTierHandle = { readonly __brand: 'Tier' };
export type NativeIoHandle = { readonly __brand: 'NativeIo' };

export interface NativeTensorDesc {
  name: string;
  typeId: number;
  dims: number[];
  /** Absolute byte offset in the mapped file. */
  offset: number;
}

export interface NativeModelDesc {
  hparams: import('../model/types.js').HParams;
  tensors: NativeTensorDesc[];
  /**
   * Read the dense tensors (all but the routed experts) from the file into the model's own memory
   * instead of computing them from the mapping, whose pages of them are then never touched.
   */
  ownDense?: boolean;
  /** RoPE's rotation (src/model/rope.ts ropeTable); required when hparams carry ropeDims or ropeScaling. */
  rope?: import('../model/rope.js').RopeTable;
}

export interface NativeEvalOptions {
  /** Write logits for every row (nTokens * nVocab) instead of only the last row. */
  allLogits?: boolean;
  /** If given, receives the routed expert ids: [nTokens][nLayer][nExpertUsed], router rank order. */
  routes?: Int32Array;
  /** With a tier attached: per layer [startNs, endNs, moeStartNs, moeEndNs, hits, misses, deviceStartNs, deviceEndNs] of the step just run (nLayer * LAYER_STAT_FIELDS). */
  layerStats?: Float64Array;
  /**
   * A one-token eval only: [nLayer * predictK] expert ids, each layer's router applied to the residual stream entering
   * that layer (the state the previous layer left), its top predictK by score: the early guess a prefetch can read by.
   * The routing itself is unchanged.
   */
  predicted?: Int32Array;
  predictK?: number;
  /** 0 (default) or 1: predicted[l] made from the stream entering layer l - 1 (a full layer ahead; layer 0 from its own). */
  predictAhead?: number;
  /**
   * [nTokens][nLayer][nExpertUsed] expert ids each row runs instead of the router's top-k (a simulation driven by a
   * recorded trace: EngineOptions.routesFrom). nExpertUsed distinct ids in [0, nExpert) per row and layer (else the eval
   * fails before anything runs); weighted by the router's probabilities (softmax, or sigmoid) renormalised over them and scaled as the model's routing is; `routes` receives them.
   */
  forcedRoutes?: Int32Array;
  /**
   * evalAsync with a tier only: called on the JS thread after each layer's routing (per chunk of rows)
   * with that layer's rows per expert [nExpert], while later layers compute. Posted without blocking
   * (a bounded queue; drops counted in tierStats.layerHookDropped); every posted call runs before the
   * eval's promise settles, and a throw rejects it.
   */
  onLayerRouted?: (layer: number, counts: Int32Array) => void;
  /**
   * Continuous batching (a context of nSeq sequences): row i belongs to sequence seqIds[i] and sits at
   * positions[i] of it; it attends to its own sequence's positions up to its own only. Both or neither,
   * one entry per token; a sequence's rows at increasing positions; pos must be 0 with them.
   */
  seqIds?: Int32Array;
  positions?: Int32Array;
  /** The rows whose logits are written, increasing ([rows][nVocab] in `logits`); default the last (or all with allLogits). */
  logitRows?: Int32Array;
}

/** Elementwise ops exactly as the native forward pass runs them; all in place or into `out`. */
export interface NativeForwardOps {
  /** out = x / sqrt(mean(x^2) + eps) * w */
  rmsNorm(x: Float32Array, w: Float32Array, eps: number, out: Float32Array): void;
  /** Rotates nHeads heads of v at position pos; neox pairs (i, i + hd/2), else (2i, 2i + 1). */
  rope(v: Float32Array, nHeads: number, headDim: number, pos: number, base: number, neox: boolean): void;
  softmax(x: Float32Array): void;
  /** g = silu(g) * u */
  swiglu(g: Float32Array, u: Float32Array): void;
  /** g = gpt-oss's swiglu_oai: min(g, 7) sigmoid(1.702 min(g, 7)) (clamp(u, -7, 7) + 1) */
  swigluOai(g: Float32Array, u: Float32Array): void;
  /** The k largest of p, descending; ties to the lower index. */
  topK(p: Float32Array, k: number): Int32Array;
  /** One query row over all nKv cached positions (GQA: head h reads KV head h / (nHead / nHeadKv)); keys/values [nKv, nHeadKv * headDim]. */
  attention(
    q: Float32Array,
    keys: Float32Array,
    values: Float32Array,
    nHead: number,
    nHeadKv: number,
    headDim: number,
    nKv: number,
    out: Float32Array,
  ): void;
}

/** A backend's configuration (native/include/mt_backend.h); fake-only fields are ignored by cpu. */
export interface NativeBackendConfig {
  budgetBytes: number;
  bandwidthBytesPerS?: number;
  transferFixedUs?: number;
  computeBytesPerS?: number;
  /** Default true; false: the fake refuses in-place overwrite. */
  overwriteSupported?: boolean;
  /** 0: never; else the upload that takes the total uploaded bytes past this fails there (once). fake and disk. */
  failTransferAfterBytes?: number;
  /** disk (required), cuda / cuda-sim (optional): the mapped model file; uploads read their pieces' ranges from it instead of the mapping. */
  file?: MappedFileHandle;
  /** cuda-sim (tests): the simulated device's memory (0 or absent: 1 GiB); device allocations past it fail. */
  simDeviceBytes?: number;
  /** cuda-sim (tests): the simulated runtime reports no device, as a machine without a GPU does. */
  simNoDevice?: boolean;
  /** cuda-sim (tests): the copy crossing failTransferAfterBytes is accepted and its error turns up, sticky, in the events after it (a lost device). */
  simAsyncCopyFault?: boolean;
}

/** run_expert's operands (native/include/mt_backend_cuda.h): host x [count, nEmbd] in, y [count, nEmbd] out; the slot is gate | up | down. */
export interface NativeExpertArgs {
  x: Float32Array;
  y: Float32Array;
  count: number;
  gateType: number;
  upType: number;
  downType: number;
  gateBytes: number;
  upBytes: number;
  downBytes: number;
  nEmbd: number;
  nFf: number;
}

/** The cuda kinds' staging ring (MT_BACKEND_CUDA_STAGING_*) and run_expert's row limit. */
export interface NativeCudaLimits {
  stagingBuffers: number;
  stagingBufferBytes: number;
  expertRowsMax: number;
  /** Runs one runExperts call takes at most (MT_BACKEND_CUDA_RUNS_MAX). */
  runsMax: number;
}

/** A timing event: ns on CLOCK_MONOTONIC (process.hrtime.bigint()), or the fake's virtual clock. */
export interface NativeBackendEvent {
  state: 'pending' | 'done' | 'failed';
  kind: 'upload' | 'compute';
  startNs: bigint;
  /** 0n while an upload is pending on the cpu backend. */
  endNs: bigint;
  label: number;
  /** -1 for compute markers. */
  slot: number;
  bytes: number;
}

export interface NativeBackendStats {
  slots: number;
  slotBytes: number;
  slotStrideBytes: number;
  reservedBytes: number;
  budgetBytes: number;
  leases: number;
  uploadsInFlight: number;
  uploadsDone: number;
  uploadsFailed: number;
  bytesUploaded: number;
  /** Empty slots whose memory was given back (discardSlot; a tier shrink's spare slots). */
  discards: number;
  overwriteSupported: boolean;
  hostVisible: boolean;
  /** Upload sources the addon still references (released once their upload finished). */
  sourcesHeld: number;
  /** The disk backend only: how its uploads read the model file (native/include/mt_backend_disk.h). */
  disk?: NativeDiskBackendStats;
}

/**
 * A disk backend's read engine (native/include/mt_io.h): each upload piece is one read, issued with the upload. The
 * disk tier reads on the same engine, on a lane of its own: the counts below are the backend's lane's (engine,
 * direct, queueDepth and alignmentBytes are the engine's).
 */
export interface NativeDiskBackendStats {
  /** The read engine in use: io_uring, or pread threads where io_uring is unavailable. */
  engine: 'uring' | 'threads';
  /** true: O_DIRECT (nothing stays in the page cache); false: buffered, where the filesystem refused O_DIRECT (tmpfs), each read's pages dropped after. */
  direct: boolean;
  /** Reads in flight at the disk at most (ioLimits.queueDepthDefault). */
  queueDepth: number;
  /** The most reads in flight at once so far, from the reads' own start and end times. */
  readsInFlightPeak: number;
  /** Now: reads at the disk, and reads queued in the engine behind them. */
  readsInFlight: number;
  readsQueued: number;
  /** Now: uploads whose reads wait in the backend (more reads outstanding than the engine's queue may hold). */
  uploadsWaiting: number;
  readsIssued: number;
  readsFailed: number;
  /** Bytes that landed in slots, over every read. */
  bytesRead: number;
  /** Direct reads through an aligned bounce buffer (GGUF pieces are 32-byte aligned; the bytes are copied once more). */
  readsBounced: number;
  /** What direct reads align to (1 when buffered). */
  alignmentBytes: number;
}

/** The backend verbs (native/addon/backend.cc); src/native/backend.ts is their typed wrapper. */
export interface NativeBackendVerbs {
  backendPreset(name: 'consumer-8gb'): Required<NativeBackendConfig>;
  createBackend(kind: 'cpu' | 'fake' | 'disk' | 'cuda' | 'cuda-sim', config: NativeBackendConfig): NativeBackendHandle;
  /** Adds n slots; returns the first new slot id. */
  slotsReserve(b: NativeBackendHandle, n: number, slotBytes: number): number;
  /** Starts an asynchronous copy of the sources, back to back, into the slot; returns the event id. */
  upload(
    b: NativeBackendHandle,
    slot: number,
    sources: ArrayBufferView[],
    overwrite: boolean,
    label: number,
    /** Held with the sources until the copy ends: what owns their memory (a MappedFileHandle). */
    keepAlive?: object,
  ): number;
  overwriteSupported(b: NativeBackendHandle): boolean;
  freeSlot(b: NativeBackendHandle, slot: number): void;
  /** Gives an empty slot's memory back (cpu / fake: its whole pages); the slot stays reserved. */
  discardSlot(b: NativeBackendHandle, slot: number): void;
  slotState(b: NativeBackendHandle, slot: number): 'empty' | 'uploading' | 'valid' | 'invalid';
  eventQuery(b: NativeBackendHandle, event: number): NativeBackendEvent;
  eventWait(b: NativeBackendHandle, event: number): Promise<NativeBackendEvent>;
  computeRecord(b: NativeBackendHandle, label: number, workBytes: number): number;
  lease(b: NativeBackendHandle, slot: number): number;
  release(b: NativeBackendHandle, lease: number): void;
  leaseCount(b: NativeBackendHandle, slot?: number): number;
  backendStats(b: NativeBackendHandle): NativeBackendStats;
  /** Copies a slot's bytes into out (tests); returns the bytes copied. */
  slotRead(b: NativeBackendHandle, slot: number, out: Uint8Array): number;
  destroyBackend(b: NativeBackendHandle): void;
  /** Test only (disk; refused with 'unsupported' elsewhere): while held its read engine starts no read of its uploads (the tier's lane goes on), so uploads issued meanwhile are all in flight together. */
  diskHold(b: NativeBackendHandle, hold: boolean): void;
  /** cuda / cuda-sim: y = Down (silu(Gate x) * (Up x)) from a valid, leased slot, on the device; refused ('unsupported') by the host kinds. */
  runExpert(b: NativeBackendHandle, slot: number, args: NativeExpertArgs): void;
  runExperts(
    b: NativeBackendHandle,
    runs: ReadonlyArray<{ slot: number; args: NativeExpertArgs }>,
  ): { startNs: number; endNs: number };
  /** Test only (cuda / cuda-sim): copies a slot's bytes back from the device; returns the bytes copied. */
  cudaSlotRead(b: NativeBackendHandle, slot: number, out: Uint8Array): number;
  cudaLimits(): NativeCudaLimits;
}

/** One finished (or failed) swap upload, reported once by tierPoll. Times: CLOCK_MONOTONIC ns (virtual on the fake). */
export interface NativeTierUpload {
  taskId: number;
  layer: number;
  expert: number;
  victim: number;
  ok: boolean;
  inPlace: boolean;
  fellBack: boolean;
  /** Issued at bind for a routed miss that waited on it (admit before run, the disk tier). */
  admitted: boolean;
  /** Issued by a prediction, a layer ahead (prefetch enforce, the disk tier). */
  prefetch: boolean;
  bytes: number;
  issuedNs: number;
  startNs: number;
  endNs: number;
}

/** A streamed miss's read into scratch for its call (the disk tier): issued at bind, start: its first range reached the disk, end: its last landed. */
export interface NativeTierRead {
  layer: number;
  expert: number;
  bytes: number;
  issuedNs: number;
  startNs: number;
  endNs: number;
}

export interface NativeTierStats {
  hits: number;
  misses: number;
  lazyMisses: number;
  leases: number;
  slotsUsed: number[];
  slotsBudget: number[];
  /** onLayerRouted posts (calls, total ns the eval thread spent posting, dropped); native tier only. */
  layerHookCalls?: number;
  layerHookNs?: number;
  layerHookDropped?: number;
  /** Swaps requested with issueNow that the caller issued at once (their layer was not computing). */
  swapsStartedNow?: number;
  /** Slots reserved on the backend that no layer uses now (a tierResize shrink left them empty). */
  slotsSpare?: number;
  /** Swaps the tier's issuer thread issued after their layer's boundary (cpu backend; 0 on the fake, which issues inline). */
  swapsIssuedByIssuer?: number;
  /** Boundary posts the issuer reached only after their eval's poll or the next eval's start: nothing issued then (the layer's next boundary issues). */
  issuerStalePosts?: number;
  /** Layer boundaries the eval thread handed to the issuer (swaps queued or uploads in flight there). */
  boundariesPosted?: number;
  /** Misses read from the model file into scratch for their call (streamFile), their bytes, and reads before a run that failed. */
  streamedReads?: number;
  streamedBytes?: number;
  streamFailures?: number;
  /** Misses read into a slot before their layer ran them (admit before run; their bytes are uploads). */
  admittedReads?: number;
  /** Bytes the tier's own reads (streamed misses, whole-layer reads: its lane of the read engine, never the backend's uploads) read since the tier was made: never reset. */
  streamEngineBytes?: number;
  /** From the stats mark: ns the forward pass waited for misses' reads with nothing else of the layer left to run (the disk tier's stall). */
  stallNs?: number;
  /** From the stats mark: routed misses read by their own call (admitted or streamed), and the distinct experts among them (a prefill's reads per distinct expert: expertReads / distinctExpertsRead, 1.0 at best). */
  expertReads?: number;
  distinctExpertsRead?: number;
  /** Layers read whole for a prefill's whole-layer path since the tier was made. */
  bulkLayers?: number;
  /** From the stats mark, per layer: calls whose misses were read on demand, and calls whose misses came from a whole-layer read. */
  pathCalls?: { onDemand: number[]; wholeLayer: number[] };
  /** Prefetch (mt_tier.h): the routes' outcomes by expert from the stats mark, in all and by layer, and the queue's ledger since the tier was made. */
  prefetch?: NativePrefetchStats;
  /** The one gate (native tier only). */
  gate?: NativeGateStats;
}

/**
 * Prefetch counters (include/mt_tier.h, mt_tier_stats). From the stats mark, by expert: of the routed
 * experts a prediction read, covered (landed by their bind) and late (not landed: lateNs waited, on
 * the disk tier); wasted (read, evicted before any routing); uncovered (routed, needed bytes moved, no
 * prefetch of it); observe's wouldIssue / wouldCover; byLayer the first four per layer. Since the tier
 * was made (never reset), the queue's ledger: queued (bytes admitted), refused (queue full), and each
 * queued task's one end: issued (then completed or failed), cancelled (a newer eval or its layer began
 * first), dropped (no slot, or the backend refused); retiredBytes at those ends; inflightBytes now.
 */
export interface NativePrefetchStats {
  covered: number;
  late: number;
  lateNs: number;
  wasted: number;
  uncovered: number;
  wouldIssue: number;
  wouldCover: number;
  queued: number;
  refused: number;
  issued: number;
  completed: number;
  failed: number;
  cancelled: number;
  dropped: number;
  admittedBytes: number;
  retiredBytes: number;
  inflightBytes: number;
  queueLength: number;
  byLayer: { covered: number[]; late: number[]; wasted: number[]; uncovered: number[] };
}

/** An expert's state in the tier (include/mt_tier.h, enum mt_expert_state). */
export const ExpertState = { none: 0, incoming: 1, resident: 2, outgoing: 3 } as const;

/** The tier's expert states, one snapshot: [nLayer * nExpert] each. */
export interface NativeTierExpertStates {
  /** ExpertState values. */
  states: Uint8Array;
  /** The slot a compute reads the expert from, or -1. */
  slots: Int32Array;
}

/** The expert tier (resident experts from backend slots, misses from host copies); see src/engine/tier/. */
export type TierPolicyMode = 'off' | 'evict' | 'keep';

/**
 * Decayed LFU (include/mt_policy.h) over one layer's rows the caller owns: the code the tier runs at
 * need, for `moetier replay --policy dlfu` (src/tiers/policies/dlfu.ts).
 */
export interface NativePolicyVerbs {
  /** adds[e] > 0: count[e] decayed from stamp[e] to now, plus adds[e]; stamp[e] = now. */
  dlfuAdd(count: Float64Array, stamp: Float64Array, adds: Float64Array, now: number, halfLife: number): void;
  /** Among eligible[e] != 0, the lowest score (ties the lowest id); -1 when none. */
  dlfuVictim(count: Float64Array, stamp: Float64Array, eligible: Uint8Array, halfLife: number): number;
  /** log2(count[e]) + stamp[e] / halfLife; -Infinity when never routed. */
  dlfuScore(count: Float64Array, stamp: Float64Array, expert: number, halfLife: number): number;
  /**
   * A prefetch queue and its exact-route ledger in a handle (include/mt_prefetch_ledger.h: the state
   * machine the tier's prefetch runs), for `moetier replay --prefetch` (src/tiers/prefetch-ledger.ts).
   */
  prefetchLedgerCreate(
    layers: number,
    experts: number,
    queueLengthMax: number,
    inflightBytesMax: number,
  ): { readonly prefetchLedger: unknown };
  /**
   * One event at atMs. admit(layer, expert, bytes): the task's id, or its refusal; begin(generation): the
   * queued tasks it cancelled; issue, complete, fail, cancel, drop(id): '', or 'wrong-state' (nothing
   * changed); route(layer, expert, bytes, resident 0 | 1) and evict(layer, expert): the outcome.
   */
  prefetchLedgerEvent(
    ledger: { readonly prefetchLedger: unknown },
    event: string,
    atMs: number,
    ...args: number[]
  ): number | string;
  /**
   * tallies(layer, -1: all): [count, bytes] per tally (mt_prefetch_ledger.h order), then lateMs; task(id):
   * [layer, expert, bytes, generation, admittedMs, state, flags], empty when none; queue(): the queued ids,
   * oldest first; live(layer, expert): [id] or empty; state(): [generation, queueLength, inflightBytes,
   * outstandingBytes, landedUnrouted].
   */
  prefetchLedgerRead(
    ledger: { readonly prefetchLedger: unknown },
    what: 'tallies' | 'task' | 'queue' | 'live' | 'state',
    ...args: number[]
  ): Float64Array;
}

/** One class's ledger at the gate (mt_tier.h mt_tier_gate_class), since the tier's creation. */
export interface NativeGateLedger {
  issued: number;
  completed: number;
  failed: number;
  refused: number;
  cancelled: number;
}

/** The one gate every upload into a slot passes (mt_tier.h, tier_gate.cc). */
export interface NativeGateStats {
  inflightBytesMax: number;
  inflightTransfersMax: number;
  queueDepthMax: number;
  inflightBytes: number;
  inflightTransfers: number;
  /** The placement's swaps the gate holds queued (waiting for their layer's boundary or for room). */
  swapsQueued: number;
  byClass: { miss: NativeGateLedger; prefetch: NativeGateLedger; swap: NativeGateLedger; warm: NativeGateLedger };
}

export interface NativeTierVerbs {
  createTier(
    ctx: NativeContextHandle,
    backend: NativeBackendHandle,
    /**
     * streamFile: the model's mapped file; a miss with no host copy is read from it before its layer runs it (into a slot
     * when one can take it, else into scratch for its call), never computed from the mapping. streamFailAfterBytes: tests
     * only, the streamed read that takes the bytes read past it fails.
     */
    options: {
      slotsPerLayer: number[];
      hostCopies?: Uint8Array;
      hostCopyOffsets?: Int32Array;
      streamFile?: MappedFileHandle;
      streamFailAfterBytes?: number;
    },
  ): NativeTierHandle;
  /** Bytes of one expert in the container type / as a Q8_0 host copy. */
  tierExpertBytes(tier: NativeTierHandle): { container: number; hostCopy: number };
  /** Makes these experts of this layer resident (free slots), uploads and waits. */
  tierWarmstart(tier: NativeTierHandle, layer: number, experts: Int32Array): Promise<void>;
  /**
   * Queues a swap issued right after `layer` next finishes computing: 0, or a negative code. With
   * issueNow, a layer that is not being computed has its queue issued at once: 1.
   */
  tierRequestSwap(
    tier: NativeTierHandle,
    layer: number,
    victim: number,
    newcomer: number,
    taskId: number,
    options?: { issueNow?: boolean },
  ): number;
  tierPoll(tier: NativeTierHandle): {
    uploads: NativeTierUpload[];
    evicted: Array<{ layer: number; expert: number }>;
    reads: NativeTierRead[];
  };
  /**
   * Between evals: the tier's eviction policy (mt_tier.h mt_tier_set_policy: decayed LFU, decided at
   * the moment a slot is needed). off: no eviction at need; evict: an admitted miss or a prefetch
   * evicts the lowest-scored resident its call does not run; keep: also, each routed miss of a tier
   * without streamFile is kept. prior [nLayer * nExpert]: the counts at time 0 (a scaled heat file).
   */
  tierSetPolicy(tier: NativeTierHandle, mode: TierPolicyMode, halfLifeTokens: number, prior?: Float64Array): void;
  /** Between evals: one decode token passed (the policy's clock). */
  tierPolicyTick(tier: NativeTierHandle): void;
  /** Between evals: every expert's policy score [nLayer * nExpert] (higher: keep; -Infinity: never routed). */
  tierPolicyScores(tier: NativeTierHandle): Float64Array;
  /**
   * Between evals: the prefetch mode, predicted experts handed over per layer, how many each layer's
   * prediction may start reading ([nLayer]), and the cap on prefetch bytes in flight (the rest wait in
   * the tier's queue); budget and cap are not needed for off.
   */
  tierSetPrefetch(
    tier: NativeTierHandle,
    mode: 'off' | 'observe' | 'enforce',
    predictK: number,
    budget?: Int32Array,
    queueMax?: number,
  ): void;
  /** Any time: the one gate's budget (bytes and transfers in flight at once) and the most swaps it holds queued (mt_tier.h mt_tier_set_gate). */
  tierSetGate(
    tier: NativeTierHandle,
    inflightBytesMax: number,
    inflightTransfersMax: number,
    queueDepthMax: number,
  ): void;
  /** Between evals: the swaps still queued at the gate are dropped (a request ended); how many. */
  tierCancelSwaps(tier: NativeTierHandle): number;
  /** The one gate alone: its budget, in flight now, ledger by class (cheaper than tierStats). */
  tierGate(tier: NativeTierHandle): NativeGateStats;
  /** Between evals, a tier with streamFile: how the next prefill reads its misses (mt_tier.h mt_tier_prefill_path). */
  tierSetPrefillPath(tier: NativeTierHandle, path: 'on-demand' | 'whole-layer'): void;
  /** Every expert's state and slot, one consistent snapshot (the tier alone owns them); `into`: filled in place and returned. */
  tierExpertStates(tier: NativeTierHandle, into?: NativeTierExpertStates): NativeTierExpertStates;
  tierStats(tier: NativeTierHandle): NativeTierStats;
  /** The stats mark (e.g. after the prefill). */
  tierResetStats(tier: NativeTierHandle): void;
  /**
   * Between evals and warmstarts: the layer's slot count becomes `slots`. Growing takes spare slots,
   * then reserves more of the same size (the new ones are free: warmstart fills them); shrinking
   * gives up free slots, then the slots of `victims` (in order; those with a swap pending are
   * skipped), evicted and reported by tierPoll. Throws with nothing changed when it cannot.
   */
  tierResize(tier: NativeTierHandle, layer: number, slots: number, victims: Int32Array): void;
  /** Waits for in-flight uploads; releases every lease and slot. */
  freeTier(tier: NativeTierHandle): void;
  /** Writes the expert's gate|up|down as Q8_0 rows back to back at dstOffset. */
  requantizeExpertToQ8(
    model: NativeModelHandle,
    layer: number,
    expert: number,
    dst: Uint8Array,
    dstOffset: number,
  ): void;
}

/** A read engine's options (native/include/mt_io.h, mt_io_config). */
export interface NativeIoOptions {
  /** 'auto' (default): io_uring where io_uring_setup works and the kernel has IORING_OP_READ, else threads. */
  engine?: 'auto' | 'uring' | 'threads';
  /** Reads in flight at most, 1..ioLimits.queueDepthMax (default ioLimits.queueDepthDefault; threads: this many threads). */
  queueDepth?: number;
  /** Default true: O_DIRECT (the engine reopens the file with it), unaligned reads through aligned bounce buffers. */
  direct?: boolean;
  /** Direct: the largest aligned range a bounce buffer grows to; 0 / absent: ioLimits.readBytesMax. */
  bounceBytesMax?: number;
  /** Test only: the read that takes the bytes asked of the engine past this fails with EIO (once); its bytes before the limit land. */
  failAfterBytes?: number;
  /** Test only: each syscall reads at most this many bytes (aligned when direct), so longer reads take the short-read path. */
  chunkBytesMax?: number;
}

/** One read's state; times on CLOCK_MONOTONIC (process.hrtime.bigint()). */
export interface NativeIoInfo {
  state: 'pending' | 'done' | 'failed';
  /** errno when failed (EIO, ENODATA: end of file, ECANCELED), else 0; errorName its name ('' when 0). */
  error: number;
  errorName: string;
  /** '' when done; else why, naming the offset and the bytes ("short read at offset X: got N of M bytes (end of file)"). */
  reason: string;
  label: number;
  offset: number;
  bytes: number;
  /** Bytes of the wanted range that landed in dst. */
  bytesRead: number;
  issuedNs: bigint;
  /** When the read was handed to the kernel (0n while queued): startNs - issuedNs is its queue wait. */
  startNs: bigint;
  /** When it finished, after the bounce copy (0n while pending). */
  endNs: bigint;
  /** Read through an aligned bounce buffer and copied (direct, unaligned). */
  bounced: boolean;
}

export interface NativeIoStats {
  /** The engine in use. */
  engine: 'uring' | 'threads';
  queueDepth: number;
  direct: boolean;
  /** What direct syscalls align offset, length and memory to (1 when buffered), and where that figure came from. */
  alignmentBytes: number;
  alignmentSource: 'none' | 'blksszget' | 'statx' | 'default';
  readsIssued: number;
  readsDone: number;
  /** Cancelled reads are counted here too. */
  readsFailed: number;
  readsCancelled: number;
  bytesRead: number;
  readsBounced: number;
  /** Time the completion side spent copying out of bounce buffers (what the bounce costs). */
  bounceCopyNs: number;
  /** Syscalls that continued a short read. */
  resubmits: number;
  readsInFlight: number;
  readsQueued: number;
  /** Bounce buffer memory the engine holds now. */
  bounceBytes: number;
  /** The counts per lane ([normal, urgent]: mt_io.h, "Lanes"); the fields above are their sums (places and bounce buffers are shared). */
  lanes: NativeIoLaneStats[];
  /** dst arrays the addon still references (released once their read settled). */
  dstsHeld: number;
}

/** One lane's share of a read engine's counts (NativeIoStats.lanes). */
export interface NativeIoLaneStats {
  readsIssued: number;
  readsDone: number;
  readsFailed: number;
  readsCancelled: number;
  bytesRead: number;
  readsBounced: number;
  readsInFlight: number;
  readsQueued: number;
  /** Its queued reads wait (ioHold). */
  held: boolean;
}

/**
 * gen-model's writer verbs (native/addon/synth.cc): ggml's reference quantisers, byte for byte
 * what src/model/quant.ts writes for the same finite floats, on every kernel path.
 */
export interface NativeSynthVerbs {
  /** src [rows * cols] -> dst [rows * rowBytes], on the calling thread (tests). */
  quantizeRows(typeId: number, src: Float32Array, rows: number, cols: number, dst: Uint8Array): void;
  /** The same off the event loop, rows split over `threads` threads; src and dst are held (leave them alone) until it settles. */
  quantizeRowsAsync(
    typeId: number,
    src: Float32Array,
    rows: number,
    cols: number,
    dst: Uint8Array,
    threads: number,
  ): Promise<void>;
  /**
   * Rows drawn from an sfc32 stream as src/synth/prng.ts Rng.fillUniform draws them (state: its words a, b, c, d;
   * value = the step as int32 * scale) and quantised to typeId into dst, off the event loop on `threads` threads;
   * state is advanced past the rows when it resolves. The same bytes as fillUniform + quantizeRow, for any thread count.
   */
  synthUniformAsync(
    state: Int32Array,
    scale: number,
    typeId: number,
    rows: number,
    cols: number,
    dst: Uint8Array,
    threads: number,
  ): Promise<void>;
}

/**
 * The engine's verbs, every one required (an addon that lacks one is a stale build: loadNative
 * checks the constants, and the engine names no verb it does not call). The verbs only tests and
 * benches call (ISA control, single kernels, pools, the read engine's probes, page-cache checks)
 * are declared apart: src/native/diagnostics.ts, loadDiagnostics().
 */
export interface NativeBinding extends NativeBackendVerbs, NativeTierVerbs, NativeSynthVerbs, NativePolicyVerbs {
  /** The numbers TypeScript must agree on (src/native/constants.ts; checked at load). */
  constants: NativeConstants;
  version(): string;

  /**
   * Memory-map a file read-only; buffer is an external ArrayBuffer over the mapping's first
   * min(size, 4 GiB - 64 KiB) bytes (an ArrayBuffer cannot hold a 7-18 GB model on Node 20; JavaScript
   * reads the header and the identity's first MiB of weights, the native model the whole mapping).
   * size: the file's bytes. fd: the open file, kept until unmapFile (identity and size checks, the
   * rebuild workers' pinned path). access 'random': no readahead around page faults (only the
   * pages read come in). guarded: a read past the end of the file, truncated under the mapping,
   * reads zeros and counts in mappedFaults instead of ending the process with SIGBUS (false only
   * where the embedder owns SIGBUS).
   */
  mapFile(
    filePath: string,
    options?: { access?: 'normal' | 'random' },
  ): { handle: MappedFileHandle; buffer: ArrayBuffer; size: number; fd: number; guarded: boolean };
  unmapFile(handle: MappedFileHandle): void;
  /**
   * Every page of the mapping faulted in now, off the event loop (MADV_POPULATE_READ, or a read per
   * page on a kernel without it): the first requests then pay no page fault per page of weights they
   * touch first. Resolves with the bytes populated (fewer than the mapping's when memory ran short:
   * those pages come in when used), the time taken and the method; a read error rejects (code MT_IO).
   */
  populateMapping(handle: MappedFileHandle): Promise<{ bytes: number; ms: number; method: 'populate-read' | 'touch' }>;
  /** Reads past the end of the truncated file that the SIGBUS guard answered with zeros: non-zero, the mapping is no longer the file. */
  mappedFaults(handle: MappedFileHandle): number;

  /** A model over a mapped file: validates every tensor's extent against the mapping. */
  createModel(file: MappedFileHandle, desc: NativeModelDesc): NativeModelHandle;
  /**
   * ownedDense: bytes of dense tensors the model holds in its own memory (desc.ownDense), 0 otherwise.
   * hostCopyExpert: one expert's Q8_0 host copy (gate | up | down rows), 0 where the tier offers none.
   */
  modelBytes(model: NativeModelHandle): { ownedDense: number; hostCopyExpert: number };
  /** What createContext would allocate for these options, without allocating: the f32 KV cache and the rest (scratch). */
  contextBytes(
    model: NativeModelHandle,
    options: { nCtx: number; threads: number; nSeq?: number },
  ): { kvBytes: number; scratchBytes: number };
  /** A KV cache of nSeq (default 1) sequences of nCtx tokens each and a pool of `threads` compute threads. */
  createContext(
    model: NativeModelHandle,
    options: { nCtx: number; threads: number; nSeq?: number },
  ): NativeContextHandle;
  /** Run tokens at positions [pos, pos + n) off the event loop; logits for the last row (or all). */
  evalAsync(
    ctx: NativeContextHandle,
    tokens: Int32Array,
    pos: number,
    logits: Float32Array,
    options?: NativeEvalOptions,
  ): Promise<void>;
  freeContext(ctx: NativeContextHandle): void;
  freeModel(model: NativeModelHandle): void;
}

export const ISA = { scalar: 0, avx2: 1, avx512vnni: 2 } as const;

let cached: NativeBinding | undefined;

/**
 * Load the addon once; a missing build is an operating error that says how to fix it.
 *
 * MOETIER_ADDON=<path of a .node file> overrides which addon is loaded (relative to the working
 * directory). The test suite points it at the debug build (`npm run build:native:debug`:
 * native/build-debug/Release/moetier.node, whose MT_ASSERT invariants abort on a native bug);
 * a path that names no file is an error, never a silent fall back to the release build.
 */
export function loadNative(): NativeBinding {
  if (cached) return cached;
  const override = process.env.MOETIER_ADDON;
  let found: string | undefined;
  if (override !== undefined && override !== '') {
    found = path.resolve(override);
    if (!existsSync(found)) {
      throw new NativeError(
        `MOETIER_ADDON=${override}: no such addon file (for the debug build run \`npm run build:native:debug\`)`,
      );
    }
  } else {
    const here = path.dirname(fileURLToPath(import.meta.url));
    // Works from src/native (vitest) and from dist/src/native (compiled).
    const candidates = [
      path.resolve(here, '../../native/build/Release/moetier.node'),
      path.resolve(here, '../../../native/build/Release/moetier.node'),
    ];
    found = candidates.find((p) => existsSync(p));
    if (!found) {
      throw new NativeError(
        `native addon not built (looked in ${candidates.join(', ')}); run \`npm run build:native\``,
      );
    }
  }
  const require = createRequire(import.meta.url);
  const binding = require(found) as NativeBinding;
  const mismatches = constantMismatches(binding.constants);
  if (mismatches.length > 0)
    throw new NativeError(
      `${found}: the addon and TypeScript disagree (${mismatches.join('; ')}): a stale build; run \`npm run build\``,
    );
  cached = binding;
  return cached;
}
