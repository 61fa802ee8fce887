/**
 * One expert for run_expert tests (tests/native/backend-cuda-sim, tests/device/cuda-backend):
 * its gate | up | down quantised from seeded values, and the CPU's FFN of it through the addon's
 * own kernels (matvec for one row, the grouped matmul for more, then the forward pass's swiglu).
 */
import { mulberry32 } from '../../src/core/prng.js';
import { quantizeRow, rowBytes } from '../../src/model/quant.js';
import type { GgmlTypeName } from '../../src/model/types.js';
import { loadDiagnostics } from '../../src/native/diagnostics.js';

const native = loadDiagnostics();

export function expertPieces(
  type: GgmlTypeName,
  nEmbd: number,
  nFf: number,
  seed: number,
): { pieces: Uint8Array[]; gateBytes: number; downBytes: number } {
  const rng = mulberry32(seed);
  const matrix = (rows: number, cols: number): Uint8Array => {
    const f = Float32Array.from({ length: rows * cols }, () => rng() * 2 - 1);
    const out = new Uint8Array(rows * rowBytes(type, cols));
    for (let r = 0; r < rows; r++) quantizeRow(type, f, r * cols, cols, out, r * rowBytes(type, cols));
    return out;
  };
  const gate = matrix(nFf, nEmbd),
    up = matrix(nFf, nEmbd),
    down = matrix(nEmbd, nFf);
  return { pieces: [gate, up, down], gateBytes: gate.length, downBytes: down.length };
}

export function cpuExpert(
  typeId: number,
  pieces: Uint8Array[],
  nEmbd: number,
  nFf: number,
  x: Float32Array,
  count: number,
): Float32Array {
  const project = (w: Uint8Array, rows: number, cols: number, v: Float32Array): Float32Array => {
    const y = new Float32Array(count * rows);
    if (count === 1) native.matvec(typeId, w, rows, cols, v, y);
    else native.matmul(typeId, w, rows, cols, v, count, y);
    return y;
  };
  const g = project(pieces[0], nFf, nEmbd, x);
  const u = project(pieces[1], nFf, nEmbd, x);
  native.forwardOps.swiglu(g, u);
  return project(pieces[2], nEmbd, nFf, g);
}
