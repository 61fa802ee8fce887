/** A broken invariant is a bug: stop loudly. Operating errors use errors.ts instead. */
export function assert(condition: unknown, message: string): asserts condition {
  if (!condition) throw new Error(`assertion failed: ${message}`);
}
