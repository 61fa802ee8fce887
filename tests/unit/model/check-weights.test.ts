/** `moetier inspect --check-weights` (issue 10): finds a NaN norm element and an inf block scale, names the tensors. */
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { inspectMain } from '../../../src/cli/commands/inspect.js';
import { findNonFiniteWeights } from '../../../src/model/check-weights.js';
import { parseGguf } from '../../../src/model/gguf/reader.js';
import { tempDir, tinyModel } from '../../engine/tier-helpers.js';

const { dir, cleanup } = tempDir('moetier-check-weights-');
let clean: string;
let broken: string;
beforeAll(async () => {
  clean = await tinyModel(dir, 'q8_0', 4);
  const bytes = readFileSync(clean);
  const file = parseGguf(new Uint8Array(bytes), clean);
  const view = new DataView(bytes.buffer, bytes.byteOffset);
  view.setFloat32(file.tensors.get('output_norm.weight')!.offset + 4 * 3, Number.NaN, true); // element 3
  const down = file.tensors.get('blk.1.ffn_down_exps.weight')!;
  view.setUint16(down.offset + 34 * 5, 0x7c00, true); // block 5's f16 scale = +inf
  broken = path.join(dir, 'broken.gguf');
  writeFileSync(broken, bytes);
});
afterAll(cleanup);

describe('check weights', () => {
  it('finds nothing in a healthy model, and the planted NaN and inf by tensor and position', () => {
    expect(findNonFiniteWeights(parseGguf(new Uint8Array(readFileSync(clean)), clean))).toEqual([]);
    const found = findNonFiniteWeights(parseGguf(new Uint8Array(readFileSync(broken)), broken)).sort((a, b) =>
      a.tensor.localeCompare(b.tensor),
    );
    expect(found).toEqual([
      { tensor: 'blk.1.ffn_down_exps.weight', index: 5, unit: 'block scale', count: 1 },
      { tensor: 'output_norm.weight', index: 3, unit: 'element', count: 1 },
    ]);
  });

  it('reads the tensors past the mapped view from the file (a model bigger than the view)', () => {
    const bytes = new Uint8Array(readFileSync(broken));
    const whole = parseGguf(bytes, broken);
    const headerOnly = { ...whole, bytes: bytes.subarray(0, whole.dataOffset) };
    const sorted = (xs: ReturnType<typeof findNonFiniteWeights>) => xs.sort((a, b) => a.tensor.localeCompare(b.tensor));
    expect(sorted(findNonFiniteWeights(headerOnly))).toEqual(sorted(findNonFiniteWeights(whole)));
    expect(findNonFiniteWeights(headerOnly)).toHaveLength(2);
  });

  it('moetier inspect --check-weights exits 0 on a healthy model and 1 naming the broken tensors', async () => {
    const lines: string[] = [];
    expect(await inspectMain(['-m', clean, '--check-weights'], (t) => lines.push(t))).toBe(0);
    expect(lines.join('\n')).toMatch(/qwen3moe, 4 layers, 8 experts \(top-2\)[\s\S]*weights: no NaN or inf/);
    lines.length = 0;
    expect(await inspectMain(['-m', broken, '--check-weights', '--json'], (t) => lines.push(t))).toBe(1);
    const report = JSON.parse(lines[0]) as { nonFiniteWeights: Array<{ tensor: string }> };
    expect(report.nonFiniteWeights.map((w) => w.tensor).sort()).toEqual([
      'blk.1.ffn_down_exps.weight',
      'output_norm.weight',
    ]);
  });
});
