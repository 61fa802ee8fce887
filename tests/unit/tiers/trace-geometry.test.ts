/**
 * A trace carries its model's expert geometry in its header (the engine writes it), so replay
 * prices a trace of a model it has no named geometry for (a synthetic preset, a user's model);
 * a header without one still needs --geometry, and a bad one is refused with the line.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { formatTraceJsonl, parseTraceJsonl } from '../../../src/routes/jsonl.js';
import type { Trace } from '../../../src/routes/types.js';
import { expertBytes, geometryFromTrace } from '../../../src/tiers/geometry.js';
import { loadTraceFiles, runLab } from '../../../src/tiers/lab.js';
import { InvalidOptionError } from '../../../src/core/errors.js';

const dir = mkdtempSync(path.join(tmpdir(), 'moetier-trace-geometry-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function trace(geometry?: Trace['header']['geometry']): Trace {
  const step = (s: number) => ({
    step: s,
    layers: [
      [s % 4, (s + 1) % 4],
      [(s + 2) % 4, (s + 3) % 4],
    ],
  });
  return {
    source: 'mem',
    header: {
      model: 'synth-tiny.gguf',
      layers: 2,
      experts: 4,
      topK: 2,
      rankOrder: true,
      ...(geometry ? { geometry } : {}),
    },
    prefill: [step(0)],
    decode: Array.from({ length: 12 }, (_, i) => step(i + 1)),
  };
}

describe("a trace header's geometry", () => {
  const g = { hidden: 64, expertFfn: 32, expertType: 'Q8_0' };
  it('round-trips through the JSONL format', () => {
    const [back] = parseTraceJsonl(formatTraceJsonl([trace(g)]), 'mem');
    expect(back.header.geometry).toEqual(g);
    const [none] = parseTraceJsonl(formatTraceJsonl([trace()]), 'mem');
    expect(none.header.geometry).toBeUndefined();
  });
  it('prices the expert as the container stores it', () => {
    const geo = geometryFromTrace(trace(g).header)!;
    expect(expertBytes(geo)).toBe(((3 * 64 * 32) / 32) * 34); // 3 matrices of 64 x 32 at Q8_0
    expect(geometryFromTrace(trace({ ...g, expertType: 'IQ2_XXS' }).header)).toBeUndefined();
  });
  it('lets replay run a trace of a model it has no named geometry for; without one it asks for --geometry', () => {
    const file = path.join(dir, 'with.jsonl');
    writeFileSync(file, formatTraceJsonl([trace(g)]));
    const rows = runLab(loadTraceFiles([file]), {
      policies: ['lfru', 'belady'],
      budgets: [2],
      offload: 'hostless',
      scope: 'layer',
    } as never);
    expect(rows.map((r) => r.policy)).toEqual(['lfru', 'belady']);
    const bare = path.join(dir, 'bare.jsonl');
    writeFileSync(bare, formatTraceJsonl([trace()]));
    expect(() =>
      runLab(loadTraceFiles([bare]), {
        policies: ['lfru'],
        budgets: [2],
        offload: 'hostless',
        scope: 'layer',
      } as never),
    ).toThrow(InvalidOptionError);
  });
  it('refuses a malformed geometry with the file and line', () => {
    const text = formatTraceJsonl([trace(g)]).replace('"expertFfn":32', '"expertFfn":-1');
    expect(() => parseTraceJsonl(text, 'bad.jsonl')).toThrow(/bad\.jsonl.*expertFfn/);
  });
});
