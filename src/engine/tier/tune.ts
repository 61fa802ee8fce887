/**
 * engine.tune(): live changes to the placement. All values are checked before anything
 * changes (a bad value throws InvalidOptionError and the engine keeps its settings); the
 * new values apply before the next step, i.e. at the next layer boundary the engine owns.
 */
import { InvalidOptionError } from '../../core/errors.js';
import { validateUploadLimits } from '../../actors/upload-queue/logic.js';
import type { UploadQueueLimits } from '../../actors/upload-queue/messages.js';
import type { LfruParams } from '../../tiers/policies/lfru.js';
import { validateLfru } from './options.js';
import {
  checkReplanKeys,
  prefillReplanDefaults,
  validatePrefillReplan,
  type PrefillReplanConfig,
  type PrefillReplanOptions,
} from './replan-options.js';
import { resolvePrefetch, type PrefetchConfig, type PrefetchOptions } from '../prefetch-options.js';

/** The settings a tune changes, as they are now (engine.tuneSettings()). */
export interface TuneSettings {
  placementPolicy: 'lfru' | 'dlfu';
  residentSlotsPerLayer: number;
  uploadInflightBytesMax: number;
  uploadInflightTransfersMax: number;
  lfru: LfruParams;
  prefillReplan: PrefillReplanConfig;
  prefetch: PrefetchConfig;
}

export interface TuneOptions {
  /**
   * Device slots per layer, in [1, nExpert], from the next boundary (before the next step): growing
   * reserves more slots and fills them hottest first; shrinking evicts the coldest residents.
   */
  residentSlotsPerLayer?: number;
  uploadInflightBytesMax?: number;
  uploadInflightTransfersMax?: number;
  lfru?: Partial<LfruParams>;
  /** Prefill replan on / off and its cap per layer, from the next request's prefill. */
  prefillReplan?: PrefillReplanOptions;
  /** Prefetch mode and window limits over the current ones (src/engine/prefetch-options.ts), from the next step's first layer on. */
  prefetch?: PrefetchOptions;
}

const known = new Set([
  'residentSlotsPerLayer',
  'uploadInflightBytesMax',
  'uploadInflightTransfersMax',
  'lfru',
  'prefillReplan',
  'prefetch',
]);

export function validateTune(
  o: TuneOptions,
  lfru: LfruParams,
  upload: UploadQueueLimits,
  replan: PrefillReplanConfig | undefined,
  nExpert: number,
  prefetch?: PrefetchConfig,
): {
  lfru: LfruParams | undefined;
  upload: Partial<UploadQueueLimits> | undefined;
  prefillReplan: PrefillReplanConfig | undefined;
  residentSlotsPerLayer: number | undefined;
  prefetch: PrefetchConfig | undefined;
} {
  if (typeof o !== 'object' || o === null) throw new InvalidOptionError('tune', 'an object of settings', o);
  for (const key of Object.keys(o))
    if (!known.has(key)) throw new InvalidOptionError(`tune.${key}`, `one of ${[...known].join(', ')}`, key);
  const slots = o.residentSlotsPerLayer;
  if (slots !== undefined && !(Number.isInteger(slots) && slots >= 1 && slots <= nExpert)) {
    throw new InvalidOptionError(
      'tune.residentSlotsPerLayer',
      `an integer in [1, ${nExpert}] (the expert count)`,
      slots,
    );
  }
  const limits: Partial<UploadQueueLimits> = {};
  if (o.uploadInflightBytesMax !== undefined) limits.inflightBytesMax = o.uploadInflightBytesMax;
  if (o.uploadInflightTransfersMax !== undefined) limits.inflightTransfersMax = o.uploadInflightTransfersMax;
  const hasLimits = Object.keys(limits).length > 0;
  if (hasLimits) validateUploadLimits({ ...upload, ...limits });
  const nextLfru = o.lfru === undefined ? undefined : validateLfru({ ...lfru, ...o.lfru });
  let prefillReplan: PrefillReplanConfig | undefined;
  if (o.prefillReplan !== undefined) {
    if (typeof o.prefillReplan !== 'object' || o.prefillReplan === null) {
      throw new InvalidOptionError(
        'tune.prefillReplan',
        '{ enabled?: boolean, maxSwapsPerLayer?: integer, guard?: boolean }',
        o.prefillReplan,
      );
    }
    checkReplanKeys(o.prefillReplan, 'tune.prefillReplan');
    prefillReplan = validatePrefillReplan(
      { ...(replan ?? prefillReplanDefaults), ...o.prefillReplan },
      nExpert,
      'tune.prefillReplan',
    );
  }
  const nextPrefetch = o.prefetch === undefined ? undefined : resolvePrefetch(o.prefetch, prefetch, 'tune.prefetch');
  return {
    lfru: nextLfru,
    upload: hasLimits ? limits : undefined,
    prefillReplan,
    residentSlotsPerLayer: slots,
    prefetch: nextPrefetch,
  };
}
