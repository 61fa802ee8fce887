/**
 * Ctrl-C during a command that runs a request: the first SIGINT aborts the request through its
 * AbortSignal, so the request ends as an abort does (the heat file merged and written atomically,
 * the engine closed, the trace file written) and the command exits with 130 (128 + SIGINT, what
 * a shell reports for a process Ctrl-C ended). A second SIGINT ends the process at once, as Node's
 * default does: the listener is gone by then.
 */

export const exitCodeInterrupted = 130;

export interface Interrupt {
  readonly signal: AbortSignal;
  /** Stops listening (the default handling is back). */
  dispose(): void;
}

export function catchInterrupt(): Interrupt {
  const controller = new AbortController();
  const onSigint = (): void => controller.abort();
  process.once('SIGINT', onSigint);
  return { signal: controller.signal, dispose: () => void process.removeListener('SIGINT', onSigint) };
}
