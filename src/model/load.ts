/**
 * Opening a model: map the file (native), parse and validate it (TypeScript), build the tokenizer,
 * and hand the validated tensor table to the native forward pass.
 */
import { existsSync, statSync } from 'node:fs';
import { GgufFormatError, InvalidOptionError, NativeError } from '../core/errors.js';
import { parseGguf } from './gguf/reader.js';
import { readHParams } from './hparams.js';
import { createTokenizer, type Tokenizer } from './tokenizer/index.js';
import { GGML_TYPE, type GgufFile, type HParams } from './types.js';
import type { MappedFileHandle, NativeBinding, NativeModelHandle } from '../native/binding.js';
import { pinModelFile, type PinnedModelFile } from './model-pin.js';
import { ropeTable } from './rope.js';

export interface LoadedModel {
  path: string;
  file: GgufFile;
  hparams: HParams;
  tokenizer: Tokenizer;
  mapping: MappedFileHandle;
  nativeModel: NativeModelHandle;
  /** The mapped file itself, for readers after the open and for the checks that it did not change. */
  pin: PinnedModelFile;
}

/**
 * fromDisk: the disk tier's way (docs/SPEC.md section 6): the file is mapped without readahead and the dense
 * tensors are read into the model's own memory, so the page cache holds neither the dense
 * weights nor (with the disk backend) the experts.
 */
export function loadModel(native: NativeBinding, path: string, options: { fromDisk?: boolean } = {}): LoadedModel {
  if (typeof path !== 'string' || path.length === 0)
    throw new InvalidOptionError('model', 'a path to a .gguf file', path);
  if (!existsSync(path) || !statSync(path).isFile())
    throw new InvalidOptionError('model', 'an existing .gguf file', path);
  let mapped: { handle: MappedFileHandle; buffer: ArrayBuffer; size: number; fd: number };
  try {
    mapped = options.fromDisk ? native.mapFile(path, { access: 'random' }) : native.mapFile(path);
  } catch (err) {
    throw new GgufFormatError(path, 'file', 'a readable, non-empty file', { cause: err });
  }
  try {
    const file = parseGguf(new Uint8Array(mapped.buffer), path, mapped.size);
    const hparams = readHParams(file);
    const tokenizer = createTokenizer(file);
    const tensors = [...file.tensors.values()].map((t) => ({
      name: t.name,
      typeId: GGML_TYPE[t.type],
      dims: t.dims,
      offset: t.offset,
    }));
    let nativeModel: NativeModelHandle;
    try {
      nativeModel = native.createModel(mapped.handle, {
        hparams,
        tensors,
        rope: ropeTable(hparams),
        ...(options.fromDisk ? { ownDense: true } : {}),
      });
    } catch (err) {
      throw new NativeError(`${path}: the native forward pass refused the model: ${(err as Error).message}`, {
        cause: err,
      });
    }
    return { path, file, hparams, tokenizer, mapping: mapped.handle, nativeModel, pin: pinModelFile(path, mapped.fd) };
  } catch (err) {
    native.unmapFile(mapped.handle);
    throw err;
  }
}
