/**
 * A native eval's failure as a typed error: the addon rejects with a plain Error whose message
 * starts with what failed (native/cpu/forward_eval.cc writes them); the engine hands its callers
 * MoetierErrors only. Errors that are already typed pass through.
 */
import { MoetierError, NativeError, NonFiniteLogitsError } from '../core/errors.js';

export function typedEvalError(err: unknown, position: number): unknown {
  if (err instanceof MoetierError || !(err instanceof Error)) return err;
  if (/^eval: logits: a non-finite value/.test(err.message)) return new NonFiniteLogitsError(err.message, position, { cause: err });
  return new NativeError(err.message, { cause: err });
}
