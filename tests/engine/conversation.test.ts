/**
 * A conversation keeps the KV cache between turns (src/engine/conversation.ts): turn n evaluates
 * only its new tokens at the position after the cached ones, and gives the tokens a single
 * request over the whole history gives. Limits, eviction, abort and failure leave it consistent.
 *
 * The synthetic model's greedy token is mostly its input's successor, so equal tokens alone would
 * not tell a kept cache from a lost one: the evals' logits are compared too, bit for bit, with
 * engine.logits over the whole history (the native forward pass sums in one order however the rows
 * are split), and the logits of the new tokens alone differ from them.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { lastValueFrom, toArray } from 'rxjs';
import {
  ContextFullError,
  ConversationEvictedError,
  InvalidOptionError,
  RequestAbortedError,
} from '../../src/core/errors.js';
import { openEngine, type Engine, type GenerateOptions } from '../../src/engine/engine.js';
import type { Conversation } from '../../src/engine/conversation.js';
import { loadNative } from '../../src/native/binding.js';
import { collect, tempDir, tinyModel } from './tier-helpers.js';

const { dir, cleanup } = tempDir('moetier-conversation-');
afterAll(cleanup);
afterEach(() => void vi.restoreAllMocks());

const greedy = (maxTokens: number): GenerateOptions => ({ maxTokens, stopAtEos: false });

async function turn(
  conversation: Conversation,
  prompt: string | number[],
  options: GenerateOptions = greedy(6),
): Promise<number[]> {
  const ids: number[] = [];
  for await (const t of conversation.generate(prompt, options)) ids.push(t.id);
  return ids;
}

interface Evals extends Array<{ tokens: number[]; position: number }> {
  /** logits[i]: what eval i wrote (copied once it resolved). */
  logits: Float32Array[];
}

/** Every native eval from here on (tokens copied: the engine reuses its one-token array), optionally failing the n-th. */
function recordEvals(failAt?: number): Evals {
  const native = loadNative();
  const original = native.evalAsync.bind(native);
  const calls = Object.assign([], { logits: [] }) as Evals;
  vi.spyOn(native, 'evalAsync').mockImplementation((context, tokens, position, logits, options) => {
    const i = calls.push({ tokens: Array.from(tokens), position }) - 1;
    if (calls.length === failAt) return Promise.reject(new Error('injected eval failure'));
    return original(context, tokens, position, logits, options).then(() => void (calls.logits[i] = logits.slice()));
  });
  return calls;
}

/** The logits of one eval are those of the whole history evaluated from position 0. */
async function expectHistoryLogits(got: Float32Array | undefined, history: number[]): Promise<void> {
  expect(got).toEqual(await reference.logits(history));
}

let model: string;
/** Requests on this engine never touch the engines under test: the references of the tests. */
let reference: Engine;
beforeAll(async () => {
  model = await tinyModel(dir);
  reference = await openEngine({ model, threads: 1, contextTokens: 128 });
});
afterAll(() => reference.close());

const text1 = 'the ship sails at dawn';
const text2 = ' and the crew sings';
const text3 = ' until the harbour';

const disk = { slotsPerLayer: 3, heat: false as const, backend: 'disk' as const };
for (const [name, tierOptions] of [
  ['without a tier', undefined],
  ['on the disk tier (3 slots per layer)', disk],
  ['on the disk tier, every prefill reading whole layers', { ...disk, shortPrefillTokens: 0 }],
] as const) {
  const tier = tierOptions !== undefined;
  describe(`a conversation ${name}`, () => {
    let engine: Engine;
    beforeAll(async () => {
      engine = await openEngine({ model, threads: 1, contextTokens: 128, ...tierOptions });
      expect(engine.config.tier !== undefined).toBe(tier);
      expect(engine.fileReads() !== undefined).toBe(tier); // the disk backend: experts read from the file
    });
    afterAll(() => engine.close());

    it('turn 2 gives the tokens of one request over [prompt 1, output 1, prompt 2], evaluating only its new tokens', async () => {
      const conversation = engine.conversation();
      const p1 = engine.tokenize(text1);
      const p2 = engine.tokenize(text2, { addBos: false });
      const a = await turn(conversation, p1);
      expect(a).toEqual(await collect(reference, p1, greedy(6)));
      expect(conversation.cachedTokens).toBe(p1.length + a.length - 1); // the last token is sampled, never evaluated
      const evals = recordEvals();
      const b = await turn(conversation, p2);
      vi.restoreAllMocks(); // the references below evaluate too

      const whole = [...p1, ...a, ...p2];
      expect(b).toEqual(await collect(reference, whole, greedy(6)));
      await expectHistoryLogits(evals.logits[0], whole);
      await expectHistoryLogits(evals.logits.at(-1), [...whole, ...b.slice(0, -1)]);
      // What a lost cache would give: turn 2's new tokens alone, from position 0.
      expect(await reference.logits([a.at(-1)!, ...p2])).not.toEqual(evals.logits[0]);
      expect(conversation.tokens).toEqual([...whole, ...b]);
      expect(conversation.cachedTokens).toBe(whole.length + b.length - 1);

      // Evals: the pending token and prompt 2 at the position after the cached ones, then one row per decode step.
      const cached = p1.length + a.length - 1;
      expect(evals[0]).toEqual({ tokens: [a.at(-1)!, ...p2], position: cached });
      expect(evals.slice(1)).toEqual(
        b.slice(0, -1).map((id, i) => ({ tokens: [id], position: cached + 1 + p2.length + i })),
      );
      const stats = conversation.lastStats!;
      expect(stats).toMatchObject({
        promptTokens: 1 + p2.length,
        cachedTokens: cached,
        replayedTokens: 0,
        generatedTokens: 6,
        finishReason: 'length',
      });
      expect(engine.lastStats).toBe(stats);
      // Turn 2's prefill took the path its own few tokens ask for (whole layers only when every prefill does).
      if (tier)
        expect(
          stats.prefillPathCalls?.wholeLayer.every((n) => n === ('shortPrefillTokens' in tierOptions ? 1 : 0)),
        ).toBe(true);
    });

    it('turn 3 continues the same cache (string prompts: no BOS after the first turn)', async () => {
      const conversation = engine.conversation();
      const a = await turn(conversation, text1);
      const b = await turn(conversation, text2);
      const evals = recordEvals();
      const c = await turn(conversation, text3);
      vi.restoreAllMocks();
      const p1 = engine.tokenize(text1);
      const p2 = engine.tokenize(text2, { addBos: false });
      const p3 = engine.tokenize(text3, { addBos: false });
      expect(conversation.tokens).toEqual([...p1, ...a, ...p2, ...b, ...p3, ...c]);
      expect(c).toEqual(await collect(reference, [...p1, ...a, ...p2, ...b, ...p3], greedy(6)));
      await expectHistoryLogits(evals.logits[0], [...p1, ...a, ...p2, ...b, ...p3]);
      expect(conversation.lastStats).toMatchObject({
        promptTokens: 1 + p3.length,
        cachedTokens: p1.length + a.length + p2.length + b.length - 1,
      });
    });
  });
}

describe('conversation limits, eviction and failures', () => {
  let engine: Engine;
  const contextTokens = 64;
  beforeAll(async () => {
    engine = await openEngine({ model, threads: 1, contextTokens });
  });
  afterAll(() => engine.close());

  it('refuses a turn that would pass contextTokens before any eval, with the numbers, and changes nothing', async () => {
    const conversation = engine.conversation();
    const p1 = engine.tokenize(text1);
    const a = await turn(conversation, p1);
    const p2 = engine.tokenize(text2, { addBos: false });
    const before = { tokens: conversation.tokens, cached: conversation.cachedTokens, stats: conversation.lastStats };
    const evals = recordEvals();
    const fits = contextTokens - before.cached - (1 + p2.length); // cached + new + maxTokens = contextTokens
    const refused = await turn(conversation, p2, greedy(fits + 1)).catch((err: unknown) => err);
    expect(refused).toBeInstanceOf(ContextFullError);
    expect(refused).toMatchObject({
      code: 'E_CONTEXT_FULL',
      limit: 'contextTokens',
      cachedTokens: before.cached,
      newTokens: 1 + p2.length,
      maxTokens: fits + 1,
      contextTokens,
    });
    expect((refused as Error).message).toContain(`> contextTokens ${contextTokens}`);
    expect(evals).toHaveLength(0);
    expect(conversation.tokens).toEqual(before.tokens);
    expect(conversation.cachedTokens).toBe(before.cached);
    expect(conversation.lastStats).toBe(before.stats);
    expect(conversation.evicted).toBe(false);

    // The largest turn that fits runs to its end ('length', never 'context'), and the cache was kept.
    const b = await turn(conversation, p2, greedy(fits));
    vi.restoreAllMocks();
    expect(b).toHaveLength(fits);
    expect(conversation.lastStats?.finishReason).toBe('length');
    expect(conversation.tokens).toHaveLength(contextTokens); // the cache's last position is left for the pending token
    expect(conversation.cachedTokens).toBe(contextTokens - 1);
    expect(b).toEqual(await collect(reference, [...p1, ...a, ...p2], greedy(fits)));
    expect(evals.at(-1)?.position).toBe(contextTokens - 2);
    await expectHistoryLogits(evals.logits.at(-1), conversation.tokens.slice(0, -1));
    await expect(turn(conversation, [p2[0]!], greedy(1))).rejects.toBeInstanceOf(ContextFullError);
  });

  it('turns started together run one after the other, each after the one before it', async () => {
    const together = engine.conversation();
    const [a, b] = await Promise.all([turn(together, text1), turn(together, text2)]);
    const apart = engine.conversation();
    expect([a, b]).toEqual([await turn(apart, text1), await turn(apart, text2)]);
  });

  it('a first turn longer than the context is a ContextFullError too', async () => {
    const conversation = engine.conversation();
    const evals = recordEvals();
    await expect(turn(conversation, new Array(60).fill(1), greedy(5))).rejects.toMatchObject({
      code: 'E_CONTEXT_FULL',
      cachedTokens: 0,
      newTokens: 60,
    });
    expect(evals).toHaveLength(0);
    expect(conversation.tokens).toEqual([]);
  });

  it('another request evicts it: a typed error before any eval, the history intact to start again from', async () => {
    const conversation = engine.conversation();
    const p1 = engine.tokenize(text1);
    const a = await turn(conversation, p1);
    const history = conversation.tokens;
    const cached = conversation.cachedTokens;
    await collect(engine, engine.tokenize(text3), greedy(3));
    expect(conversation.evicted).toBe(true);
    expect(conversation.cachedTokens).toBe(0);

    const p2 = engine.tokenize(text2, { addBos: false });
    const evals = recordEvals();
    const err = await turn(conversation, p2).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ConversationEvictedError);
    expect(err).toMatchObject({
      code: 'E_CONVERSATION_EVICTED',
      lostTokens: cached,
      requestsSince: 1,
      lastRequest: 'engine.generate',
    });
    expect(evals).toHaveLength(0);
    expect(conversation.tokens).toEqual(history);
    await expect(turn(conversation, p2)).rejects.toBeInstanceOf(ConversationEvictedError); // stays evicted: explicit, never silent

    // What the error says to do: a new conversation over the history gives turn 2's tokens.
    const again = engine.conversation();
    const b = await turn(again, [...history, ...p2]);
    expect(b).toEqual(await collect(reference, [...p1, ...a, ...p2], greedy(6)));
  });

  it('another conversation and engine.logits evict it too, named in the error', async () => {
    const first = engine.conversation();
    const second = engine.conversation();
    await turn(first, text1);
    await turn(second, text2);
    await expect(turn(first, text3)).rejects.toMatchObject({
      lastRequest: `conversation ${second.id}`,
      requestsSince: 1,
    });
    await expect(turn(second, text3)).resolves.toHaveLength(6); // its own turns keep its cache
    await engine.logits(engine.tokenize(text1));
    await collect(engine, text1, greedy(2));
    await expect(turn(second, text1)).rejects.toMatchObject({ lastRequest: 'engine.generate', requestsSince: 2 });
  });

  it("onEvicted 'replay' evaluates the history again from position 0, counted in the turn's stats", async () => {
    const conversation = engine.conversation({ onEvicted: 'replay' });
    const p1 = engine.tokenize(text1);
    const a = await turn(conversation, p1);
    await collect(engine, text3, greedy(2));
    const p2 = engine.tokenize(text2, { addBos: false });
    const evals = recordEvals();
    const b = await turn(conversation, p2);
    vi.restoreAllMocks();
    expect(b).toEqual(await collect(reference, [...p1, ...a, ...p2], greedy(6)));
    expect(evals[0]).toEqual({ tokens: [...p1, ...a, ...p2], position: 0 });
    expect(conversation.cachedTokens).toBe(p1.length + a.length + p2.length + b.length - 1);
    expect(conversation.lastStats).toMatchObject({
      promptTokens: p1.length + a.length + p2.length,
      cachedTokens: 0,
      replayedTokens: p1.length + a.length,
    });
    expect(() => engine.conversation({ onEvicted: 'drop' as 'throw' })).toThrow(InvalidOptionError);
  });

  it('breaking out of a turn keeps exactly the tokens yielded; the next turn continues after them', async () => {
    const conversation = engine.conversation();
    const p1 = engine.tokenize(text1);
    const seen: number[] = [];
    for await (const t of conversation.generate(p1, greedy(10))) {
      seen.push(t.id);
      if (seen.length === 3) break;
    }
    expect(conversation.lastStats?.finishReason).toBe('aborted');
    expect(conversation.tokens).toEqual([...p1, ...seen]);
    expect(conversation.cachedTokens).toBe(p1.length + 2); // the third token was yielded, not yet evaluated
    const p2 = engine.tokenize(text2, { addBos: false });
    const evals = recordEvals();
    const b = await turn(conversation, p2);
    vi.restoreAllMocks();
    expect(evals[0]).toEqual({ tokens: [seen[2]!, ...p2], position: p1.length + 2 });
    expect(b).toEqual(await collect(reference, [...p1, ...seen, ...p2], greedy(6)));
    await expectHistoryLogits(evals.logits[0], [...p1, ...seen, ...p2]);
  });

  it('an abort between tokens keeps the evaluated tokens; the next turn evaluates only its prompt', async () => {
    const conversation = engine.conversation();
    const p1 = engine.tokenize(text1);
    const controller = new AbortController();
    const seen: number[] = [];
    await expect(
      (async () => {
        for await (const t of conversation.generate(p1, { ...greedy(10), signal: controller.signal })) {
          seen.push(t.id);
          if (seen.length === 3) controller.abort();
        }
      })(),
    ).rejects.toBeInstanceOf(RequestAbortedError);
    expect(conversation.tokens).toEqual([...p1, ...seen]);
    expect(conversation.cachedTokens).toBe(p1.length + 3); // the third was evaluated before the abort was seen
    const p2 = engine.tokenize(text2, { addBos: false });
    const evals = recordEvals();
    const b = await turn(conversation, p2);
    vi.restoreAllMocks();
    expect(evals[0]).toEqual({ tokens: p2, position: p1.length + 3 });
    expect(b).toEqual(await collect(reference, [...p1, ...seen, ...p2], greedy(6)));
    await expectHistoryLogits(evals.logits[0], [...p1, ...seen, ...p2]);
  });

  it('a failed eval leaves the cache accounted for: a failed prefill adds nothing, a failed decode step keeps what was yielded', async () => {
    const conversation = engine.conversation();
    const p1 = engine.tokenize(text1);
    const a = await turn(conversation, p1);
    const history = conversation.tokens;
    const cached = conversation.cachedTokens;
    const p2 = engine.tokenize(text2, { addBos: false });

    recordEvals(1); // the prefill
    await expect(turn(conversation, p2)).rejects.toThrow('injected eval failure');
    expect(conversation.lastStats?.finishReason).toBe('error');
    expect(conversation.tokens).toEqual(history);
    expect(conversation.cachedTokens).toBe(cached);
    vi.restoreAllMocks();

    const seen: number[] = [];
    recordEvals(3); // the prefill, one decode step, then the second decode step fails
    await expect(
      (async () => {
        for await (const t of conversation.generate(p2, greedy(6))) seen.push(t.id);
      })(),
    ).rejects.toThrow('injected eval failure');
    expect(seen).toHaveLength(2);
    expect(conversation.tokens).toEqual([...history, ...p2, ...seen]);
    expect(conversation.cachedTokens).toBe(history.length + p2.length + 1); // seen[1] was yielded, its eval failed
    vi.restoreAllMocks();

    const p3 = engine.tokenize(text3, { addBos: false });
    const evals = recordEvals();
    const c = await turn(conversation, p3);
    vi.restoreAllMocks();
    expect(evals[0]).toEqual({ tokens: [seen[1]!, ...p3], position: history.length + p2.length + 1 });
    expect(c).toEqual(await collect(reference, [...p1, ...a, ...p2, ...seen, ...p3], greedy(6)));
    await expectHistoryLogits(evals.logits[0], [...p1, ...a, ...p2, ...seen, ...p3]);
  });

  it('generate$ streams the same turn; reset starts again at position 0; a closed conversation or engine refuses with typed errors', async () => {
    const conversation = engine.conversation();
    const p1 = engine.tokenize(text1);
    const viaRx = await lastValueFrom(conversation.generate$(p1, greedy(4)).pipe(toArray()));
    expect(viaRx.map((t) => t.id)).toEqual(await collect(reference, p1, greedy(4)));
    conversation.reset();
    expect(conversation.tokens).toEqual([]);
    expect(conversation.cachedTokens).toBe(0);
    const evals = recordEvals();
    expect(await turn(conversation, p1, greedy(4))).toEqual(viaRx.map((t) => t.id));
    expect(evals[0]).toEqual({ tokens: p1, position: 0 });

    // A reset while a turn runs: the turn streams to its end, but is no longer recorded.
    const streamed: number[] = [];
    for await (const t of conversation.generate(text2, greedy(4))) {
      streamed.push(t.id);
      if (streamed.length === 1) conversation.reset();
    }
    expect(streamed).toHaveLength(4);
    expect(conversation.tokens).toEqual([]);
    expect(conversation.cachedTokens).toBe(0);
    await turn(conversation, p1, greedy(4));
    expect(conversation.tokens).toEqual([...p1, ...viaRx.map((t) => t.id)]);

    const history = conversation.tokens;
    conversation.close();
    expect(() => conversation.generate(text2)).toThrow(InvalidOptionError);
    expect(conversation.tokens).toEqual(history);

    const other = await openEngine({ model, threads: 1, contextTokens: 32 });
    const open = other.conversation();
    await other.close();
    expect(() => open.generate(text1)).toThrow(/expected an open engine/);
    expect(() => other.conversation()).toThrow(InvalidOptionError);
  });
});
