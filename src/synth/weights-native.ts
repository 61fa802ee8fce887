/**
 * The synthetic model's tensor bytes made by the addon (native/addon/synth.cc): the same bytes as
 * weights.ts's TypeScript (the reference, `SynthTensor.data`), fast enough for the real-model
 * shapes (Qwen3-30B-A3B at Q4_K_M: 29e9 expert weights; TypeScript's Q4_K search takes ~390 ns a
 * weight, the native one ~10 ns on AVX-512, on every core).
 *
 *   uniform tensors (experts, q / k / v, shared experts): rows drawn and quantised natively,
 *     the stream continued from the tensor's Rng (synthUniformAsync)
 *   the others (embedding, head, router, norms, ...): rows filled by their TypeScript filler,
 *     a chunk at a time, each chunk quantised natively while the next one fills (quantizeRowsAsync)
 *
 * One tensor in memory at a time, as the writer pulls it (<= 165 MB for the largest preset), plus
 * two fill buffers of 4 Mi floats each side.
 */
import { availableParallelism } from 'node:os';
import { expectedTensors } from '../model/arch.js';
import type { GgufTensorSource } from '../model/gguf/writer.js';
import { rowBytes } from '../model/quant.js';
import { GGML_TYPE, type GgmlTypeName } from '../model/types.js';
import { loadNative, type NativeSynthVerbs } from '../native/binding.js';
import type { PlantedModel } from './planted.js';
import { rowFiller, type RowFill, type SynthTensor } from './weights.js';

/** The addon's writer verbs and the threads they run on. */
export interface NativeWriter {
  verbs: NativeSynthVerbs;
  threads: number;
}

/** Floats filled in TypeScript per chunk (twice: one chunk fills while the other is quantised). */
const FILL_CHUNK_FLOATS = 4 << 20;

/**
 * The writer verbs, or why there are none (the addon is not built, or was built before them):
 * the TypeScript then writes the same bytes, slowly.
 */
export function nativeWriter(threads = availableParallelism()): NativeWriter | { missing: string } {
  let binding;
  try {
    binding = loadNative();
  } catch (error) {
    return { missing: (error as Error).message };
  }
  const { quantizeRows, quantizeRowsAsync, synthUniformAsync } = binding;
  return { verbs: { quantizeRows, quantizeRowsAsync, synthUniformAsync }, threads: Math.max(1, threads) };
}

/** `tensors` (synthTensors of `plant`) as the writer's sources: made by the addon where it has the verbs, else the tensors themselves. */
export function synthTensorSources(
  plant: PlantedModel,
  tensors: readonly SynthTensor[],
  writer = nativeWriter(),
): GgufTensorSource[] {
  return 'verbs' in writer ? nativeTensorSources(plant, tensors, writer) : [...tensors];
}

/** `tensors` (synthTensors of `plant`) as writer sources whose bytes the addon makes. */
export function nativeTensorSources(
  plant: PlantedModel,
  tensors: readonly SynthTensor[],
  writer: NativeWriter,
): GgufTensorSource[] {
  const specs = new Map(expectedTensors(plant.hp).map((spec) => [spec.name, spec]));
  return tensors.map((t) => {
    const spec = specs.get(t.name);
    if (spec === undefined) return t;
    return {
      name: t.name,
      type: t.type,
      dims: t.dims,
      data: () => nativeTensorBytes(t.type, t.dims, rowFiller(spec, plant), writer),
    };
  });
}

/** The bytes of a tensor [dims[0] columns, the rest rows] of `type` whose rows `fill` gives. */
export async function nativeTensorBytes(
  type: GgmlTypeName,
  dims: readonly number[],
  fill: RowFill,
  writer: NativeWriter,
): Promise<Uint8Array> {
  const cols = dims[0];
  const rows = dims.slice(1).reduce((a, b) => a * b, 1);
  const bytes = new Uint8Array(rows * rowBytes(type, cols));
  const typeId = GGML_TYPE[type];
  if (fill.uniform !== undefined) {
    // Rng.fillUniform's scale, the same double: the native stream gives the same floats.
    const { rng, sd } = fill.uniform;
    const state = rng.state();
    await writer.verbs.synthUniformAsync(
      state,
      (Math.sqrt(3) * sd) / 2147483648,
      typeId,
      rows,
      cols,
      bytes,
      writer.threads,
    );
    rng.setState(state);
    return bytes;
  }
  const chunkRows = Math.max(1, Math.floor(FILL_CHUNK_FLOATS / cols));
  const buffers = [
    new Float32Array(Math.min(rows, chunkRows) * cols),
    new Float32Array(rows > chunkRows ? chunkRows * cols : 0),
  ];
  const stride = rowBytes(type, cols);
  let quantizing: Promise<void> = Promise.resolve();
  try {
    for (let r0 = 0, k = 0; r0 < rows; r0 += chunkRows, k ^= 1) {
      const n = Math.min(chunkRows, rows - r0);
      const buffer = buffers[k].subarray(0, n * cols);
      for (let r = 0; r < n; r++) fill(r0 + r, buffer.subarray(r * cols, (r + 1) * cols));
      await quantizing; // the other buffer's chunk: done before this one starts, and before that buffer fills again
      quantizing = writer.verbs.quantizeRowsAsync(
        typeId,
        buffer,
        n,
        cols,
        bytes.subarray(r0 * stride, (r0 + n) * stride),
        writer.threads,
      );
    }
  } catch (error) {
    await quantizing.catch(() => undefined); // a filler that threw: no quantisation left running unobserved
    throw error;
  }
  await quantizing;
  return bytes;
}
