/**
 * Prefill replan's settings (SPEC.md section 2), validated where they enter: openEngine's
 * `prefillReplan`, the CLI (--prefill-replan, --replan-max N), the variables
 * MOETIER_PREFILL_REPLAN=1 / MOETIER_PREFILL_REPLAN_MAX, and engine.tune.
 *
 *   precedence: explicit option > variable > default (off, cap 24 swaps per layer)
 *   cap:        an integer >= 1, kept as min(cap, nExpert): a layer cannot swap more than its
 *               experts, so nExpert (or more) means uncapped
 */
import { InvalidOptionError } from '../../core/errors.js';
import { replanDefaults } from '../../tiers/policies/replan.js';

export interface PrefillReplanOptions {
  enabled?: boolean;
  /** Swaps planned per layer from one prefill's counts (default 24). */
  maxSwapsPerLayer?: number;
}

export interface PrefillReplanConfig {
  enabled: boolean;
  maxSwapsPerLayer: number;
}

/** Pending replan swaps started per decode token (SPEC.md section 2: four). */
export const replanDrainPerToken = 4;

export function resolvePrefillReplan(
  o: PrefillReplanOptions | undefined,
  env: Record<string, string | undefined>,
  nExpert: number,
): PrefillReplanConfig {
  if (o !== undefined && (typeof o !== 'object' || o === null)) {
    throw new InvalidOptionError('prefillReplan', '{ enabled?: boolean, maxSwapsPerLayer?: integer }', o);
  }
  const fromEnv: PrefillReplanOptions = {};
  const flag = env.MOETIER_PREFILL_REPLAN;
  if (flag !== undefined && flag !== '') {
    if (flag !== '0' && flag !== '1') throw new InvalidOptionError('MOETIER_PREFILL_REPLAN', '0 or 1', flag);
    fromEnv.enabled = flag === '1';
  }
  const max = env.MOETIER_PREFILL_REPLAN_MAX;
  if (max !== undefined && max !== '') {
    const n = Number(max);
    fromEnv.maxSwapsPerLayer = checkCap('MOETIER_PREFILL_REPLAN_MAX', /^\d+$/.test(max) ? n : max, nExpert);
  }
  return validatePrefillReplan({ enabled: false, maxSwapsPerLayer: replanDefaults.capPerLayer, ...fromEnv, ...defined(o) }, nExpert, 'prefillReplan');
}

/** The whole setting checked; `where` names the option in the error (prefillReplan, tune.prefillReplan). */
export function validatePrefillReplan(c: PrefillReplanConfig, nExpert: number, where: string): PrefillReplanConfig {
  if (typeof c.enabled !== 'boolean') throw new InvalidOptionError(`${where}.enabled`, 'true or false', c.enabled);
  return { enabled: c.enabled, maxSwapsPerLayer: checkCap(`${where}.maxSwapsPerLayer`, c.maxSwapsPerLayer, nExpert) };
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
  return out;
}
