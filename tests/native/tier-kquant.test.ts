/**
 * The expert tier with k-quant experts (gate / up Q4_K, down Q6_K; kquant-helpers.ts), with
 * Q5_0 / Q5_1 experts (gate / up Q5_0, down Q5_1), with IQ4_XS / IQ4_NL and with MXFP4 experts: host copies
 * are for Q4_0 containers only (no exact int8 host copies of a k-quant, Q5_1, IQ4 or MXFP4 expert are made), so
 * the tier offers none (hostCopy bytes 0) and every
 * miss is computed from the container's bytes in the container's types: tokens and logits at
 * budgets 0, 3 and 8 of 8 slots are byte-identical to no tier, on every kernel path this CPU has.
 * Slot hits hand the forward pass gate | up | down of two types: each keeps its own.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { ISA, type NativeTierHandle } from '../../src/native/binding.js';
import type { MappedModel } from './forward-helpers.js';
import { kquantModels, type KName } from './kquant-helpers.js';
import { cpuBackend, greedyRun, native, range, type Step } from './tier-helpers.js';

const DECODE = 4;
const models = new Map<string, { kquant: MappedModel; f32: MappedModel }>();
afterAll(() => {
  native.isaSet(native.isaBest());
  for (const m of models.values()) {
    m.kquant.close();
    m.f32.close();
  }
});

function model(gateUp: KName, down: KName): MappedModel {
  const key = `${gateUp}/${down}`;
  if (!models.has(key)) models.set(key, kquantModels(gateUp, down, { nLayer: 3 }));
  return models.get(key)!.kquant;
}

async function run(m: MappedModel, slots: number | undefined): Promise<Step[]> {
  const hp = m.model.hparams;
  const ctx = native.createContext(m.handle, { nCtx: 32, threads: 2 });
  const backend = cpuBackend();
  let tier: NativeTierHandle | undefined;
  try {
    if (slots !== undefined) {
      tier = native.createTier(ctx, backend, { slotsPerLayer: Array(hp.nLayer).fill(slots) });
      expect(native.tierExpertBytes(tier).hostCopy).toBe(0);
      for (let l = 0; l < hp.nLayer; l++) await native.tierWarmstart(tier, l, range(slots));
    }
    const steps = await greedyRun(m, ctx, DECODE);
    if (tier) {
      const stats = native.tierStats(tier);
      expect(stats.leases).toBe(0);
      if (slots! < hp.nExpert) expect(stats.misses).toBeGreaterThan(0);
      if (slots! > 0) expect(stats.hits).toBeGreaterThan(0);
      expect(stats.lazyMisses).toBe(stats.misses); // no host copies: every miss reads the container
    }
    return steps;
  } finally {
    if (tier) native.freeTier(tier);
    native.freeContext(ctx);
    native.destroyBackend(backend);
  }
}

describe('tier with k-quant experts: results do not depend on placement', () => {
  const isas = [ISA.scalar, ISA.avx2, ISA.avx512vnni].filter((isa) => isa <= native.isaBest());
  const pairs: Array<[KName, KName]> = [
    ['Q4_K', 'Q6_K'],
    ['Q5_0', 'Q5_1'],
    ['IQ4_XS', 'IQ4_NL'],
    ['MXFP4', 'MXFP4'],
  ];
  for (const isa of isas)
    for (const [gateUp, down] of pairs) {
      it(`${gateUp} / ${down}, ${native.isaName(isa)}: budgets 0, 3 and 8 of 8 equal no tier`, async () => {
        native.isaSet(isa);
        const m = model(gateUp, down);
        const expected = await run(m, undefined);
        for (const slots of [0, 3, 8]) {
          const steps = await run(m, slots);
          expect(steps.map((s) => s.token)).toEqual(expected.map((s) => s.token));
          steps.forEach((s, i) => {
            expect(
              Buffer.from(s.logits.buffer).equals(Buffer.from(expected[i].logits.buffer)),
              `slots=${slots} step=${i}`,
            ).toBe(true);
            expect(Array.from(s.routes)).toEqual(Array.from(expected[i].routes));
          });
        }
      });
    }
});
