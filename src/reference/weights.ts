/**
 * Weight access for the reference pass: each tensor dequantised to f32 once, on first use.
 * The reference runs tiny models, so holding f32 copies is the simple, readable choice.
 */
import { InvalidOptionError } from '../core/errors.js';
import { dequantizeRow, rowBytes } from '../model/quant.js';
import type { HParams, TensorInfo } from '../model/types.js';

export interface ReferenceWeights {
  hparams: HParams;
  tensors: Map<string, TensorInfo>;
  /** The bytes TensorInfo.offset points into (the whole file). */
  bytes: Uint8Array;
}

export class WeightCache {
  private readonly cache = new Map<string, Float32Array>();
  constructor(private readonly weights: ReferenceWeights) {}

  has(name: string): boolean {
    return this.weights.tensors.has(name);
  }

  /** The whole tensor as f32, ggml order (dims[0] contiguous). */
  get(name: string): Float32Array {
    const hit = this.cache.get(name);
    if (hit) return hit;
    const info = this.weights.tensors.get(name);
    if (!info) throw new InvalidOptionError('tensor', `a tensor named ${name}`, 'missing');
    const cols = info.dims[0];
    const rows = info.dims.slice(1).reduce((a, b) => a * b, 1);
    const out = new Float32Array(cols * rows);
    const stride = rowBytes(info.type, cols);
    const row = new Float32Array(cols);
    for (let r = 0; r < rows; r++) {
      dequantizeRow(info.type, this.weights.bytes, info.offset + r * stride, cols, row);
      out.set(row, r * cols);
    }
    this.cache.set(name, out);
    return out;
  }
}
