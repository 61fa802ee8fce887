/**
 * The promises the expert tier builds on, checked at the kernel level on every path this CPU has:
 *  - a Q4_0 matrix and its exact Q8_0 copy (q = nibble - 8, the same f16 scale bytes) give
 *    bit-identical matvec and matmul results;
 *  - a row's result does not depend on which rows are computed with it (the SIMD kernels run rows
 *    in groups and tiles; the thread pool hands out arbitrary row ranges).
 * Shapes cover groups, tiles and their tails (rows 1..33, n 1..9), the medium expert widths and
 * rows long enough (3072) for the AVX2 matvec's long-row prefetch.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { ISA } from '../../src/native/binding.js';
import { loadDiagnostics } from '../../src/native/diagnostics.js';
import { GGML_TYPE } from '../../src/model/types.js';
import { mulberry32 } from '../../src/core/prng.js';

const native = loadDiagnostics();
const PATHS = Object.values(ISA).filter((isa) => isa <= native.isaBest());

afterEach(() => {
  native.isaSet(native.isaBest());
});

/** Random Q4_0 rows [rows, cols] (every nibble value, scales ~2^-10 .. 2^-5 of either sign). */
function randomQ4(rows: number, cols: number, seed: number): Uint8Array {
  const next = mulberry32(seed);
  const out = new Uint8Array((rows * cols * 18) / 32);
  for (let b = 0; b < out.length; b += 18) {
    const exp = 5 + Math.floor(next() * 6);
    const f16 = (next() < 0.5 ? 0x8000 : 0) | (exp << 10) | Math.floor(next() * 1024);
    out[b] = f16 & 0xff;
    out[b + 1] = f16 >> 8;
    for (let j = 2; j < 18; j++) out[b + j] = Math.floor(next() * 256);
  }
  return out;
}

/** The exact Q8_0 copy of Q4_0 rows: per block the same scale bytes, q[j] = nibble(j) - 8. */
function q8CopyOf(q4: Uint8Array): Uint8Array {
  const blocks = q4.length / 18;
  const out = new Uint8Array(blocks * 34);
  for (let b = 0; b < blocks; b++) {
    out[b * 34] = q4[b * 18];
    out[b * 34 + 1] = q4[b * 18 + 1];
    for (let j = 0; j < 16; j++) {
      const byte = q4[b * 18 + 2 + j];
      out[b * 34 + 2 + j] = ((byte & 0x0f) - 8) & 0xff;
      out[b * 34 + 2 + j + 16] = ((byte >> 4) - 8) & 0xff;
    }
  }
  return out;
}

function randomX(n: number, seed: number): Float32Array {
  const next = mulberry32(seed);
  return Float32Array.from({ length: n }, () => (next() * 2 - 1) * (next() < 0.1 ? 8 : 1));
}

const bits = (a: Float32Array): number[] => Array.from(new Uint32Array(a.buffer, a.byteOffset, a.length));

describe.each(PATHS.map((isa) => [native.isaName(isa), isa] as const))('path %s', (_name, isa) => {
  it('a Q4_0 matrix and its Q8_0 copy give bit-identical matvec and matmul', () => {
    native.isaSet(isa);
    for (const cols of [32, 256, 768, 3072]) {
      for (const rows of [1, 7, 8, 9, 17, 33]) {
        const q4 = randomQ4(rows, cols, rows * 31 + cols);
        const q8 = q8CopyOf(q4);
        for (const n of [1, 2, 3, 5, 9]) {
          const x = randomX(n * cols, n + cols);
          const [a, b] = [new Float32Array(n * rows), new Float32Array(n * rows)];
          if (n === 1) {
            native.matvec(GGML_TYPE.Q4_0, q4, rows, cols, x, a);
            native.matvec(GGML_TYPE.Q8_0, q8, rows, cols, x, b);
          } else {
            native.matmul(GGML_TYPE.Q4_0, q4, rows, cols, x, n, a);
            native.matmul(GGML_TYPE.Q8_0, q8, rows, cols, x, n, b);
          }
          expect(bits(a), `cols=${cols} rows=${rows} n=${n}`).toEqual(bits(b));
          expect(a.some((v) => v !== 0)).toBe(true);
        }
      }
    }
  });

  it.each(['Q4_0', 'Q8_0'] as const)('%s: a row gives the same bits whichever rows it is computed with', (type) => {
    native.isaSet(isa);
    const rows = 27,
      cols = 256,
      n = 5;
    const rowBytes = (cols / 32) * (type === 'Q4_0' ? 18 : 34);
    const q4 = randomQ4(rows, cols, 4242);
    const w = type === 'Q4_0' ? q4 : q8CopyOf(q4);
    const x = randomX(n * cols, 9);
    const fullVec = new Float32Array(rows);
    native.matvec(GGML_TYPE[type], w, rows, cols, x.subarray(0, cols), fullVec);
    const fullMat = new Float32Array(n * rows);
    native.matmul(GGML_TYPE[type], w, rows, cols, x, n, fullMat);
    // Rows [k, k + m): the groups and tiles start at another row and end in other tails.
    for (const [k, m] of [
      [1, 26],
      [3, 9],
      [5, 1],
      [8, 8],
      [19, 8],
    ]) {
      const sub = w.subarray(k * rowBytes, (k + m) * rowBytes);
      const y = new Float32Array(m);
      native.matvec(GGML_TYPE[type], sub, m, cols, x.subarray(0, cols), y);
      expect(bits(y), `matvec rows ${k}..${k + m}`).toEqual(bits(fullVec.subarray(k, k + m)));
      const Y = new Float32Array(n * m);
      native.matmul(GGML_TYPE[type], sub, m, cols, x, n, Y);
      for (let i = 0; i < n; i++)
        expect(bits(Y.subarray(i * m, (i + 1) * m)), `matmul rows ${k}..${k + m} i=${i}`).toEqual(
          bits(fullMat.subarray(i * rows + k, i * rows + k + m)),
        );
    }
  });
});
