/**
 * Issue 27, items 2 and 4: an openEngine that fails leaves nothing behind, however often it fails.
 * Each case runs in a fresh node (the built package, as memory-kept does): the allocator's state and
 * the thread count are the process's own, not the test runner's.
 *   - the disk tier (its dense weights owned, read from the file) and a bad option refused after
 *     the model loaded: each failed open left its dense copies in glibc's heap (malloc'd past a
 *     raised mmap threshold; now each is its own mapping): 84 MiB over 60 opens of the small preset
 *   - a tier and a bad heat file: a backend was made before the heat file was read, and each failed
 *     open left a thread until the collector ran (51 threads after 40 opens; V8 died in a worker's
 *     start-up after ~350): now what can be refused is refused before anything is made
 */
import { execFileSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { writeSynthModel } from '../../src/synth/generate.js';
import { tempDir } from './tier-helpers.js';

const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const { dir, cleanup } = tempDir('moetier-failed-opens-');
afterAll(cleanup);
let small: string;
const MiB = 2 ** 20;

beforeAll(async () => {
  small = path.join(dir, 'small-q8_0.gguf');
  await writeSynthModel({ preset: 'small', arch: 'qwen3moe', quant: 'q8_0', seed: 3, routing: 'realistic' }, small);
}, 120_000);

interface Outcome {
  /** Resident-set growth over the measured opens (after a warm-up, the collector run at both ends). */
  growth: number;
  /** Threads before the measured opens, and right after them (before any collection). */
  threadsBefore: number;
  threadsAfter: number;
  errors: string[];
}

/** `warmUp` then `measured` failed opens with these options in a fresh node. */
function failingOpens(options: Record<string, unknown>, warmUp = 40, measured = 60): Outcome {
  const script = `
import { readdirSync } from 'node:fs';
import { openEngine } from ${JSON.stringify(path.join(repoRoot, 'dist/src/engine/engine.js'))};
const options = ${JSON.stringify(options)};
const threads = () => readdirSync('/proc/self/task').length;
const errors = new Set();
const open = async () => {
  try { const e = await openEngine(options); await e.close(); errors.add('opened'); } catch (err) { errors.add(err.constructor.name); }
};
for (let i = 0; i < ${warmUp}; i++) await open();
gc();
const rss = process.memoryUsage().rss, threadsBefore = threads();
for (let i = 0; i < ${measured}; i++) await open();
const threadsAfter = threads();
gc();
await new Promise((r) => setTimeout(r, 100));
gc();
console.log(JSON.stringify({ growth: process.memoryUsage().rss - rss, threadsBefore, threadsAfter, errors: [...errors] }));
`;
  const out = execFileSync(process.execPath, ['--expose-gc', '--input-type=module', '-e', script], {
    encoding: 'utf8',
    timeout: 240_000,
  });
  return JSON.parse(out.trim().split('\n').at(-1)!) as Outcome;
}

describe('failed opens, in a fresh process', () => {
  it('on the disk tier, refused after the model loaded, give their owned dense weights back', () => {
    const r = failingOpens({
      model: small,
      threads: 1,
      contextTokens: 64,
      heat: false,
      backend: 'disk',
      slotsPerLayer: 2,
      prefetch: { mode: 'bogus' },
    });
    expect(r.errors).toEqual(['InvalidOptionError']);
    expect(r.growth, `${(r.growth / MiB).toFixed(1)} MiB over 60 failed opens`).toBeLessThan(24 * MiB);
  }, 240_000);

  it('with a tier and a bad heat file, leave no thread and no memory behind', () => {
    const heat = path.join(dir, 'bad.heat.json');
    writeFileSync(heat, '{"not": "a heat file"}');
    const r = failingOpens({ model: small, threads: 1, contextTokens: 64, slotsPerLayer: 2, heat });
    expect(r.errors).toEqual(['FileFormatError']);
    expect(r.threadsAfter, 'threads after 60 failed opens').toBeLessThanOrEqual(r.threadsBefore + 4);
    expect(r.growth, `${(r.growth / MiB).toFixed(1)} MiB over 60 failed opens`).toBeLessThan(24 * MiB);
  }, 240_000);
});
