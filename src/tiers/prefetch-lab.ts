/**
 * The prefetch lab: every (trace, budget, mode) through the prefetch replay into rows, on the
 * same scenarios the policy lab replays (labScenario: budget, start, heat prefix).
 * `moetier replay --prefetch` is a thin front end over `runPrefetchLab`.
 */
import type { Trace } from '../routes/types.js';
import { costDefaults, type CostParams } from './cost.js';
import { expertBytes } from './geometry.js';
import { labGeometry, labScenario } from './lab.js';
import { replayPrefetch, type PrefetchReplayMode } from './prefetch-replay.js';
import { timingFromCost, timingFromSnapshot, type TimingModel } from './prefetch-timing.js';
import { toPrefetchRow, type PrefetchRow } from './report/prefetch-rows.js';
import type { StartKind } from './start.js';
import type { TransferWindowLimits } from './transfer-window.js';

export interface PrefetchLabOptions {
  budgets: readonly number[];
  scope: 'layer' | 'global';
  start?: StartKind;
  heatFromPrefix?: number;
  geometry?: string;
  cost?: CostParams;
  modes: readonly PrefetchReplayMode[];
  /** The oracle's recall: a stated assumption, not a measurement. */
  recall: number;
  seed: number;
  /** The cost model's timing, or a calibration snapshot (its file and parsed JSON). */
  timing: 'cost' | { file: string; json: unknown };
  window: Required<TransferWindowLimits>;
  /** The prefetch queue's length (the engine's prefetch.queueMax). */
  queueLengthMax: number;
}

export function runPrefetchLab(traces: readonly Trace[], o: PrefetchLabOptions): PrefetchRow[] {
  const rows: PrefetchRow[] = [];
  for (const trace of traces) {
    const g = labGeometry(trace, o.geometry);
    const timing: TimingModel =
      o.timing === 'cost'
        ? timingFromCost(g, o.cost ?? costDefaults)
        : timingFromSnapshot(o.timing.file, o.timing.json, trace.header.layers);
    for (const b of o.budgets) {
      const sc = labScenario(trace, o, b);
      for (const mode of o.modes) {
        const r = replayPrefetch(sc, {
          mode,
          timing,
          expertBytes: expertBytes(g),
          recall: o.recall,
          seed: o.seed,
          window: o.window,
          queueLengthMax: o.queueLengthMax,
        });
        rows.push(toPrefetchRow(sc, g, r, { recall: o.recall, seed: o.seed, timing, window: o.window }));
      }
    }
  }
  return rows;
}
