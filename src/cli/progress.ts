/**
 * Progress of a long job (model generation) on stderr: on a terminal one line redrawn in place
 * (carriage return + erase line), ended when the job completes; elsewhere (a pipe, a log file,
 * CI) plain lines, at most one per interval, so a log is not flooded with redraws.
 */
import type { Stream } from './completion.js';

const REDRAW = '\r\x1b[2K'; // to column 0, erase the line

/** A progress printer that writes at most every `intervalMs` (and always at 100 %). */
export function progressPrinter(
  sink: Stream,
  intervalMs = 250,
  now: () => number = Date.now,
): (done: number, total: number) => void {
  let last = -Infinity;
  return (done, total) => {
    const t = now();
    if (done < total && t - last < intervalMs) return;
    last = t;
    const mb = (n: number): string => (n / 1e6).toFixed(1);
    const line = `gen-model: ${((100 * done) / total).toFixed(0).padStart(3)}% ${mb(done)} / ${mb(total)} MB`;
    if (!sink.isTTY) sink.write(`${line}\n`);
    else sink.write(`${REDRAW}${line}${done >= total ? '\n' : ''}`);
  };
}
