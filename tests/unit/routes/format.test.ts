import { describe, expect, it } from 'vitest';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { formatTraceJsonl, headerLine, parseTraceJsonl, routeLine } from '../../../src/routes/jsonl.js';
import { parseSharedDecodeTrace } from '../../../src/routes/shared-format.js';
import { nextStepReuse, readTraces, routeCounts } from '../../../src/routes/load.js';
import { TraceFormatError } from '../../../src/routes/errors.js';
import type { Trace } from '../../../src/routes/types.js';
import { mulberry32 } from '../../../src/core/prng.js';
import { randomTrace } from '../tiers/random-trace.js';

const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');
const olmoeTrace = path.resolve(repoRoot, '../shared/traces/olmoe-1b-7b.decode.jsonl');

const header = { model: 'm', layers: 2, experts: 8, topK: 2, rankOrder: true };

describe('moetier route trace JSONL', () => {
  it('round-trips prompts with prefill, decode, probabilities and token ids', () => {
    const a = randomTrace(mulberry32(7), { layers: 3, experts: 10, topK: 2, tokens: 6, prefillRows: 4, reuse: 0.5 });
    a.header = { ...a.header, promptId: 'p0', prompt: 'Write a "C" function\nplease' };
    a.decode.forEach((s, i) => {
      s.token = 100 + i;
      s.probs = s.layers.map((ids) => ids.map((_, k) => 1 / (k + 2)));
    });
    const b = randomTrace(mulberry32(8), { layers: 3, experts: 10, topK: 2, tokens: 3, prefillRows: 0, reuse: 0 });
    const back = parseTraceJsonl(formatTraceJsonl([a, b]), 'x.jsonl');
    expect(back).toHaveLength(2);
    const strip = (t: Trace) => ({ header: t.header, prefill: t.prefill, decode: t.decode });
    expect(strip(back[0])).toEqual(strip(a));
    expect(strip(back[1])).toEqual(strip(b));
  });

  it('accepts a prefill written layer by layer (rows of layer 0 first)', () => {
    const lines = [headerLine(header)];
    for (const layer of [0, 1])
      for (const step of [0, 1]) lines.push(routeLine({ phase: 'prefill', step, layer, experts: [layer, step + 2] }));
    const [t] = parseTraceJsonl(lines.join('\n'), 'p.jsonl');
    expect(t.prefill.map((s) => s.layers)).toEqual([
      [
        [0, 2],
        [1, 2],
      ],
      [
        [0, 3],
        [1, 3],
      ],
    ]);
  });

  it.each([
    [
      'a record before any header',
      [routeLine({ phase: 'decode', step: 0, layer: 0, experts: [1, 2] })],
      1,
      'header line',
    ],
    [
      'an expert id out of range',
      [headerLine(header), routeLine({ phase: 'decode', step: 0, layer: 0, experts: [1, 8] })],
      2,
      'distinct integer ids in [0, 8)',
    ],
    [
      'a repeated expert id',
      [headerLine(header), routeLine({ phase: 'decode', step: 0, layer: 0, experts: [3, 3] })],
      2,
      'distinct',
    ],
    [
      'a missing layer',
      [headerLine(header), routeLine({ phase: 'decode', step: 0, layer: 1, experts: [1, 2] })],
      2,
      'layer 0 missing',
    ],
    [
      'a duplicated record',
      [
        headerLine(header),
        routeLine({ phase: 'decode', step: 0, layer: 0, experts: [1, 2] }),
        routeLine({ phase: 'decode', step: 0, layer: 0, experts: [1, 2] }),
      ],
      3,
      'one record only',
    ],
    [
      'a bad phase',
      [headerLine(header), '{"type":"route","phase":"warmup","step":0,"layer":0,"experts":[1,2]}'],
      2,
      '"prefill" or "decode"',
    ],
    ['not JSON', [headerLine(header), '{"type":'], 2, 'one JSON object'],
  ])('rejects %s with the file, line and expectation', (_what, lines, line, expected) => {
    try {
      parseTraceJsonl(lines.join('\n'), 'bad.jsonl');
      expect.unreachable('parse should fail');
    } catch (e) {
      expect(e).toBeInstanceOf(TraceFormatError);
      expect((e as TraceFormatError).line).toBe(line);
      expect((e as Error).message).toContain('bad.jsonl');
      expect((e as Error).message).toContain(expected);
    }
  });
});

describe('../shared/traces reader', () => {
  it('reads the olmoe decode trace: 16 layers x top-8 of 64, sorted ids, real reuse', () => {
    const [t] = readTraces(olmoeTrace, { expertsOf: (m) => (m === 'olmoe-1b-7b' ? 64 : undefined) });
    expect(t.header).toMatchObject({ model: 'olmoe-1b-7b', layers: 16, experts: 64, topK: 8, rankOrder: false });
    expect(t.prefill).toHaveLength(0);
    const lines = readFileSync(olmoeTrace, 'utf8').trim().split('\n');
    expect(t.decode).toHaveLength(lines.length);
    expect(t.decode[0].layers[0]).toEqual(JSON.parse(lines[0]).layers[0]);
    const sorted = t.decode.every((s) => s.layers.every((ids) => ids.every((e, i) => i === 0 || ids[i - 1] < e)));
    expect(sorted).toBe(true);
    // The traces README: next-token reuse well above chance (k / E = 0.125).
    expect(nextStepReuse(t.decode)).toBeGreaterThan(2 * (8 / 64));
    const counts = routeCounts(t.decode, 16, 64);
    expect(counts.every((row) => row.reduce((a, b) => a + b, 0) === 8 * t.decode.length)).toBe(true);
  });

  it('converts to our format and back unchanged', () => {
    const [t] = readTraces(olmoeTrace, { expertsOf: () => 64 });
    const [back] = parseTraceJsonl(formatTraceJsonl([t]), 'ours.jsonl');
    expect(back.decode).toEqual(t.decode);
    expect(back.header).toEqual(t.header);
  });

  it('needs the expert count from the caller and checks ids against it', () => {
    const text = '{"tok": 1, "layers": [[1, 2], [3, 9]]}\n';
    expect(() => parseSharedDecodeTrace(text, 's.jsonl', { model: 'm', experts: 8 })).toThrow(/s\.jsonl:1: experts/);
    expect(parseSharedDecodeTrace(text, 's.jsonl', { model: 'm', experts: 16 }).decode[0].layers).toEqual([
      [1, 2],
      [3, 9],
    ]);
  });
});
