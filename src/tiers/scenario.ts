/**
 * What one replay runs: a trace cut into prefill counts and decode steps, a budget
 * and the starting content shared by every policy compared.
 *
 * `heatFromPrefix N` turns the first N decode tokens into the heat table and
 * `prefillFromPrefix N` into the prompt's prefill counts (replan, TTFT); either way
 * those tokens are not replayed: every policy is scored on the same later tokens.
 * A prefix stand-in is optimistic for replan: the decode's own first tokens predict its
 * next ones better than a real prompt does (docs/REPLAY.md); real prefill rows are used
 * when the trace has them.
 *
 * `heat` gives the table itself (an engine heat file, e.g. from another prompt's run);
 * `prefill` the counts (another trace's prefill rows); `prefillPermute S` relabels each
 * layer's prefill counts by a seeded permutation (a prefill that misleads: its experts are
 * not its decode's); `scoreFrom N` replays the first N decode tokens as a warm-up that is
 * not scored (hits, uploads and tokens count from token N on).
 */
import { InvalidOptionError } from '../core/errors.js';
import { mulberry32 } from '../core/prng.js';
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
  /** Decode tokens replayed before the scored ones (a warm-up): 0 scores them all. */
  scoreFrom: number;
}

export interface ScenarioOptions {
  budget: Budget;
  /** Default: 'heat' when a heat prefix is given, else 'ids'. */
  start?: StartKind;
  heatFromPrefix?: number;
  prefillFromPrefix?: number;
  heat?: HeatTable;
  prefill?: HeatTable;
  prefillPermute?: number;
  scoreFrom?: number;
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
  if (o.heat && heatN > 0)
    throw new InvalidOptionError('--heat', 'a heat file or --heat-from-prefix, not both', 'both');
  if (o.prefill && prefillN > 0)
    throw new InvalidOptionError(
      '--prefill-from',
      "another trace's prefill or --prefill-from-prefix, not both",
      'both',
    );
  if (o.heat) checkShape(o.heat, layers, experts, '--heat');
  if (o.prefill) checkShape(o.prefill, layers, experts, '--prefill-from');
  const heat = o.heat ?? (heatN > 0 ? routeCounts(trace.decode.slice(0, heatN), layers, experts) : undefined);
  let prefill: HeatTable | undefined = o.prefill;
  if (prefillN > 0) prefill = routeCounts(trace.decode.slice(0, prefillN), layers, experts);
  else if (!prefill && trace.prefill.length > 0) prefill = routeCounts(trace.prefill, layers, experts);
  if (o.prefillPermute !== undefined) {
    if (!prefill)
      throw new InvalidOptionError(
        '--prefill-permute',
        'a prefill to permute (prefill rows in the trace, --prefill-from or --prefill-from-prefix)',
        o.prefillPermute,
      );
    prefill = permuteCounts(prefill, o.prefillPermute);
  }
  const startKind = o.start ?? (heat ? 'heat' : 'ids');
  const skippedTokens = Math.max(heatN, prefillN);
  const decode = trace.decode.slice(skippedTokens).map((s) => s.layers);
  const scoreFrom = o.scoreFrom ?? 0;
  if (!Number.isInteger(scoreFrom) || scoreFrom < 0 || scoreFrom >= decode.length) {
    throw new InvalidOptionError(
      '--score-from',
      `an integer in [0, ${decode.length - 1}] (decode tokens replayed after the prefixes)`,
      o.scoreFrom,
    );
  }
  return {
    source: trace.source,
    model,
    layers,
    experts,
    topK,
    budget: o.budget,
    startKind,
    start: startResidency(startKind, layers, experts, o.budget, heat),
    heat,
    prefill,
    decode,
    skippedTokens,
    scoreFrom,
  };
}

function checkShape(t: HeatTable, layers: number, experts: number, option: string): void {
  if (t.length !== layers || t.some((row) => row.length !== experts)) {
    throw new InvalidOptionError(
      option,
      `counts of the trace's shape (${layers} layers x ${experts} experts)`,
      `${t.length} x ${t[0]?.length ?? 0}`,
    );
  }
}

/** Each layer's counts relabelled by its own permutation from `seed` (mulberry32, Fisher-Yates). */
export function permuteCounts(t: HeatTable, seed: number): HeatTable {
  if (!Number.isSafeInteger(seed)) throw new InvalidOptionError('--prefill-permute', 'an integer seed', seed);
  const next = mulberry32(seed);
  return t.map((row) => {
    const perm = row.map((_, e) => e);
    for (let i = perm.length - 1; i > 0; i--) {
      const j = Math.floor(next() * (i + 1));
      [perm[i], perm[j]] = [perm[j], perm[i]];
    }
    return row.map((_, e) => row[perm[e]]);
  });
}
