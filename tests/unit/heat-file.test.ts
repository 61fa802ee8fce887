import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { FileFormatError, InvalidOptionError } from '../../src/core/errors.js';
import { addRoutes, emptyHeat, readHeatFile, writeHeatFile } from '../../src/engine/heat-file.js';

const dir = mkdtempSync(path.join(tmpdir(), 'moetier-heat-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const hp = { arch: 'qwen3moe' as const, nLayer: 2, nExpert: 4 };

describe('heat file', () => {
  it('merges routes across requests and round-trips through disk', () => {
    const file = path.join(dir, 'sub', 'm.heat.json');
    expect(readHeatFile(file, hp)).toBeUndefined();
    let heat = addRoutes(emptyHeat(hp), [
      [
        [0, 1],
        [3, 2],
      ],
      [
        [0, 2],
        [3, 1],
      ],
    ]);
    writeHeatFile(file, heat);
    heat = addRoutes(readHeatFile(file, hp)!, [
      [
        [0, 3],
        [1, 2],
      ],
    ]);
    writeHeatFile(file, heat);
    const back = readHeatFile(file, hp)!;
    expect(back.counts).toEqual([
      [3, 1, 1, 1],
      [0, 2, 2, 2],
    ]);
    expect(back.routedPairs).toBe(12);
  });

  it('refuses a corrupt file or one for another geometry', () => {
    const bad = path.join(dir, 'bad.json');
    writeFileSync(bad, '{"version":1,');
    expect(() => readHeatFile(bad, hp)).toThrow(FileFormatError);
    const other = path.join(dir, 'other.json');
    writeHeatFile(other, emptyHeat({ ...hp, nExpert: 8 }));
    expect(() => readHeatFile(other, hp)).toThrow(InvalidOptionError);
  });

  it('checks every field: null, a string count, a float, another architecture, a ragged row are refused, named', () => {
    const good = emptyHeat(hp);
    const cases: Array<[unknown, RegExp]> = [
      [null, /heat file: expected a JSON object/],
      [{ ...good, routedPairs: '12' }, /heat file routedPairs: expected an integer >= 0/],
      [{ ...good, routedPairs: 1.5 }, /routedPairs/],
      [{ ...good, arch: 'olmoe' }, /heat file arch: expected "qwen3moe"/],
      [
        {
          ...good,
          counts: [
            [0, 0, 0, 0],
            [0, 0, 0],
          ],
        },
        /heat file counts\[1\]: expected 4 integers >= 0/,
      ],
      [
        {
          ...good,
          counts: [
            [0, 0, -1, 0],
            [0, 0, 0, 0],
          ],
        },
        /counts\[0\]/,
      ],
      [{ ...good, version: 2 }, /heat file version: expected 1/],
    ];
    cases.forEach(([value, message], i) => {
      const file = path.join(dir, `field-${i}.json`);
      writeFileSync(file, JSON.stringify(value));
      expect(() => readHeatFile(file, hp)).toThrow(message);
    });
  });

  it('refuses a FIFO or a folder as the heat file by type, without reading (a FIFO blocked for ever)', () => {
    const fifo = path.join(dir, 'fifo.heat.json');
    execFileSync('mkfifo', [fifo]);
    expect(() => readHeatFile(fifo, hp)).toThrow(/option heat: expected a heat file \(a regular file\)/);
    expect(() => readHeatFile(dir, hp)).toThrow(/option heat: expected a heat file \(a regular file\)/);
  });
});
