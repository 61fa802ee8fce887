/**
 * The expert tier's options, validated where they enter (openEngine, the CLI, tune).
 *
 *   resident 0.37        -> slotsPerLayer = round(0.37 * nExpert) on every layer (at least 1)
 *   slotsPerLayer B      -> B slots on every layer
 *   neither              -> no tier: evaluation is exactly the foundation's path
 */
import { InvalidOptionError } from '../../core/errors.js';
import { moeLayers, type HParams } from '../../model/types.js';
import { lfruDefaults, type LfruParams } from '../../tiers/policies/lfru.js';
import type { UploadQueueLimits } from '../../actors/upload-queue/messages.js';
import { resolvePrefillReplan, type PrefillReplanConfig, type PrefillReplanOptions } from './replan-options.js';
import { resolvePrefetch, type PrefetchConfig, type PrefetchOptions } from '../prefetch-options.js';
import { resolveShortPrefillTokens } from './prefill-path.js';
import { checkDlfuParams, dlfuDefaults, dlfuHalfLifeMax, type DlfuParams } from '../../tiers/policies/dlfu.js';

/**
 * The placement policy (src/tiers/policies): 'lfru', docs/SPEC.md section 1's baseline with prefill replan and
 * its guard on top; or 'dlfu', decayed LFU, a demand policy (every routed miss is kept, evicting the
 * resident of lowest decayed count), which the tier runs and decides at the moment a slot is needed.
 * Default: dlfu where the tier admits the misses it reads (the disk tier: each miss is read anyway, and
 * reads per token are the cost; docs/REPLAY.md, "Eviction on real routing"), LFRU elsewhere. An
 * admitted miss evicts by dlfu, so LFRU there is refused (disk.admitMisses false streams the misses and
 * leaves LFRU its swaps). Replan plans over LFRU's scores, so dlfu refuses it (and its guard, which
 * watches a replan, does not run).
 */
export type PlacementPolicyName = 'lfru' | 'dlfu';

/**
 * cpu: RAM slots copied from the mapping; fake: a simulated card; disk: RAM slots read from the model file (dense weights owned, the
 * page cache kept out); cuda: device memory, residents computed on the GPU (DeviceUnavailableError where none is); cuda-sim: the
 * cuda host code on a simulated runtime whose kernels are the CPU's (tests: its tokens are the cpu backend's).
 */
export const TIER_BACKEND_KINDS = ['cpu', 'fake', 'disk', 'cuda', 'cuda-sim'] as const;
export type TierBackendKind = (typeof TIER_BACKEND_KINDS)[number];

/** The kinds' names for an InvalidOptionError. */
export const TIER_BACKEND_EXPECTED = TIER_BACKEND_KINDS.map((k) => `"${k}"`).join(', ');

export function isTierBackendKind(v: unknown): v is TierBackendKind {
  return typeof v === 'string' && (TIER_BACKEND_KINDS as readonly string[]).includes(v);
}

export interface FakeBackendOptions {
  /** A named fake device (default 'consumer-8gb'); the fields below override it. */
  preset?: 'consumer-8gb';
  bandwidthBytesPerS?: number;
  transferFixedUs?: number;
  computeBytesPerS?: number;
  overwriteSupported?: boolean;
}

/** The disk tier's options (its fault injection, for tests, is fault-injection.ts: no option). */
export interface DiskTierOptions {
  /** A routed miss read from the file may evict the policy's coldest resident not running in its call, and stay (default true); false: it takes only free slots and queued swaps, else it is read for its call only. */
  admitMisses?: boolean;
}

export interface TierOptions {
  backend?: TierBackendKind;
  /** Fraction of all experts that hold a device slot, in (0, 1]. */
  resident?: number;
  /** Device slots on every layer (instead of `resident`). */
  slotsPerLayer?: number;
  /** Heat file path; default: the model's heat file in the cache folder; false: none. */
  heat?: string | false;
  fake?: FakeBackendOptions;
  disk?: DiskTierOptions;
  lfru?: Partial<LfruParams>;
  /** The placement policy (default 'dlfu' on a disk tier that admits its misses, else 'lfru'); see PlacementPolicyName. */
  placementPolicy?: PlacementPolicyName;
  /** Decayed LFU's half-life in decode tokens (default 16), with placementPolicy 'dlfu'. */
  dlfu?: Partial<DlfuParams>;
  upload?: Partial<UploadQueueLimits>;
  /** Prefill replan (default off, cap 24; also MOETIER_PREFILL_REPLAN=1 / MOETIER_PREFILL_REPLAN_MAX): replan-options.ts. */
  prefillReplan?: PrefillReplanOptions;
  /** Overlap-aware prefetch (default off; observe and enforce on any tier): src/engine/prefetch-options.ts. */
  prefetch?: PrefetchOptions;
  /** The disk tier: prompts of at most this many tokens read their misses on demand, longer ones whole layers ahead (default 'auto'): prefill-path.ts. */
  shortPrefillTokens?: number | 'auto';
  /**
   * cuda / cuda-sim: the tier reads the model file instead of its mapping, as the disk tier does:
   * each miss for its call (on demand, into host scratch, computed on the CPU), each upload into
   * the pinned staging ring. What memoryBudgetBytes sets on those backends, so that a model
   * bigger than RAM keeps its pages out of the page cache; the disk backend always reads the file.
   */
  readsFile?: boolean;
}

export interface TierConfig {
  backend: TierBackendKind;
  slotsPerLayer: number[];
  heat: string | false;
  fake: FakeBackendOptions;
  disk: DiskTierOptions;
  lfru: LfruParams;
  placementPolicy: PlacementPolicyName;
  dlfu: DlfuParams;
  upload: Partial<UploadQueueLimits>;
  replan: PrefillReplanConfig;
  prefetch: PrefetchConfig;
  /** Resolved shortPrefillTokens (the disk tier reads it; prefill-path.ts). */
  shortPrefillTokens: number;
  /** Misses and uploads read the model file (the disk backend, or a cuda kind with readsFile). */
  readsFile: boolean;
  /** The slots are device memory the host cannot read (cuda, cuda-sim): residents compute there. */
  deviceSlots: boolean;
}

export function wantsTier(o: TierOptions): boolean {
  return o.resident !== undefined || o.slotsPerLayer !== undefined;
}

/** defaultHeat: asked for only when the options leave the heat file to its default (it reads the model's first MiB for its identity). */
export function resolveTierConfig(
  o: TierOptions,
  hp: Pick<HParams, 'nLayer' | 'nExpert' | 'denseLayers'>,
  defaultHeat: () => string,
): TierConfig {
  const backend = o.backend ?? 'cpu';
  if (!isTierBackendKind(backend)) throw new InvalidOptionError('backend', `one of ${TIER_BACKEND_EXPECTED}`, backend);
  if (o.resident !== undefined && o.slotsPerLayer !== undefined) {
    throw new InvalidOptionError('resident', 'either resident or slotsPerLayer, not both', o.resident);
  }
  let perLayer: number;
  if (o.slotsPerLayer !== undefined) {
    if (!Number.isInteger(o.slotsPerLayer) || o.slotsPerLayer < 1 || o.slotsPerLayer > hp.nExpert) {
      throw new InvalidOptionError(
        'slotsPerLayer',
        `an integer in [1, ${hp.nExpert}] (the expert count)`,
        o.slotsPerLayer,
      );
    }
    perLayer = o.slotsPerLayer;
  } else {
    const r = o.resident;
    if (typeof r !== 'number' || !(r > 0 && r <= 1))
      throw new InvalidOptionError('resident', 'a fraction of all experts in (0, 1]', r);
    perLayer = Math.min(hp.nExpert, Math.max(1, Math.round(r * hp.nExpert)));
  }
  const admitsMisses = backend === 'disk' && o.disk?.admitMisses !== false;
  const placementPolicy = o.placementPolicy ?? (admitsMisses ? 'dlfu' : 'lfru');
  if (placementPolicy !== 'lfru' && placementPolicy !== 'dlfu')
    throw new InvalidOptionError('placementPolicy', '"lfru" or "dlfu"', placementPolicy);
  if (placementPolicy === 'lfru' && admitsMisses) {
    throw new InvalidOptionError(
      'placementPolicy',
      '"dlfu" on the disk tier, whose admitted misses the tier evicts for by dlfu (or disk.admitMisses false beside "lfru": misses streamed)',
      placementPolicy,
    );
  }
  if (o.dlfu !== undefined && placementPolicy !== 'dlfu')
    throw new InvalidOptionError('dlfu', 'placementPolicy "dlfu" beside it', o.dlfu);
  const replan = resolvePrefillReplan(o.prefillReplan, hp.nExpert);
  if (placementPolicy === 'dlfu' && replan.enabled) {
    const why = o.placementPolicy === undefined ? ', the default on a disk tier that admits its misses' : '';
    throw new InvalidOptionError(
      'prefillReplan.enabled',
      `false with placementPolicy "dlfu"${why} (replan plans over LFRU's scores)`,
      true,
    );
  }
  const deviceSlots = backend === 'cuda' || backend === 'cuda-sim';
  if (
    o.readsFile !== undefined &&
    (typeof o.readsFile !== 'boolean' || (o.readsFile && !deviceSlots && backend !== 'disk'))
  ) {
    throw new InvalidOptionError(
      'readsFile',
      'true only on backend "cuda", "cuda-sim" or "disk" (the others copy from the mapping), or false',
      o.readsFile,
    );
  }
  if (o.readsFile === false && backend === 'disk')
    throw new InvalidOptionError('readsFile', 'unset or true on backend "disk" (it always reads the file)', false);
  const readsFile = backend === 'disk' || o.readsFile === true;
  if (deviceSlots && readsFile && o.shortPrefillTokens !== undefined) {
    throw new InvalidOptionError(
      'shortPrefillTokens',
      'unset on a cuda backend (its misses are read on demand: the whole-layer path computes a layer on the host)',
      o.shortPrefillTokens,
    );
  }
  const heat = o.heat === undefined ? defaultHeat() : o.heat;
  if (heat !== false && (typeof heat !== 'string' || heat.length === 0))
    throw new InvalidOptionError('heat', 'a file path or false', heat);
  const config: TierConfig = {
    backend,
    slotsPerLayer: new Array<number>(moeLayers(hp)).fill(perLayer),
    heat,
    fake: validateFake(o.fake ?? {}),
    disk: validateDisk(o.disk ?? {}),
    lfru: validateLfru({ ...lfruDefaults, ...o.lfru }),
    placementPolicy,
    dlfu: validateDlfu({ ...dlfuDefaults, ...o.dlfu }),
    upload: o.upload ?? {},
    replan,
    prefetch: resolvePrefetch(o.prefetch),
    // On a device every prompt reads on demand: a prompt never exceeds Infinity tokens.
    shortPrefillTokens:
      deviceSlots && readsFile
        ? Number.POSITIVE_INFINITY
        : resolveShortPrefillTokens(o.shortPrefillTokens, backend === 'disk'),
    readsFile,
    deviceSlots,
  };
  checkPrefetchFits(config.prefetch, config, hp.nExpert);
  return config;
}

function validateDisk(d: DiskTierOptions): DiskTierOptions {
  for (const key of Object.keys(d))
    if (key !== 'admitMisses') throw new InvalidOptionError(`disk.${key}`, 'admitMisses', key);
  if (d.admitMisses !== undefined && typeof d.admitMisses !== 'boolean')
    throw new InvalidOptionError('disk.admitMisses', 'true or false', d.admitMisses);
  return d;
}

const fakeKeys = ['preset', 'bandwidthBytesPerS', 'transferFixedUs', 'computeBytesPerS', 'overwriteSupported'];

/** The fake device's fields (their values: the native backend's checks); an unknown key is refused, not passed on. */
function validateFake(f: FakeBackendOptions): FakeBackendOptions {
  for (const key of Object.keys(f))
    if (!fakeKeys.includes(key)) throw new InvalidOptionError(`fake.${key}`, `one of ${fakeKeys.join(', ')}`, key);
  return f;
}

function validateDlfu(p: DlfuParams): DlfuParams {
  for (const key of Object.keys(p))
    if (key !== 'halfLifeTokens') throw new InvalidOptionError(`dlfu.${key}`, 'halfLifeTokens', key);
  try {
    checkDlfuParams(p, 'dlfu.halfLifeTokens');
  } catch {
    throw new InvalidOptionError(
      'dlfu.halfLifeTokens',
      `a number of tokens in [1, ${dlfuHalfLifeMax}]`,
      p.halfLifeTokens,
    );
  }
  return p;
}

export function validateLfru(p: LfruParams): LfruParams {
  for (const [name, value] of Object.entries(p)) {
    if (!Number.isInteger(value) || value < 1) throw new InvalidOptionError(`lfru.${name}`, 'an integer >= 1', value);
  }
  return p;
}

export function checkPrefetchFits(
  prefetch: PrefetchConfig,
  config: TierConfig,
  nExpert: number,
  name = 'prefetch',
): void {
  if (prefetch.mode === 'enforce' && config.backend === 'disk' && config.disk.admitMisses === false) {
    throw new InvalidOptionError(
      `${name}.mode`,
      '"off" or "observe" with disk.admitMisses false (enforce evicts by the order that admission uses)',
      prefetch.mode,
    );
  }
  // A prefetch read lands in a slot the miss then waits for: a device slot the host cannot compute from.
  if (prefetch.mode === 'enforce' && config.deviceSlots && config.readsFile) {
    throw new InvalidOptionError(
      `${name}.mode`,
      `"off" or "observe" on backend "${config.backend}" reading the file (a miss is computed on the host from its own read)`,
      prefetch.mode,
    );
  }
  if (prefetch.candidates !== undefined && prefetch.candidates > nExpert) {
    throw new InvalidOptionError(
      `${name}.candidates`,
      `an integer in [1, ${nExpert}] (the model's experts per layer)`,
      prefetch.candidates,
    );
  }
}
