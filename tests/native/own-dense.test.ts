/**
 * ownDense (issue 12, part 2's dense half): the dense tensors are read from the file into the
 * model's own memory and dropped from the page cache; the forward pass computes from the copies
 * (the same logits to the bit) and never touches the mapping's pages of them, while the experts
 * are still read through the mapping.
 */
import { closeSync, mkdirSync, mkdtempSync, openSync, rmSync, statfsSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type MappedFileHandle } from '../../src/native/binding.js';
import { loadDiagnostics } from '../../src/native/diagnostics.js';
import { parseGguf } from '../../src/model/gguf/reader.js';
import { readHParams } from '../../src/model/hparams.js';
import { GGML_TYPE } from '../../src/model/types.js';
import { writeSynthModel } from '../../src/synth/generate.js';

const native = loadDiagnostics();
const tmpfsMagic = 0x01021994;
const base = statfsSync(tmpdir()).type === tmpfsMagic ? path.resolve(import.meta.dirname, '../../.ci') : tmpdir();
mkdirSync(base, { recursive: true });
const dir = mkdtempSync(path.join(base, 'moetier-own-dense-'));
const file = path.join(dir, 'tiny.gguf');
afterAll(() => rmSync(dir, { recursive: true, force: true }));
beforeAll(async () => {
  await writeSynthModel({ preset: 'tiny', arch: 'qwen3moe', quant: 'q8_0', seed: 3 }, file);
});

const isExpert = (name: string) => /\.ffn_(gate|up|down)_exps\.weight$/.test(name);

function open(ownDense: boolean) {
  // No readahead: the header's pages come in when it is parsed, and no neighbours with them.
  const { handle, buffer } = native.mapFile(file, { access: 'random' });
  const gguf = parseGguf(new Uint8Array(buffer), file);
  const hparams = readHParams(gguf);
  const tensors = [...gguf.tensors.values()].map((t) => ({
    name: t.name,
    typeId: GGML_TYPE[t.type],
    dims: t.dims,
    offset: t.offset,
  }));
  const model = native.createModel(handle, { hparams, tensors, ownDense });
  return { handle, gguf, hparams, model };
}

/** Resident pages strictly inside the dense tensors (pages shared with an expert or the header left out). */
function denseResident(
  handle: MappedFileHandle,
  gguf: ReturnType<typeof parseGguf>,
): { pages: number; resident: number } {
  const page = native.mappedResidency(handle, 0, 0).pageBytes;
  let pages = 0,
    resident = 0;
  for (const t of gguf.tensors.values()) {
    if (isExpert(t.name)) continue;
    const from = Math.ceil(t.offset / page) * page,
      to = Math.floor((t.offset + t.byteLength) / page) * page;
    if (to <= from) continue;
    const r = native.mappedResidency(handle, from, to - from);
    pages += r.pages;
    resident += r.resident;
  }
  return { pages, resident };
}

function run(m: ReturnType<typeof open>): Float32Array {
  const ctx = native.createContext(m.model, { nCtx: 32, threads: 1 });
  const logits = new Float32Array(m.hparams.nVocab);
  native.evalSync(ctx, Int32Array.of(1, 5, 9, 13), 0, logits);
  native.freeContext(ctx);
  return logits;
}

describe('ownDense', () => {
  it('loads the dense tensors without the mapping or the page cache, and computes from its copies', () => {
    native.dropFileCache(file);
    const owned = open(true);
    // Loaded by pread and dropped from the page cache: the mapping's dense pages never came in.
    const loaded = denseResident(owned.handle, owned.gguf);
    expect(loaded.pages).toBeGreaterThan(0);
    // (A page may linger in another CPU's LRU cache, where DONTNEED cannot drop it: a few at most.)
    expect(loaded.resident).toBeLessThanOrEqual(Math.max(4, Math.ceil(loaded.pages * 0.05)));
    const denseBytes = [...owned.gguf.tensors.values()]
      .filter((t) => !isExpert(t.name))
      .reduce((s, t) => s + t.byteLength, 0);
    expect(native.modelBytes(owned.model).ownedDense).toBe(denseBytes);
    const before = run(owned);
    // The file's output norm changes under both: a model computing from the mapping sees it,
    // the owned model computes from its copy and gives the logits it gave.
    const norm = owned.gguf.tensors.get('output_norm.weight')!;
    const fd = openSync(file, 'r+');
    writeSync(fd, Buffer.alloc(norm.byteLength, 0x3c), 0, norm.byteLength, norm.offset);
    closeSync(fd);
    expect(run(owned)).toEqual(before);
    const mapped = open(false);
    expect(native.modelBytes(mapped.model).ownedDense).toBe(0);
    expect(run(mapped)).not.toEqual(before);
    for (const m of [owned, mapped]) {
      native.freeModel(m.model);
      native.unmapFile(m.handle);
    }
  });
});
