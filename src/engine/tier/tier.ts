/**
 * The expert tier in the engine: builds the backend and the native tier, warmstarts it from the heat file, and runs the placement around each request.
 *
 *   open:     backend(budget = slots x slot bytes) -> tier -> warmstart (hottest per layer | ids)
 *   request:  prefill eval -> afterPrefill (stats mark) -> [decode eval -> afterDecode]* -> finish
 *   finish:   drop queued swaps, settle uploads, merge the request's routing into the heat file
 *   tune:     a new slot budget per layer waits for the next boundary (before the request's next
 *             step, or the next request): grow = more slots filled hottest first, shrink = the
 *             coldest residents evicted (their host copies rebuilt) and their slots left spare
 *             (still reserved; on the cpu and fake backends their pages go back to the OS)
 *
 * The backend's byte budget covers every expert (the most a tune may grow to; slots are reserved
 * as the tier needs them), and the host-copy arena covers all but one expert per layer (the
 * least a tune may shrink to); both are address space until used.
 */
import { firstMoeLayer, moeLayers } from '../../model/types.js';
import { ExpertReadError } from '../../core/errors.js';
import type { UploadQueueLimits } from '../../actors/upload-queue/messages.js';
import { ExpertState, type NativeBinding, type NativeContextHandle } from '../../native/binding.js';
import { Backend } from '../../native/backend.js';
import type { LfruParams } from '../../tiers/policies/lfru.js';
import { startResidency } from '../../tiers/start.js';
import { residentIds } from '../../tiers/residency.js';
import { limits } from '../../core/limits.js';
import { SLOT_ALIGN_BYTES } from '../../native/constants.js';
import { mergeIntoHeatFile, readHeatFile } from '../heat-file.js';
import type { LoadedModel } from '../../model/load.js';
import { expertContainerBytes, expertFileOffset } from './experts.js';
import { NativeTierPort } from './native-port.js';
import { checkPrefetchFits, type TierConfig } from './options.js';
import { TierPlacement } from './placement.js';
import type { PrefillReplanConfig } from './replan-options.js';
import type { PrefetchConfig } from '../prefetch-options.js';
import { prefillPathFor } from './prefill-path.js';
import { residentSets, type TierPort } from './port.js';
import { TierRequest } from './request.js';
import type { RouteLog } from './route-log.js';
import { TierTracing, type TraceParent } from './tracing.js';
import { CALIBRATION_DEFAULTS } from '../../actors/calibration/logic.js';
import { armedTierFaults } from './fault-injection.js';
import { Int8RebuildActor } from '../../actors/int8-rebuild/actor.js';
import { CalibrationActor } from '../../actors/calibration/actor.js';
import { LayerComputeActor } from '../../actors/layer-compute/actor.js';
import { Subject } from 'rxjs';
import { MoetierError } from '../../core/errors.js';
import { stepView, type StepView } from './step-views.js';
import type { ExpertKey } from '../../tiers/keys.js';

export class EngineTier {
  private constructor(
    readonly port: TierPort,
    readonly backend: Backend,
    readonly placement: TierPlacement,
    private readonly model: LoadedModel,
    readonly config: TierConfig,
    /** 'heat' when a heat file filled the slots, 'ids' on a cold start. */
    readonly start: 'heat' | 'ids',
    /** Host int8 copies of the non-resident experts (native tier over a Q4_0 container only). */
    readonly rebuild: Int8RebuildActor | undefined,
    /** Owns the native eval calls of the requests; publishes each step's routing and timing. */
    readonly compute: LayerComputeActor,
    readonly tracing: TierTracing = tierTracing(config.backend, moeLayers(model.hparams)),
  ) {}

  static async create(
    native: NativeBinding,
    model: LoadedModel,
    context: NativeContextHandle,
    config: TierConfig,
  ): Promise<EngineTier> {
    const hp = model.hparams;
    // What can be refused was refused when the options were resolved (options.ts); the heat file is read
    // before anything is made (a failed open used to leave a backend, rebuild workers and their host-copy
    // arena behind for the collector: ~6 MB an open).
    const heat = config.heat === false ? undefined : readHeatFile(config.heat, hp);
    const containerBytes = expertContainerBytes(model.file, hp);
    const budgetBytes = moeLayers(hp) * hp.nExpert * Math.ceil(containerBytes / SLOT_ALIGN_BYTES) * SLOT_ALIGN_BYTES;
    // Tests only (fault-injection.ts): a slot transfer or a streamed read that fails on purpose.
    const faults = armedTierFaults();
    const transferFault =
      faults.transferAfterBytes !== undefined ? { failTransferAfterBytes: faults.transferAfterBytes } : {};
    const backend = Backend.create(
      config.backend,
      config.backend === 'fake'
        ? {
            ...Backend.preset(config.fake.preset ?? 'consumer-8gb'),
            ...withoutPreset(config.fake),
            budgetBytes,
            ...transferFault,
          }
        : config.backend === 'disk'
          ? { budgetBytes, file: model.mapping, ...transferFault }
          : config.backend === 'cuda-sim'
            ? {
                budgetBytes,
                simDeviceBytes: budgetBytes + SIM_DEVICE_SCRATCH_BYTES,
                ...transferFault,
                ...(config.readsFile ? { file: model.mapping } : {}),
              }
            : config.backend === 'cuda' && config.readsFile
              ? { budgetBytes, file: model.mapping }
              : { budgetBytes },
    );
    let port: TierPort | undefined;
    let rebuild: Int8RebuildActor | undefined;
    try {
      // A tier that reads the file keeps no host copies (their arena would hold every non-resident
      // expert in RAM): its misses are read from the file for their call.
      // One expert's copy as the native tier sizes it (mt_tier_host_copy_bytes: 0 where it offers none).
      const copyBytes = native.modelBytes(model.nativeModel).hostCopyExpert;
      rebuild =
        wantsHostCopies(model) && copyBytes > 0 && !config.readsFile ? createRebuildActor(model, copyBytes) : undefined;
      const host = rebuild ? { hostCopies: rebuild.arena, hostCopyOffsets: rebuild.offsets } : {};
      // Its misses are read from the file for their call, never from the mapping.
      const failAfter = faults.streamedReadAfterBytes;
      const stream = config.readsFile
        ? { streamFile: model.mapping, ...(failAfter !== undefined ? { streamFailAfterBytes: failAfter } : {}) }
        : {};
      const handle = native.createTier(context, backendHandle(backend), {
        slotsPerLayer: config.slotsPerLayer,
        ...host,
        ...stream,
      });
      port = new NativeTierPort(native, handle, moeLayers(hp), hp.nExpert, config.slotsPerLayer, config.readsFile);
      const start = heat ? 'heat' : 'ids';
      const residency = startResidency(
        start,
        moeLayers(hp),
        hp.nExpert,
        { scope: 'layer', slots: config.slotsPerLayer[0] },
        heat?.counts,
      );
      for (let l = 0; l < moeLayers(hp); l++) await warmLayer(port, model, l, residentIds(residency, l));
      port.resetStats();
      // Every expert without a slot gets a host copy, built in the background.
      rebuild?.send({ kind: 'evicted', experts: nonResident(port) });
      // Device slots cannot take a miss's read before it runs (the host computes it): no admission.
      const admitMisses = !config.deviceSlots && (config.disk.admitMisses ?? true);
      const placement = new TierPlacement(
        port,
        config.lfru,
        config.upload,
        heat?.counts,
        config.replan,
        admitMisses,
        config.prefetch,
        hp.nExpertUsed,
        { policy: config.placementPolicy, dlfu: config.dlfu },
      );
      const compute = new LayerComputeActor(native, context, { nLayer: moeLayers(hp), k: hp.nExpertUsed });
      return new EngineTier(port, backend, placement, model, config, start, rebuild, compute);
    } catch (err) {
      await rebuild?.close();
      port?.free();
      backend.destroy();
      throw err;
    }
  }

  /** Slots per layer a tune asked for, applied at the next boundary (applyResize). */
  private pendingSlots: number | undefined;

  /** Before a request: a tuned slot budget, then the fills the policy decided (slots freed by failed uploads), uploaded and awaited. */
  async beginRequest(trace: TraceParent, log?: RouteLog): Promise<TierRequest> {
    await this.applyResize();
    const fills = this.placement.takeFills();
    try {
      for (const f of fills) await this.port.warmstart(f.layer, Int32Array.of(f.expert));
    } catch {
      // A failed fill leaves its slot free (counted by the backend); the next tick decides again.
    }
    // A filled expert needs its host copy no more (it was built when the expert was evicted): without
    // this, the copy stayed published for a resident expert and its arena block was never reused.
    if (fills.length > 0 && this.rebuild) {
      const r = this.port.expertStates().slots;
      this.rebuild.send({
        kind: 'resident',
        experts: fills.filter((f) => r[f.layer * this.port.nExpert + f.expert] >= 0),
      });
    }
    const prefillPath = this.port.readsMisses
      ? (tokens: number) => prefillPathFor(tokens, this.config.shortPrefillTokens)
      : undefined;
    const boundary = () => (this.pendingSlots === undefined ? undefined : this.applyResize());
    return new TierRequest(
      this.port,
      this.placement,
      this.compute,
      this.tracing.beginRequest(trace),
      this.rebuild,
      boundary,
      log,
      prefillPath,
      this.steps.observed ? (s) => this.steps.next(stepView(s)) : undefined,
    );
  }

  /** Every step's layer windows and transfers while someone subscribes (engine.steps$()); completes at close. */
  readonly steps = new Subject<StepView>();

  /** A new slot budget for every layer (validated by the caller), from the next boundary on. */
  resizeSlots(slotsPerLayer: number): void {
    this.pendingSlots = this.port.slotsPerLayer.every((s) => s === slotsPerLayer) ? undefined : slotsPerLayer;
  }

  /** The slot budget that applies after the next boundary. */
  get targetSlotsPerLayer(): number {
    return this.pendingSlots ?? Math.max(...this.port.slotsPerLayer);
  }

  /**
   * Between evaluations: applies a tuned slot budget. Shrinking evicts each layer's coldest residents
   * (the tier skips those with a swap pending); growing fills the new slots hottest first. A layer
   * that cannot shrink yet (every candidate has a swap pending) is retried at the next boundary.
   * The evicted get host copies (and the filled lose theirs) before the next step. true: something changed.
   */
  async applyResize(): Promise<boolean> {
    const target = this.pendingSlots;
    if (target === undefined) return false;
    const before = residentSets(this.port);
    let waiting = false;
    for (let l = 0; l < this.port.nLayer; l++) {
      const now = this.port.slotsPerLayer[l];
      if (now === target) continue;
      try {
        this.port.resize(
          l,
          target,
          target < now ? Int32Array.from(this.placement.coldestResidents(l)) : new Int32Array(0),
        );
      } catch {
        waiting = true;
        continue;
      }
      if (target > now) {
        const fill = this.placement.hottestOutside(l, target - this.port.stats().slotsUsed[l]);
        // A failed fill leaves its slot free (the backend counts it); the policy may fill it later.
        if (fill.length > 0) await this.port.warmstart(l, Int32Array.from(fill)).catch(() => undefined);
      }
    }
    if (!waiting) this.pendingSlots = undefined;
    this.config.slotsPerLayer = this.port.slotsPerLayer.slice();
    this.placement.afterResize();
    const after = residentSets(this.port);
    const diff = (a: number[][], b: number[][]): ExpertKey[] =>
      a.flatMap((ids, layer) => ids.filter((e) => !b[layer].includes(e)).map((expert) => ({ layer, expert })));
    this.rebuild?.send({ kind: 'resident', experts: diff(after, before) });
    this.rebuild?.send({ kind: 'evicted', experts: diff(before, after) });
    return true;
  }

  /**
   * Merges a finished request's routing ([row][layer][k]) into the heat file. Heat only warms the
   * next start, so a file that cannot be written (read-only or full cache folder) costs the
   * warmstart, not the request: the write is skipped and the reason returned for the stats.
   */
  mergeHeat(rows: number[][][]): string | undefined {
    if (this.config.heat === false || rows.length === 0) return undefined;
    try {
      if (mergeIntoHeatFile(this.config.heat, this.model.hparams, rows)) return undefined;
      return `${this.config.heat}: locked by another run for over ${limits.heatLockWaitMs} ms`;
    } catch (err) {
      if (err instanceof MoetierError) return err.message; // a refused path: named by the error itself
      const code = (err as NodeJS.ErrnoException).code;
      if (typeof code !== 'string') throw err; // not a file-system refusal: a bug
      return `${this.config.heat}: ${code}`;
    }
  }

  tune(
    params: LfruParams | undefined,
    limits: Partial<UploadQueueLimits> | undefined,
    replan?: PrefillReplanConfig,
    prefetch?: PrefetchConfig,
  ): void {
    if (prefetch) checkPrefetchFits(prefetch, this.config, this.model.hparams.nExpert, 'tune.prefetch');
    this.placement.tune(params, limits, replan);
    if (replan) this.config.replan = replan;
    if (params) this.config.lfru = params;
    if (prefetch) (this.placement.tunePrefetch(prefetch), (this.config.prefetch = prefetch));
  }

  async close(): Promise<void> {
    this.compute.close();
    this.tracing.calibration.close();
    this.steps.complete();
    await this.rebuild?.close();
    this.port.free();
    this.backend.destroy();
  }
}

/**
 * Enforce's prefetches evict by the policy's order; on the disk tier that order also lets every
 * routed miss evict, which disk.admitMisses false turns off: the two cannot both hold.
 */
/**
 * The warm start of one layer; a copy or read that fails is the open's failure, typed (ExpertReadError:
 * the first expert that did not land, where it starts in the file), and everything made so far is
 * released by the caller.
 */
async function warmLayer(port: TierPort, model: LoadedModel, layer: number, experts: readonly number[]): Promise<void> {
  try {
    await port.warmstart(layer, Int32Array.from(experts));
  } catch (err) {
    const { states } = port.expertStates();
    const expert = experts.find((e) => states[layer * port.nExpert + e] !== ExpertState.resident) ?? experts[0] ?? 0;
    const offset = expertFileOffset(model.file, model.hparams, layer, expert);
    throw new ExpertReadError(
      `${model.path}: the warm start could not copy layer ${layer} expert ${expert} (at offset ${offset}) into its slot: ${(err as Error).message}; the open failed and released what it had made`,
      { file: model.path, layer, expert, offset },
      { cause: err },
    );
  }
}

/**
 * Host copies pay off where the container is 4-bit: a Q4_0 expert becomes an exact Q8_0 copy. All
 * three matrices must be Q4_0: a mix (a k-quant file's Q6_K down beside Q4_K gate / up, or a Q4_0
 * gate beside a Q6_K down) has no exact Q8_0 copy, and the native tier offers none then
 * (mt_tier_host_copy_bytes): its misses are computed from the container's own bytes.
 */
function wantsHostCopies(model: LoadedModel): boolean {
  const first = firstMoeLayer(model.hparams);
  return ['gate', 'up', 'down'].every(
    (m) => model.file.tensors.get(`blk.${first}.ffn_${m}_exps.weight`)?.type === 'Q4_0',
  );
}

/**
 * Room for every expert but one per layer (a tune may shrink every layer to one slot), plus slack
 * for the swaps between eviction and arrival. Blocks are reused lowest first: untouched ones stay address space.
 */
function createRebuildActor(model: LoadedModel, copyBytes: number): Int8RebuildActor {
  const hp = model.hparams;
  const nonResidentMax = moeLayers(hp) * (hp.nExpert - 1);
  return new Int8RebuildActor(model.pin, moeLayers(hp), hp.nExpert, nonResidentMax + rebuildSlackBlocks, copyBytes);
}

const rebuildSlackBlocks = 16;
/** cuda-sim: simulated device memory beyond the slots, for the backend's row buffers (run_expert's x / y, scratch). */
const SIM_DEVICE_SCRATCH_BYTES = 256 * 1024 * 1024;

/** The calibration actor and the spans whose step timings it folds (the request's calibrate stage). */
function tierTracing(backend: string, nLayer: number): TierTracing {
  let tracing: TierTracing | undefined = undefined;
  const calibration = new CalibrationActor({ alpha: CALIBRATION_DEFAULTS.alpha, nLayer }, () => tracing!.tracerOf);
  tracing = new TierTracing(backend, calibration);
  return tracing;
}

function nonResident(port: TierPort): ExpertKey[] {
  const r = port.expertStates().slots;
  const keys: ExpertKey[] = [];
  for (let i = 0; i < r.length; i++)
    if (r[i] < 0) keys.push({ layer: Math.floor(i / port.nExpert), expert: i % port.nExpert });
  return keys;
}

function withoutPreset(o: TierConfig['fake']): Omit<TierConfig['fake'], 'preset'> {
  const { preset: _preset, ...rest } = o;
  return rest;
}

/** The backend's native handle, for createTier (the Backend wrapper keeps it private). */
function backendHandle(b: Backend): import('../../native/binding.js').NativeBackendHandle {
  return (b as unknown as { handle: import('../../native/binding.js').NativeBackendHandle }).handle;
}
