/**
 * Parity verdicts: one case = one (model, prompt), both engines greedy from the same prompt ids.
 *
 *   moetier { tokens, firstLogits (shifted), top2At(step) }   llama.cpp { tokens, stoppedAtEog, firstLogits, top2[] }
 *          \____________________ compareCase ______________________/
 *                                     |
 *       { identical, divergenceStep, maxAbsLogitDiff, divergence? }
 */
import { maxAbsDiff } from './logits.mjs';

/**
 * First index where the two greedy sequences differ, or -1.
 * llama.cpp stops on an end-of-generation token; moetier may stop there too or go on, so
 * moetier's tokens past the end of llama.cpp's EOG-terminated run are not compared.
 */
export function divergenceStep(moetierTokens, llamaTokens, llamaStoppedAtEog = false) {
  const ours = llamaStoppedAtEog ? moetierTokens.slice(0, llamaTokens.length) : moetierTokens;
  const n = Math.min(ours.length, llamaTokens.length);
  for (let i = 0; i < n; i++) if (ours[i] !== llamaTokens[i]) return i;
  return ours.length === llamaTokens.length ? -1 : n;
}

/**
 * moetier: { tokens, firstLogits }, llama: { tokens, stoppedAtEog, firstLogits, top2 },
 * top2At(step) -> moetier's top-2 at that step (called only on divergence).
 */
export async function compareCase(moetier, llama, top2At) {
  const step = divergenceStep(moetier.tokens, llama.tokens, llama.stoppedAtEog);
  const logits = maxAbsDiff(moetier.firstLogits, llama.firstLogits);
  const verdict = {
    identical: step === -1,
    generatedTokens: llama.tokens.length,
    maxAbsLogitDiff: logits.maxAbsDiff,
    maxAbsLogitDiffAtId: logits.atId,
    logitsCompared: logits.compared,
  };
  if (step === -1) return verdict;
  return {
    ...verdict,
    divergence: {
      step,
      moetier: { token: moetier.tokens[step] ?? null, top2: await top2At(step) },
      llamaCpp: { token: llama.tokens[step] ?? null, top2: llama.top2[step] ?? null },
    },
  };
}

/** The one line `npm run parity` prints. */
export function summarizeParity(cases, meta) {
  return { allTokensIdentical: cases.length > 0 && cases.every((c) => c.identical), ...meta, cases };
}
