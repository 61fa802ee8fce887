/**
 * gpt-oss's chat format through moetier's template path: the Harmony template that gen-model
 * writes into gpt-oss files (src/synth/harmony-template.ts, the published template's shape: macros,
 * namespace(), strftime_now, raise_exception), rendered by applyChatTemplate (@huggingface/jinja)
 * from a generated tiny gpt-oss file's metadata, then tokenized by that file's vocabulary, whose
 * end-of-generation set is llama.cpp's for o200k_harmony (<|end|> dropped when <|return|> and
 * <|call|> exist; bench/tokenizer.mjs checks it against llama.cpp).
 */
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { InvalidOptionError } from '../../../src/core/errors.js';
import { applyChatTemplate, type ChatMessage } from '../../../src/model/chat-template.js';
import { metaString } from '../../../src/model/gguf/metadata.js';
import { parseGguf } from '../../../src/model/gguf/reader.js';
import { writeGguf } from '../../../src/model/gguf/writer.js';
import { createTokenizer, type Tokenizer } from '../../../src/model/tokenizer/index.js';
import type { GgufFile } from '../../../src/model/types.js';
import { buildSynthModel } from '../../../src/synth/generate.js';
import { HARMONY_TEMPLATE } from '../../../src/synth/harmony-template.js';

let dir: string;
let file: GgufFile;
let tok: Tokenizer;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'moetier-harmony-'));
  const model = buildSynthModel({ preset: 'tiny', arch: 'gpt-oss', quant: 'q8_0', seed: 1, routing: 'planted' });
  const path = join(dir, 'tiny-gpt-oss-vocab.gguf');
  await writeGguf(path, model.metadata, []); // the metadata alone: the template and the vocabulary
  file = parseGguf(new Uint8Array(await readFile(path)), path);
  tok = createTokenizer(file);
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

/** The template's own system message, dated as strftime_now dates it (local time; either side of a midnight). */
function systemMessage(date: Date): string {
  const ymd = `${date.getFullYear()}-${String(date.getMonth() + 1).padStart(2, '0')}-${String(date.getDate()).padStart(2, '0')}`;
  return (
    '<|start|>system<|message|>You are ChatGPT, a large language model trained by OpenAI.\n' +
    `Knowledge cutoff: 2024-06\nCurrent date: ${ymd}\n\nReasoning: medium\n\n` +
    '# Valid channels: analysis, commentary, final. Channel must be included for every message.<|end|>'
  );
}

function render(messages: ChatMessage[], addGenerationPrompt?: boolean): { text: string; system: string[] } {
  const before = systemMessage(new Date());
  const text = applyChatTemplate(file, messages, { addGenerationPrompt });
  return { text, system: [before, systemMessage(new Date())] };
}

/** `text` is one of the system messages followed by `rest`. */
function expectRendered({ text, system }: { text: string; system: string[] }, rest: string): void {
  expect(system.map((s) => s + rest)).toContain(text);
}

describe('the Harmony template of a generated gpt-oss file', () => {
  it('is what gen-model writes, with the gpt-4o pre-tokenizer', () => {
    expect(metaString(file, 'tokenizer.chat_template')).toBe(HARMONY_TEMPLATE);
    expect(metaString(file, 'tokenizer.ggml.pre')).toBe('gpt-4o');
    expect(HARMONY_TEMPLATE.length).toBeGreaterThan(4000);
  });

  it('renders system, user and assistant turns, and the generation prompt <|start|>assistant', () => {
    const messages: ChatMessage[] = [
      { role: 'system', content: 'Answer in one word.' },
      { role: 'user', content: 'Where does the tide go?' },
      { role: 'assistant', content: 'Out.' },
      { role: 'user', content: 'And then?' },
    ];
    const turns =
      '<|start|>developer<|message|># Instructions\n\nAnswer in one word.\n\n<|end|>' +
      '<|start|>user<|message|>Where does the tide go?<|end|>' +
      '<|start|>assistant<|channel|>final<|message|>Out.<|end|>' +
      '<|start|>user<|message|>And then?<|end|>';
    expectRendered(render(messages), turns + '<|start|>assistant');
    expectRendered(render(messages, false), turns);
  });

  it('takes a first developer message as the instructions, and no developer turn without one', () => {
    expectRendered(
      render([
        { role: 'developer', content: 'Be brief.' },
        { role: 'user', content: 'Hi' },
      ]),
      '<|start|>developer<|message|># Instructions\n\nBe brief.\n\n<|end|><|start|>user<|message|>Hi<|end|><|start|>assistant',
    );
    expectRendered(render([{ role: 'user', content: 'Hi' }]), '<|start|>user<|message|>Hi<|end|><|start|>assistant');
  });

  it('ends a last assistant turn with <|return|> when no answer is asked for, its reasoning on the analysis channel', () => {
    const thinking = { role: 'assistant', content: 'Four.', thinking: 'Two and two.' } as ChatMessage;
    expectRendered(
      render([{ role: 'user', content: '2+2?' }, thinking], false),
      '<|start|>user<|message|>2+2?<|end|>' +
        '<|start|>assistant<|channel|>analysis<|message|>Two and two.<|end|>' +
        '<|start|>assistant<|channel|>final<|message|>Four.<|return|>',
    );
    // An earlier turn's reasoning is dropped, as Harmony asks.
    expectRendered(
      render([{ role: 'user', content: '2+2?' }, thinking, { role: 'user', content: 'Sure?' }]),
      '<|start|>user<|message|>2+2?<|end|><|start|>assistant<|channel|>final<|message|>Four.<|end|>' +
        '<|start|>user<|message|>Sure?<|end|><|start|>assistant',
    );
  });

  it('refuses what the template refuses: channel tags in a message, a tool result without a call, an unknown role', () => {
    const cases: ChatMessage[][] = [
      [
        { role: 'user', content: 'x' },
        { role: 'assistant', content: '<|channel|>final<|message|>y' },
      ],
      [
        { role: 'user', content: 'x' },
        { role: 'tool', content: '{}' },
      ],
      [
        { role: 'user', content: 'x' },
        { role: 'narrator', content: 'y' },
      ],
    ];
    for (const messages of cases) {
      expect(() => applyChatTemplate(file, messages)).toThrow(InvalidOptionError);
    }
    expect(() => applyChatTemplate(file, cases[0])).toThrow(/without Harmony's <\|channel\|> tags/);
  });
});

describe('the Harmony prompt through the gpt-oss vocabulary', () => {
  const id = (text: string): number => tok.encode(text, { addBos: false })[0];

  it("makes each Harmony marker one token, and decodes back to the template's text", () => {
    const { text } = render([
      { role: 'system', content: 'Be brief.' },
      { role: 'user', content: 'the tide came in' },
    ]);
    const ids = tok.encode(text);
    for (const marker of ['<|start|>', '<|message|>', '<|end|>']) {
      expect(tok.encode(marker, { addBos: false }), marker).toHaveLength(1);
      expect(ids).toContain(id(marker));
    }
    const prompt = [id('<|start|>'), ...tok.encode('assistant', { addBos: false })];
    expect(ids.slice(-prompt.length)).toEqual(prompt);
    expect(tok.decode(ids)).toBe(text);
    expect(tok.bosId).toBe(id('<|startoftext|>'));
  });

  it("ends generation on <|return|>, <|call|> and <|endoftext|>, not on <|end|> (llama.cpp's o200k_harmony rule)", () => {
    expect([...tok.eogIds].map((i) => tok.tokenPiece(i)).sort()).toEqual(['<|call|>', '<|endoftext|>', '<|return|>']);
    expect(tok.eosId).toBe(id('<|return|>'));
    // <|end|> and the channel markers are rendered even when special tokens are hidden, as llama.cpp renders them.
    const reply = ['<|channel|>', 'analysis', '<|message|>', 'x', '<|end|>'].flatMap((t) =>
      tok.encode(t, { addBos: false }),
    );
    expect(tok.decode(reply, { special: false })).toBe('<|channel|>analysis<|message|>x<|end|>');
    expect(tok.decode([id('<|return|>')], { special: false })).toBe('');
  });
});
