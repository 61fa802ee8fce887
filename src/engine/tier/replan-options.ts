/**
 * Prefill replan's settings (docs/SPEC.md section 2), validated where they enter: openEngine's
 * `prefillReplan`, the CLI (--prefill-replan, --replan-max N, --replan-guard on|off, and its
 * variables: src/cli/replan-env.ts), and engine.tune. The library reads no environment.
 *
 *   default:    off, cap 24 swaps per layer, guard on
 *   guard:      src/tiers/policies/replan-guard.ts. With replan on, a replanned layer is reverted
 *               where the first decode tokens favour the residents it displaced; with replan off,
 *               the replan is held in reserve and taken late where they favour it (so a heat file
 *               that misleads costs a bounded number of tokens). Off: the unguarded replan and the
 *               plain LFRU baseline of docs/SPEC.md.
 *   cap:        an integer >= 1, kept as min(cap, nExpert): a layer cannot swap more than its
 *               experts, so nExpert (or more) means uncapped
 */
import { InvalidOptionError } from '../../core/errors.js';
import { replanDefaults } from '../../tiers/policies/replan.js';

export interface PrefillReplanOptions {
  enabled?: boolean;
  /** Swaps planned per layer from one prefill's counts (default 24). */
  maxSwapsPerLayer?: number;
  /** The replan guard (default true): see the top of this file. */
  guard?: boolean;
}

export interface PrefillReplanConfig {
  enabled: boolean;
  maxSwapsPerLayer: number;
  guard: boolean;
}

/** The settings when nothing is given (replan off, the guard on). */
export const prefillReplanDefaults: PrefillReplanConfig = {
  enabled: false,
  maxSwapsPerLayer: replanDefaults.capPerLayer,
  guard: true,
};

/** Pending replan swaps started per decode token (docs/SPEC.md section 2: four). */
export const replanDrainPerToken = 4;

export function resolvePrefillReplan(o: PrefillReplanOptions | undefined, nExpert: number): PrefillReplanConfig {
  if (o !== undefined && (typeof o !== 'object' || o === null)) {
    throw new InvalidOptionError(
      'prefillReplan',
      '{ enabled?: boolean, maxSwapsPerLayer?: integer, guard?: boolean }',
      o,
    );
  }
  if (o !== undefined) checkReplanKeys(o, 'prefillReplan');
  return validatePrefillReplan({ ...prefillReplanDefaults, ...defined(o) }, nExpert, 'prefillReplan');
}

/** The whole setting checked; `where` names the option in the error (prefillReplan, tune.prefillReplan). */
export function validatePrefillReplan(c: PrefillReplanConfig, nExpert: number, where: string): PrefillReplanConfig {
  if (typeof c.enabled !== 'boolean') throw new InvalidOptionError(`${where}.enabled`, 'true or false', c.enabled);
  if (typeof c.guard !== 'boolean') throw new InvalidOptionError(`${where}.guard`, 'true or false', c.guard);
  return {
    enabled: c.enabled,
    maxSwapsPerLayer: checkCap(`${where}.maxSwapsPerLayer`, c.maxSwapsPerLayer, nExpert),
    guard: c.guard,
  };
}

const replanKeys = new Set(['enabled', 'maxSwapsPerLayer', 'guard']);

/** A key the settings do not have (a typo such as `gaurd`) is refused, not ignored. */
export function checkReplanKeys(o: object, where: string): void {
  for (const key of Object.keys(o))
    if (!replanKeys.has(key))
      throw new InvalidOptionError(`${where}.${key}`, `one of ${[...replanKeys].join(', ')}`, key);
}

function checkCap(name: string, v: unknown, nExpert: number): number {
  if (typeof v !== 'number' || !Number.isInteger(v) || v < 1) {
    throw new InvalidOptionError(name, `an integer >= 1 (${nExpert} or more: uncapped)`, v);
  }
  return Math.min(v, nExpert);
}

function defined(o: PrefillReplanOptions | undefined): PrefillReplanOptions {
  const out: PrefillReplanOptions = {};
  if (o?.enabled !== undefined) out.enabled = o.enabled;
  if (o?.maxSwapsPerLayer !== undefined) out.maxSwapsPerLayer = o.maxSwapsPerLayer;
  if (o?.guard !== undefined) out.guard = o.guard;
  return out;
}
