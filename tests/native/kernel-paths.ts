/** Runs a weight type's matvec / matmul on one ISA path, and compares results bit for bit (the kernel tests of each block family). */
import { expect } from 'vitest';
import { loadDiagnostics } from '../../src/native/diagnostics.js';

const native = loadDiagnostics();

/** W [rows, cols] (typeId blocks) @ x [cols] -> [rows], on `isa`. */
export function matvecOn(
  isa: number,
  typeId: number,
  w: Uint8Array,
  rows: number,
  cols: number,
  x: Float32Array,
): Float32Array {
  expect(native.isaSet(isa)).toBe(true);
  const y = new Float32Array(rows);
  native.matvec(typeId, w, rows, cols, x, y);
  return y;
}

/** W [rows, cols] @ X [n, cols] -> [n, rows], on `isa`. */
export function matmulOn(
  isa: number,
  typeId: number,
  w: Uint8Array,
  rows: number,
  cols: number,
  x: Float32Array,
  n: number,
): Float32Array {
  expect(native.isaSet(isa)).toBe(true);
  const y = new Float32Array(n * rows);
  native.matmul(typeId, w, rows, cols, x, n, y);
  return y;
}

export function sameBits(a: Float32Array, b: Float32Array): boolean {
  const ua = new Uint32Array(a.buffer, a.byteOffset, a.length),
    ub = new Uint32Array(b.buffer, b.byteOffset, b.length);
  return ua.length === ub.length && ua.every((v, i) => v === ub[i]);
}
