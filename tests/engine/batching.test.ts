/**
 * Continuous batching (issue 29, item 1; src/engine/batch): an engine opened with `parallel` runs
 * concurrent requests in shared steps. Each request's tokens are those it gets alone (greedy and
 * seeded sampling), over random arrival times, prompt and answer lengths: a property checked
 * against a one-at-a-time engine. The evals really are shared (rows of several sequences, a long
 * prompt in chunks of batchTokensMax beside the others' decode rows), conversations keep their
 * sequence's cache between turns, an aborted request frees its sequence at once, and the memory
 * plan counts every sequence's cache.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { mulberry32 } from '../../src/core/prng.js';
import { InvalidOptionError, LimitExceededError, RequestAbortedError } from '../../src/core/errors.js';
import { openEngine, type Engine, type GenerateOptions } from '../../src/engine/engine.js';
import { loadNative, type NativeEvalOptions } from '../../src/native/binding.js';
import { collect, tempDir, tinyModel, fixedPlanBytes } from './tier-helpers.js';

const { dir, cleanup } = tempDir('moetier-batching-');
afterAll(cleanup);
afterEach(() => void vi.restoreAllMocks());

interface Job {
  prompt: number[];
  options: GenerateOptions;
  delayMs: number;
}

function randomJobs(seed: number, count: number, nVocab: number): Job[] {
  const r = mulberry32(seed);
  return Array.from({ length: count }, (_, i) => ({
    prompt: Array.from({ length: 1 + Math.floor(r() * 40) }, () => Math.floor(r() * nVocab)),
    options: {
      maxTokens: 1 + Math.floor(r() * 14),
      stopAtEos: false,
      ...(i % 2 === 1 ? { temperature: 0.8, topK: 20, seed: 1000 + i } : {}),
    },
    delayMs: Math.floor(r() * 30),
  }));
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** Every job on `engine`, each started after its delay, all running concurrently. */
function runAll(engine: Engine, jobs: readonly Job[]): Promise<number[][]> {
  return Promise.all(
    jobs.map(async (j) => {
      await sleep(j.delayMs);
      return collect(engine, j.prompt, j.options);
    }),
  );
}

interface Step {
  seqIds: number[];
  positions: number[];
}

/** The rows of every batched eval from here on. */
function recordSteps(): Step[] {
  const native = loadNative();
  const original = native.evalAsync.bind(native);
  const steps: Step[] = [];
  vi.spyOn(native, 'evalAsync').mockImplementation((context, tokens, position, logits, options?: NativeEvalOptions) => {
    if (options?.seqIds && options.positions)
      steps.push({ seqIds: Array.from(options.seqIds), positions: Array.from(options.positions) });
    return original(context, tokens, position, logits, options);
  });
  return steps;
}

let model: string;
let alone: Engine;
beforeAll(async () => {
  model = await tinyModel(dir);
  alone = await openEngine({ model, threads: 2, contextTokens: 96 });
});
afterAll(() => alone.close());

describe('continuous batching', () => {
  it('gives each request the tokens it gets alone, over random arrivals and lengths', async () => {
    const engine = await openEngine({ model, threads: 2, contextTokens: 96, parallel: 4, batchTokensMax: 16 });
    try {
      for (const seed of [1, 2, 3]) {
        const jobs = randomJobs(seed, 10, alone.hparams.nVocab);
        const expected: number[][] = [];
        for (const j of jobs) expected.push(await collect(alone, j.prompt, j.options));
        const steps = recordSteps();
        const got = await runAll(engine, jobs);
        vi.restoreAllMocks();
        expect(got, `seed ${seed}`).toEqual(expected);
        // The steps were shared, and no step passed its row cap.
        expect(steps.some((s) => new Set(s.seqIds).size >= 2)).toBe(true);
        expect(Math.max(...steps.map((s) => s.seqIds.length))).toBeLessThanOrEqual(16);
      }
      expect(engine.queueDepth).toBe(0);
    } finally {
      await engine.close();
    }
  });

  it("splits a long prompt over steps while the others' decode goes on beside it", async () => {
    const engine = await openEngine({ model, threads: 2, contextTokens: 96, parallel: 2, batchTokensMax: 8 });
    try {
      const long = Array.from({ length: 60 }, (_, i) => (i * 7) % alone.hparams.nVocab);
      const short = [5, 6, 7];
      const steps = recordSteps();
      const decoding = engine.generate(short, { maxTokens: 30, stopAtEos: false });
      const it = decoding[Symbol.asyncIterator]();
      await it.next(); // the short request decodes before the long one arrives
      const [rest, longIds] = await Promise.all([
        (async () => {
          const ids: number[] = [];
          for (let r = await it.next(); !r.done; r = await it.next()) ids.push(r.value.id);
          return ids;
        })(),
        collect(engine, long, { maxTokens: 4, stopAtEos: false }),
      ]);
      expect(rest.length).toBe(29);
      expect(longIds).toEqual(await collect(alone, long, { maxTokens: 4, stopAtEos: false }));
      // Some step held the short request's decode row beside a chunk of the long prompt.
      const mixed = steps.filter((s) => new Set(s.seqIds).size === 2 && s.seqIds.length > 2);
      expect(mixed.length).toBeGreaterThanOrEqual(2);
      for (const s of steps) expect(s.seqIds.length).toBeLessThanOrEqual(8);
    } finally {
      await engine.close();
    }
  });

  it('keeps each conversation on its own sequence between turns while other requests run', async () => {
    const engine = await openEngine({ model, threads: 2, contextTokens: 96, parallel: 3 });
    try {
      const a = engine.conversation();
      const b = engine.conversation();
      const turn = async (c: typeof a, text: string) => {
        const ids: number[] = [];
        for await (const t of c.generate(text, { maxTokens: 4, stopAtEos: false })) ids.push(t.id);
        return ids;
      };
      await Promise.all([turn(a, 'the ship sails'), turn(b, 'a bird sings'), collect(engine, [1, 2, 3])]);
      await Promise.all([turn(a, ' at dawn'), turn(b, ' at dusk'), collect(engine, [4, 5, 6])]);
      for (const c of [a, b]) {
        expect(c.evicted).toBe(false);
        expect(c.lastStats?.cachedTokens).toBeGreaterThan(0);
        // The turn evaluated only its new tokens (and the last turn's pending one).
        expect(c.lastStats?.promptTokens).toBeLessThan(c.tokens.length - 4);
      }
      // The same tokens as one request over each whole history.
      const history = a.tokens;
      const replay = await collect(alone, history.slice(0, history.length - 4), { maxTokens: 4, stopAtEos: false });
      expect(history.slice(-4)).toEqual(replay);
    } finally {
      await engine.close();
    }
  });

  it('frees the sequence of an aborted request at once and lets a queued abort leave the queue', async () => {
    const engine = await openEngine({
      model,
      threads: 2,
      contextTokens: 96,
      parallel: 2,
      requestQueueDepthMax: 1,
    });
    try {
      const running = [new AbortController(), new AbortController()];
      const streams = running.map((c, i) =>
        engine.generate([1 + i, 2, 3], { maxTokens: 200, stopAtEos: false, signal: c.signal })[Symbol.asyncIterator](),
      );
      for (const s of streams) await s.next();
      const queuedAbort = new AbortController();
      const queued = collect(engine, [9, 9], { maxTokens: 2, signal: queuedAbort.signal });
      await sleep(5);
      expect(engine.queueDepth).toBe(1);
      await expect(collect(engine, [8], { maxTokens: 2 })).rejects.toBeInstanceOf(LimitExceededError);
      const t0 = performance.now();
      queuedAbort.abort();
      await expect(queued).rejects.toBeInstanceOf(RequestAbortedError);
      expect(performance.now() - t0).toBeLessThan(50);
      expect(engine.queueDepth).toBe(0);
      running[0].abort();
      await expect(streams[0].next()).rejects.toBeInstanceOf(RequestAbortedError);
      // Its place is free: a new request runs beside the other one still streaming.
      expect(await collect(engine, [7, 7], { maxTokens: 3, stopAtEos: false })).toEqual(
        await collect(alone, [7, 7], { maxTokens: 3, stopAtEos: false }),
      );
      await streams[1].return?.(undefined);
      expect(engine.queueDepth).toBe(0);
      expect(engine.activeRequests).toBe(0);
    } finally {
      await engine.close();
    }
  });

  it('keeps the tokens on the expert tier and on the disk tier under a memory budget', async () => {
    const jobs = randomJobs(7, 8, alone.hparams.nVocab);
    const expected: number[][] = [];
    for (const j of jobs) expected.push(await collect(alone, j.prompt, j.options));
    const base = { model, threads: 2, contextTokens: 96, parallel: 3, batchTokensMax: 12, heat: false as const };
    const whole = await openEngine({ ...base, memoryBudgetBytes: 1 << 30 });
    const plan = whole.memoryPlan!;
    await whole.close();
    const fixed = fixedPlanBytes(plan);
    for (const options of [{ resident: 0.5 }, { memoryBudgetBytes: fixed + 3 * 4 * plan.slotStrideBytes }]) {
      const engine = await openEngine({ ...base, ...options });
      try {
        if ('memoryBudgetBytes' in options) expect(engine.config.tier?.backend).toBe('disk');
        expect(await runAll(engine, jobs)).toEqual(expected);
        const stats = engine.tierStats()!;
        expect(stats.hits + stats.misses).toBeGreaterThan(0);
        expect(stats.leases).toBe(0); // the busy period ended: nothing held
      } finally {
        await engine.close();
      }
    }
  });

  it('on the disk tier, one read of an expert serves every sequence routed to it in a step', async () => {
    // Two requests with the same prompt route the same experts row for row: batched, each miss is read
    // once for both; one after the other, each reads it (planted sameness: a check of the mechanism).
    const reads = async (parallel: number): Promise<number> => {
      const probe = await openEngine({ model, threads: 2, contextTokens: 64, parallel, memoryBudgetBytes: 1 << 30 });
      const plan = probe.memoryPlan!;
      await probe.close();
      const engine = await openEngine({
        model,
        threads: 2,
        contextTokens: 64,
        parallel,
        heat: false,
        memoryBudgetBytes: fixedPlanBytes(plan) + 4 * plan.slotStrideBytes, // one slot a layer
        disk: { admitMisses: false }, // every miss streamed: the reads count the misses
        placementPolicy: 'lfru',
      });
      try {
        const before = engine.fileReads()!;
        const job = () => collect(engine, [11, 12, 13, 14], { maxTokens: 12, stopAtEos: false });
        const [a, b] = await Promise.all([job(), job()]);
        expect(a).toEqual(b);
        const after = engine.fileReads()!;
        return after.streamedBytes + after.uploadBytes - before.streamedBytes - before.uploadBytes;
      } finally {
        await engine.close();
      }
    };
    const alone1 = await reads(1);
    const batched = await reads(2);
    expect(alone1).toBeGreaterThan(0);
    expect(batched).toBeLessThan(0.6 * alone1);
  });

  it('a failed step fails the requests in it, typed, and the engine goes on', async () => {
    const engine = await openEngine({ model, threads: 2, contextTokens: 96, parallel: 3 });
    try {
      const native = loadNative();
      const original = native.evalAsync.bind(native);
      let evals = 0;
      vi.spyOn(native, 'evalAsync').mockImplementation((...args) => {
        if (++evals === 4) return Promise.reject(new Error('eval: injected failure'));
        return original(...args);
      });
      const outcomes = await Promise.allSettled([
        collect(engine, [1, 2, 3], { maxTokens: 8, stopAtEos: false }),
        collect(engine, [4, 5, 6], { maxTokens: 8, stopAtEos: false }),
      ]);
      vi.restoreAllMocks();
      // Both decode in every step from the second on: the failing step held both.
      for (const o of outcomes) {
        expect(o.status).toBe('rejected');
        expect(String((o as PromiseRejectedResult).reason)).toMatch(/injected failure/);
      }
      expect(engine.activeRequests).toBe(0);
      expect(engine.lastStats?.finishReason).toBe('error');
      expect(await collect(engine, [7, 7], { maxTokens: 3, stopAtEos: false })).toEqual(
        await collect(alone, [7, 7], { maxTokens: 3, stopAtEos: false }),
      );
    } finally {
      await engine.close();
    }
  });

  it('engine.logits on a batching engine is the logits of a request alone', async () => {
    const engine = await openEngine({ model, threads: 2, contextTokens: 96, parallel: 2 });
    try {
      const ids = [3, 1, 4, 1, 5, 9, 2, 6];
      const [got] = await Promise.all([engine.logits(ids), collect(engine, [2, 7, 1], { maxTokens: 5 })]);
      expect(got).toEqual(await alone.logits(ids));
    } finally {
      await engine.close();
    }
  });

  it('refuses bad parallel and batchTokensMax values, and --trace-routes on a batching engine', async () => {
    for (const [options, name] of [
      [{ parallel: 0 }, 'parallel'],
      [{ parallel: 65 }, 'parallel'],
      [{ parallel: 1.5 }, 'parallel'],
      [{ parallel: 64, contextTokens: 32768 }, 'parallel'],
      [{ parallel: 4, batchTokensMax: 3 }, 'batchTokensMax'],
      [{ batchTokensMax: 4096 }, 'batchTokensMax'],
    ] as const) {
      const err = await openEngine({ model, ...options }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(InvalidOptionError);
      expect((err as InvalidOptionError).option).toBe(name);
    }
    const engine = await openEngine({ model, threads: 1, contextTokens: 64, parallel: 2 });
    try {
      expect(() => engine.generate([1, 2], { traceRoutes: `${dir}/t.jsonl` })).toThrow(/parallel 1/);
    } finally {
      await engine.close();
    }
  });

  it("counts every sequence's cache in the memory plan", async () => {
    const plan = async (parallel: number) => {
      const e = await openEngine({ model, threads: 1, contextTokens: 64, parallel, memoryBudgetBytes: 64 << 20 });
      try {
        return e.memoryPlan!;
      } finally {
        await e.close();
      }
    };
    const one = await plan(1);
    const four = await plan(4);
    expect(four.parts.kvCache).toBe(4 * one.parts.kvCache);
    expect(one.parts.kvCache).toBeGreaterThan(0);
  });
});
