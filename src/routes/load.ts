/** Reads a routing-trace file of either format (ours, or ../shared/traces/). */
import { checkInputFile, readChecked } from '../core/input-file.js';
import { limits } from '../core/limits.js';
import path from 'node:path';
import type { Trace } from './types.js';
import { parseTraceJsonl } from './jsonl.js';
import { looksShared, parseSharedDecodeTrace } from './shared-format.js';
import { TraceFormatError } from './errors.js';

export interface LoadOptions {
  /** Model name for headerless files; default: the file name up to its first dot. */
  model?: string;
  /** Experts per layer for headerless files, from the model's name. */
  expertsOf(model: string): number | undefined;
}

export function readTraces(file: string, opts: LoadOptions): Trace[] {
  const text = readTraceText(file);
  if (!looksShared(text)) return parseTraceJsonl(text, file);
  const model = opts.model ?? path.basename(file).split('.')[0];
  const experts = opts.expertsOf(model);
  if (experts === undefined) {
    throw new TraceFormatError(
      file,
      1,
      `model "${model}"`,
      'a known model name (give --model) for a file without header',
    );
  }
  return [parseSharedDecodeTrace(text, file, { model, experts })];
}

/** The file's text, refused by type and size before reading (a FIFO blocks for ever, /dev/zero never ends). */
function readTraceText(file: string): string {
  const st = checkInputFile(file, '--trace', 'trace file');
  if (st.size > limits.traceFileBytesMax)
    throw new TraceFormatError(file, 1, 'file size', `at most ${limits.traceFileBytesMax} bytes, got ${st.size}`);
  return readChecked(file, '--trace', 'trace file');
}

/** Routing counts per layer and expert over some steps: counts[layer][expert]. */
export function routeCounts(steps: readonly { layers: number[][] }[], layers: number, experts: number): number[][] {
  const counts = Array.from({ length: layers }, () => new Array<number>(experts).fill(0));
  for (const s of steps) {
    s.layers.forEach((ids, l) => {
      for (const e of ids) counts[l][e]++;
    });
  }
  return counts;
}

/** Share of (layer, expert) picks that the same layer also picked at the previous step. */
export function nextStepReuse(steps: readonly { layers: number[][] }[]): number {
  let reused = 0;
  let total = 0;
  for (let t = 1; t < steps.length; t++) {
    steps[t].layers.forEach((ids, l) => {
      const prev = new Set(steps[t - 1].layers[l]);
      for (const e of ids) if (prev.has(e)) reused++;
      total += ids.length;
    });
  }
  return total === 0 ? 0 : reused / total;
}
