/**
 * Built-in prompts, written in the synthetic vocabulary's real words (every word is one
 * token). Their topics are 0..3, which every preset has. Each ends on a topic word, so
 * greedy generation continues along that topic's cycle.
 */
import { mulberry32, randomInt } from '../core/prng.js';
import { FUNCTION_WORDS, TOPICS } from './topics.js';
import type { TokenizerModel } from './vocab.js';

export interface BuiltinPrompt {
  name: string;
  /** Index into TOPICS. */
  topic: number;
  words: readonly string[];
}

const prompt = (name: string, topic: string, text: string): BuiltinPrompt => ({
  name,
  topic: TOPICS.findIndex((t) => t.name === topic),
  words: text.split(' '),
});

export const DEMO_PROMPT = prompt(
  'demo',
  'music',
  'the band will play a song on the guitar and the piano with a melody',
);

export const PARITY_PROMPTS: readonly BuiltinPrompt[] = [
  prompt('parity-ocean', 'ocean', 'the captain and the crew sail the ship across the sea to the harbor'),
  prompt('parity-code', 'code', 'we compile the function and debug the program with a test'),
  prompt('parity-space', 'space', 'the rocket will launch into orbit around the moon and the planet'),
];

/**
 * Prompts whose decodes the routing statistics are taken over (the realistic-routing bands,
 * bench/predict.mjs): the parity prompts, the demo, one that wanders over three topics before
 * it settles, and a two-word one. Topics 0..3 only, so every preset has them.
 */
export const ROUTING_PROMPTS: readonly BuiltinPrompt[] = [
  ...PARITY_PROMPTS,
  DEMO_PROMPT,
  prompt('routing-wander', 'space', 'the song of the ship is in the code of the star'),
  prompt('routing-short', 'code', 'a loop'),
];

/**
 * The prompt as text for a tokenizer: SentencePiece (llama) adds the leading "▁" itself;
 * the byte-level BPE (gpt2) needs the leading space for the first word to be its "Ġword" token.
 */
export function promptText(p: BuiltinPrompt, model: TokenizerModel): string {
  const text = p.words.join(' ');
  return model === 'gpt2' ? ` ${text}` : text;
}

/**
 * A long prompt of one topic (benchmarks: prefill replan needs 200-250-token prompts): `length`
 * words, deterministic in (topic, seed). Mostly the topic's words, one function word in three
 * so it reads as glue; it ends on a topic word. Every word is one token in the synthetic vocab.
 */
export function longTopicPrompt(topic: number, length: number, seed: number): BuiltinPrompt {
  const t = TOPICS[topic];
  if (!t) throw new RangeError(`longTopicPrompt: topic: expected 0..${TOPICS.length - 1}, got ${topic}`);
  if (!Number.isInteger(length) || length < 1)
    throw new RangeError(`longTopicPrompt: length: expected an integer >= 1, got ${length}`);
  const rng = mulberry32(seed * 977 + topic);
  const words: string[] = [];
  for (let i = 0; i < length; i++) {
    const glue = i % 3 === 1 && i !== length - 1;
    const list = glue ? FUNCTION_WORDS : t.words;
    words.push(list[randomInt(rng, 0, list.length - 1)]);
  }
  return { name: `long-${t.name}-${length}-s${seed}`, topic, words };
}
