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
    let heat = addRoutes(emptyHeat(hp), [[[0, 1], [3, 2]], [[0, 2], [3, 1]]]);
    writeHeatFile(file, heat);
    heat = addRoutes(readHeatFile(file, hp)!, [[[0, 3], [1, 2]]]);
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
});
