/**
 * The prefetch flags of `moetier replay`: parsed beside the policy lab's, and
 * when --prefetch is given the command replays each trace on a simulated clock instead
 * (src/tiers/prefetch-lab.ts). Without them the command is the policy lab, unchanged.
 */
import { UPLOAD_QUEUE_DEFAULTS } from '../../actors/upload-queue/logic.js';
import { readInputText } from '../../core/input-file.js';
import { limits } from '../../core/limits.js';
import { InvalidOptionError } from '../../core/errors.js';
import { resolvePrefetch } from '../../engine/prefetch-options.js';
import type { LabOptions } from '../../tiers/lab.js';
import type { PrefetchLabOptions } from '../../tiers/prefetch-lab.js';
import { prefetchReplayModes, type PrefetchReplayMode } from '../../tiers/prefetch-replay.js';
import type { Args, FlagSpecs } from '../args.js';

export const prefetchUsage = `
  --prefetch M,...           modes of off, observe, enforce (e.g. off,observe,enforce): the prefetch replay instead of
                             the policy lab, host-less on a simulated clock with LRU residency, one row per budget and
                             mode (ms and stall ms per token, reads, covered, late, wasted, uncovered, cancelled);
                             the engine's window (transferWindowBytes, packPrefetch)
  --prefetch-recall R        the oracle's recall in [0, 1] (default 0.9): the next layer's true routing with each expert
                             replaced by a wrong one with probability 1 - R; an assumption, not a measurement
  --prefetch-seed N          the oracle's seed (default 1)
  --prefetch-safety S        share of a layer's compute trusted as the window, in (0, 1] (default 0.8)
  --timing cost|FILE.json    compute per layer, bandwidth and fixed cost per read: the cost model (default; --cost
                             applies) or a calibration snapshot (engine.calibration$() saved as JSON)`;

export interface PrefetchArgs {
  modes?: PrefetchReplayMode[];
  recall: number;
  seed: number;
  safety?: number;
  timing: string;
}

/** The prefetch replay's flags (parsed with the rest of moetier replay's: replay.ts). */
export const prefetchFlags: FlagSpecs = {
  prefetch: { type: 'string' },
  'prefetch-recall': { type: 'string' },
  'prefetch-seed': { type: 'string' },
  'prefetch-safety': { type: 'string' },
  timing: { type: 'string' },
};

/** The prefetch flags of a parsed command line, checked (defaults: recall 0.9, seed 1, timing cost). */
export function prefetchArgs(args: Args): PrefetchArgs {
  const p: PrefetchArgs = { recall: 0.9, seed: 1, timing: args.string('timing') ?? 'cost' };
  const value = (name: string) => args.string(name);
  const modes = value('prefetch');
  if (modes !== undefined) p.modes = modeList(modes);
  const recall = value('prefetch-recall');
  if (recall !== undefined) p.recall = numberIn(args.flag('prefetch-recall'), recall, 0, 1, 'a number in [0, 1]');
  const seed = value('prefetch-seed');
  if (seed !== undefined)
    p.seed = numberIn(args.flag('prefetch-seed'), seed, 0, 0xffffffff, 'an integer in [0, 4294967295]', true);
  const safety = value('prefetch-safety');
  if (safety !== undefined) p.safety = numberIn(args.flag('prefetch-safety'), safety, 0, 1, 'a number in (0, 1]');
  return p;
}

function modeList(v: string): PrefetchReplayMode[] {
  const modes = v.split(',');
  const bad = modes.find((m) => !(prefetchReplayModes as readonly string[]).includes(m));
  if (bad !== undefined || new Set(modes).size !== modes.length) {
    throw new InvalidOptionError(
      '--prefetch',
      'distinct modes of off, observe, enforce, comma-separated (e.g. off,observe,enforce)',
      v,
    );
  }
  return modes as PrefetchReplayMode[];
}

function numberIn(flag: string, v: string, lo: number, hi: number, expected: string, integer = false): number {
  const x = Number(v);
  if (v.trim() === '' || !Number.isFinite(x) || x < lo || x > hi || (integer && !Number.isInteger(x)))
    throw new InvalidOptionError(flag, expected, v);
  return x;
}

/** The prefetch flags only with --prefetch; with it, no policy-lab flag that it would ignore. */
export function checkPrefetchArgs(p: PrefetchArgs, given: ReadonlySet<string>, offload: string): void {
  const own = ['--prefetch-recall', '--prefetch-seed', '--prefetch-safety', '--timing'];
  if (!p.modes) {
    const stray = own.find((f) => given.has(f));
    if (stray) throw new InvalidOptionError(stray, '--prefetch beside it (it sets the prefetch replay)', undefined);
    return;
  }
  const ignored = [
    '--policy',
    '--plot',
    '--prefill-from-prefix',
    '--prefill-from',
    '--prefill-permute',
    '--heat',
    '--score-from',
  ].find((f) => given.has(f));
  if (ignored)
    throw new InvalidOptionError(
      ignored,
      'no such flag with --prefetch (the prefetch replay runs its own LRU, no prefill, no heat file, every token scored)',
      undefined,
    );
  if (offload !== 'hostless' && given.has('--offload'))
    throw new InvalidOptionError(
      '--offload',
      'hostless with --prefetch (the prefetch replay reads every miss)',
      offload,
    );
}

/** The lab options of the prefetch replay; reads the --timing file. */
export function prefetchLabOptions(p: PrefetchArgs, lab: LabOptions): PrefetchLabOptions {
  let cfg;
  try {
    cfg = resolvePrefetch({ mode: 'enforce', ...(p.safety !== undefined ? { safety: p.safety } : {}) });
  } catch (err) {
    if (err instanceof InvalidOptionError)
      throw new InvalidOptionError('--prefetch-safety', err.expected, err.got, { cause: err });
    throw err;
  }
  return {
    budgets: lab.budgets,
    scope: lab.scope,
    start: lab.start,
    heatFromPrefix: lab.heatFromPrefix,
    geometry: lab.geometry,
    cost: lab.cost,
    modes: p.modes ?? ['off'],
    recall: p.recall,
    seed: p.seed,
    timing: p.timing === 'cost' ? 'cost' : { file: p.timing, json: readSnapshot(p.timing) },
    // In flight: the engine's gate default (upload.inflightBytesMax), which the replay's ledger models.
    window: {
      safety: cfg.safety,
      windowBytesMax: cfg.windowBytesMax,
      inflightBytesMax: UPLOAD_QUEUE_DEFAULTS.inflightBytesMax,
    },
    queueLengthMax: cfg.queueMax,
  };
}

function readSnapshot(file: string): unknown {
  try {
    return JSON.parse(readInputText(file, '--timing', 'calibration snapshot JSON file', limits.timingFileBytesMax));
  } catch (err) {
    throw new InvalidOptionError('--timing', 'cost, or a readable calibration snapshot JSON file', file, {
      cause: err,
    });
  }
}
