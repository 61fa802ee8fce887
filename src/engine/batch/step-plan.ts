/**
 * Which rows one batched step evaluates (continuous batching, src/engine/batch/scheduler.ts): every
 * decoding sequence's one row first, then the prompts' rows in arrival order, each as many as the
 * step's room allows. So a long prompt is split over several steps and the others' decode goes on
 * beside it: a decoding sequence waits at most one step of batchTokensMax rows for its next token.
 */

/** A sequence with rows to evaluate. */
export interface WaitingRows {
  /** The sequence (its KV-cache sequence id). */
  seq: number;
  /** Rows it still has to evaluate. */
  rows: number;
  /** Its one row is a sampled token (decode); false: rows of a prompt. */
  decoding: boolean;
  /** When its rows were submitted (earlier first among prompts). */
  arrival: number;
}

/** Rows of one sequence in the step, in the order they go into the eval. */
export interface PlannedRows {
  seq: number;
  rows: number;
}

/** The step's rows: at most tokensMax (decode rows all fit: the engine keeps tokensMax >= parallel). */
export function planStep(waiting: readonly WaitingRows[], tokensMax: number): PlannedRows[] {
  const plan: PlannedRows[] = [];
  let room = tokensMax;
  for (const w of waiting) {
    if (!w.decoding || room === 0) continue;
    plan.push({ seq: w.seq, rows: 1 });
    room--;
  }
  const prompts = waiting.filter((w) => !w.decoding).sort((a, b) => a.arrival - b.arrival);
  for (const w of prompts) {
    if (room === 0) break;
    const rows = Math.min(w.rows, room);
    plan.push({ seq: w.seq, rows });
    room -= rows;
  }
  return plan;
}
