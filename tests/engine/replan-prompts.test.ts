/** The long topic prompts of the replan benchmark: deterministic, one token per word, one topic. */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openEngine, type Engine } from '../../src/engine/engine.js';
import { longTopicPrompt, promptText } from '../../src/synth/prompts.js';
import { FUNCTION_WORDS, TOPICS } from '../../src/synth/topics.js';
import { tempDir, tinyModel } from './tier-helpers.js';

const { dir, cleanup } = tempDir('moetier-replan-prompts-');
let engine: Engine;
beforeAll(async () => {
  engine = await openEngine({ model: await tinyModel(dir, 'q8_0', 3), threads: 1, contextTokens: 512 });
});
afterAll(async () => {
  await engine.close();
  cleanup();
});

describe('longTopicPrompt', () => {
  it('is deterministic in (topic, seed), differs across seeds, and ends on a topic word', () => {
    expect(longTopicPrompt(2, 224, 1)).toEqual(longTopicPrompt(2, 224, 1));
    expect(longTopicPrompt(2, 224, 1).words).not.toEqual(longTopicPrompt(2, 224, 2).words);
    const p = longTopicPrompt(1, 224, 5);
    expect(p.words).toHaveLength(224);
    expect(TOPICS[1].words).toContain(p.words[223]);
    for (const w of p.words) expect(TOPICS[1].words.includes(w) || FUNCTION_WORDS.includes(w)).toBe(true);
    expect(() => longTopicPrompt(99, 10, 1)).toThrow(RangeError);
    expect(() => longTopicPrompt(0, 0, 1)).toThrow(RangeError);
  });

  it('tokenizes to one token per word (so 224 words is a 224-token prompt)', () => {
    for (const topic of [0, 1, 2, 3]) {
      const p = longTopicPrompt(topic, 224, 1);
      const ids = engine.tokenize(promptText(p, engine.tokenizer.kind), { addBos: false });
      expect(ids).toHaveLength(224);
      expect(engine.detokenize(ids).trim()).toBe(p.words.join(' '));
    }
  });
});
