/**
 * A random model (tests/fixtures/random-model.ts) written to a temp file, mapped, and opened
 * both natively and in the TypeScript reference over the same bytes and offsets.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { MappedFileHandle, NativeModelDesc, NativeModelHandle } from '../../src/native/binding.js';
import { loadDiagnostics } from '../../src/native/diagnostics.js';
import { GGML_TYPE, type HParams } from '../../src/model/types.js';
import { ropeTable } from '../../src/model/rope.js';
import { buildRandomModel, type RandomModel } from '../fixtures/random-model.js';

export const native = loadDiagnostics();

export interface MappedModel {
  model: RandomModel;
  file: MappedFileHandle;
  desc: NativeModelDesc;
  handle: NativeModelHandle;
  close(): void;
}

export function descOf(model: RandomModel): NativeModelDesc {
  return {
    hparams: model.hparams,
    rope: ropeTable(model.hparams),
    tensors: Array.from(model.tensors.values(), (t) => ({
      name: t.name,
      typeId: GGML_TYPE[t.type],
      dims: t.dims,
      offset: t.offset,
    })),
  };
}

/** mutate (optional) edits the model's bytes before they are written, e.g. to plant a NaN weight. */
export function mapModel(
  hparams: HParams,
  options: Parameters<typeof buildRandomModel>[1],
  mutate?: (model: RandomModel) => void,
): MappedModel {
  const model = buildRandomModel(hparams, options);
  mutate?.(model);
  const dir = mkdtempSync(path.join(tmpdir(), 'moetier-forward-'));
  const file = path.join(dir, 'model.bin');
  writeFileSync(file, model.bytes);
  const mapped = native.mapFile(file);
  rmSync(dir, { recursive: true }); // the mapping keeps the data
  const desc = descOf(model);
  const handle = native.createModel(mapped.handle, desc);
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

/** Largest |a - b| over the largest |b|: one number per comparison, stated against a tolerance. */
export function relativeError(actual: Float32Array, expected: Float32Array): number {
  let worst = 0;
  let scale = 0;
  for (let i = 0; i < expected.length; i++) {
    worst = Math.max(worst, Math.abs(actual[i] - expected[i]));
    scale = Math.max(scale, Math.abs(expected[i]));
  }
  return worst / scale;
}
