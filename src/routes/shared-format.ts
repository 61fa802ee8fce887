/**
 * Reader for the decode-only traces of ../shared/traces/:
 *   {"tok": 1, "layers": [[8 sorted expert ids] x nLayer]}
 * No header, no prefill, no rank order, no probabilities: the model name and the
 * expert count come from the caller (the file name and a known geometry).
 */
import type { RouteStep, Trace } from './types.js';
import { TraceFormatError } from './errors.js';
import { checkExperts, parseJsonObject, traceLimits } from './jsonl.js';

export interface SharedTraceInfo {
  model: string;
  /** Experts per layer; the file does not say. */
  experts: number;
}

export function parseSharedDecodeTrace(text: string, file: string, info: SharedTraceInfo): Trace {
  const decode: RouteStep[] = [];
  let layers = 0;
  let topK = 0;
  text.split('\n').forEach((raw, i) => {
    const line = i + 1;
    if (raw.trim() === '') return;
    const rec = parseJsonObject(raw, file, line);
    const ls = rec.layers;
    if (!Array.isArray(ls) || ls.length === 0 || ls.length > traceLimits.layersMax) {
      throw new TraceFormatError(file, line, 'field "layers"', 'an array of per-layer expert id arrays');
    }
    if (layers === 0) {
      layers = ls.length;
      topK = Array.isArray(ls[0]) ? ls[0].length : 0;
      if (topK < 1 || topK > info.experts)
        throw new TraceFormatError(
          file,
          line,
          'field "layers"',
          `1 to ${info.experts} expert ids per layer (the first layer has ${topK})`,
        );
    }
    if (ls.length !== layers) {
      throw new TraceFormatError(file, line, 'field "layers"', `${layers} layers like the first line`);
    }
    const header = { model: info.model, layers, experts: info.experts, topK, rankOrder: false };
    const experts = ls.map((l) => checkExperts(l, header, file, line));
    if (rec.tok !== undefined && !Number.isInteger(rec.tok)) {
      throw new TraceFormatError(file, line, 'field "tok"', 'an integer');
    }
    // The file's "tok" is a 1-based position, not a token id: steps are renumbered from 0.
    decode.push({ step: decode.length, layers: experts });
  });
  if (decode.length === 0) throw new TraceFormatError(file, 1, 'file', 'at least one decode line');
  return {
    source: file,
    header: { model: info.model, layers, experts: info.experts, topK, rankOrder: false },
    prefill: [],
    decode,
  };
}

/** True when the first non-empty line looks like the shared format rather than ours. */
export function looksShared(text: string): boolean {
  const first = text.split('\n').find((l) => l.trim() !== '') ?? '';
  return /"layers"\s*:\s*\[\s*\[/.test(first) && !/"type"\s*:/.test(first);
}
