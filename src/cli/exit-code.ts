/**
 * Exit codes, as the ecosystem's tools use them: 0 done, 2 a bad command line (unknown flag,
 * missing or invalid value, an unknown command: nothing was run), 1 a failure while running
 * (a corrupt model, out of memory, a native error, a bug). 130 after Ctrl-C is set by `run`.
 */
import { InvalidOptionError } from '../core/errors.js';

export const EXIT_OK = 0;
export const EXIT_FAILURE = 1;
export const EXIT_USAGE = 2;

export function exitCodeFor(err: unknown): number {
  return err instanceof InvalidOptionError ? EXIT_USAGE : EXIT_FAILURE;
}
