/**
 * A random model (tests/fixtures/random-model.ts) written to a temp file, mapped, and opened
 * both natively and in the TypeScript reference over the same bytes and offsets.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { MappedFileHandle, NativeModelDesc, NativeModelHandle } from '../../src/native/binding.js';
import { loadDiagnostics } from '../../src/native/diagnostics.js';
import { expect } from 'vitest';
import { createReferenceSession } from '../../src/reference/forward.js';
import { GGML_TYPE, moeLayers, type HParams } from '../../src/model/types.js';
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

/**
 * The native pass against the f32 reference over the same model: a prefill of `prompt` (every row's
 * logits), then one decode step per token of `steps`. Each row's logits within `tolerance`
 * (relativeError); with `routes`, each row's routes (MoE layers only) equal to the reference's.
 */
export async function expectReferenceLogits(
  m: MappedModel,
  o: { prompt: number[]; steps: number[]; tolerance: number; routes: boolean; threads?: number },
): Promise<void> {
  const hp = m.model.hparams;
  const nCtx = o.prompt.length + o.steps.length;
  const ctx = native.createContext(m.handle, { nCtx, threads: o.threads ?? 2 });
  try {
    const reference = createReferenceSession(m.model, nCtx);
    const perRow = moeLayers(hp) * hp.nExpertUsed;
    const logits = new Float32Array(o.prompt.length * hp.nVocab);
    const routes = new Int32Array(o.prompt.length * perRow);
    native.evalSync(ctx, Int32Array.from(o.prompt), 0, logits, { allLogits: true, routes });
    const expected = reference.eval(o.prompt);
    o.prompt.forEach((_, r) => {
      if (o.routes)
        expect(Array.from(routes.subarray(r * perRow, (r + 1) * perRow))).toEqual(expected.routes[r].flat());
      const row = logits.subarray(r * hp.nVocab, (r + 1) * hp.nVocab);
      expect(relativeError(row, expected.logits[r])).toBeLessThan(o.tolerance);
    });
    let pos = o.prompt.length;
    for (const token of o.steps) {
      const row = new Float32Array(hp.nVocab);
      const rowRoutes = new Int32Array(perRow);
      await native.evalAsync(ctx, Int32Array.of(token), pos++, row, { routes: rowRoutes });
      const step = reference.eval([token]);
      if (o.routes) expect(Array.from(rowRoutes)).toEqual(step.routes[0].flat());
      expect(relativeError(row, step.logits[0])).toBeLessThan(o.tolerance);
    }
  } finally {
    native.freeContext(ctx);
  }
}
