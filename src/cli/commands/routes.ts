/**
 * moetier routes stats TRACE...: what routing traces look like (entropy of expert use, how
 * concentrated it is, next-token reuse, distinct experts per window, per-layer LRU and Belady
 * hit rates). Traces in the engine's format (moetier run --trace-routes) or ../shared/traces/'s.
 * Pure computation: no model.
 */
import path from 'node:path';
import { InvalidOptionError } from '../../core/errors.js';
import type { Command } from '../command.js';
import { loadTraceFiles } from '../../tiers/lab.js';
import {
  HIT_RATE_SHARES,
  HIT_RATE_WARMUP_STEPS,
  pooledPhase,
  traceRouteStats,
  type LayerRow,
  type TraceRouteStats,
} from '../../tiers/route-stats.js';
import type { Phase } from '../../routes/types.js';

const usage = `usage: moetier routes stats [--json] [--model NAME] TRACE...

  TRACE          route traces (moetier run --trace-routes, or ../shared/traces/ files); a file may hold several prompts
  --json         one JSON object: per trace and phase, every layer and the mean over layers; and the mean over traces
  --model NAME   model name of a headerless trace (default: the file name up to its first dot)

Per layer, decode and prefill rows apart:
  entropy        entropy of expert use over log E (1 = every expert used equally)
  top16, topE/4  share of the picks on the 16 / the E/4 most-used experts
  reuse          share of a token's experts the previous token also used; x chance: over k/E
  win16, win64   distinct experts in 16 / 64 consecutive tokens, as a share of E
  LRU, Belady    hit rate at ${HIT_RATE_SHARES.map((s) => `${s * 100} %`).join(' / ')} of E slots per layer: host-less, cold start,
                 the first ${HIT_RATE_WARMUP_STEPS} tokens not scored (Belady MIN: the bound for any demand policy)`;

export interface RoutesArgs {
  files: string[];
  json: boolean;
  model?: string;
}

export function parseRoutesArgs(argv: readonly string[]): RoutesArgs {
  const [sub, ...rest] = argv;
  if (sub !== 'stats') throw new InvalidOptionError('routes', 'the sub-command stats', sub);
  const p: RoutesArgs = { files: [], json: false };
  for (let i = 0; i < rest.length; i++) {
    const a = rest[i];
    if (a === '--json') p.json = true;
    else if (a === '--model') {
      const v = rest[++i];
      if (v === undefined || v.startsWith('--')) throw new InvalidOptionError(a, 'a model name after it', v);
      p.model = v;
    } else if (a.startsWith('-')) throw new InvalidOptionError(a, 'a known option (see moetier routes --help)', a);
    else p.files.push(a);
  }
  if (p.files.length === 0) throw new InvalidOptionError('TRACE', 'at least one trace file', undefined);
  return p;
}

const f3 = (x: number | null): string => (x === null || Number.isNaN(x) ? '-' : x.toFixed(3));

function rowCells(label: string, r: LayerRow): string[] {
  return [
    label,
    f3(r.entropy),
    f3(r.top16Share),
    f3(r.topQuarterShare),
    f3(r.reuse),
    r.reuseOverChance.toFixed(2),
    f3(r.window16Share),
    f3(r.window64Share),
    ...r.lruHitRate.map(f3),
    ...r.beladyHitRate.map(f3),
  ];
}

function table(rows: string[][]): string {
  const pct = HIT_RATE_SHARES.map((s) => `${+(s * 100).toFixed(1)}%`);
  const head = [
    'layer',
    'entropy',
    'top16',
    'topE/4',
    'reuse',
    'x chance',
    'win16',
    'win64',
    ...pct.map((p) => `LRU@${p}`),
    ...pct.map((p) => `Belady@${p}`),
  ];
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i].length)));
  const line = (cells: string[]): string =>
    cells.map((c, i) => (i === 0 ? c.padEnd(widths[i]) : c.padStart(widths[i]))).join('  ');
  return [line(head), ...rows.map(line)].join('\n');
}

export function formatRouteStats(all: readonly TraceRouteStats[]): string {
  const out: string[] = [];
  for (const t of all) {
    for (const phase of ['decode', 'prefill'] as const) {
      const s = t[phase];
      if (!s) continue;
      out.push(
        `${path.basename(t.source)} (${t.model}, ${t.layers} layers x ${t.experts} experts, top-${t.topK}): ${phase}, ${s.steps} rows; ` +
          `slots ${t.slots.join(' / ')} per layer`,
      );
      out.push(table([...s.layers.map((r, l) => rowCells(String(l), r)), rowCells('mean', s.mean)]), '');
    }
  }
  if (all.length > 1) {
    for (const phase of ['decode', 'prefill'] as const) {
      const pooled = pooledPhase(all, phase);
      if (pooled)
        out.push(
          `mean of ${pooled.traces} traces, ${phase} (each trace's mean over layers, equally weighted)`,
          table([rowCells('mean', pooled.mean)]),
          '',
        );
    }
  }
  return out.join('\n');
}

export function routeStatsJson(all: readonly TraceRouteStats[]): object {
  const pooled = Object.fromEntries(
    (['decode', 'prefill'] as Phase[]).flatMap((p) => {
      const m = pooledPhase(all, p);
      return m ? [[p, m]] : [];
    }),
  );
  return { hitRateShares: HIT_RATE_SHARES, hitRateWarmupSteps: HIT_RATE_WARMUP_STEPS, traces: all, pooled };
}

export async function routesMain(argv: readonly string[], out: (text: string) => void): Promise<number> {
  const p = parseRoutesArgs(argv);
  const all = loadTraceFiles(p.files, p.model).map(traceRouteStats);
  out(p.json ? JSON.stringify(routeStatsJson(all)) : formatRouteStats(all));
  return 0;
}

export const routesCommand: Command = {
  name: 'routes',
  summary: 'routes stats: what routing traces look like (entropy, reuse, windows, LRU and Belady hit rates by layer)',
  usage,
  run: (argv) => routesMain(argv, (text) => console.log(text)),
};
