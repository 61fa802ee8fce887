/**
 * The few numeric building blocks of the forward pass, in plain f32-array TypeScript.
 * Accumulation is in f64 (JS numbers) so the reference is the accurate side of every comparison.
 */
import { ropeTable, type RopeTable } from '../model/rope.js';

/** out = x / sqrt(mean(x^2) + eps) * w */
export function rmsNorm(
  x: Float32Array,
  w: Float32Array,
  eps: number,
  out: Float32Array = new Float32Array(x.length),
): Float32Array {
  let sumSquares = 0;
  for (let i = 0; i < x.length; i++) sumSquares += x[i] * x[i];
  const scale = 1 / Math.sqrt(sumSquares / x.length + eps);
  for (let i = 0; i < x.length; i++) out[i] = x[i] * scale * w[i];
  return out;
}

/** y [rows] = W [rows, cols] @ x [cols]; W row-major f32. */
export function matVec(w: Float32Array, rows: number, cols: number, x: Float32Array, rowOffset = 0): Float32Array {
  const y = new Float32Array(rows);
  for (let r = 0; r < rows; r++) {
    const base = (rowOffset + r) * cols;
    let acc = 0;
    for (let c = 0; c < cols; c++) acc += w[base + c] * x[c];
    y[r] = acc;
  }
  return y;
}

/** In-place softmax over x. */
export function softmax(x: Float32Array | number[]): void {
  let max = -Infinity;
  for (let i = 0; i < x.length; i++) if (x[i] > max) max = x[i];
  let sum = 0;
  for (let i = 0; i < x.length; i++) {
    x[i] = Math.exp(x[i] - max);
    sum += x[i];
  }
  for (let i = 0; i < x.length; i++) x[i] /= sum;
}

export function silu(z: number): number {
  return z / (1 + Math.exp(-z));
}

export function sigmoid(z: number): number {
  return 1 / (1 + Math.exp(-z));
}

/** gpt-oss's clamped SwiGLU (ggml's swiglu_oai, alpha 1.702, limit 7): g' sigmoid(alpha g') (u' + 1). */
export const SWIGLU_OAI = { alpha: 1.702, limit: 7 } as const;

export function swigluOai(g: number, u: number): number {
  const x = Math.min(g, SWIGLU_OAI.limit);
  const y = Math.min(Math.max(u, -SWIGLU_OAI.limit), SWIGLU_OAI.limit);
  return (x / (1 + Math.exp(-SWIGLU_OAI.alpha * x))) * (y + 1);
}

/**
 * Rotary position embedding of one head vector (length headDim) in place at position pos: the
 * whole head, unscaled (rotateHead with ropeTable's plain table).
 */
export function rope(
  v: Float32Array,
  offset: number,
  headDim: number,
  pos: number,
  base: number,
  type: 'norm' | 'neox',
): void {
  rotateHead(v, offset, ropeTable({ headDim, ropeBase: base }), pos, type);
}

/**
 * One head vector at v[offset ..] rotated in place at position pos by `table` (src/model/rope.ts):
 * its first table.dims dims; 'norm' rotates adjacent pairs (2i, 2i+1), 'neox' (i, i + dims/2).
 */
export function rotateHead(
  v: Float32Array,
  offset: number,
  table: RopeTable,
  pos: number,
  type: 'norm' | 'neox',
): void {
  const half = table.dims / 2;
  for (let i = 0; i < half; i++) {
    const theta = pos * table.invFreq[i];
    const cos = Math.cos(theta) * table.magnitude;
    const sin = Math.sin(theta) * table.magnitude;
    const ia = type === 'norm' ? offset + 2 * i : offset + i;
    const ib = type === 'norm' ? ia + 1 : ia + half;
    const a = v[ia];
    const b = v[ib];
    v[ia] = a * cos - b * sin;
    v[ib] = a * sin + b * cos;
  }
}

/** Indices of the k largest values, descending; ties go to the lower index. */
export function topK(values: Float32Array, k: number): number[] {
  const order = Array.from(values.keys());
  order.sort((a, b) => values[b] - values[a] || a - b);
  return order.slice(0, k);
}
