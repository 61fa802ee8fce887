/**
 * moetier replay: routing traces through placement policies, against the offline
 * optimum, with a napkin cost model. Pure computation: no model, no device.
 */
import path from 'node:path';
import { InvalidOptionError } from '../../core/errors.js';
import { checkOutputPath, writeFileAtomic } from '../../core/output-file.js';
import type { Command } from '../command.js';
import { costDefaults, parseCostOverrides } from '../../tiers/cost.js';
import { loadTraceFiles, runLab, type LabOptions } from '../../tiers/lab.js';
import { policyNames } from '../../tiers/policies/index.js';
import { readHeatTable } from '../../engine/heat-file.js';
import { routeCounts } from '../../routes/load.js';
import type { Trace } from '../../routes/types.js';
import { lineChartSvg } from '../../tiers/report/svg.js';
import { formatTable } from '../../tiers/report/table.js';
import type { ReplayRow } from '../../tiers/report/rows.js';
import { runPrefetchLab } from '../../tiers/prefetch-lab.js';
import { formatPrefetchTable } from '../../tiers/report/prefetch-rows.js';
import { parseFlags, type FlagSpecs } from '../args.js';
import {
  checkPrefetchArgs,
  prefetchArgs,
  prefetchFlags,
  prefetchLabOptions,
  prefetchUsage,
  type PrefetchArgs,
} from './replay-prefetch.js';

const usage = `usage: moetier replay --trace F [--trace F2 | F1,F2] [options]

  --budget 16,24,32          device slots per layer (default 16,24,32)
  --policy a,b,...           of ${policyNames.join(', ')} (default all)
  --offload hosted|hostless  hosted: misses run on the host; host-less: every miss is uploaded (default hosted);
                             host-less rows add reads per token against Belady's misses (the disk tier)
  --scope layer|global       per-layer budgets, or one budget of slots x layers for the model (default layer)
  --start empty|ids|heat     starting content shared by every policy (default heat with a heat prefix, else ids)
  --heat-from-prefix N       heat table from the first N decode tokens; they are not replayed
  --prefill-from-prefix N    the first N decode tokens play the prompt's prefill (replan, TTFT); not replayed.
                             Optimistic for replan: a decode's own first tokens predict it better than a real
                             prompt does; a trace's real prefill rows are used when it has them
  --heat F                   warm start from an engine heat file (moetier run's, e.g. from other prompts)
  --prefill-from F           the prefill rows of another trace F (a prefill from another prompt)
  --prefill-permute SEED     relabel each layer's prefill counts by a seeded permutation (a misleading prefill)
  --score-from N             replay the first N decode tokens as a warm-up, score from token N on
  --geometry NAME            expert byte geometry (default: from the trace's model)
  --model NAME               model name of a headerless trace (default: file name up to the first dot)
  --cost k=v,...             cost-model overrides of ${Object.keys(costDefaults).join(', ')}
  --json                     rows as JSON instead of tables
  --plot out.svg             hit rate against budget, one line per policy${prefetchUsage}`;

interface Parsed {
  files: string[];
  lab: LabOptions;
  model?: string;
  json: boolean;
  plot?: string;
  prefetch: PrefetchArgs;
  heatFile?: string;
  prefillFile?: string;
  /** The flags given, as typed (so that one the chosen replay would ignore is refused). */
  given: Set<string>;
}

/** The flags of moetier replay (the prefetch replay's among them: replay-prefetch.ts). */
const replayFlags: FlagSpecs = {
  trace: { type: 'string', multiple: true },
  budget: { type: 'string' },
  policy: { type: 'string' },
  offload: { type: 'string' },
  scope: { type: 'string' },
  start: { type: 'string' },
  'heat-from-prefix': { type: 'string' },
  'prefill-from-prefix': { type: 'string' },
  heat: { type: 'string' },
  'prefill-from': { type: 'string' },
  'prefill-permute': { type: 'string' },
  'score-from': { type: 'string' },
  geometry: { type: 'string' },
  model: { type: 'string' },
  cost: { type: 'string' },
  json: { type: 'boolean' },
  plot: { type: 'string' },
  ...prefetchFlags,
};

function intList(option: string, v: string): number[] {
  const xs = v.split(',').map(Number);
  if (v.trim() === '' || xs.some((x) => !Number.isInteger(x)))
    throw new InvalidOptionError(option, 'comma-separated integers', v);
  return xs;
}

function oneOf<T extends string>(option: string, v: string, allowed: readonly T[]): T {
  if (!(allowed as readonly string[]).includes(v)) throw new InvalidOptionError(option, allowed.join(' or '), v);
  return v as T;
}

export function parseReplayArgs(argv: readonly string[]): Parsed {
  const args = parseFlags(argv, replayFlags, 'replay');
  const str = (name: string) => args.string(name);
  const int = (name: string) => {
    const v = str(name);
    return v === undefined ? undefined : intList(args.flag(name), v)[0];
  };
  const choice = <T extends string>(name: string, allowed: readonly T[]) => {
    const v = str(name);
    return v === undefined ? undefined : oneOf(args.flag(name), v, allowed);
  };
  const lab: LabOptions = { budgets: [16, 24, 32], policies: [...policyNames], offload: 'hosted', scope: 'layer' };
  const budget = str('budget');
  if (budget !== undefined) lab.budgets = intList(args.flag('budget'), budget);
  const policy = str('policy');
  if (policy !== undefined) lab.policies = policy.split(',');
  lab.offload = choice('offload', ['hosted', 'hostless'] as const) ?? lab.offload;
  lab.scope = choice('scope', ['layer', 'global'] as const) ?? lab.scope;
  const start = choice('start', ['empty', 'ids', 'heat'] as const);
  if (start !== undefined) lab.start = start;
  for (const [flag, key] of [
    ['heat-from-prefix', 'heatFromPrefix'],
    ['prefill-from-prefix', 'prefillFromPrefix'],
    ['prefill-permute', 'prefillPermute'],
    ['score-from', 'scoreFrom'],
  ] as const) {
    const n = int(flag);
    if (n !== undefined) lab[key] = n;
  }
  const geometry = str('geometry');
  if (geometry !== undefined) lab.geometry = geometry;
  const cost = str('cost');
  if (cost !== undefined) lab.cost = parseCostOverrides(cost);
  const given = new Set(args.given().map((name) => `--${name}`));
  const p: Parsed = {
    files: args.list('trace').flatMap((v) => v.split(',').filter((f) => f !== '')),
    lab,
    json: args.bool('json'),
    prefetch: prefetchArgs(args),
    given,
    ...optional('model', str('model')),
    ...optional('plot', str('plot')),
    ...optional('heatFile', str('heat')),
    ...optional('prefillFile', str('prefill-from')),
  };
  if (p.files.length === 0) throw new InvalidOptionError('--trace', 'at least one trace file', undefined);
  checkPrefetchArgs(p.prefetch, p.given, p.lab.offload);
  return p;
}

/** { key: v } when v is given, else nothing (exactOptionalPropertyTypes: no key set to undefined). */
function optional<K extends string>(key: K, v: string | undefined): Partial<Record<K, string>> {
  return v === undefined ? {} : ({ [key]: v } as Record<K, string>);
}

/** Hit rate against budget; one line per policy (per trace and policy with several traces). */
export function plotRows(rows: readonly ReplayRow[]): string {
  const traces = [...new Set(rows.map((r) => r.trace))];
  const keyOf = (r: ReplayRow): string => (traces.length > 1 ? `${path.basename(r.trace)}: ` : '') + r.policy;
  const keys = [...new Set(rows.map(keyOf))];
  const series = keys.map((label) => ({
    label,
    points: rows.filter((r) => keyOf(r) === label).map((r) => ({ x: r.budget, y: r.hitRate })),
  }));
  const r0 = rows[0];
  const title = `${traces.map((t) => path.basename(t)).join(', ')}: decode hit rate (${r0.offload}, ${r0.scope} budget, start ${r0.start})`;
  return lineChartSvg(series, { title, xLabel: 'resident experts per layer (budget)', yLabel: 'decode hit rate' });
}

export async function replayMain(argv: readonly string[], out: (text: string) => void): Promise<number> {
  const p = parseReplayArgs(argv);
  if (p.prefetch.modes) return prefetchMain(p, out);
  if (p.plot) checkOutputPath(p.plot, '--plot', p.files); // before the work, never over a trace
  const traces = loadTraceFiles(p.files, p.model);
  const rows = runLab(traces, { ...p.lab, ...startFiles(p, traces) });
  if (p.json) out(`[\n${rows.map((r) => JSON.stringify(r)).join(',\n')}\n]`);
  else {
    for (const t of [...new Set(rows.map((r) => r.trace))]) out(formatTable(rows.filter((r) => r.trace === t)) + '\n');
  }
  if (p.plot) writeFileAtomic(p.plot, plotRows(rows), '--plot');
  return 0;
}

/** --heat F and --prefill-from F, read against the first trace's shape (every trace of one run must share it). */
function startFiles(p: Parsed, traces: readonly Trace[]): Pick<LabOptions, 'heat' | 'prefill'> {
  if (!p.heatFile && !p.prefillFile) return {};
  const { layers, experts } = traces[0].header;
  if (traces.some((t) => t.header.layers !== layers || t.header.experts !== experts)) {
    throw new InvalidOptionError(
      p.heatFile ? '--heat' : '--prefill-from',
      'traces of one shape (the file applies to each)',
      p.files.join(','),
    );
  }
  const out: Pick<LabOptions, 'heat' | 'prefill'> = {};
  if (p.heatFile) out.heat = readHeatTable(p.heatFile, layers, experts);
  if (p.prefillFile) {
    const [other] = loadTraceFiles([p.prefillFile], p.model);
    if (other.prefill.length === 0)
      throw new InvalidOptionError(
        '--prefill-from',
        'a trace with prefill rows (moetier run --trace-routes writes them)',
        p.prefillFile,
      );
    if (other.header.layers !== layers || other.header.experts !== experts) {
      throw new InvalidOptionError('--prefill-from', `a trace of ${layers} layers x ${experts} experts`, p.prefillFile);
    }
    out.prefill = routeCounts(other.prefill, layers, experts);
  }
  return out;
}

/** --prefetch: the timing-model replay's rows, a table per trace or --json. */
function prefetchMain(p: Parsed, out: (text: string) => void): number {
  const rows = runPrefetchLab(loadTraceFiles(p.files, p.model), prefetchLabOptions(p.prefetch, p.lab));
  if (p.json) out(`[\n${rows.map((r) => JSON.stringify(r)).join(',\n')}\n]`);
  else {
    for (const t of [...new Set(rows.map((r) => r.trace))])
      out(formatPrefetchTable(rows.filter((r) => r.trace === t)) + '\n');
  }
  return 0;
}

export const replayCommand: Command = {
  name: 'replay',
  summary:
    'replay routing traces through placement policies (hit rate, uploads, cost estimate), or prefetch on a simulated clock',
  usage,
  run: (argv) => replayMain(argv, (text) => console.log(text)),
};
