/**
 * The int8-rebuild worker (a piscina thread): maps the engine's pinned model file itself (the
 * engine's open descriptor, never the path: model/model-pin.ts), checks it is that file at that
 * size, opens its own model handle over the mapping, and writes one expert's Q8_0 host copy into
 * the shared arena. Only handles, offsets and small messages cross threads; the weights never do.
 */
import { loadModel, type LoadedModel } from '../../model/load.js';
import { checkModelFile, type PinnedModelFile } from '../../model/model-pin.js';
import { loadNative } from '../../native/binding.js';

export interface RebuildJob {
  pin: PinnedModelFile;
  arena: SharedArrayBuffer;
  layer: number;
  expert: number;
  offset: number;
}

let open: LoadedModel | undefined;

export default function rebuild(job: RebuildJob): { bytes: number } {
  const native = loadNative();
  if (!open || open.path !== job.pin.readerPath) open = loadModel(native, job.pin.readerPath);
  // The worker's own mapping must be the engine's file, still at its size (a truncated file would SIGBUS).
  checkModelFile({ ...job.pin, readerPath: open.pin.readerPath });
  if (!native.requantizeExpertToQ8) throw new Error('the addon has no requantizeExpertToQ8 verb');
  const startNs = process.hrtime.bigint();
  native.requantizeExpertToQ8(open.nativeModel, job.layer, job.expert, new Uint8Array(job.arena), job.offset);
  return { bytes: Number(process.hrtime.bigint() - startNs) };
}
