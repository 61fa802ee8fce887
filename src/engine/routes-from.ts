/**
 * routesFrom (`moetier run --routes-from TRACE`): the engine driven by a recorded route trace, a
 * simulation for benchmarks. The forward pass still computes every layer, but each MoE layer runs
 * the experts the trace names for that row instead of the router's top-k (mt_eval_args.forced_routes,
 * weighted by the router's softmax renormalised over them), so the tokens it samples mean nothing;
 * slots, reads, uploads, prefetch, calibration and spans are the engine's own, following the trace.
 *
 *   trace file ──readTraces──> shape checked against the model (RouteTraceMismatchError)
 *              ──> rows flattened once: [rows][nLayer][k] per phase
 *   per request:  prompt row i   -> prefill row i mod P   (no prefill rows: decode row i mod D)
 *                 decode step t  -> decode row t mod D    (no decode rows: prefill row t mod P)
 *
 * Decode step t is the request's t-th one-token eval (the one that evaluates generated token t), so
 * a run of -n N uses decode rows 0 .. N-2, and a trace shorter than the run wraps around to row 0.
 * A file of several prompts (several headers) gives each request the next one, in turn (the first
 * request the first). The next-layer prediction of --prefetch stays the router's own guess.
 */
import { createHash } from 'node:crypto';
import { checkInputFile } from '../core/input-file.js';
import { InvalidOptionError, RouteTraceMismatchError, type RouteShape } from '../core/errors.js';
import { moeLayers, type HParams } from '../model/types.js';
import { traceLimits } from '../routes/jsonl.js';
import { readTraces } from '../routes/load.js';
import { TraceFormatError } from '../routes/errors.js';
import type { RouteStep, Trace } from '../routes/types.js';

export type RoutePhase = 'prefill' | 'decode';

/** One trace's rows, flattened: rows x nLayer x k ids each. */
interface TraceRows {
  prefill: Int32Array;
  decode: Int32Array;
}

/** The routing of one request: the rows each of its evals runs. */
export interface RequestRoutes {
  /**
   * The forced routes of the request's next eval of `nTokens` rows in `phase`: [nTokens][nLayer][k].
   * A view into the trace where the rows lie in one piece (a decode step), else a copy.
   */
  next(phase: RoutePhase, nTokens: number): Int32Array;
}

export class RouteTraceSource {
  /** Requests begun so far: request r takes trace r mod traces. */
  private requests = 0;

  private constructor(
    /** The file, as given. */
    readonly file: string,
    private readonly rows: readonly TraceRows[],
    private readonly rowIds: number,
    /** sha-256 of the routing itself (16 hex digits): names the trace's own default heat file. */
    readonly digest: string,
  ) {}

  /** Reads and checks a trace for a model of this shape; throws before anything runs. */
  static load(file: string, hp: Pick<HParams, 'nLayer' | 'nExpert' | 'nExpertUsed' | 'denseLayers'>): RouteTraceSource {
    if (typeof file !== 'string' || file.length === 0)
      throw new InvalidOptionError('routesFrom', 'a route trace file path', file);
    checkTraceFile(file);
    // The loader asks for the expert count only for a headerless file (../shared/traces/): its ids
    // are then read up to the format's limit and checked against the model's count here, so a trace
    // of a bigger model is a shape mismatch, not a format error.
    let headerless = false;
    const traces = readTraces(file, {
      expertsOf: () => {
        headerless = true;
        return traceLimits.expertsMax;
      },
    });
    const model: RouteShape = { layers: moeLayers(hp), experts: hp.nExpert, topK: hp.nExpertUsed };
    for (const t of traces) checkShape(file, t, model, headerless);
    const rowIds = moeLayers(hp) * hp.nExpertUsed;
    const rows = traces.map((t) => ({ prefill: flatten(t.prefill, rowIds), decode: flatten(t.decode, rowIds) }));
    const hash = createHash('sha256');
    for (const r of rows)
      hash
        .update(`${r.prefill.length},${r.decode.length};`)
        .update(new Uint8Array(r.prefill.buffer))
        .update(new Uint8Array(r.decode.buffer));
    return new RouteTraceSource(file, rows, rowIds, hash.digest('hex').slice(0, 16));
  }

  /** Prompts (headers) in the file. */
  get traces(): number {
    return this.rows.length;
  }

  /** A new request's routing: the next trace, from its first rows. */
  begin(): RequestRoutes {
    const t = this.rows[this.requests++ % this.rows.length];
    const ids = this.rowIds;
    // A phase without rows of its own takes the other's (a trace holds at least one row).
    const prefill = t.prefill.length > 0 ? t.prefill : t.decode;
    const decode = t.decode.length > 0 ? t.decode : t.prefill;
    const cursor = { prefill: 0, decode: 0 };
    return {
      next(phase: RoutePhase, nTokens: number): Int32Array {
        const from = phase === 'prefill' ? prefill : decode;
        const first = cursor[phase];
        cursor[phase] += nTokens;
        return rowsAt(from, ids, first, nTokens);
      },
    };
  }
}

/** Rows [first, first + n) of `flat` (rows of `ids` ids), wrapping around its end. */
export function rowsAt(flat: Int32Array, ids: number, first: number, n: number): Int32Array {
  const total = flat.length / ids;
  const start = first % total;
  if (start + n <= total) return flat.subarray(start * ids, (start + n) * ids);
  const out = new Int32Array(n * ids);
  for (let i = 0; i < n; i++) {
    const r = (start + i) % total;
    out.set(flat.subarray(r * ids, (r + 1) * ids), i * ids);
  }
  return out;
}

/** The file exists and is a regular file: a wrong path is the option's error, named as such. */
function checkTraceFile(file: string): void {
  checkInputFile(file, 'routesFrom', 'route trace file');
}

function checkShape(file: string, t: Trace, model: RouteShape, headerless: boolean): void {
  // A headerless trace says no expert count: its largest id + 1 bounds it.
  let maxId = -1;
  if (headerless)
    for (const s of [...t.prefill, ...t.decode])
      for (const ids of s.layers) for (const e of ids) maxId = Math.max(maxId, e);
  const trace: RouteShape = {
    layers: t.header.layers,
    experts: headerless ? maxId + 1 : t.header.experts,
    topK: t.header.topK,
  };
  const experts = headerless ? trace.experts <= model.experts : trace.experts === model.experts;
  if (trace.layers !== model.layers || trace.topK !== model.topK || !experts)
    throw new RouteTraceMismatchError(file, trace, model, headerless);
  if (t.prefill.length + t.decode.length === 0)
    throw new TraceFormatError(file, 1, `prompt ${t.header.promptId ?? t.header.model}`, 'at least one route row');
}

/** Steps' [layer][k] ids, in step order, as one [rows][layer][k] array. */
function flatten(steps: readonly RouteStep[], rowIds: number): Int32Array {
  const out = new Int32Array(steps.length * rowIds);
  let at = 0;
  for (const s of steps) for (const ids of s.layers) for (const e of ids) out[at++] = e;
  return out;
}
