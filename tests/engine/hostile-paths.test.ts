/**
 * Issue 27, items 1, 5 and part of 6: paths the library and the CLI are given.
 *   - the library never writes over one of its inputs: `traceRoutes` naming the model file (it
 *     used to overwrite the model with the trace), the heat file or the route trace; a heat file
 *     naming the model; refused with the option's name, the model byte for byte the same
 *   - a `traceRoutes` that cannot be written (a folder, a missing folder) is refused before the
 *     first eval, not after every token was generated
 *   - `moetier replay --timing` on a FIFO is refused at once (it blocked for ever)
 *   - a model file rewritten in place (same inode, same size) mid-run is a ModelFileChangedError, not
 *     a NonFiniteLogitsError telling the user to check the weights; the next request is refused
 *   - a warm start whose copy fails fails the open with a typed error naming the expert and its
 *     offset (it was a plain Error saying the experts "stay non-resident" while the open failed)
 */
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { closeSync, copyFileSync, mkdirSync, openSync, readFileSync, statSync, writeSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ExpertReadError, InvalidOptionError, ModelFileChangedError } from '../../src/core/errors.js';
import { openEngine, type Engine } from '../../src/engine/engine.js';
import { replayMain } from '../../src/cli/commands/replay.js';
import { collect, tempDir, tinyModel } from './tier-helpers.js';
import { withTierFaults } from '../../src/engine/tier/fault-injection.js';

const { dir, cleanup } = tempDir('moetier-hostile-paths-');
afterAll(cleanup);
let model: string;
const digest = (file: string) => createHash('sha256').update(readFileSync(file)).digest('hex');

beforeAll(async () => {
  model = await tinyModel(dir, 'q8_0', 31);
});

/** The error a call throws (sync or async), or undefined. */
async function caught(fn: () => unknown): Promise<unknown> {
  try {
    await fn();
    return undefined;
  } catch (err) {
    return err;
  }
}

describe('paths the library writes', () => {
  it('traceRoutes naming the model, the heat file or a folder is refused before any eval; the model is untouched', async () => {
    const before = digest(model);
    const heat = path.join(dir, 'model.heat.json');
    const engine: Engine = await openEngine({ model, threads: 1, contextTokens: 64, slotsPerLayer: 2, heat });
    try {
      await collect(engine, 'the ship', { maxTokens: 2 }); // writes the heat file
      const folder = path.join(dir, 'a-folder');
      mkdirSync(folder);
      for (const [target, why] of [
        [model, /a file other than the input/],
        [heat, /a file other than the input/],
        [folder, /a regular file or a new path \(this is a directory/],
        [path.join(dir, 'missing', 'routes.jsonl'), /a path in an existing directory/],
      ] as const) {
        const err = await caught(() => engine.generate('the ship', { maxTokens: 2, traceRoutes: target }));
        expect(err, target).toBeInstanceOf(InvalidOptionError);
        expect((err as InvalidOptionError).option).toBe('traceRoutes');
        expect((err as Error).message).toMatch(why);
      }
      expect(engine.lastStats!.generatedTokens).toBe(2); // no request ran after the first
      // A good path still works, written whole.
      const good = path.join(dir, 'routes.jsonl');
      await collect(engine, 'the ship', { maxTokens: 2, traceRoutes: good });
      expect(readFileSync(good, 'utf8')).toMatch(/"layers"/);
    } finally {
      await engine.close();
    }
    expect(digest(model)).toBe(before);
  });

  it('a heat file naming the model is refused at open, before it is read or written', async () => {
    const before = digest(model);
    const err = await caught(() => openEngine({ model, threads: 1, contextTokens: 64, slotsPerLayer: 2, heat: model }));
    expect(err).toBeInstanceOf(InvalidOptionError);
    expect((err as InvalidOptionError).option).toBe('heat');
    expect(digest(model)).toBe(before);
  });
});

describe('a write or read the system refuses', () => {
  it("is the option's error, named, before any work: a traceRoutes in a folder no process may write, a --trace that fails to read", async () => {
    // sysfs takes no new file, even from root: EACCES (it was a raw errno after every token).
    const engine = await openEngine({ model, threads: 1, contextTokens: 64 });
    try {
      const err = await caught(() =>
        engine.generate('the ship', { maxTokens: 2, traceRoutes: '/sys/moetier-routes.jsonl' }),
      );
      expect(err).toBeInstanceOf(InvalidOptionError);
      expect((err as Error).message).toMatch(
        /option traceRoutes: expected a path this process can write \(EACCES making a file beside it\)/,
      );
      expect(engine.lastStats).toBeUndefined(); // no request ran
    } finally {
      await engine.close();
    }
    // /proc/self/mem is a regular file of size 0 whose read fails (EIO): it printed a raw errno.
    const read = await caught(() => replayMain(['--trace', '/proc/self/mem'], () => {}));
    expect(read).toBeInstanceOf(InvalidOptionError);
    expect((read as Error).message).toMatch(/option --trace: expected a readable trace file \(EIO reading it\)/);
  });
});

describe('paths the CLI reads', () => {
  it('moetier replay --timing on a FIFO is refused at once, naming the flag', async () => {
    const fifo = path.join(dir, 'timing.fifo');
    execFileSync('mkfifo', [fifo]);
    const trace = path.resolve(__dirname, '../../../shared/traces/olmoe-1b-7b.decode.jsonl');
    const started = Date.now();
    const err = await caught(() => replayMain(['--trace', trace, '--prefetch', 'enforce', '--timing', fifo], () => {}));
    expect(err).toBeInstanceOf(InvalidOptionError);
    expect((err as Error).message).toMatch(/--timing/);
    expect(((err as Error).cause as Error).message).toMatch(/a regular file/);
    expect(Date.now() - started).toBeLessThan(10_000);
  }, 20_000);
});

describe('a failed warm start', () => {
  it('fails the open with an ExpertReadError naming the expert, its offset and what became of the open', async () => {
    const err = await caught(() =>
      withTierFaults({ transferAfterBytes: 1 }, () =>
        openEngine({
          model,
          threads: 1,
          contextTokens: 64,
          slotsPerLayer: 2,
          heat: false,
          backend: 'fake',
          fake: { overwriteSupported: false },
        }),
      ),
    );
    expect(err).toBeInstanceOf(ExpertReadError);
    const e = err as ExpertReadError;
    expect(e.file).toBe(model);
    expect(e.layer).toBe(0);
    expect(e.expert).toBeGreaterThanOrEqual(0);
    expect(e.offset).toBeGreaterThan(0);
    expect(e.message).toMatch(
      new RegExp(
        `layer 0 expert ${e.expert} \\(at offset ${e.offset}\\).*the open failed and released what it had made`,
      ),
    );
  });
});

describe('a model rewritten in place', () => {
  it('mid-run fails the request with ModelFileChangedError (its non-finite logits the cause), and the next request before any eval', async () => {
    const copy = path.join(dir, 'rewritten.gguf');
    copyFileSync(model, copy);
    const engine = await openEngine({ model: copy, threads: 1, contextTokens: 64 });
    try {
      const tokens = engine.generate('the ship will sail', { maxTokens: 20, stopAtEos: false })[Symbol.asyncIterator]();
      expect((await tokens.next()).done).toBe(false); // the first token, from the file as it was
      const size = statSync(copy).size;
      const fd = openSync(copy, 'r+');
      writeSync(fd, Buffer.alloc(size, 0xff), 0, size, 0); // every byte NaN-shaped, in place
      closeSync(fd);
      const err = await (async () => {
        for (;;) if ((await tokens.next()).done) return undefined;
      })().catch((e: unknown) => e);
      expect(err).toBeInstanceOf(ModelFileChangedError);
      expect((err as Error).message).toMatch(/written to in place/);
      expect(await caught(() => collect(engine, 'the ship', { maxTokens: 1 }))).toBeInstanceOf(ModelFileChangedError);
    } finally {
      await engine.close();
    }
  });
});
