/**
 * What one replay runs: a trace cut into prefill counts and decode steps, a budget
 * and the starting content shared by every policy compared.
 *
 * `heatFromPrefix N` turns the first N decode tokens into the heat table and
 * `prefillFromPrefix N` into the prompt's prefill counts (replan, TTFT); either way
 * those tokens are not replayed: every policy is scored on the same later tokens.
 */
import { InvalidOptionError } from '../core/errors.js';
import { routeCounts } from '../routes/load.js';
import type { Trace } from '../routes/types.js';
import type { Residency } from './residency.js';
import { startResidency, type StartKind } from './start.js';
import type { Budget, FutureStep, HeatTable } from './types.js';

export interface Scenario {
  source: string;
  model: string;
  layers: number;
  experts: number;
  topK: number;
  budget: Budget;
  startKind: StartKind;
  start: Residency;
  heat?: HeatTable;
  /** Prefill rows per layer and expert, run before decode (none: no prefill events). */
  prefill?: HeatTable;
  decode: readonly FutureStep[];
  /** Decode tokens of the trace used as heat / prefill and not replayed. */
  skippedTokens: number;
}

export interface ScenarioOptions {
  budget: Budget;
  /** Default: 'heat' when a heat prefix is given, else 'ids'. */
  start?: StartKind;
  heatFromPrefix?: number;
  prefillFromPrefix?: number;
}

export function buildScenario(trace: Trace, o: ScenarioOptions): Scenario {
  const { layers, experts, topK, model } = trace.header;
  const n = trace.decode.length;
  const prefixOk = (v: number | undefined, option: string): number => {
    if (v === undefined) return 0;
    if (!Number.isInteger(v) || v < 1 || v >= n) {
      throw new InvalidOptionError(option, `an integer in [1, ${n - 1}] (the trace has ${n} decode tokens)`, v);
    }
    return v;
  };
  const heatN = prefixOk(o.heatFromPrefix, '--heat-from-prefix');
  const prefillN = prefixOk(o.prefillFromPrefix, '--prefill-from-prefix');
  const heat = heatN > 0 ? routeCounts(trace.decode.slice(0, heatN), layers, experts) : undefined;
  let prefill: HeatTable | undefined;
  if (prefillN > 0) prefill = routeCounts(trace.decode.slice(0, prefillN), layers, experts);
  else if (trace.prefill.length > 0) prefill = routeCounts(trace.prefill, layers, experts);
  const startKind = o.start ?? (heat ? 'heat' : 'ids');
  const skippedTokens = Math.max(heatN, prefillN);
  return {
    source: trace.source, model, layers, experts, topK, budget: o.budget, startKind,
    start: startResidency(startKind, layers, experts, o.budget, heat),
    heat, prefill,
    decode: trace.decode.slice(skippedTokens).map((s) => s.layers),
    skippedTokens,
  };
}
