/**
 * How a prefill on the disk tier reads its misses (docs/SPEC.md section 5; native/tier/tier_bulk.cc):
 *
 *   on-demand    each layer's routed misses are read once it has routed, and the layer's residents
 *                compute meanwhile (tier_stream.cc): reads only what the prompt routes to
 *   whole-layer  each layer's experts are read whole, the next layer's while this one computes:
 *                reads every expert, but before routing, behind the previous layer's compute
 *
 * shortPrefillTokens N: a prompt of at most N tokens takes on-demand, a longer one whole-layer;
 * 0: every prefill whole-layer. 'auto' (the default) is the crossover measured on the disk tier at
 * half the medium Q8_0 file (`npm run bench -- prefill`, bench/results/prefill.json). A one-token
 * eval (decode) always takes on-demand.
 *
 * Where this differs from the public design (docs/SPEC.md section 5): its on-demand path ensures the
 * routed ids in chunks of at most 32 (a GPU kernel's width) and sends a layer needing more than
 * half the cache to the whole-layer path. Here on-demand issues all of a layer's routed misses at
 * once (no kernel limit on the CPU; each is admitted into a slot or streamed into a layer-sized
 * scratch), and a layer cannot switch to whole-layer after routing: that read would only start
 * later and read more. Both paths read each expert once per prompt (up to 2048 rows: the chunks
 * of a longer prompt run layer by layer in groups, native/cpu/forward_eval.cc).
 */
import { InvalidOptionError } from '../../core/errors.js';

/**
 * The measured crossover (bench/results/prefill.json measuredCrossover; tests/bench/prefill-results
 * checks they agree): on realistic routing, in 4 interleaved rounds at half the medium Q8_0 file, on
 * demand was faster up to 16 tokens (4: 233 against 480 ms, 16: 479 / 561) and slower at 24 (609 /
 * 536); from 32 to 64 the cells swing either way by ~30 %. On planted routing it measured 12.
 */
export const SHORT_PREFILL_TOKENS_AUTO = 16;

export type PrefillPath = 'on-demand' | 'whole-layer';

/** The whole-layer path's read pieces (native/tier/tier_bulk.cc kPieceBytes): the plan's bounce buffers. */
export const WHOLE_LAYER_PIECE_BYTES = 1 << 20;

/** The option as given (undefined: 'auto'), checked; only the disk tier reads its misses. */
export function resolveShortPrefillTokens(v: number | 'auto' | undefined, readsMisses: boolean): number {
  if (v === undefined || v === 'auto') return SHORT_PREFILL_TOKENS_AUTO;
  if (!Number.isSafeInteger(v) || v < 0)
    throw new InvalidOptionError(
      'shortPrefillTokens',
      "an integer >= 0 (0: every prefill reads whole layers) or 'auto'",
      v,
    );
  if (!readsMisses)
    throw new InvalidOptionError(
      'shortPrefillTokens',
      'unset without the disk tier (memoryBudgetBytes, or backend "disk"): only it reads its misses',
      v,
    );
  return v;
}

export function prefillPathFor(promptTokens: number, shortPrefillTokens: number): PrefillPath {
  return promptTokens <= shortPrefillTokens ? 'on-demand' : 'whole-layer';
}

/** A context of nCtx tokens can hold a prompt the whole-layer path takes. */
export function wholeLayerReachable(shortPrefillTokens: number, nCtx: number): boolean {
  return shortPrefillTokens < nCtx;
}

/**
 * The whole-layer path's second layer buffer (the first is the streamed misses' scratch, already
 * in the plan's working set): one layer's experts, with an alignment block before and after each
 * of its three tensors (tier_bulk.cc), counted at the largest block the read engine may use.
 */
export function wholeLayerBufferBytes(expertBytes: number, nExpert: number): number {
  const blockMax = 64 * 1024;
  return nExpert * expertBytes + 6 * blockMax;
}
