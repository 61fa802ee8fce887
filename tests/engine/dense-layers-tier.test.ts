/**
 * Leading dense layers on the expert tiers (issue 30): gen-model's tiny-dense (glm4moe, layer 0
 * dense with no experts, layers 1-3 MoE) gives the untiered engine's tokens on cpu slots (Q8_0 and
 * a Q4_0 file with host copies, with prefill replan and prefetch), on the fake and cuda-sim
 * backends, and on the disk tier under memory budgets; everything indexed by layer for the experts
 * counts the 3 MoE layers (the tier's slots, the heat file, a route trace's header and rows).
 */
import path from 'node:path';
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openEngine, type EngineOptions } from '../../src/engine/engine.js';
import { readHeatFile } from '../../src/engine/heat-file.js';
import { writeSynthModel } from '../../src/synth/generate.js';
import { collect, fixedPlanBytes, tempDir } from './tier-helpers.js';

const { dir, cleanup } = tempDir('moetier-dense-tier-');
afterAll(cleanup);
const text = 'the ship sails over the deep sea and the crew sings of the harbour';
const options = { maxTokens: 24, stopAtEos: false };
const models: Record<'q8_0' | 'q4_0', string> = { q8_0: '', q4_0: '' };
const reference: Record<'q8_0' | 'q4_0', number[]> = { q8_0: [], q4_0: [] };

async function tokens(o: EngineOptions): Promise<{ ids: number[]; engine: Awaited<ReturnType<typeof openEngine>> }> {
  const engine = await openEngine(o);
  return { ids: await collect(engine, engine.tokenize(text), options), engine };
}

beforeAll(async () => {
  for (const quant of ['q8_0', 'q4_0'] as const) {
    models[quant] = path.join(dir, `tiny-dense-${quant}.gguf`);
    await writeSynthModel({ preset: 'tiny-dense', arch: 'glm4moe', quant, seed: 5 }, models[quant]);
    const { ids, engine } = await tokens({ model: models[quant], threads: 2, contextTokens: 128 });
    reference[quant] = ids;
    expect(engine.hparams.denseLayers).toEqual({ count: 1, nFf: 128 });
    await engine.close();
  }
});

describe('leading dense layers on the tiers', () => {
  it('cpu slots (Q8_0; Q4_0 with host copies, replan and prefetch): the untiered tokens, 3 MoE layers of slots', async () => {
    for (const [quant, extra] of [
      ['q8_0', {}],
      ['q4_0', { prefillReplan: { enabled: true } }],
      ['q4_0', { prefetch: { mode: 'enforce' as const } }],
    ] as const) {
      const { ids, engine } = await tokens({
        model: models[quant],
        threads: 2,
        contextTokens: 128,
        slotsPerLayer: 2,
        heat: false,
        ...extra,
      });
      try {
        expect(ids).toEqual(reference[quant]);
        const tier = engine.tierStats()!;
        expect(tier.slotsBudget).toEqual([2, 2, 2]);
        expect(tier.misses).toBeGreaterThan(0);
        // Decode pairs: the MoE layers' only.
        expect(tier.hits + tier.misses).toBe((options.maxTokens - 1) * 3 * engine.hparams.nExpertUsed);
        // Host copies of the victims (offered from the first MoE layer's types); a prefetch evicts
        // within a step, whose victims may run from the container (as on any model).
        if (quant === 'q4_0' && !('prefetch' in extra)) expect(tier.lazyMisses).toBe(0);
      } finally {
        await engine.close();
      }
    }
  });

  it('the fake and cuda-sim backends: the untiered tokens', async () => {
    for (const backend of ['fake', 'cuda-sim'] as const) {
      const { ids, engine } = await tokens({
        model: models.q8_0,
        threads: 2,
        contextTokens: 128,
        slotsPerLayer: 3,
        heat: false,
        backend,
      });
      try {
        expect(ids).toEqual(reference.q8_0);
      } finally {
        await engine.close();
      }
    }
  });

  it('the disk tier under memory budgets of 1 and 4 slots a layer: the untiered tokens', async () => {
    const probe = await openEngine({ model: models.q8_0, threads: 2, contextTokens: 128, memoryBudgetBytes: 1 << 30 });
    const plan = probe.memoryPlan!;
    await probe.close();
    for (const slots of [1, 4]) {
      const { ids, engine } = await tokens({
        model: models.q8_0,
        threads: 2,
        contextTokens: 128,
        heat: false,
        memoryBudgetBytes: fixedPlanBytes(plan) + slots * 3 * plan.slotStrideBytes,
      });
      try {
        expect(engine.config.tier?.backend).toBe('disk');
        expect(engine.tierStats()!.slotsBudget).toEqual([slots, slots, slots]);
        expect(ids).toEqual(reference.q8_0);
      } finally {
        await engine.close();
      }
    }
  });

  it('the heat file and a route trace count the MoE layers', async () => {
    const heat = path.join(dir, 'dense.heat.json');
    const trace = path.join(dir, 'dense.routes.jsonl');
    const engine = await openEngine({ model: models.q8_0, threads: 2, contextTokens: 128, slotsPerLayer: 2, heat });
    try {
      await collect(engine, engine.tokenize(text), { ...options, traceRoutes: trace });
    } finally {
      await engine.close();
    }
    const counts = readHeatFile(heat, { arch: 'glm4moe', nLayer: 4, nExpert: 8, denseLayers: { count: 1, nFf: 128 } })!;
    expect(counts.layers).toBe(3);
    expect(counts.routedPairs).toBeGreaterThan(0);
    const lines = readFileSync(trace, 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(lines[0]).toMatchObject({ type: 'header', layers: 3, experts: 8, topK: 2 });
    const layers = new Set(lines.filter((l) => l.type === 'route').map((l) => l.layer));
    expect([...layers].sort()).toEqual([0, 1, 2]);
  });
});
