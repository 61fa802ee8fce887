/**
 * The heat merge under concurrent runs (issue 10): 12 processes each merge 25 requests' routes
 * into one heat file at once; every routed pair must be counted (a read-merge-rename without the
 * lock lost some runs' counts). The children run the real merge (dist/src/engine/heat-file.js).
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { readHeatFile } from '../../src/engine/heat-file.js';

const dir = mkdtempSync(path.join(tmpdir(), 'moetier-heat-merge-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const heatModule = path.resolve(import.meta.dirname, '../../dist/src/engine/heat-file.js');
const hp = { arch: 'qwen3moe', nLayer: 4, nExpert: 16 } as const;

const child = `
const { mergeIntoHeatFile } = await import(${JSON.stringify(heatModule)});
const [file, id] = process.argv.slice(1);
const hp = ${JSON.stringify(hp)};
for (let r = 0; r < 25; r++) {
  // One request: 3 rows x 4 layers x 2 experts = 24 routed pairs, expert ids depending on the run.
  const rows = Array.from({ length: 3 }, (_, row) => Array.from({ length: 4 }, (_, l) => [(+id + row + l) % 16, (+id * 3 + r) % 16]));
  if (!mergeIntoHeatFile(file, hp, rows)) { console.error('lock timeout'); process.exit(3); }
}
`;

function run(file: string, id: number): Promise<number> {
  return new Promise((resolve, reject) => {
    const p = spawn(process.execPath, ['--input-type=module', '-e', child, file, String(id)], {
      stdio: ['ignore', 'ignore', 'inherit'],
    });
    p.on('error', reject);
    p.on('exit', (code) => resolve(code ?? -1));
  });
}

describe('heat merge', () => {
  it('12 concurrent runs lose no counts and leave no lock or temporary file', async () => {
    const file = path.join(dir, 'shared.heat.json');
    const codes = await Promise.all(Array.from({ length: 12 }, (_, id) => run(file, id)));
    expect(codes).toEqual(new Array(12).fill(0));
    const heat = readHeatFile(file, hp)!;
    expect(heat.routedPairs).toBe(12 * 25 * 24);
    expect(heat.counts.flat().reduce((a, b) => a + b, 0)).toBe(12 * 25 * 24);
    expect(readdirSync(dir)).toEqual(['shared.heat.json']);
  }, 60_000);
});
