/**
 * The expert tier inside the forward pass, on the cpu backend: placement never changes results.
 *
 *   (1) tokens and logits with a tier at budgets 0, partial and all are byte-identical to no tier,
 *       for Q8_0 and Q4_0 containers, with Q8_0 host copies (requantize verb) and without, on
 *       every kernel path this CPU has (a Q4_0 row and its exact Q8_0 copy must reduce alike);
 *   (2) per layer hits + misses = rows x top-k; 0 slots: no hits; every expert resident: all hits.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { GGML_TYPE, type GgmlTypeName } from '../../src/model/types.js';
import { ISA, type NativeTierHandle } from '../../src/native/binding.js';
import type { MappedModel } from './forward-helpers.js';
import { buildHostCopies, cpuBackend, greedyRun, native, PROMPT, range, tinyModel, type Step } from './tier-helpers.js';
import { LAYER_STAT_FIELDS as F } from '../../src/native/constants.js';

const DECODE = 5;
const models = new Map<GgmlTypeName, MappedModel>();
afterAll(() => {
  native.isaSet(native.isaBest());
  models.forEach((m) => m.close());
});

function model(type: GgmlTypeName): MappedModel {
  if (!models.has(type)) models.set(type, tinyModel(type));
  return models.get(type)!;
}

async function baseline(m: MappedModel): Promise<Step[]> {
  const ctx = native.createContext(m.handle, { nCtx: 32, threads: 2 });
  try {
    return await greedyRun(m, ctx, DECODE);
  } finally {
    native.freeContext(ctx);
  }
}

/** A run with a tier of `slots` per layer, the first `slots` experts of each layer resident. */
async function tiered(
  m: MappedModel,
  slots: number,
  hostCopies: boolean,
): Promise<{ steps: Step[]; stats: ReturnType<typeof native.tierStats> }> {
  const hp = m.model.hparams;
  const ctx = native.createContext(m.handle, { nCtx: 32, threads: 2 });
  const backend = cpuBackend();
  let tier: NativeTierHandle | undefined;
  try {
    tier = native.createTier(ctx, backend, { slotsPerLayer: Array(hp.nLayer).fill(slots) });
    if (hostCopies) {
      // A second tier is not allowed on one context: rebuild this one with the arena.
      const arena = buildHostCopies(m, tier, (_, x) => x < slots);
      native.freeTier(tier);
      tier = native.createTier(ctx, backend, { slotsPerLayer: Array(hp.nLayer).fill(slots), ...arena });
    }
    for (let l = 0; l < hp.nLayer; l++) await native.tierWarmstart(tier, l, range(slots));
    const steps = await greedyRun(m, ctx, DECODE);
    const stats = native.tierStats(tier);
    expect(stats.leases).toBe(0);
    if (slots < hp.nExpert) expect(stats.misses).toBeGreaterThan(0);
    if (slots > 0) expect(stats.hits).toBeGreaterThan(0);
    expect(stats.lazyMisses).toBe(hostCopies ? 0 : stats.misses); // host copies serve every miss
    return { steps, stats };
  } finally {
    if (tier) native.freeTier(tier);
    native.freeContext(ctx);
    native.destroyBackend(backend);
  }
}

function expectSameSteps(actual: Step[], expected: Step[]): void {
  expect(actual.map((s) => s.token)).toEqual(expected.map((s) => s.token));
  actual.forEach((s, i) => {
    expect(Buffer.from(s.logits.buffer).equals(Buffer.from(expected[i].logits.buffer))).toBe(true);
    expect(Array.from(s.routes)).toEqual(Array.from(expected[i].routes));
  });
}

describe('tier: results do not depend on placement (cpu backend)', () => {
  const isas = [ISA.scalar, ISA.avx2, ISA.avx512vnni].filter((isa) => isa <= native.isaBest());
  for (const type of ['Q8_0', 'Q4_0'] as const) {
    for (const isa of isas) {
      it(`${type}, ${native.isaName(isa)}: budgets 0, 3 and 8 of 8, with and without host copies, equal no tier`, async () => {
        native.isaSet(isa);
        const m = model(type);
        const expected = await baseline(m);
        for (const slots of [0, 3, 8])
          for (const hostCopies of [false, true]) expectSameSteps((await tiered(m, slots, hostCopies)).steps, expected);
      });
    }
  }

  it('a Q4_0 matrix and its Q8_0 copy give bit-identical matvec and matmul on every path', () => {
    const m = model('Q4_0');
    const hp = m.model.hparams;
    const gate = m.model.tensors.get('blk.1.ffn_gate_exps.weight')!;
    const rowBytes = (gate.byteLength / hp.nExpert / hp.nFfExp) | 0;
    const expert = 6;
    const q4 = m.model.bytes.subarray(
      gate.offset + expert * hp.nFfExp * rowBytes,
      gate.offset + (expert + 1) * hp.nFfExp * rowBytes,
    );
    const copy = new Uint8Array(65536);
    native.requantizeExpertToQ8(m.handle, 1, expert, copy, 0);
    const q8 = copy.subarray(0, hp.nFfExp * (hp.nEmbd / 32) * 34); // gate rows come first
    const x = Float32Array.from({ length: 5 * hp.nEmbd }, (_, i) => Math.sin(i * 0.37) * (1 + (i % 7)));
    for (const isa of isas) {
      native.isaSet(isa);
      const [a, b] = [new Float32Array(hp.nFfExp), new Float32Array(hp.nFfExp)];
      native.matvec(GGML_TYPE.Q4_0, q4, hp.nFfExp, hp.nEmbd, x.subarray(0, hp.nEmbd), a);
      native.matvec(GGML_TYPE.Q8_0, q8, hp.nFfExp, hp.nEmbd, x.subarray(0, hp.nEmbd), b);
      expect(Array.from(new Uint32Array(a.buffer))).toEqual(Array.from(new Uint32Array(b.buffer)));
      expect(a.some((v) => v !== 0)).toBe(true);
      const [c, d] = [new Float32Array(5 * hp.nFfExp), new Float32Array(5 * hp.nFfExp)];
      native.matmul(GGML_TYPE.Q4_0, q4, hp.nFfExp, hp.nEmbd, x, 5, c);
      native.matmul(GGML_TYPE.Q8_0, q8, hp.nFfExp, hp.nEmbd, x, 5, d);
      expect(Array.from(new Uint32Array(c.buffer))).toEqual(Array.from(new Uint32Array(d.buffer)));
    }
  });
});

describe('tier: hits and misses', () => {
  it('per layer hits + misses = rows x top-k; none resident: no hits; all resident: all hits', async () => {
    const m = model('Q8_0');
    const hp = m.model.hparams;
    const rows = (s: number) => (s === 0 ? PROMPT.length : 1);
    for (const slots of [0, 3, 8]) {
      const { steps, stats } = await tiered(m, slots, false);
      let hits = 0;
      let misses = 0;
      steps.forEach((step, s) => {
        for (let l = 0; l < hp.nLayer; l++) {
          const [start, end, moeStart, moeEnd, h, x, deviceStart, deviceEnd] = step.stats.subarray(l * F, l * F + F);
          expect(h + x).toBe(rows(s) * hp.nExpertUsed);
          expect([deviceStart, deviceEnd]).toEqual([0, 0]); // the cpu backend's residents run on the host
          // Counted from the routes: pairs routed to experts 0..slots-1 (the resident ones).
          const routed = Array.from({ length: rows(s) * hp.nExpertUsed }, (_, i) => {
            const r = Math.floor(i / hp.nExpertUsed);
            return step.routes[(r * hp.nLayer + l) * hp.nExpertUsed + (i % hp.nExpertUsed)];
          });
          expect(h).toBe(routed.filter((e) => e < slots).length);
          if (slots === 0) expect(h).toBe(0);
          if (slots === hp.nExpert) expect(x).toBe(0);
          expect(start).toBeLessThanOrEqual(moeStart);
          expect(moeStart).toBeLessThanOrEqual(moeEnd);
          expect(moeEnd).toBeLessThanOrEqual(end);
          if (l > 0) expect(start).toBeGreaterThanOrEqual(step.stats[(l - 1) * F + 1]);
          hits += h;
          misses += x;
        }
      });
      expect(stats.hits).toBe(hits);
      expect(stats.misses).toBe(misses);
      expect(stats.lazyMisses).toBe(misses); // no host copies: every miss reads the container
    }
  });

  it('without a tier, layerStats times every layer and counts every pair a miss', async () => {
    const m = model('Q8_0');
    const hp = m.model.hparams;
    const ctx = native.createContext(m.handle, { nCtx: 32, threads: 2 });
    const before = process.hrtime.bigint();
    const steps = await greedyRun(m, ctx, 1);
    const after = process.hrtime.bigint();
    native.freeContext(ctx);
    for (const step of steps)
      for (let l = 0; l < hp.nLayer; l++) {
        const [start, end, , , h] = step.stats.subarray(l * F, l * F + 6);
        expect(start).toBeGreaterThanOrEqual(Number(before));
        expect(end).toBeLessThanOrEqual(Number(after));
        expect(h).toBe(0);
      }
    expect(steps[0].stats[5]).toBe(PROMPT.length * hp.nExpertUsed);
  });
});
