/**
 * A native eval's failure as a typed error: the addon rejects with a plain Error whose message
 * starts with what failed (native/cpu/forward_eval.cc writes them); evalAsync's carry the code
 * MT_EVAL_FAILED, or MT_INTERNAL ("eval: internal error: ...") for a C++ exception its worker
 * caught. The engine hands its callers MoetierErrors only (the native error is the cause).
 * Errors that are already typed pass through.
 */
import {
  DeviceComputeError,
  ExpertReadError,
  MoetierError,
  NativeError,
  NonFiniteLogitsError,
} from '../core/errors.js';

/** native/tier/tier_stream.cc's read_failed: "expert read: FILE: layer L expert E at offset O (B bytes): why". */
const expertReadPattern = /expert read: (.*): layer (\d+) expert (\d+) at offset (\d+) \(\d+ bytes\): /;

/**
 * native/tier/tier_remote.cc: "tier: layer L: computing resident slot S on the device (one call
 * with slots S,T,...): why" (the slots run in one device call; the first is S).
 */
const deviceComputePattern =
  /tier: layer (\d+): computing resident slot (\d+) on the device \(one call with slots ([\d,]+)\): /;

export function typedEvalError(err: unknown, position: number): unknown {
  // Only the addon's own refusals ("eval: ..."); anything else thrown on the way (a bug in a
  // policy tick, a consumer's error) passes through as it is.
  if (err instanceof MoetierError || !(err instanceof Error) || !err.message.startsWith('eval: ')) return err;
  if (err.message.startsWith('eval: logits: a non-finite value'))
    return new NonFiniteLogitsError(err.message, position, { cause: err });
  const read = expertReadPattern.exec(err.message);
  if (read) {
    const [, file, layer, expert, offset] = read;
    return new ExpertReadError(
      err.message.slice('eval: '.length),
      { file: file!, layer: Number(layer), expert: Number(expert), offset: Number(offset) },
      { cause: err },
    );
  }
  const device = deviceComputePattern.exec(err.message);
  if (device) {
    const slots = device[3]!.split(',').map(Number);
    return new DeviceComputeError(
      err.message.slice('eval: '.length),
      { layer: Number(device[1]), slot: Number(device[2]), slots },
      { cause: err },
    );
  }
  return new NativeError(err.message, { cause: err });
}
