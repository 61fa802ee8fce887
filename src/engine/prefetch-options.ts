/**
 * The prefetch's options (docs/SPEC.md section 4), validated fail-closed where they enter
 * (openEngine, tune): a bad value is refused with the option's name and nothing changes.
 *
 *   mode             off (default: today's path, byte for byte) | observe (decide and report,
 *                    issue nothing) | enforce (issue only what the window admits)
 *   safety           the share of a layer's measured compute time trusted as the window (0.8)
 *   windowBytesMax   bytes one window admits at most (256 MiB)
 *   queueMax         admitted experts waiting for room under the gate's budget at once (the native
 *                    tier's queue; 64, its ceiling); more are refused and counted
 *   (bytes in flight: the one gate's budget, upload.inflightBytesMax, which every upload into a slot
 *   shares, misses first; a prefetch.inflightBytesMax is refused with that name)
 *   candidates       the predicted experts per layer, best first, a prefetch may read (default the
 *                    model's nExpertUsed, k; at most nExpert, checked where the model is known). On
 *                    the planted presets the top k hold 98 % of the routed experts and ranks k+1..2k
 *                    the rest: reading the top 2k read about twice the bytes for the same coverage
 *                    (bench/README.md, prefetch)
 */
import { InvalidOptionError } from '../core/errors.js';
import { TIER_PREFETCH_QUEUE_MAX } from '../native/constants.js';
import { TRANSFER_WINDOW_DEFAULTS } from '../tiers/transfer-window.js';

export type PrefetchMode = 'off' | 'observe' | 'enforce';

export interface PrefetchOptions {
  mode?: PrefetchMode;
  safety?: number;
  windowBytesMax?: number;
  queueMax?: number;
  candidates?: number;
}

/** Resolved: every limit set; candidates stays unset for the model's nExpertUsed. */
export type PrefetchConfig = Required<Omit<PrefetchOptions, 'candidates'>> & Pick<PrefetchOptions, 'candidates'>;

export const prefetchDefaults: PrefetchConfig = {
  mode: 'off',
  safety: TRANSFER_WINDOW_DEFAULTS.safety,
  windowBytesMax: TRANSFER_WINDOW_DEFAULTS.windowBytesMax,
  queueMax: TIER_PREFETCH_QUEUE_MAX,
};

/** The options over `base` (the defaults, or the config a tune changes), checked as a whole. */
export function resolvePrefetch(
  o: PrefetchOptions | undefined,
  base: PrefetchConfig = prefetchDefaults,
  name = 'prefetch',
): PrefetchConfig {
  if (o === undefined) return base;
  if (o === null || typeof o !== 'object') throw new InvalidOptionError(name, 'an object', o);
  if ('inflightBytesMax' in o) {
    throw new InvalidOptionError(
      `${name}.inflightBytesMax`,
      "unset: prefetches share the one gate's budget, upload.inflightBytesMax (tune: uploadInflightBytesMax)",
      (o as { inflightBytesMax?: unknown }).inflightBytesMax,
    );
  }
  for (const key of Object.keys(o))
    if (!(key in prefetchDefaults) && key !== 'candidates')
      throw new InvalidOptionError(
        `${name}.${key}`,
        `one of ${[...Object.keys(prefetchDefaults), 'candidates'].join(', ')}`,
        key,
      );
  const next = { ...base, ...o } as PrefetchConfig;
  if (next.mode !== 'off' && next.mode !== 'observe' && next.mode !== 'enforce')
    throw new InvalidOptionError(`${name}.mode`, '"off", "observe" or "enforce"', next.mode);
  if (typeof next.safety !== 'number' || !(next.safety > 0 && next.safety <= 1))
    throw new InvalidOptionError(`${name}.safety`, 'a number in (0, 1]', next.safety);
  if (!Number.isSafeInteger(next.windowBytesMax) || next.windowBytesMax < 1)
    throw new InvalidOptionError(`${name}.windowBytesMax`, 'an integer number of bytes >= 1', next.windowBytesMax);
  if (!Number.isInteger(next.queueMax) || next.queueMax < 1 || next.queueMax > TIER_PREFETCH_QUEUE_MAX) {
    throw new InvalidOptionError(`${name}.queueMax`, `an integer in [1, ${TIER_PREFETCH_QUEUE_MAX}]`, next.queueMax);
  }
  if (next.candidates !== undefined && !(Number.isInteger(next.candidates) && next.candidates >= 1)) {
    throw new InvalidOptionError(
      `${name}.candidates`,
      'an integer >= 1 (predicted experts per layer a prefetch may read)',
      next.candidates,
    );
  }
  return Object.freeze(next);
}
