/**
 * The policy lab: every (trace, budget, policy) replayed into result rows.
 * `moetier replay` is a thin front end over `runLab`.
 */
import { InvalidOptionError } from '../core/errors.js';
import { readTraces } from '../routes/load.js';
import type { Trace } from '../routes/types.js';
import { costDefaults, type CostParams, type Offload } from './cost.js';
import { geometryByName, geometryFromTrace, requireGeometry, type ModelGeometry } from './geometry.js';
import { belady } from './policies/belady.js';
import { policyByName, policyNames } from './policies/index.js';
import { replay } from './replay.js';
import { toRow, type ReplayRow } from './report/rows.js';
import { buildScenario, type Scenario } from './scenario.js';
import type { StartKind } from './start.js';
import type { Budget, HeatTable } from './types.js';

export interface LabOptions {
  /** Slots per layer; under a global scope the model gets budget x layers slots. */
  budgets: readonly number[];
  policies: readonly string[];
  offload: Offload;
  scope: 'layer' | 'global';
  start?: StartKind;
  heatFromPrefix?: number;
  prefillFromPrefix?: number;
  /** --heat F: an engine heat file's counts (the warm start of a real run). */
  heat?: HeatTable;
  /** --prefill-from F: another trace's prefill rows, counted (a prefill from another prompt). */
  prefill?: HeatTable;
  prefillPermute?: number;
  scoreFrom?: number;
  /** Byte geometry; default: the one named like the trace's model. */
  geometry?: string;
  cost?: CostParams;
}

export function loadTraceFiles(files: readonly string[], model?: string): Trace[] {
  return files.flatMap((f) => readTraces(f, { model, expertsOf: (m) => geometryByName(m)?.experts }));
}

export function runLab(traces: readonly Trace[], o: LabOptions): ReplayRow[] {
  const chosen = o.policies.map((name) => {
    const p = policyByName(name);
    if (!p) throw new InvalidOptionError('--policy', `names from ${policyNames.join(', ')}`, name);
    return p;
  });
  const rows: ReplayRow[] = [];
  for (const trace of traces) {
    const g = labGeometry(trace, o.geometry);
    for (const b of o.budgets) {
      const sc = labScenario(trace, o, b);
      const counts = new Map(chosen.map((p) => [p, replay(p, sc, o.offload)]));
      // Every row's hit rate is set against Belady's (host-less: its reads against Belady's misses), asked for or not: one replay of it.
      const bound = counts.get(belady) ?? replay(belady, sc, o.offload);
      for (const p of chosen) rows.push(toRow(p, sc, counts.get(p)!, o.offload, g, o.cost ?? costDefaults, bound));
    }
  }
  return rows;
}

/** --geometry, else the trace's model by name, else the geometry its header carries; of the trace's shape. */
export function labGeometry(trace: Trace, geometry?: string): ModelGeometry {
  const fromHeader = geometry || geometryByName(trace.header.model) ? undefined : geometryFromTrace(trace.header);
  const g =
    fromHeader ??
    requireGeometry(
      geometry ?? trace.header.model,
      geometry
        ? '--geometry'
        : `--geometry (trace model "${trace.header.model}" is not known and its header carries no geometry)`,
    );
  // The byte and cost figures come from g: a trace of another shape would be priced as a model it is not.
  // ...and its top-k: a trace routing 7 or 9 experts per row is not a replay of a top-8 model.
  if (trace.header.layers !== g.layers || trace.header.experts !== g.experts || trace.header.topK !== g.topK) {
    throw new InvalidOptionError(
      geometry ? '--geometry' : '--trace',
      `a trace of ${g.name}'s shape (${g.layers} layers x ${g.experts} experts, top-${g.topK}), got ${trace.header.layers} x ${trace.header.experts}, top-${trace.header.topK} in ${trace.header.model}`,
      geometry ?? trace.header.model,
    );
  }
  return g;
}

/**
 * The scenario one (trace, budget) pair of the lab replays: `slotsPerLayer` slots on every layer,
 * or that many times the layers as one global budget. (Exported for the test that the engine and
 * the replay feed a policy the same events: it replays an engine trace through this.)
 */
export function labScenario(
  trace: Trace,
  o: Pick<
    LabOptions,
    'scope' | 'start' | 'heatFromPrefix' | 'prefillFromPrefix' | 'heat' | 'prefill' | 'prefillPermute' | 'scoreFrom'
  >,
  slotsPerLayer: number,
): Scenario {
  const b = slotsPerLayer;
  if (!Number.isInteger(b) || b < 1 || b > trace.header.experts) {
    throw new InvalidOptionError('--budget', `integers in [1, ${trace.header.experts}] (slots per layer)`, b);
  }
  const budget: Budget =
    o.scope === 'layer' ? { scope: 'layer', slots: b } : { scope: 'global', slots: b * trace.header.layers };
  return buildScenario(trace, {
    budget,
    start: o.start,
    heatFromPrefix: o.heatFromPrefix,
    prefillFromPrefix: o.prefillFromPrefix,
    heat: o.heat,
    prefill: o.prefill,
    prefillPermute: o.prefillPermute,
    scoreFrom: o.scoreFrom,
  });
}
