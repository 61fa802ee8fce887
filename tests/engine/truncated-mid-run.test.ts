/**
 * Issue 27, item 3: the model file truncated in the middle of a request. Without a tier and with a
 * host tier (resident), the engine reads the file through its mapping; a read past the new end
 * used to end the process with SIGBUS. Now the SIGBUS guard answers it with zeros and the engine
 * turns it into ModelFileChangedError after that eval: no token computed from the zeros is
 * yielded, later requests are refused, close works, and the process lives. Each case runs in a
 * fresh node on the built package (a regression would kill the test runner).
 */
import { execFileSync } from 'node:child_process';
import { copyFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { tempDir, tinyModel } from './tier-helpers.js';

const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const { dir, cleanup } = tempDir('moetier-truncated-');
afterAll(cleanup);
let original: string;
beforeAll(async () => {
  original = await tinyModel(dir, 'q8_0', 5);
}, 120_000);

interface Outcome {
  /** Tokens of the clean run, and those the cut run yielded before its error. */
  reference: number[];
  yielded: number[];
  error: { name: string; code: string; message: string } | null;
  /** The next request, after the file was put back byte for byte with its old mtime. */
  next: { name: string; message: string } | null;
  closed: boolean;
}

/** Opens `options` on a copy of the model, generates 12 tokens, truncates the copy after the 3rd. */
function cutMidRun(name: string, options: Record<string, unknown>): Outcome {
  const file = path.join(dir, `${name}.gguf`);
  copyFileSync(original, file);
  const script = `
import { execFileSync } from 'node:child_process';
import { copyFileSync, statSync, truncateSync } from 'node:fs';
import { openEngine } from ${JSON.stringify(path.join(repoRoot, 'dist/src/engine/engine.js'))};
const file = ${JSON.stringify(file)};
const options = { ...${JSON.stringify(options)}, model: file };
const request = { maxTokens: 12, stopAtEos: false };
const describe = (err) => err && { name: err.constructor.name, code: err.code, message: err.message };
const reference = [];
const clean = await openEngine(options);
for await (const t of clean.generate('The tide came in', request)) reference.push(t.id);
await clean.close();
const { mtimeNs } = statSync(file, { bigint: true });
const engine = await openEngine(options);
const yielded = [];
let error = null;
try {
  for await (const t of engine.generate('The tide came in', request)) {
    yielded.push(t.id);
    if (yielded.length === 3) truncateSync(file, 8192);
  }
} catch (err) { error = describe(err); }
// Put the file back as it was, byte for byte and to the nanosecond: only the mapping's fault count can tell now.
copyFileSync(${JSON.stringify(original)}, file);
execFileSync('touch', ['-m', '-d', '@' + (mtimeNs / 1000000000n) + '.' + String(mtimeNs % 1000000000n).padStart(9, '0'), file]);
let next = null;
try { for await (const _ of engine.generate('Again', request)); } catch (err) { next = describe(err); }
await engine.close();
console.log(JSON.stringify({ reference, yielded, error, next, closed: true }));
`;
  const out = execFileSync(process.execPath, ['--input-type=module', '-e', script], {
    encoding: 'utf8',
    timeout: 120_000,
  });
  return JSON.parse(out.trim().split('\n').at(-1)!) as Outcome;
}

function expectTypedAndAlive(r: Outcome): void {
  expect(r.error?.name, JSON.stringify(r.error)).toBe('ModelFileChangedError');
  expect(r.error?.code).toBe('E_MODEL_FILE_CHANGED');
  expect(r.error?.message).toMatch(/size went from \d+ to 8192 bytes/);
  expect(r.yielded.length, 'tokens before the truncation, none after').toBe(3);
  expect(r.yielded).toEqual(r.reference.slice(0, 3));
  expect(r.next?.name, 'the file put back: the mapping still holds zeros').toBe('ModelFileChangedError');
  expect(r.next?.message).toContain('cut short while the engine read it');
  expect(r.closed).toBe(true);
}

describe('the model file truncated mid-request', () => {
  it('without a tier: ModelFileChangedError, and the process lives', () => {
    expectTypedAndAlive(cutMidRun('plain', { threads: 2, contextTokens: 64 }));
  }, 120_000);

  it('with a host tier (resident 0.5): the same', () => {
    expectTypedAndAlive(cutMidRun('resident', { threads: 1, contextTokens: 64, resident: 0.5, heat: false }));
  }, 120_000);

  it('with the simulated device (cuda-sim, resident 0.5), whose uploads read the mapping: the same', () => {
    expectTypedAndAlive(
      cutMidRun('cuda-sim', { threads: 1, contextTokens: 64, backend: 'cuda-sim', resident: 0.5, heat: false }),
    );
  }, 120_000);
});
