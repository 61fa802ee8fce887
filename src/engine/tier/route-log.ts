/**
 * One request's routing, kept for the heat file and for `--trace-routes`:
 *   prefill rows [row][layer][k] and decode steps [token][layer][k], rank order,
 * written in the policy lab's JSONL format (src/routes/jsonl.ts).
 *
 * `add` runs between two evaluations, where the next token waits for it (after every step
 * without a tier, in batches of steps with one): it keeps a typed copy of the routes (one
 * allocation); the nested arrays the heat file and the trace format want are built once, at the
 * end of the request. (Building them per step cost ~20 us of a 1.5 ms small-preset token.)
 */
import { checkOutputPath, writeFileAtomic } from '../../core/output-file.js';
import path from 'node:path';
import { moeLayers, type HParams } from '../../model/types.js';
import type { TraceGeometry } from '../../routes/types.js';
import { formatTraceJsonl } from '../../routes/jsonl.js';
import type { RouteStep } from '../../routes/types.js';

interface RoutedChunk {
  /** Token ids evaluated, one per row. */
  tokens: Int32Array;
  /** [row][nLayer][k] expert ids, a copy (the eval writes its buffer again). */
  routes: Int32Array;
}

export class RouteLog {
  private readonly chunks: Record<'prefill' | 'decode', RoutedChunk[]> = { prefill: [], decode: [] };

  constructor(private readonly hp: Pick<HParams, 'nLayer' | 'nExpert' | 'nExpertUsed' | 'denseLayers'>) {}

  /** routes: [nTokens][nLayer][k] as evaluation wrote them (at least); tokens: the ids evaluated. */
  add(phase: 'prefill' | 'decode', routes: Int32Array, tokens: Int32Array): void {
    const n = tokens.length * moeLayers(this.hp) * this.hp.nExpertUsed;
    this.chunks[phase].push({ tokens: tokens.slice(), routes: routes.slice(0, n) });
  }

  /** The steps of one phase, numbered from 0, with [layer][k] expert lists. */
  steps(phase: 'prefill' | 'decode'): RouteStep[] {
    const { nExpertUsed: k } = this.hp;
    const nLayer = moeLayers(this.hp);
    const out: RouteStep[] = [];
    for (const c of this.chunks[phase]) {
      for (let t = 0; t < c.tokens.length; t++) {
        const layers = new Array<number[]>(nLayer);
        for (let l = 0; l < nLayer; l++)
          layers[l] = Array.from(c.routes.subarray((t * nLayer + l) * k, (t * nLayer + l + 1) * k));
        out.push({ step: out.length, token: c.tokens[t], layers });
      }
    }
    return out;
  }

  /** Every routed row of the request, [row][layer][k] (what a heat file counts). */
  rows(): number[][][] {
    return [...this.steps('prefill'), ...this.steps('decode')].map((s) => s.layers);
  }

  /**
   * geometry: the model's expert geometry, written into the header so replay can price the trace.
   * Written whole through a temporary beside `file`, never over one of `inputs` (the engine's files).
   */
  write(file: string, model: string, prompt?: string, geometry?: TraceGeometry, inputs: readonly string[] = []): void {
    const { nExpert, nExpertUsed } = this.hp;
    const nLayer = moeLayers(this.hp);
    const header = {
      model: path.basename(model),
      layers: nLayer,
      experts: nExpert,
      topK: nExpertUsed,
      rankOrder: true,
      promptId: 'p0',
      prompt,
      ...(geometry ? { geometry } : {}),
    };
    checkOutputPath(file, 'traceRoutes', inputs);
    writeFileAtomic(
      file,
      formatTraceJsonl([{ source: file, header, prefill: this.steps('prefill'), decode: this.steps('decode') }]),
      'traceRoutes',
    );
  }
}
