/**
 * openEngine frees everything it opened when a later step throws (issue 10): 200 failed opens of
 * each kind (a bad tier option found after the model is mapped) leave no mapping of the file and
 * no RSS growth. Before, each left the model mapped: 200 left 200 mappings and ~325 MB of RSS.
 * Also: requestQueueDepthMax is validated and means what the docs say.
 */
import { copyFileSync, readFileSync, renameSync, truncateSync, writeFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { InvalidOptionError, ModelFileChangedError, NonFiniteLogitsError } from '../../src/core/errors.js';
import { parseGguf } from '../../src/model/gguf/reader.js';
import { openEngine, type EngineOptions } from '../../src/engine/engine.js';
import { tempDir, tinyModel } from './tier-helpers.js';

const { dir, cleanup } = tempDir('moetier-open-fail-');
let model: string;
beforeAll(async () => {
  model = await tinyModel(dir, 'q8_0', 3);
});
afterAll(cleanup);

const mappingsOf = (file: string): number =>
  readFileSync('/proc/self/maps', 'utf8')
    .split('\n')
    .filter((l) => l.endsWith(file)).length;
const rssMb = (): number => process.memoryUsage().rss / 2 ** 20;

describe('openEngine failures', () => {
  it('200 failed opens of each kind leave no mapping and no RSS growth', async () => {
    const kinds: Array<[string, Partial<EngineOptions>]> = [
      ['resident 2', { resident: 2 }],
      ['slotsPerLayer 99', { slotsPerLayer: 99 }],
      ['a bad lfru', { resident: 0.5, lfru: { tickTokens: 0 } }],
      ['a bad prefillReplan', { resident: 0.5, prefillReplan: { enabled: true, maxSwapsPerLayer: -1 } }],
    ];
    // Warm up (allocator pools, JIT), then measure.
    for (const [, extra] of kinds)
      await expect(openEngine({ model, heat: false, ...extra })).rejects.toBeInstanceOf(InvalidOptionError);
    const rssBefore = rssMb();
    for (const [name, extra] of kinds) {
      for (let i = 0; i < 200; i++) {
        await expect(openEngine({ model, heat: false, ...extra }), name).rejects.toBeInstanceOf(InvalidOptionError);
      }
      expect(mappingsOf(model), name).toBe(0);
    }
    // 800 leaked mappings of a 0.6 MB model (plus its parsed tables) would be hundreds of MB.
    expect(rssMb() - rssBefore).toBeLessThan(64);
  }, 120_000);

  it('validates requestQueueDepthMax: 0 lets none wait, -1, NaN and 1.5 are refused', async () => {
    for (const bad of [-1, Number.NaN, 1.5]) {
      await expect(openEngine({ model, requestQueueDepthMax: bad })).rejects.toThrow(
        /option requestQueueDepthMax: expected an integer in \[0, 65536\]/,
      );
    }
    expect(mappingsOf(model)).toBe(0);
    const engine = await openEngine({ model, requestQueueDepthMax: 0 });
    try {
      const it1 = engine.generate('red green', { maxTokens: 2 })[Symbol.asyncIterator]();
      await it1.next(); // running
      const it2 = engine.generate('blue', { maxTokens: 2 })[Symbol.asyncIterator]();
      await expect(it2.next()).rejects.toThrow(/requestQueueDepthMax/);
      await it1.return?.();
    } finally {
      await engine.close();
    }
  });
});

describe('the model file under a running engine', () => {
  it('another model renamed over the path changes no token; a truncated file is a typed error, not a SIGBUS', async () => {
    const path = `${dir}/live.gguf`;
    copyFileSync(model, path);
    const engine = await openEngine({ model: path, threads: 1 });
    try {
      const collect = async () => {
        const ids: number[] = [];
        for await (const t of engine.generate('red green blue', { maxTokens: 8 })) ids.push(t.id);
        return ids;
      };
      const before = await collect();
      renameSync(await tinyModel(dir, 'q8_0', 77), path); // same geometry, other weights
      expect(await collect()).toEqual(before); // the engine reads the file it opened
    } finally {
      await engine.close();
    }
    const cut = `${dir}/cut.gguf`;
    copyFileSync(model, cut);
    const second = await openEngine({ model: cut, threads: 1 });
    try {
      truncateSync(cut, 4096);
      const it = second.generate('red green', { maxTokens: 4 })[Symbol.asyncIterator]();
      await expect(it.next()).rejects.toBeInstanceOf(ModelFileChangedError);
      await expect(second.logits([1, 2])).rejects.toThrow(
        /the model file changed under the running engine \(its size went from \d+ to 4096 bytes\)/,
      );
    } finally {
      await second.close();
    }
  });
});

describe('close and dropped iterators', () => {
  it('close() frees with a full queue, and a second close() waits for the same free', async () => {
    const engine = await openEngine({ model, threads: 1, requestQueueDepthMax: 1 });
    const running = engine.generate('red green', { maxTokens: 3 })[Symbol.asyncIterator]();
    await running.next();
    const waiting = engine.generate('blue', { maxTokens: 2 })[Symbol.asyncIterator]();
    const waitingDone = (async () => {
      for (let r = await waiting.next(); !r.done; r = await waiting.next());
    })();
    await new Promise((r) => setTimeout(r, 10)); // the queue is full now: one runs, one waits
    const first = engine.close();
    const second = engine.close();
    expect(second).toBe(first);
    for (let r = await running.next(); !r.done; r = await running.next());
    await waitingDone;
    await first;
    expect(mappingsOf(model)).toBe(0); // freed: before, close() threw LimitExceededError and freed nothing
  });

  it('a dropped iterator is cancelled after requestIdleMs: the engine serves the next request and close() resolves', async () => {
    const engine = await openEngine({ model, threads: 1, requestIdleMs: 150 });
    const dropped = engine.generate('red green', { maxTokens: 16 })[Symbol.asyncIterator]();
    await dropped.next(); // one token taken, then nothing: it holds the queue
    const started = performance.now();
    const ids: number[] = [];
    for await (const t of engine.generate('blue', { maxTokens: 2 })) ids.push(t.id);
    expect(ids.length).toBe(2);
    expect(performance.now() - started).toBeGreaterThanOrEqual(140);
    await expect(dropped.next()).rejects.toThrow(/limit requestIdleMs exceeded/);
    await engine.close();
    expect(mappingsOf(model)).toBe(0);
  });

  it('it.throw() mid-stream ends the request with finishReason error (it said length)', async () => {
    const engine = await openEngine({ model, threads: 1 });
    try {
      const it = engine.generate('red green', { maxTokens: 8 })[Symbol.asyncIterator]();
      await it.next();
      await expect(it.throw!(new Error('consumer gave up'))).rejects.toThrow('consumer gave up');
      expect(engine.lastStats?.finishReason).toBe('error');
    } finally {
      await engine.close();
    }
  });
});

describe('non-finite logits', () => {
  it('stop the request with NonFiniteLogitsError naming the position, not token 0 for ever', async () => {
    const poisoned = `${dir}/nan.gguf`;
    const bytes = readFileSync(model);
    const norm = parseGguf(new Uint8Array(bytes), poisoned).tensors.get('output_norm.weight')!;
    new DataView(bytes.buffer, bytes.byteOffset).setFloat32(norm.offset, Number.NaN, true);
    writeFileSync(poisoned, bytes);
    const engine = await openEngine({ model: poisoned, threads: 1 });
    try {
      const it = engine.generate('red green', { maxTokens: 4 })[Symbol.asyncIterator]();
      const err = await it.next().then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(NonFiniteLogitsError);
      expect((err as NonFiniteLogitsError).position).toBe(0);
      expect((err as Error).message).toMatch(/a non-finite value \(NaN\) at token position \d+, vocabulary id \d+/);
      expect(engine.lastStats?.finishReason).toBe('error');
      await expect(engine.logits([1, 2])).rejects.toBeInstanceOf(NonFiniteLogitsError);
    } finally {
      await engine.close();
    }
  });
});

describe('library arguments', () => {
  it('null, undefined and wrong kinds at the boundary are typed refusals, not TypeErrors', async () => {
    await expect(openEngine(null as unknown as EngineOptions)).rejects.toBeInstanceOf(InvalidOptionError);
    await expect(openEngine(undefined as unknown as EngineOptions)).rejects.toBeInstanceOf(InvalidOptionError);
    await expect(openEngine({ model: null } as unknown as EngineOptions)).rejects.toBeInstanceOf(InvalidOptionError);
    const engine = await openEngine({ model, threads: 1 });
    try {
      expect(() => engine.generate(null as unknown as string)).toThrow(InvalidOptionError);
      expect(() => engine.generate(undefined as unknown as string)).toThrow(InvalidOptionError);
      expect(() => engine.generate('x', null as unknown as object)).toThrow(InvalidOptionError);
      expect(() => engine.tokenize(undefined as unknown as string)).toThrow(InvalidOptionError);
      expect(() => engine.detokenize(null as unknown as number[])).toThrow(InvalidOptionError);
    } finally {
      await engine.close();
    }
    expect(() => engine.tierStats()).toThrow(InvalidOptionError);
  });
});
