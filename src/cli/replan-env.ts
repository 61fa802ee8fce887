/**
 * The prefill replan's environment variables, the CLI's alone (the library reads no environment):
 * MOETIER_PREFILL_REPLAN=0|1, MOETIER_PREFILL_REPLAN_MAX=N, MOETIER_REPLAN_GUARD=0|1. A flag
 * beside one wins (--prefill-replan, --replan-max, --replan-guard); an empty variable is unset.
 * A bad value names the variable.
 */
import { InvalidOptionError } from '../core/errors.js';
import type { PrefillReplanOptions } from '../engine/tier/replan-options.js';

export function replanFromEnv(env: Readonly<Record<string, string | undefined>>): PrefillReplanOptions {
  const out: PrefillReplanOptions = {};
  const enabled = zeroOrOne(env, 'MOETIER_PREFILL_REPLAN');
  if (enabled !== undefined) out.enabled = enabled;
  const guard = zeroOrOne(env, 'MOETIER_REPLAN_GUARD');
  if (guard !== undefined) out.guard = guard;
  const max = env.MOETIER_PREFILL_REPLAN_MAX;
  if (max !== undefined && max !== '') {
    if (!/^\d+$/.test(max) || Number(max) < 1)
      throw new InvalidOptionError(
        'MOETIER_PREFILL_REPLAN_MAX',
        "an integer >= 1 (the model's experts or more: uncapped)",
        max,
      );
    out.maxSwapsPerLayer = Number(max);
  }
  return out;
}

function zeroOrOne(env: Readonly<Record<string, string | undefined>>, name: string): boolean | undefined {
  const v = env[name];
  if (v === undefined || v === '') return undefined;
  if (v !== '0' && v !== '1') throw new InvalidOptionError(name, '0 or 1', v);
  return v === '1';
}
