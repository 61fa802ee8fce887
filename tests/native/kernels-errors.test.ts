/**
 * Bad input to the kernel verbs is refused with a thrown error that names the argument
 * and what was expected; nothing is read or written out of bounds, the process survives.
 */
import { describe, expect, it } from 'vitest';
import { loadDiagnostics } from '../../src/native/diagnostics.js';
import { GGML_TYPE } from '../../src/model/types.js';

const native = loadDiagnostics();
const Q8 = GGML_TYPE.Q8_0;

// A valid Q8_0 call: W [3, 64] (3 rows of 2 blocks of 34 bytes), x [64], y [3].
const w = new Uint8Array(3 * 68);
const x = new Float32Array(64);
const y = new Float32Array(3);

describe('kernel verbs refuse bad input', () => {
  it('accepts the valid baseline call', () => {
    expect(() => native.matvec(Q8, w, 3, 64, x, y)).not.toThrow();
  });

  it('wrong buffer sizes', () => {
    expect(() => native.matvec(Q8, w.subarray(1), 3, 64, x, y)).toThrow(/weights: expected 204 elements, got 203/);
    expect(() => native.matvec(Q8, w, 3, 64, new Float32Array(63), y)).toThrow(/x: expected 64 elements/);
    expect(() => native.matvec(Q8, w, 3, 64, x, new Float32Array(4))).toThrow(/y: expected 3 elements/);
    expect(() => native.matmul(Q8, w, 3, 64, x, 2, new Float32Array(6))).toThrow(/x: expected 128 elements/);
    expect(() => native.matmul(Q8, w, 3, 64, new Float32Array(128), 2, y)).toThrow(/y: expected 6 elements/);
    expect(() => native.dequantRow(Q8, w, 64, new Float32Array(64))).toThrow(/row: expected 68 elements/);
    expect(() => native.dequantRow(Q8, w.subarray(0, 68), 64, new Float32Array(32))).toThrow(/out: expected 64/);
  });

  it('unsupported type ids', () => {
    for (const typeId of [3, 9, 15, 99]) {
      // Q4_1, Q8_1, Q8_K and none (6 and 7, Q5_0 / Q5_1, are supported)
      expect(() => native.matvec(typeId, w, 3, 64, x, y)).toThrow(/typeId: expected one of/);
      expect(() => native.dequantRow(typeId, w, 64, new Float32Array(64))).toThrow(RangeError);
    }
    expect(() => native.matvec(-1, w, 3, 64, x, y)).toThrow(/typeId/);
  });

  it('cols not a multiple of the block size', () => {
    for (const type of [GGML_TYPE.Q8_0, GGML_TYPE.Q4_0, 6, 7, GGML_TYPE.IQ4_NL, GGML_TYPE.MXFP4]) {
      // 6, 7: Q5_0, Q5_1
      expect(() => native.matvec(type, w, 3, 48, new Float32Array(48), y)).toThrow(/cols: expected a multiple of 32/);
      expect(() => native.dequantRow(type, w, 31, new Float32Array(31))).toThrow(/multiple of 32/);
    }
    for (const typeId of [10, 11, 12, 13, 14, GGML_TYPE.IQ4_XS]) {
      // Q2_K..Q6_K, IQ4_XS: 256-element super-blocks
      expect(() => native.matvec(typeId, w, 3, 64, x, y)).toThrow(/cols: expected a multiple of 256/);
      expect(() => native.dequantRow(typeId, w, 128, new Float32Array(128))).toThrow(/multiple of 256/);
    }
  });

  it('wrong kinds and non-integer numbers', () => {
    expect(() => native.matvec(Q8, Array.from(w) as never, 3, 64, x, y)).toThrow(TypeError);
    expect(() => native.matvec(Q8, w, 3, 64, new Float64Array(64) as never, y)).toThrow(/x: expected a Float32Array/);
    expect(() => native.matvec(Q8, new Int8Array(204) as never, 3, 64, x, y)).toThrow(/weights: expected a Uint8Array/);
    expect(() => native.matvec(Q8, w, 2.5, 64, x, y)).toThrow(/rows: expected an integer/);
    expect(() => native.matvec(Q8, w, 0, 64, x, new Float32Array(0))).toThrow(/rows/);
    expect(() => native.matvec(Q8, w, 3, Number.NaN, x, y)).toThrow(/cols/);
    expect(() => (native.matvec as (...a: unknown[]) => void)(Q8, w, 3)).toThrow(/cols: expected a number/);
    expect(() => native.isaSet(7)).toThrow(RangeError);
    // Sizes whose byte counts would overflow are refused before any arithmetic on them.
    expect(() => native.matvec(GGML_TYPE.F32, w, 2 ** 31, 2 ** 31, x, y)).toThrow(
      /cols: expected an integer in \[1, 268435456\]/,
    );
    expect(() => native.measureReadBandwidth(2 ** 52, 1)).toThrow(/bytes/);
  });
});
