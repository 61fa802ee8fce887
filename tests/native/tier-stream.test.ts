/**
 * Admit before run, one read per miss (issue 12, native/tier/tier_stream.cc): on the disk backend
 * with a stream descriptor, a routed expert with no slot and no host copy is read from the model
 * file before its layer runs it: into a free slot of its layer (admitted: computed from the slot,
 * which keeps it), else into scratch for the call (streamed). The layer's other runs compute while
 * the reads are in flight. The logits are the plain eval's bits in every case.
 */
import { afterEach, describe, expect, it } from 'vitest';
import type { NativeBackendHandle, NativeContextHandle, NativeTierHandle } from '../../src/native/binding.js';
import { greedyRun, native, tinyModel, type Step } from './tier-helpers.js';
import { LAYER_STAT_FIELDS as F } from '../../src/native/constants.js';
import type { MappedModel } from './forward-helpers.js';

const decodeSteps = 6;
const open: Array<() => void> = [];
afterEach(() => {
  while (open.length > 0) open.pop()!();
});

function setup(slots: number, extra: { streamFailAfterBytes?: number } = {}) {
  const m = tinyModel('Q8_0');
  const hp = m.model.hparams;
  const ctx: NativeContextHandle = native.createContext(m.handle, { nCtx: 64, threads: 1 });
  const backend: NativeBackendHandle = native.createBackend('disk', { budgetBytes: 1 << 24, file: m.file });
  const tier: NativeTierHandle = native.createTier(ctx, backend, {
    slotsPerLayer: Array(hp.nLayer).fill(slots),
    streamFile: m.file,
    ...extra,
  });
  open.push(() => {
    native.freeTier(tier);
    native.destroyBackend(backend);
    native.freeContext(ctx);
    m.close();
  });
  return { m, ctx, tier };
}

/** The same model without a tier: every expert from the mapping. */
async function plainRun(m: MappedModel): Promise<Step[]> {
  const ctx = native.createContext(m.handle, { nCtx: 64, threads: 1 });
  try {
    return await greedyRun(m, ctx, decodeSteps);
  } finally {
    native.freeContext(ctx);
  }
}

const bits = (steps: Step[]) => steps.map((s) => Array.from(s.logits));
// hits + misses of every layer: fields 4 and 5.
const routedRows = (steps: Step[]) =>
  steps.reduce((n, s) => n + s.stats.reduce((a, v, i) => (i % F === 4 || i % F === 5 ? a + v : a), 0), 0);

describe('admit before run (disk tier)', () => {
  it('room for every expert: each miss is read once into a free slot before it runs, and then every row is resident', async () => {
    const { m, ctx, tier } = setup(8);
    const plain = await plainRun(m);
    const first = await greedyRun(m, ctx, decodeSteps);
    // Computed from the slots right after their reads: a run that did not wait for its read would
    // compute from the empty slot's zeros, and these bits would differ.
    expect(bits(first)).toEqual(bits(plain));
    const s1 = native.tierStats(tier);
    expect(s1.admittedReads).toBeGreaterThan(0);
    expect(s1.streamedReads).toBe(0); // a free slot took every miss
    expect(s1.lazyMisses).toBe(0);
    expect(s1.leases).toBe(0);
    native.tierPoll(tier);
    native.tierResetStats(tier);
    const second = await greedyRun(m, ctx, decodeSteps);
    expect(bits(second)).toEqual(bits(plain));
    const s2 = native.tierStats(tier);
    expect(s2.misses).toBe(0);
    expect(s2.hits).toBe(routedRows(second));
    expect(s2.admittedReads).toBe(0); // no further reads
    expect(s2.streamedReads).toBe(0);
  });

  it('a tight budget: the first misses take the free slots, the rest are streamed for their call; the bits are unchanged', async () => {
    const { m, ctx, tier } = setup(1);
    const plain = await plainRun(m);
    const run = await greedyRun(m, ctx, decodeSteps);
    expect(bits(run)).toEqual(bits(plain));
    const s = native.tierStats(tier);
    expect(s.admittedReads).toBe(m.model.hparams.nLayer); // one free slot per layer, filled by its first miss
    expect(s.streamedReads).toBeGreaterThan(0);
    expect(s.streamedReads! + s.admittedReads!).toBeLessThanOrEqual(s.misses); // a miss is read once (rows >= reads)
    expect(s.streamedBytes).toBe(s.streamedReads! * native.tierExpertBytes(tier).container);
    expect(s.lazyMisses).toBe(0);
  });

  it("with the tier's policy on (evict), a miss evicts the lowest-scored resident its call does not run and stays: fewer streamed reads, the same bits", async () => {
    const hp = tinyModel('Q8_0').model.hparams;
    const plainModel = setup(2);
    const plain = await plainRun(plainModel.m);
    const without = await greedyRun(plainModel.m, plainModel.ctx, decodeSteps);
    const s0 = native.tierStats(plainModel.tier);
    const { m, ctx, tier } = setup(2);
    native.tierSetPolicy(tier, 'evict', 16);
    const run = await greedyRun(m, ctx, decodeSteps);
    expect(bits(without)).toEqual(bits(plain));
    expect(bits(run)).toEqual(bits(plain));
    const s = native.tierStats(tier);
    expect(s.admittedReads!).toBeGreaterThan(s0.admittedReads!);
    expect(s.streamedReads!).toBeLessThan(s0.streamedReads!);
    expect(s.leases).toBe(0);
    // Every bind counted its routes: an expert that ran has a finite score, one that never ran -Infinity.
    const scores = native.tierPolicyScores(tier);
    expect(scores.length).toBe(hp.nLayer * hp.nExpert);
    expect(scores.some((x) => Number.isFinite(x))).toBe(true);
    native.tierSetPolicy(tier, 'off', 16); // resets the counts
    expect(native.tierPolicyScores(tier).every((x) => x === -Infinity)).toBe(true);
    expect(() => native.tierSetPolicy(tier, 'evict', 0)).toThrow(/halfLifeTokens in \[1, /);
    expect(() => native.tierSetPolicy(tier, 'sometimes' as never, 16)).toThrow(/mode 'off', 'evict' or 'keep'/);
    expect(() => native.tierSetPolicy(tier, 'keep', 16, new Float64Array(3))).toThrow(/nLayer x nExpert/);
    expect(() => native.tierSetPolicy(tier, 'keep', 16, new Float64Array(hp.nLayer * hp.nExpert).fill(-1))).toThrow(
      /finite counts >= 0/,
    );
  });

  it('a read failing half-way fails the eval, naming the file, layer, expert and offset; the next eval runs with the same bits', async () => {
    const { m, ctx, tier } = setup(1, { streamFailAfterBytes: 3000 });
    const plain = await plainRun(m);
    const err = await greedyRun(m, ctx, decodeSteps).then(
      () => undefined,
      (e: unknown) => e as Error,
    );
    expect(err).toBeInstanceOf(Error);
    expect(err!.message).toMatch(/expert read: .+: layer \d+ expert \d+ at offset \d+ \(\d+ bytes\): .*injected/);
    const s = native.tierStats(tier);
    expect(s.streamFailures).toBe(1);
    expect(s.leases).toBe(0);
    // The read engine's injection fires once: the same context and tier compute as before.
    native.tierPoll(tier);
    expect(bits(await greedyRun(m, ctx, decodeSteps))).toEqual(bits(plain));
  });
});
