/**
 * The moetier routing-trace format (JSONL), documented in docs/REPLAY.md.
 *
 *   {"type":"header","format":"moetier-routes","version":1,"model":"olmoe-1b-7b",
 *    "layers":16,"experts":64,"topK":8,"rankOrder":true,"promptId":"p0","prompt":"..."}
 *   {"type":"route","phase":"prefill","step":0,"layer":0,"experts":[12,3,...],"probs":[0.31,...],"token":791}
 *   ...
 *
 * One header per prompt; the route records after it belong to that prompt, in
 * any order (a prefill is recorded layer by layer, a decode token by token).
 * Every (phase, step) must end up with exactly one record per layer.
 */
import type { Phase, RouteStep, Trace, TraceGeometry, TraceHeader } from './types.js';
import { TraceFormatError } from './errors.js';

export const traceFormatName = 'moetier-routes';
export const traceFormatVersion = 1;

/** Sizes a trace may declare; far above any real MoE, low enough to catch garbage. */
export const traceLimits = { layersMax: 1024, expertsMax: 65536, topKMax: 256 } as const;

export function headerLine(h: TraceHeader): string {
  const { model, layers, experts, topK, rankOrder, promptId, prompt, geometry } = h;
  return JSON.stringify({
    type: 'header',
    format: traceFormatName,
    version: traceFormatVersion,
    model,
    layers,
    experts,
    topK,
    rankOrder,
    promptId,
    prompt,
    geometry,
  });
}

export interface RouteRecord {
  phase: Phase;
  step: number;
  layer: number;
  experts: readonly number[];
  probs?: readonly number[];
  token?: number;
}

export function routeLine(r: RouteRecord): string {
  const { phase, step, layer, experts, probs, token } = r;
  return JSON.stringify({ type: 'route', phase, step, layer, experts, probs, token });
}

/** Whole traces to JSONL text: a header, then prefill rows, then decode tokens, layer by layer. */
export function formatTraceJsonl(traces: readonly Trace[]): string {
  const lines: string[] = [];
  for (const t of traces) {
    lines.push(headerLine(t.header));
    for (const phase of ['prefill', 'decode'] as const) {
      for (const s of t[phase]) {
        s.layers.forEach((experts, layer) => {
          const token = layer === 0 ? s.token : undefined;
          lines.push(routeLine({ phase, step: s.step, layer, experts, probs: s.probs?.[layer], token }));
        });
      }
    }
  }
  return lines.join('\n') + '\n';
}

/** Parses JSONL text of our format into one Trace per header. */
export function parseTraceJsonl(text: string, file: string): Trace[] {
  const traces: Trace[] = [];
  let open: Assembler | undefined;
  text.split('\n').forEach((raw, i) => {
    const lineNo = i + 1;
    if (raw.trim() === '') return;
    const rec = parseJsonObject(raw, file, lineNo);
    if (rec.type === 'header') {
      if (open) traces.push(open.finish());
      open = new Assembler(file, readHeader(rec, file, lineNo));
    } else if (rec.type === 'route') {
      if (!open) throw new TraceFormatError(file, lineNo, 'route record', 'a header line before it');
      open.add(rec, lineNo);
    } else {
      throw new TraceFormatError(file, lineNo, 'field "type"', '"header" or "route"');
    }
  });
  if (open) traces.push(open.finish());
  if (traces.length === 0) throw new TraceFormatError(file, 1, 'file', 'at least one header line');
  return traces;
}

type Json = Record<string, unknown>;

export function parseJsonObject(raw: string, file: string, line: number): Json {
  let v: unknown;
  try {
    v = JSON.parse(raw);
  } catch {
    throw new TraceFormatError(file, line, 'line', 'one JSON object');
  }
  if (typeof v !== 'object' || v === null || Array.isArray(v)) {
    throw new TraceFormatError(file, line, 'line', 'one JSON object');
  }
  return v as Json;
}

function intField(rec: Json, key: string, min: number, max: number, file: string, line: number): number {
  const v = rec[key];
  if (typeof v !== 'number' || !Number.isInteger(v) || v < min || v > max) {
    throw new TraceFormatError(file, line, `field "${key}"`, `an integer in [${min}, ${max}]`);
  }
  return v;
}

function readHeader(rec: Json, file: string, line: number): TraceHeader {
  if (rec.format !== traceFormatName || rec.version !== traceFormatVersion) {
    throw new TraceFormatError(
      file,
      line,
      'header format/version',
      `"${traceFormatName}" version ${traceFormatVersion}`,
    );
  }
  if (typeof rec.model !== 'string' || rec.model === '') {
    throw new TraceFormatError(file, line, 'field "model"', 'a non-empty string');
  }
  const layers = intField(rec, 'layers', 1, traceLimits.layersMax, file, line);
  const experts = intField(rec, 'experts', 1, traceLimits.expertsMax, file, line);
  const topK = intField(rec, 'topK', 1, Math.min(experts, traceLimits.topKMax), file, line);
  const h: TraceHeader = { model: rec.model, layers, experts, topK, rankOrder: rec.rankOrder !== false };
  if (typeof rec.promptId === 'string') h.promptId = rec.promptId;
  if (typeof rec.prompt === 'string') h.prompt = rec.prompt;
  if (rec.geometry !== undefined) h.geometry = readGeometry(rec.geometry, file, line);
  return h;
}

/** The optional header field "geometry": { hidden, expertFfn, expertType }. */
function readGeometry(v: unknown, file: string, line: number): TraceGeometry {
  if (typeof v !== 'object' || v === null || Array.isArray(v))
    throw new TraceFormatError(file, line, 'field "geometry"', 'an object { hidden, expertFfn, expertType }');
  const g = v as Json;
  const hidden = intField(g, 'hidden', 1, 1 << 20, file, line);
  const expertFfn = intField(g, 'expertFfn', 1, 1 << 20, file, line);
  if (typeof g.expertType !== 'string' || !/^[A-Z0-9_]{2,12}$/.test(g.expertType))
    throw new TraceFormatError(file, line, 'field "geometry.expertType"', 'a GGML type name such as Q8_0');
  return { hidden, expertFfn, expertType: g.expertType };
}

/** Checks one layer's expert list: topK distinct ids in [0, experts). */
export function checkExperts(v: unknown, h: TraceHeader, file: string, line: number): number[] {
  const expected = `${h.topK} distinct integer ids in [0, ${h.experts})`;
  if (!Array.isArray(v) || v.length !== h.topK) throw new TraceFormatError(file, line, 'experts', expected);
  const seen = new Set<number>();
  for (const e of v) {
    if (!Number.isInteger(e) || e < 0 || e >= h.experts || seen.has(e)) {
      throw new TraceFormatError(file, line, 'experts', expected);
    }
    seen.add(e);
  }
  return v as number[];
}

/** Collects route records of one prompt into complete steps. */
class Assembler {
  private readonly steps = { prefill: new Map<number, RouteStep>(), decode: new Map<number, RouteStep>() };
  private readonly lastLine = new Map<RouteStep, number>();
  constructor(
    private readonly file: string,
    private readonly header: TraceHeader,
  ) {}

  add(rec: Json, line: number): void {
    const { file, header: h } = this;
    const phase = rec.phase;
    if (phase !== 'prefill' && phase !== 'decode') {
      throw new TraceFormatError(file, line, 'field "phase"', '"prefill" or "decode"');
    }
    const step = intField(rec, 'step', 0, Number.MAX_SAFE_INTEGER, file, line);
    const layer = intField(rec, 'layer', 0, h.layers - 1, file, line);
    const experts = checkExperts(rec.experts, h, file, line);
    const s = this.stepOf(phase, step);
    if (s.layers[layer] !== undefined) {
      throw new TraceFormatError(file, line, `${phase} step ${step} layer ${layer}`, 'one record only');
    }
    s.layers[layer] = experts;
    this.lastLine.set(s, line);
    if (rec.probs !== undefined) this.addProbs(s, layer, rec.probs, line);
    if (rec.token !== undefined) {
      const token = intField(rec, 'token', 0, Number.MAX_SAFE_INTEGER, file, line);
      if (s.token !== undefined && s.token !== token) {
        throw new TraceFormatError(
          file,
          line,
          'field "token"',
          `the same token id as step ${step}'s other records (${s.token})`,
        );
      }
      s.token = token;
    }
  }

  finish(): Trace {
    const prefill = this.sorted('prefill');
    const decode = this.sorted('decode');
    return { source: this.file, header: this.header, prefill, decode };
  }

  private stepOf(phase: Phase, step: number): RouteStep {
    let s = this.steps[phase].get(step);
    if (!s) {
      s = { step, layers: new Array<number[]>(this.header.layers) };
      this.steps[phase].set(step, s);
    }
    return s;
  }

  private addProbs(s: RouteStep, layer: number, v: unknown, line: number): void {
    const ok =
      Array.isArray(v) && v.length === this.header.topK && v.every((p) => typeof p === 'number' && p >= 0 && p <= 1);
    if (!ok) throw new TraceFormatError(this.file, line, 'probs', `${this.header.topK} numbers in [0, 1]`);
    s.probs ??= new Array<number[]>(this.header.layers);
    s.probs[layer] = v as number[];
  }

  private sorted(phase: Phase): RouteStep[] {
    const steps = [...this.steps[phase].values()].sort((a, b) => a.step - b.step);
    for (const s of steps) {
      for (let l = 0; l < this.header.layers; l++) {
        if (s.layers[l] === undefined) {
          const line = this.lastLine.get(s) ?? 0;
          throw new TraceFormatError(
            this.file,
            line,
            `${phase} step ${s.step}`,
            `a record for every layer (layer ${l} missing)`,
          );
        }
        if (s.probs && s.probs[l] === undefined) {
          throw new TraceFormatError(
            this.file,
            this.lastLine.get(s) ?? 0,
            `${phase} step ${s.step} layer ${l}`,
            'probs on every layer of a step, or none',
          );
        }
      }
    }
    return steps;
  }
}
