/**
 * The int8-rebuild worker (a piscina thread): maps the model file itself, opens its own model
 * handle over that mapping, and writes one expert's Q8_0 host copy into the shared arena.
 * Only handles, offsets and small messages cross threads; the weights never do.
 */
import { loadModel, type LoadedModel } from '../../engine/load.js';
import { loadNative } from '../../native/binding.js';

export interface RebuildJob {
  file: string;
  arena: SharedArrayBuffer;
  layer: number;
  expert: number;
  offset: number;
}

let open: LoadedModel | undefined;

export default function rebuild(job: RebuildJob): { bytes: number } {
  const native = loadNative();
  if (!open || open.path !== job.file) open = loadModel(native, job.file);
  if (!native.requantizeExpertToQ8) throw new Error('the addon has no requantizeExpertToQ8 verb');
  const startNs = process.hrtime.bigint();
  native.requantizeExpertToQ8(open.nativeModel, job.layer, job.expert, new Uint8Array(job.arena), job.offset);
  return { bytes: Number(process.hrtime.bigint() - startNs) };
}
