/**
 * The per-step work of a decode step (src/engine/tier/request.ts): the LFRU tick runs after
 * every step, the route log, traces and calibration in batches of observerBatchSteps steps and
 * at the end of the request. Every step is still ticked exactly once and in order, every step
 * reaches the route log in order, a throw in either part fails the request (no lease left, the
 * engine usable), and a tier that holds every expert skips the tick (it has nothing to decide)
 * without changing the tokens.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openEngine, type Engine, type EngineOptions } from '../../src/engine/engine.js';
import type { TierPlacement } from '../../src/engine/tier/placement.js';
import type { LfruState } from '../../src/tiers/policies/lfru.js';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { observerBatchSteps } from '../../src/engine/tier/request.js';
import { RequestTracing } from '../../src/engine/tier/tracing.js';
import { parseTraceJsonl } from '../../src/routes/jsonl.js';
import { collect, referenceRun, tempDir, tinyModel } from './tier-helpers.js';

const { dir, cleanup } = tempDir('moetier-tier-deferred-');
afterAll(cleanup);
let model: string;
let prompt: number[];
let reference: number[];
const decodeTokens = 24;

beforeAll(async () => {
  model = await tinyModel(dir, 'q8_0', 5);
  ({ prompt, reference } = await referenceRun(model, 'one two three four five six seven', decodeTokens));
});

const options = (o: Partial<EngineOptions>): EngineOptions => ({
  model,
  threads: 1,
  contextTokens: 128,
  heat: false,
  lfru: { tickTokens: 2 },
  ...o,
});

/** The engine's placement: private in the engine, read here to see the policy's own tick count. */
function placementOf(engine: Engine): TierPlacement {
  return (engine as unknown as { tier: { placement: TierPlacement } }).tier.placement;
}
/** RequestTracing.step throws `error` on its n-th call from now (1-based); returns the undo. */
function throwInTracingAt(n: number, error: Error): () => void {
  const original = RequestTracing.prototype.step;
  let calls = 0;
  RequestTracing.prototype.step = function (this: RequestTracing, ...args: Parameters<RequestTracing['step']>) {
    if (++calls === n) throw error;
    return original.apply(this, args);
  };
  return () => {
    RequestTracing.prototype.step = original;
  };
}

function ticksOf(engine: Engine): number {
  return (placementOf(engine) as unknown as { state: LfruState }).state.ticks;
}

describe('deferred decode work', () => {
  let engine: Engine;
  beforeAll(async () => {
    engine = await openEngine(options({ slotsPerLayer: 2 }));
  });
  afterAll(() => engine.close());

  it('ticks the policy once per decode step, by the end of each request, and the tokens are unchanged', async () => {
    for (let request = 1; request <= 2; request++) {
      // maxTokens tokens come from maxTokens - 1 decode evaluations (the first comes from the prefill).
      expect(await collect(engine, prompt, { maxTokens: decodeTokens, stopAtEos: false })).toEqual(reference);
      expect(ticksOf(engine)).toBe(request * (decodeTokens - 1));
    }
    expect(placementOf(engine).counts.decided).toBeGreaterThan(0);
    expect(engine.tierStats()!.leases).toBe(0);
  });

  it('a throw in the policy tick fails the request; no lease is left and the next request runs', async () => {
    const placement = placementOf(engine);
    const boom = new Error('tick failed');
    const original = placement.tick;
    let calls = 0;
    placement.tick = function (this: TierPlacement) {
      if (++calls === 3) throw boom;
      return original.call(this);
    };
    try {
      await expect(collect(engine, prompt, { maxTokens: decodeTokens, stopAtEos: false })).rejects.toBe(boom);
    } finally {
      placement.tick = original;
    }
    expect(engine.tierStats()!.leases).toBe(0);
    expect(await collect(engine, prompt, { maxTokens: decodeTokens, stopAtEos: false })).toEqual(reference);
  });

  it("a throw in the last evaluated step's tick still fails the request", async () => {
    const placement = placementOf(engine);
    const boom = new Error('last tick failed');
    const original = placement.tick;
    let calls = 0;
    placement.tick = function (this: TierPlacement) {
      if (++calls === decodeTokens - 1) throw boom;
      return original.call(this);
    };
    try {
      await expect(collect(engine, prompt, { maxTokens: decodeTokens, stopAtEos: false })).rejects.toBe(boom);
    } finally {
      placement.tick = original;
    }
    expect(engine.tierStats()!.leases).toBe(0);
  });
});

describe('batched observers (route log, traces, calibration)', () => {
  it('log every decode step in order across batches, the last partial batch at the end of the request', async () => {
    const engine = await openEngine(options({ slotsPerLayer: 2 }));
    try {
      expect(decodeTokens - 1).toBeGreaterThan(2 * observerBatchSteps); // two full batches and a partial one
      const file = path.join(dir, 'batched-routes.jsonl');
      const tokens = await collect(engine, prompt, { maxTokens: decodeTokens, stopAtEos: false, traceRoutes: file });
      const [trace] = parseTraceJsonl(readFileSync(file, 'utf8'), file);
      expect(trace.prefill.map((s) => s.token)).toEqual(prompt);
      expect(trace.decode.map((s) => s.step)).toEqual(Array.from({ length: decodeTokens - 1 }, (_, i) => i));
      expect(trace.decode.map((s) => s.token)).toEqual(tokens.slice(0, -1));
      // The same routing as an engine without a tier records (placement never changes routing).
      const plain = await openEngine({ model, threads: 1, contextTokens: 128 });
      try {
        const plainFile = path.join(dir, 'plain-routes.jsonl');
        await collect(plain, prompt, { maxTokens: decodeTokens, stopAtEos: false, traceRoutes: plainFile });
        const [plainTrace] = parseTraceJsonl(readFileSync(plainFile, 'utf8'), plainFile);
        expect(trace.decode.map((s) => s.layers)).toEqual(plainTrace.decode.map((s) => s.layers));
        expect(trace.prefill.map((s) => s.layers)).toEqual(plainTrace.prefill.map((s) => s.layers));
      } finally {
        await plain.close();
      }
    } finally {
      await engine.close();
    }
  });

  it('a throw in a batch fails the request; no lease is left and the next request runs', async () => {
    const engine = await openEngine(options({ slotsPerLayer: 2 }));
    const boom = new Error('tracing failed');
    const restore = throwInTracingAt(observerBatchSteps + 3, boom); // the prefill's call, then inside the second batch
    try {
      await expect(collect(engine, prompt, { maxTokens: decodeTokens, stopAtEos: false })).rejects.toBe(boom);
      restore();
      expect(engine.tierStats()!.leases).toBe(0);
      expect(await collect(engine, prompt, { maxTokens: decodeTokens, stopAtEos: false })).toEqual(reference);
    } finally {
      restore();
      await engine.close();
    }
  });

  it('a throw in the last batch (drained when the request ends) fails the request; the next request is observed once per step', async () => {
    const engine = await openEngine(options({ slotsPerLayer: 2 }));
    const boom = new Error('last batch failed');
    // Calls: the prefill's, one per decode step, then the final poll's: the last decode step's is in the last batch.
    const restore = throwInTracingAt(1 + (decodeTokens - 1), boom);
    try {
      expect((decodeTokens - 1) % observerBatchSteps).not.toBe(0); // the last batch is drained by the end of the request
      await expect(collect(engine, prompt, { maxTokens: decodeTokens, stopAtEos: false })).rejects.toBe(boom);
      restore();
      expect(engine.tierStats()!.leases).toBe(0);
      const before = ticksOf(engine);
      expect(await collect(engine, prompt, { maxTokens: decodeTokens, stopAtEos: false })).toEqual(reference);
      // One subscriber on the bus: the failed request's was released, so each step ticks once.
      expect(ticksOf(engine) - before).toBe(decodeTokens - 1);
    } finally {
      restore();
      await engine.close();
    }
  });
});

describe('a tier that holds every expert', () => {
  it('skips the tick (nothing to decide) and gives the tokens of the engine without a tier', async () => {
    const engine = await openEngine(options({ resident: 1 }));
    try {
      expect(await collect(engine, prompt, { maxTokens: decodeTokens, stopAtEos: false })).toEqual(reference);
      expect(ticksOf(engine)).toBe(0);
      expect(engine.lastStats?.decodeHitRate).toBe(1);
      expect(placementOf(engine).counts.decided).toBe(0);
    } finally {
      await engine.close();
    }
  });
});
