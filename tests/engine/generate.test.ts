import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { InvalidOptionError, LimitExceededError, RequestAbortedError } from '../../src/core/errors.js';
import { openEngine, type Engine } from '../../src/engine/engine.js';
import { argmax } from '../../src/engine/sampler.js';
import { parseGguf } from '../../src/model/gguf/reader.js';
import { readHParams } from '../../src/model/hparams.js';
import { createReferenceSession } from '../../src/reference/forward.js';
import { writeSynthModel } from '../../src/synth/generate.js';
import { PARITY_PROMPTS, promptText } from '../../src/synth/prompts.js';

const dir = mkdtempSync(path.join(tmpdir(), 'moetier-engine-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

async function collect(engine: Engine, prompt: string | number[], options = {}): Promise<number[]> {
  const ids: number[] = [];
  for await (const t of engine.generate(prompt, options)) ids.push(t.id);
  return ids;
}

function referenceGreedy(file: string, prompt: number[], steps: number): number[] {
  const gguf = parseGguf(new Uint8Array(readFileSync(file)), file);
  const session = createReferenceSession({ hparams: readHParams(gguf), tensors: gguf.tensors, bytes: gguf.bytes }, 256);
  let logits = session.eval(prompt).logits.at(-1)!;
  const out: number[] = [];
  for (let i = 0; i < steps; i++) {
    const id = argmax(logits);
    out.push(id);
    logits = session.eval([id]).logits[0];
  }
  return out;
}

for (const [arch, quant] of [
  ['qwen3moe', 'q8_0'],
  ['llama', 'q4_0'],
] as const) {
  describe(`engine on tiny ${arch} ${quant}`, () => {
    const file = path.join(dir, `tiny-${arch}-${quant}.gguf`);
    let engine: Engine;
    beforeAll(async () => {
      await writeSynthModel({ preset: 'tiny', arch, quant, seed: 3 }, file);
      engine = await openEngine({ model: file, threads: 2, contextTokens: 256 });
    });
    afterAll(() => engine.close());

    it('greedy tokens equal the reference forward pass', async () => {
      const prompt = engine.tokenize(promptText(PARITY_PROMPTS[0], engine.tokenizer.kind));
      const ids = await collect(engine, prompt, { maxTokens: 12, stopAtEos: false });
      expect(ids).toEqual(referenceGreedy(file, prompt, 12));
    });

    it('streams text that decodes to the same string as the ids, and reports stats', async () => {
      const pieces: string[] = [];
      const ids: number[] = [];
      for await (const t of engine.generate(promptText(PARITY_PROMPTS[1], engine.tokenizer.kind), { maxTokens: 8 })) {
        pieces.push(t.text);
        ids.push(t.id);
      }
      // A continuation keeps its leading space; a standalone SentencePiece decode drops it.
      expect(pieces.join('').trimStart()).toBe(engine.tokenizer.decode(ids, { special: false }).trimStart());
      expect(pieces.join('').length).toBeGreaterThan(ids.length);
      const stats = engine.lastStats!;
      expect(stats.generatedTokens).toBe(ids.length);
      expect(stats.ttftMs).toBeGreaterThan(0);
      expect(stats.prefillTokPerS).toBeGreaterThan(0);
    });
  });
}

describe('engine requests', () => {
  const file = path.join(dir, 'tiny-olmoe.gguf');
  let engine: Engine;
  let prompt: number[];
  beforeAll(async () => {
    await writeSynthModel({ preset: 'tiny', arch: 'olmoe', quant: 'q8_0', seed: 5 }, file);
    engine = await openEngine({ model: file, threads: 1, contextTokens: 64 });
    prompt = engine.tokenize(promptText(PARITY_PROMPTS[2], engine.tokenizer.kind));
  });
  afterAll(() => engine.close());

  it('an abort stops between tokens, frees the request, and the engine stays usable', async () => {
    const alone = await collect(engine, prompt, { maxTokens: 10, stopAtEos: false });
    const controller = new AbortController();
    const seen: number[] = [];
    await expect(
      (async () => {
        for await (const t of engine.generate(prompt, { maxTokens: 10, signal: controller.signal, stopAtEos: false })) {
          seen.push(t.id);
          if (seen.length === 3) controller.abort();
        }
      })(),
    ).rejects.toBeInstanceOf(RequestAbortedError);
    expect(seen).toHaveLength(3);
    expect(engine.lastStats?.finishReason).toBe('aborted');
    expect(await collect(engine, prompt, { maxTokens: 10, stopAtEos: false })).toEqual(alone);
  });

  it('concurrent requests queue and each gets the output it would get alone', async () => {
    const alone = await collect(engine, prompt, { maxTokens: 6, stopAtEos: false });
    const other = await collect(engine, [prompt[0]], { maxTokens: 6, stopAtEos: false });
    const [a, b, c] = await Promise.all([
      collect(engine, prompt, { maxTokens: 6, stopAtEos: false }),
      collect(engine, [prompt[0]], { maxTokens: 6, stopAtEos: false }),
      collect(engine, prompt, { maxTokens: 6, stopAtEos: false }),
    ]);
    expect([a, b, c]).toEqual([alone, other, alone]);
  });

  it('stops at the end of the context', async () => {
    const ids = await collect(engine, prompt, { maxTokens: 200, stopAtEos: false });
    expect(prompt.length + ids.length).toBe(65); // 64 cached positions, plus the last token which is sampled but never evaluated
    expect(engine.lastStats?.finishReason).toBe('context');
  });

  it('refuses bad requests with typed errors', async () => {
    expect(() => engine.generate(prompt, { maxTokens: 0 })).toThrow(InvalidOptionError);
    expect(() => engine.generate(prompt, { temperature: -1 })).toThrow(InvalidOptionError);
    expect(() => engine.generate([engine.hparams.nVocab])).toThrow(InvalidOptionError);
    expect(() => engine.generate(new Array(64).fill(prompt[0]))).toThrow(LimitExceededError);
    await expect(openEngine({ model: path.join(dir, 'missing.gguf') })).rejects.toBeInstanceOf(InvalidOptionError);
    await expect(openEngine({ model: file, threads: 0 })).rejects.toBeInstanceOf(InvalidOptionError);
  });
});
