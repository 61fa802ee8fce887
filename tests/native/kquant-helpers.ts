/**
 * Models with k-quant (or Q5_0 / Q5_1, IQ4_NL / IQ4_XS, MXFP4) experts for the native tests: random valid super-blocks (gate / up in one
 * k-quant, down in another, as llama.cpp's Q4_K_M files mix them), every other tensor F32, and an
 * F32 twin holding the experts' exact dequantisation (dequantRow, which kernels-kquant.test.ts
 * checks against the block layouts). Built here so they need no k-quant writer on the TS side.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { NativeModelDesc } from '../../src/native/binding.js';
import { GGML_TYPE, type HParams } from '../../src/model/types.js';
import { mulberry32 } from '../../src/core/prng.js';
import { buildRandomModel, tinyHParams, type RandomModel } from '../fixtures/random-model.js';
import { native, type MappedModel } from './forward-helpers.js';

// d: the f16 super-block scale that makes a typical |w| ~ 1 / sqrt(256) from random codes and
// sub-block scales (mean |sc q| ~ d * mean sc * max q / 2); dmin = minScale * d centres the types
// with a min (mean dmin m ~ mean d sc q), so the experts' outputs stay the size of F32 ones.
const KQ = {
  Q2_K: { id: 10, bytes: 84, scales: [80, 82], d: 0.0625 / 11.25, minScale: 1.5 },
  Q3_K: { id: 11, bytes: 110, scales: [108], d: 0.0625 / 32, minScale: 0 },
  Q4_K: { id: 12, bytes: 144, scales: [0, 2], d: 0.0625 / 236, minScale: 7.5 },
  Q5_K: { id: 13, bytes: 176, scales: [0, 2], d: 0.0625 / 488, minScale: 15.5 },
  Q6_K: { id: 14, bytes: 210, scales: [208], d: 0.0625 / 1024, minScale: 0 },
  // The 32-element Q5_0 / Q5_1 (llama-quantize's fallback for rows not a multiple of 256): Q5_0's
  // codes - 16 are centred already; Q5_1's m = -15.5 d centres code * d + m.
  Q5_0: { id: 6, bytes: 22, scales: [0], d: 0.0625 / 8, minScale: 0 },
  Q5_1: { id: 7, bytes: 24, scales: [0, 2], d: 0.0625 / 8, minScale: -15.5 },
  // IQ4_NL / IQ4_XS (ggml's non-linear table, mean |value| ~ 56): IQ4_NL's d alone; IQ4_XS's d times
  // its random 6-bit sub-block scales - 32 (mean magnitude ~ 16).
  IQ4_NL: { id: 20, bytes: 18, scales: [0], d: 0.0625 / 56, minScale: 0 },
  IQ4_XS: { id: 23, bytes: 136, scales: [0], d: 0.0625 / (56 * 16), minScale: 0 },
  // MXFP4 (mean |value| 4.5): no f16 scale; its E8M0 byte (byte 0) holds 2^round(log2 d), d ~ 2^-6.
  MXFP4: { id: 39, bytes: 17, scales: [], d: 0.0625 / 4.5, minScale: 0 },
} as const;
const blockElements = (type: KName): number =>
  type === 'Q5_0' || type === 'Q5_1' || type === 'IQ4_NL' || type === 'MXFP4' ? 32 : 256;
export type KName = keyof typeof KQ;

/** A normal f16 near v (mantissa truncated), of v's sign. */
function f16Bits(v: number): number {
  const a = Math.abs(v);
  const e = Math.floor(Math.log2(a));
  return (v < 0 ? 0x8000 : 0) | ((e + 15) << 10) | Math.floor((a / 2 ** e - 1) * 1024);
}

/** Random valid (super-)blocks for W [rows, cols] with the type's d (and dmin, or Q5_1's m). */
function randomBlocks(type: KName, rows: number, cols: number, seed: number): Uint8Array {
  const next = mulberry32(seed);
  const { bytes, scales, d, minScale } = KQ[type];
  const out = new Uint8Array(((rows * cols) / blockElements(type)) * bytes);
  for (let i = 0; i < out.length; i++) out[i] = Math.floor(next() * 256);
  const bits = [f16Bits(d), f16Bits(d * minScale)];
  if (type === 'MXFP4') for (let b = 0; b < out.length; b += bytes) out[b] = 128 + Math.round(Math.log2(d));
  for (let b = 0; b < out.length; b += bytes)
    scales.forEach((at, k) => {
      out[b + at] = bits[k] & 0xff;
      out[b + at + 1] = bits[k] >> 8;
    });
  return out;
}

interface Tensor {
  name: string;
  typeId: number;
  dims: number[];
  data: Uint8Array;
}

/** Tensors laid out back to back (32-byte aligned), written, mapped and opened natively. */
function open(hp: HParams, tensors: Tensor[]): MappedModel {
  let offset = 0;
  const placed = tensors.map((t) => {
    offset = Math.ceil(offset / 32) * 32;
    const at = offset;
    offset += t.data.length;
    return { ...t, offset: at };
  });
  const bytes = new Uint8Array(Math.ceil(offset / 32) * 32);
  for (const t of placed) bytes.set(t.data, t.offset);
  const dir = mkdtempSync(path.join(tmpdir(), 'moetier-kquant-'));
  const file = path.join(dir, 'model.bin');
  writeFileSync(file, bytes);
  const mapped = native.mapFile(file);
  rmSync(dir, { recursive: true });
  const desc: NativeModelDesc = {
    hparams: hp,
    tensors: placed.map((t) => ({ name: t.name, typeId: t.typeId, dims: t.dims, offset: t.offset })),
  };
  const handle = native.createModel(mapped.handle, desc);
  const model: RandomModel = { hparams: hp, tensors: new Map(), bytes }; // descOf-free: the desc above names the types
  return {
    model,
    file: mapped.handle,
    desc,
    handle,
    close() {
      native.freeModel(handle);
      native.unmapFile(mapped.handle);
    },
  };
}

/** The k-quant model and its F32 twin (experts dequantised), both opened (qwen3moe, 256-wide). */
export function kquantModels(
  gateUp: KName,
  down: KName,
  overrides: Partial<HParams> = {},
): { kquant: MappedModel; f32: MappedModel } {
  const hp = tinyHParams('qwen3moe', { nEmbd: 256, nFfExp: 256, nLayer: 2, ...overrides });
  const base = buildRandomModel(hp, { type: 'F32', seed: 3 });
  const kq: Tensor[] = [],
    f32: Tensor[] = [];
  let seed = 11;
  for (const t of base.tensors.values()) {
    const data = base.bytes.subarray(t.offset, t.offset + t.byteLength);
    const expert = /ffn_(gate|up|down)_exps/.exec(t.name);
    if (!expert) {
      kq.push({ name: t.name, typeId: GGML_TYPE.F32, dims: t.dims, data });
      f32.push({ name: t.name, typeId: GGML_TYPE.F32, dims: t.dims, data });
      continue;
    }
    const type = expert[1] === 'down' ? down : gateUp;
    const cols = t.dims[0],
      rows = t.dims.slice(1).reduce((a, b) => a * b, 1);
    const blocks = randomBlocks(type, rows, cols, seed++);
    const values = new Float32Array(rows * cols);
    const rowBytes = (cols / blockElements(type)) * KQ[type].bytes;
    for (let r = 0; r < rows; r++)
      native.dequantRow(
        KQ[type].id,
        blocks.subarray(r * rowBytes, (r + 1) * rowBytes),
        cols,
        values.subarray(r * cols, (r + 1) * cols),
      );
    kq.push({ name: t.name, typeId: KQ[type].id, dims: t.dims, data: blocks });
    f32.push({ name: t.name, typeId: GGML_TYPE.F32, dims: t.dims, data: new Uint8Array(values.buffer) });
  }
  return { kquant: open(hp, kq), f32: open(hp, f32) };
}
