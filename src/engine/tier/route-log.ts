/**
 * One request's routing, kept for the heat file and for `--trace-routes`:
 *   prefill rows [row][layer][k] and decode steps [token][layer][k], rank order,
 * written in the policy lab's JSONL format (src/routes/jsonl.ts).
 */
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import type { HParams } from '../../model/types.js';
import { formatTraceJsonl } from '../../routes/jsonl.js';
import type { RouteStep } from '../../routes/types.js';

export class RouteLog {
  readonly prefill: RouteStep[] = [];
  readonly decode: RouteStep[] = [];

  constructor(private readonly hp: Pick<HParams, 'nLayer' | 'nExpert' | 'nExpertUsed'>) {}

  /** routes: [nTokens][nLayer][k] as evaluation wrote them; tokens: the ids evaluated. */
  add(phase: 'prefill' | 'decode', routes: Int32Array, tokens: Int32Array): void {
    const { nLayer, nExpertUsed: k } = this.hp;
    const steps = phase === 'prefill' ? this.prefill : this.decode;
    for (let t = 0; t < tokens.length; t++) {
      const layers = Array.from({ length: nLayer }, (_, l) => Array.from(routes.subarray((t * nLayer + l) * k, (t * nLayer + l + 1) * k)));
      steps.push({ step: steps.length, token: tokens[t], layers });
    }
  }

  /** Every routed row of the request, [row][layer][k] (what a heat file counts). */
  rows(): number[][][] {
    return [...this.prefill, ...this.decode].map((s) => s.layers);
  }

  write(file: string, model: string, prompt?: string): void {
    const { nLayer, nExpert, nExpertUsed } = this.hp;
    const header = { model: path.basename(model), layers: nLayer, experts: nExpert, topK: nExpertUsed, rankOrder: true, promptId: 'p0', prompt };
    writeFileSync(file, formatTraceJsonl([{ source: file, header, prefill: this.prefill, decode: this.decode }]));
  }
}
