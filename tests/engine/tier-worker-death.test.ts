/**
 * An int8-rebuild worker that dies in the middle of a rebuild (its thread terminated), end to end
 * through a request: the request fails with a typed error that names the expert, no slot lease
 * is left, and the next request runs on a fresh worker with the tokens of the engine without a
 * tier (an expert without its host copy is computed from the container, bit for bit the same).
 */
import type { Piscina } from 'piscina';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Int8RebuildActor } from '../../src/actors/int8-rebuild/actor.js';
import { NativeError } from '../../src/core/errors.js';
import { openEngine, type Engine } from '../../src/engine/engine.js';
import { collect, referenceRun, tempDir, tinyModel } from './tier-helpers.js';

const { dir, cleanup } = tempDir('moetier-tier-worker-death-');
afterAll(cleanup);
let model: string;
let prompt: number[];
let reference: number[];
const maxTokens = 12;

beforeAll(async () => {
  model = await tinyModel(dir, 'q4_0', 21);
  ({ prompt, reference } = await referenceRun(model, 'one two three four five', maxTokens));
});

function rebuildOf(engine: Engine): Int8RebuildActor {
  return (engine as unknown as { tier: { rebuild: Int8RebuildActor } }).tier.rebuild;
}

describe('an int8-rebuild worker that dies mid-rebuild', () => {
  it('fails the request with a typed error, leaves no lease, and the next request runs', async () => {
    const engine = await openEngine({ model, threads: 1, contextTokens: 128, slotsPerLayer: 4, heat: false });
    try {
      const rebuild = rebuildOf(engine);
      await rebuild.whenIdle(); // the host copies of the open
      const pool = (rebuild as unknown as { pool: Piscina }).pool;
      const run = pool.run.bind(pool);
      let killed = 0;
      // The next rebuild's worker is terminated right after the job is handed to it.
      pool.run = ((task: unknown, options?: unknown) => {
        const done = run(task, options as never);
        if (killed++ === 0) for (const worker of pool.threads) void worker.terminate();
        return done;
      }) as Piscina['run'];
      engine.tune({ residentSlotsPerLayer: 2 }); // the shrink evicts two experts per layer: their host copies get rebuilt
      const failure = await collect(engine, prompt, { maxTokens, stopAtEos: false }).then(
        () => undefined,
        (error: unknown) => error,
      );
      pool.run = run;
      expect(killed).toBeGreaterThan(0);
      expect(failure).toBeInstanceOf(NativeError);
      expect((failure as Error).message).toMatch(/int8-rebuild worker failed on expert \d+\/\d+/);
      expect(engine.tierStats()!.leases).toBe(0);
      expect(engine.tierStats()!.slotsUsed.every((n) => n === 2)).toBe(true);
      // The pool replaced the dead worker: the next request runs, its tokens unchanged.
      expect(await collect(engine, prompt, { maxTokens, stopAtEos: false })).toEqual(reference);
      expect(engine.tierStats()!.leases).toBe(0);
      expect(engine.hostCopies()!.failed).toBeGreaterThan(0);
    } finally {
      await engine.close();
    }
  });
});
