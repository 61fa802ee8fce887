/**
 * The configuration, resolved once: openEngine's options in, every cross-rule applied and the
 * memory plan made, an EngineConfig out. Nothing else in the engine reads the user's options.
 *
 *   checkEngineOptions    before the model loads: threads, context, queue, idle time, and the
 *                         memory budget's rules against resident / slotsPerLayer / backend
 *   resolveEngineConfig   with the model: the memory plan (a budget: the disk tier's slots, or a
 *                         device's host side), the tier's options (src/engine/tier/options.ts
 *                         resolveTierConfig), the heat file's place, prefetch without a tier,
 *                         whether the file is preloaded (it fits the memory available)
 *
 * `engine.config` is the result (moetier run --verbose prints it, --json carries it).
 */
import { availableMemoryBytes } from '../core/available-memory.js';
import { checkNotInput } from '../core/output-file.js';
import { InvalidOptionError } from '../core/errors.js';
import { limits } from '../core/limits.js';
import type { LoadedModel } from '../model/load.js';
import { modelIdentity } from '../model/identity.js';
import { moeLayers, type HParams } from '../model/types.js';
import type { NativeBinding } from '../native/binding.js';
import { EVAL_CHUNK_ROWS, IO_QUEUE_DEPTH_DEFAULT } from '../native/constants.js';
import { defaultHeatPath } from './heat-file.js';
import { MemoryBudgetError, planMemory, type MemoryPlan } from './memory-plan.js';
import { resolvePrefetch } from './prefetch-options.js';
import { expertContainerBytes } from './tier/experts.js';
import { resolveTierConfig, wantsTier, type TierConfig, type TierOptions } from './tier/options.js';
import {
  resolveShortPrefillTokens,
  WHOLE_LAYER_PIECE_BYTES,
  wholeLayerBufferBytes,
  wholeLayerReachable,
} from './tier/prefill-path.js';

/** What openEngine's options say before the model is read. */
export interface EngineOptionsChecked {
  threads: number;
  contextTokens: number;
  /** Sequences run together (continuous batching; 1: one request at a time). */
  parallel: number;
  /** Rows one batched step evaluates at most. */
  batchTokensMax: number;
  queueDepthMax: number;
  idleMs: number;
  memoryBudgetBytes: number | undefined;
  /** The slots are device memory (backend cuda or cuda-sim): a budget bounds the host's parts only. */
  onDevice: boolean;
  /** The model's dense weights are read into its own memory (the disk tier, or any budget). */
  readsFromDisk: boolean;
  /** options.preloadModel as given (undefined: decided with the file's size, resolveEngineConfig). */
  preloadModel: boolean | undefined;
}

/** The engine as it runs: every option resolved, every rule applied. */
export interface EngineConfig {
  threads: number;
  /** KV cache positions of each sequence. */
  contextTokens: number;
  /** Sequences run together, each with its own contextTokens of cache (1: one request at a time). */
  parallel: number;
  /** Rows one batched step evaluates at most (decode rows first, then prompt chunks). */
  batchTokensMax: number;
  queueDepthMax: number;
  idleMs: number;
  /** The plan of memoryBudgetBytes (what each part holds, the slots); undefined without a budget. */
  memoryPlan: MemoryPlan | undefined;
  /** The expert tier's configuration; undefined: no tier. */
  tier: TierConfig | undefined;
  /** The whole model file is faulted into memory when the engine opens (see EngineOptions.preloadModel). */
  preloadModel: boolean;
}

export function checkEngineOptions(
  options: TierOptions & {
    threads?: number;
    contextTokens?: number;
    requestQueueDepthMax?: number;
    requestIdleMs?: number;
    memoryBudgetBytes?: number;
    parallel?: number;
    batchTokensMax?: number;
    preloadModel?: boolean;
  },
): EngineOptionsChecked {
  // The library boundary: JavaScript callers can pass anything (null gave an untyped TypeError).
  if (typeof options !== 'object' || options === null)
    throw new InvalidOptionError('options', 'an object { model, ... }', options);
  const threads = options.threads ?? 2;
  const contextTokens = options.contextTokens ?? limits.contextTokensDefault;
  if (!Number.isInteger(threads) || threads < 1 || threads > limits.threadsMax) {
    throw new InvalidOptionError('threads', `an integer in [1, ${limits.threadsMax}]`, threads);
  }
  if (!Number.isInteger(contextTokens) || contextTokens < 2 || contextTokens > limits.contextTokensMax) {
    throw new InvalidOptionError('contextTokens', `an integer in [2, ${limits.contextTokensMax}]`, contextTokens);
  }
  const { parallel, batchTokensMax } = checkBatching(options, contextTokens);
  const queueDepthMax = options.requestQueueDepthMax ?? limits.requestQueueDepthDefault;
  if (!Number.isInteger(queueDepthMax) || queueDepthMax < 0 || queueDepthMax > limits.requestQueueDepthMax) {
    throw new InvalidOptionError(
      'requestQueueDepthMax',
      `an integer in [0, ${limits.requestQueueDepthMax}] (requests that may wait behind the running one)`,
      queueDepthMax,
    );
  }
  const idleMs = options.requestIdleMs ?? limits.requestIdleMs;
  if (!Number.isInteger(idleMs) || idleMs < 1 || idleMs > 2 ** 31 - 1)
    throw new InvalidOptionError('requestIdleMs', 'an integer number of ms in [1, 2^31 - 1]', idleMs);
  const budget = options.memoryBudgetBytes;
  // On a cuda backend the slots are device memory: the budget bounds the host's parts, and the
  // device's share is asked for as without a budget (resident or slotsPerLayer).
  const onDevice = options.backend === 'cuda' || options.backend === 'cuda-sim';
  if (budget !== undefined) {
    if (!Number.isSafeInteger(budget) || budget <= 0)
      throw new InvalidOptionError('memoryBudgetBytes', 'an integer number of bytes > 0', budget);
    if (onDevice && !wantsTier(options))
      throw new InvalidOptionError(
        'memoryBudgetBytes',
        `resident or slotsPerLayer beside it on backend "${options.backend}" (the device's slots; the budget bounds host memory)`,
        budget,
      );
    if (!onDevice && (wantsTier(options) || options.backend !== undefined)) {
      throw new InvalidOptionError(
        'memoryBudgetBytes',
        'no resident, slotsPerLayer or backend beside it (the plan sets them), except backend "cuda" / "cuda-sim" with resident or slotsPerLayer',
        budget,
      );
    }
    if (options.readsFile !== undefined)
      throw new InvalidOptionError(
        'readsFile',
        'unset beside memoryBudgetBytes (the budget sets it)',
        options.readsFile,
      );
  }
  const readsFromDisk = options.backend === 'disk' || budget !== undefined;
  return {
    threads,
    contextTokens,
    parallel,
    batchTokensMax,
    queueDepthMax,
    idleMs,
    memoryBudgetBytes: budget,
    onDevice,
    readsFromDisk,
    preloadModel: checkPreload(options.preloadModel, readsFromDisk),
  };
}

/** preloadModel: a boolean, and never where the engine reads the file on purpose (the disk tier, a budget). */
function checkPreload(preload: unknown, readsFromDisk: boolean): boolean | undefined {
  if (preload === undefined) return undefined;
  if (typeof preload !== 'boolean') throw new InvalidOptionError('preloadModel', 'a boolean', preload);
  if (preload && readsFromDisk)
    throw new InvalidOptionError(
      'preloadModel',
      'false or unset with memoryBudgetBytes or backend "disk" (their experts are read from the file when routed, not held in memory)',
      preload,
    );
  return preload;
}

/** parallel and batchTokensMax against their limits (src/core/limits.ts). */
function checkBatching(
  options: { parallel?: number; batchTokensMax?: number },
  contextTokens: number,
): { parallel: number; batchTokensMax: number } {
  const parallel = options.parallel ?? 1;
  if (!Number.isInteger(parallel) || parallel < 1 || parallel > limits.parallelMax)
    throw new InvalidOptionError(
      'parallel',
      `an integer in [1, ${limits.parallelMax}] (sequences run together)`,
      parallel,
    );
  if (parallel * contextTokens > limits.sequencesTokensMax)
    throw new InvalidOptionError(
      'parallel',
      `at most ${Math.floor(limits.sequencesTokensMax / contextTokens)} with contextTokens ${contextTokens} (parallel x contextTokens <= ${limits.sequencesTokensMax})`,
      parallel,
    );
  const batchTokensMax = options.batchTokensMax ?? limits.batchTokensDefault;
  if (!Number.isInteger(batchTokensMax) || batchTokensMax < parallel || batchTokensMax > limits.batchTokensMax)
    throw new InvalidOptionError(
      'batchTokensMax',
      `an integer in [parallel (${parallel}), ${limits.batchTokensMax}] (rows one batched step evaluates)`,
      batchTokensMax,
    );
  return { parallel, batchTokensMax };
}

/**
 * The options against the loaded model. inputs: the files the engine reads (the heat file is
 * never one of them); routesDigest: a route trace drives the routing (its own default heat file).
 */
export function resolveEngineConfig(
  native: NativeBinding,
  model: LoadedModel,
  options: TierOptions & { model: string; routesFrom?: string },
  checked: EngineOptionsChecked,
  routesDigest: string | undefined,
): EngineConfig {
  const { memoryBudgetBytes: budget, threads } = checked;
  // The memory plan counts every sequence's cache: nCtx below is the cache's positions per
  // sequence, and contextBytes is asked for all `parallel` of them.
  const contextTokens = checked.contextTokens;
  const nSeq = checked.parallel;
  const planned =
    budget === undefined
      ? undefined
      : checked.onDevice
        ? {
            plan: memoryPlanOf(
              native,
              model,
              budget,
              { nCtx: contextTokens, nSeq, threads },
              contextTokens,
              deviceSlotsAsked(options, model.hparams),
            ),
            shortPrefillTokens: contextTokens,
          }
        : planWithPrefill(native, model, budget, { nCtx: contextTokens, nSeq, threads }, options.shortPrefillTokens);
  const plan = planned?.plan;
  const tierOptions: TierOptions =
    checked.onDevice && plan
      ? { ...options, readsFile: true }
      : plan && !plan.holdsEveryExpert
        ? {
            ...options,
            backend: 'disk',
            slotsPerLayer: plan.slotsPerLayer,
            shortPrefillTokens: planned!.shortPrefillTokens,
          }
        : options;
  // Under a trace the default heat file is the (model, trace) pair's: the model's own stays the router's.
  const heatName = (): string =>
    modelIdentity(model.file) + (routesDigest !== undefined ? `.routes-${routesDigest}` : '');
  const tier = wantsTier(tierOptions)
    ? resolveTierConfig(tierOptions, model.hparams, () => defaultHeatPath(heatName()))
    : undefined;
  // The heat file is written after requests: never over the model or the route trace read.
  if (typeof tier?.heat === 'string')
    checkNotInput(tier.heat, 'heat', [options.model, ...(options.routesFrom ? [options.routesFrom] : [])]);
  // A memory budget that holds every expert needs no prefetch (nothing is ever read); without any tier it is a mistake.
  if (
    !tier &&
    budget === undefined &&
    options.prefetch !== undefined &&
    resolvePrefetch(options.prefetch).mode !== 'off'
  ) {
    throw new InvalidOptionError(
      'prefetch.mode',
      '"off" without an expert tier (resident, slotsPerLayer or memoryBudgetBytes)',
      options.prefetch.mode,
    );
  }
  return {
    threads,
    contextTokens,
    parallel: checked.parallel,
    batchTokensMax: checked.batchTokensMax,
    queueDepthMax: checked.queueDepthMax,
    idleMs: checked.idleMs,
    memoryPlan: plan,
    tier,
    preloadModel:
      checked.preloadModel ?? (!checked.readsFromDisk && model.pin.identity.size <= BigInt(availableMemoryBytes())),
  };
}

/**
 * The bounce buffers of the tier's read engines: one per read in flight, each grown to the largest
 * block-aligned range it read, at most one piece (bounded here by the whole expert, or the
 * whole-layer path's 1 MiB) and two 4 KiB blocks. The disk backend and the tier share one engine
 * (mt_backend.h read_engine: its places serve the uploads and the tier's reads in turn); a cuda kind
 * that reads the file (slots on the device) runs its own engine beside the tier's.
 */
function ioBounceBytes(expertBytes: number, wholeLayer: boolean, sharedEngine: boolean): number {
  const blockBytes = 4096;
  // The whole-layer path reads 1 MiB pieces on the tier's lane: a run's first and last bounce.
  const tierPiece = wholeLayer ? Math.max(expertBytes, WHOLE_LAYER_PIECE_BYTES) : expertBytes;
  const tierEngine = IO_QUEUE_DEPTH_DEFAULT * (tierPiece + 2 * blockBytes);
  const backendEngine = IO_QUEUE_DEPTH_DEFAULT * (expertBytes + 2 * blockBytes);
  return sharedEngine ? tierEngine : tierEngine + backendEngine;
}

/**
 * The plan, and the prefill path it leaves room for. The whole-layer path needs a second layer
 * buffer, a fixed part that displaces slots; with shortPrefillTokens 'auto' it is kept only where
 * it displaces at most a quarter of the slots the budget would otherwise hold (the prefill it
 * speeds up is paid for by every decode token's hit rate: at 30 % of the medium Q4_0 file the
 * buffer took 13 slots per layer down to 8 and decode from 47.9 to 33.0 tok/s), else every prompt
 * reads on demand. A number given for shortPrefillTokens is honoured as given.
 */
export const prefillBufferSlotsShareMax = 0.25;

/** The native context's shape: positions per sequence, sequences, compute threads. */
interface ContextShape {
  nCtx: number;
  nSeq: number;
  threads: number;
}

function planWithPrefill(
  native: NativeBinding,
  model: LoadedModel,
  budgetBytes: number,
  context: ContextShape,
  asked: TierOptions['shortPrefillTokens'],
): { plan: MemoryPlan; shortPrefillTokens: number } {
  const { nCtx } = context;
  const shortPrefillTokens = resolveShortPrefillTokens(asked, true);
  const withBuffer = () => memoryPlanOf(native, model, budgetBytes, context, shortPrefillTokens);
  if (typeof asked === 'number' || !wholeLayerReachable(shortPrefillTokens, nCtx))
    return { plan: withBuffer(), shortPrefillTokens };
  const onDemandOnly = memoryPlanOf(native, model, budgetBytes, context, nCtx);
  let plan: MemoryPlan | undefined;
  try {
    plan = withBuffer();
  } catch (err) {
    if (!(err instanceof MemoryBudgetError)) throw err; // the buffer alone leaves no slot: on demand only
  }
  const displaced = onDemandOnly.slotsPerLayer - (plan?.slotsPerLayer ?? 0);
  if (plan && !onDemandOnly.holdsEveryExpert && displaced <= prefillBufferSlotsShareMax * onDemandOnly.slotsPerLayer)
    return { plan, shortPrefillTokens };
  return { plan: onDemandOnly, shortPrefillTokens: nCtx };
}

/**
 * A cuda backend's pinned host buffers: the staging ring its uploads pass through, and the rows
 * in and out of one run_experts call (a prefill chunk's routed rows at most, capped by the call's
 * row limit: mt_backend_cuda.h).
 */
function devicePinnedBytes(native: NativeBinding, hp: HParams, nCtx: number): number {
  const limits = native.cudaLimits();
  const rows = Math.min(limits.expertRowsMax, Math.min(nCtx, EVAL_CHUNK_ROWS) * hp.nExpertUsed);
  return limits.stagingBuffers * limits.stagingBufferBytes + 2 * rows * hp.nEmbd * 4;
}

/** The device slots per layer that resident or slotsPerLayer ask for (resolveTierConfig checks them again). */
function deviceSlotsAsked(options: TierOptions, hp: HParams): number {
  const probe = resolveTierConfig({ ...options, heat: false }, hp, () => '');
  return probe.slotsPerLayer[0];
}

/**
 * The memory plan of a budget for this model and context: the dense bytes the model holds, the
 * context's KV cache and scratch (what createContext will allocate), one layer call's streamed
 * misses; the slots fill the rest. At least one slot per layer, or the budget is refused.
 * deviceSlotsPerLayer: the slots are on a device (outside the budget), as many as asked.
 */
function memoryPlanOf(
  native: NativeBinding,
  model: LoadedModel,
  budgetBytes: number,
  context: ContextShape,
  shortPrefillTokens: number,
  deviceSlotsPerLayer?: number,
): MemoryPlan {
  const hp = model.hparams;
  const { nCtx } = context;
  const { kvBytes, scratchBytes } = native.contextBytes(model.nativeModel, context);
  const expertBytes = expertContainerBytes(model.file, hp);
  // The whole-layer prefill path reads the next layer while this one computes: a second layer buffer.
  const prefillBufferBytes = wholeLayerReachable(shortPrefillTokens, nCtx)
    ? wholeLayerBufferBytes(expertBytes, hp.nExpert)
    : 0;
  const input = {
    budgetBytes,
    denseBytes: native.modelBytes(model.nativeModel).ownedDense,
    kvCacheBytes: kvBytes,
    scratchBytes,
    prefillBufferBytes,
    ioBufferBytes:
      ioBounceBytes(expertBytes, prefillBufferBytes > 0, deviceSlotsPerLayer === undefined) +
      (deviceSlotsPerLayer !== undefined ? devicePinnedBytes(native, hp, nCtx) : 0),
    expertBytes: expertContainerBytes(model.file, hp),
    nLayer: moeLayers(hp),
    nExpert: hp.nExpert,
    nExpertUsed: hp.nExpertUsed,
    // A prefill chunk (up to EVAL_CHUNK_ROWS rows) may read every expert of a layer it routes to.
    workingSetExperts: Math.min(hp.nExpert, Math.min(nCtx, EVAL_CHUNK_ROWS) * hp.nExpertUsed),
    ...(deviceSlotsPerLayer !== undefined ? { deviceSlotsPerLayer } : {}),
  };
  const plan = planMemory(input);
  if (plan.slotsPerLayer >= 1) return plan;
  const minimum = plan.budgetBytes - plan.unusedBytes - plan.parts.slots + moeLayers(hp) * plan.slotStrideBytes;
  throw new MemoryBudgetError(budgetBytes, minimum, { ...plan.parts, slots: moeLayers(hp) * plan.slotStrideBytes });
}

/** The configuration as plain JSON (moetier run --json's `config`): Infinity as null, one slot count where every layer has the same. */
export function configSummary(c: EngineConfig): Record<string, unknown> {
  const t = c.tier;
  const uniform = t && t.slotsPerLayer.every((n) => n === t.slotsPerLayer[0]);
  return {
    threads: c.threads,
    contextTokens: c.contextTokens,
    parallel: c.parallel,
    batchTokensMax: c.batchTokensMax,
    requestQueueDepthMax: c.queueDepthMax,
    requestIdleMs: c.idleMs,
    memoryBudgetBytes: c.memoryPlan?.budgetBytes ?? null,
    tier: t
      ? {
          backend: t.backend,
          slotsPerLayer: uniform ? t.slotsPerLayer[0] : t.slotsPerLayer,
          readsFile: t.readsFile,
          deviceSlots: t.deviceSlots,
          placementPolicy: t.placementPolicy,
          ...(t.placementPolicy === 'dlfu' ? { dlfu: t.dlfu } : { lfru: t.lfru, prefillReplan: t.replan }),
          prefetch: t.prefetch,
          upload: t.upload,
          shortPrefillTokens: Number.isFinite(t.shortPrefillTokens) ? t.shortPrefillTokens : null,
          heat: t.heat,
          ...(t.backend === 'disk' ? { disk: { admitMisses: t.disk.admitMisses ?? true } } : {}),
        }
      : null,
  };
}

/** One line per part, for --verbose. */
export function formatConfig(c: EngineConfig): string {
  const sequences = c.parallel > 1 ? ` x ${c.parallel} sequences (steps of up to ${c.batchTokensMax} rows)` : '';
  const lines = [`config: ${c.threads} threads, context ${c.contextTokens} tokens${sequences}`];
  const t = c.tier;
  if (!t) return `${lines[0]}, no expert tier`;
  const slots = t.slotsPerLayer.every((n) => n === t.slotsPerLayer[0])
    ? `${t.slotsPerLayer[0]}`
    : t.slotsPerLayer.join(',');
  lines.push(
    `  tier        ${t.backend}, ${slots} slots per layer${t.deviceSlots ? ' (device)' : ''}${t.readsFile ? ', misses read from the file' : ''}`,
  );
  const policy =
    t.placementPolicy === 'dlfu'
      ? `dlfu (half-life ${t.dlfu.halfLifeTokens} tokens)`
      : `lfru, prefill replan ${t.replan.enabled ? `on (at most ${t.replan.maxSwapsPerLayer} swaps per layer)` : 'off'}, guard ${t.replan.guard ? 'on' : 'off'}`;
  lines.push(`  placement   ${policy}`);
  lines.push(
    `  prefetch    ${t.prefetch.mode}${t.prefetch.mode === 'off' ? '' : ` (safety ${t.prefetch.safety}, queue ${t.prefetch.queueMax})`}`,
  );
  if (t.backend === 'disk')
    lines.push(
      `  prefill     ${Number.isFinite(t.shortPrefillTokens) ? `prompts up to ${t.shortPrefillTokens} tokens read on demand, longer ones a layer at a time` : 'every prompt reads on demand'}`,
    );
  lines.push(`  heat file   ${t.heat === false ? 'none' : t.heat}`);
  return lines.join('\n');
}
