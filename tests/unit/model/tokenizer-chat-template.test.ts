import { describe, expect, it } from 'vitest';
import { InvalidOptionError, UnsupportedModelError } from '../../../src/core/errors.js';
import { applyChatTemplate, hasChatTemplate } from '../../../src/model/chat-template.js';
import type { GgufFile, GgufValue } from '../../../src/model/types.js';

const CHATML =
  "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}" +
  "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

function fileWith(entries: Array<[string, GgufValue]>): GgufFile {
  return {
    path: 'chat.gguf',
    version: 3,
    metadata: new Map(entries),
    tensors: new Map(),
    alignment: 32,
    dataOffset: 0,
    bytes: new Uint8Array(0),
    size: 0,
  };
}

describe('applyChatTemplate', () => {
  it('render a ChatML template with and without the generation prompt', () => {
    const file = fileWith([['tokenizer.chat_template', CHATML]]);
    const messages = [
      { role: 'system', content: 'Be brief.' },
      { role: 'user', content: 'Hi' },
    ];
    expect(hasChatTemplate(file)).toBe(true);
    expect(applyChatTemplate(file, messages)).toBe(
      '<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n',
    );
    expect(applyChatTemplate(file, messages, { addGenerationPrompt: false })).toBe(
      '<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n',
    );
  });

  it('pass bos_token and eos_token from the vocabulary', () => {
    const file = fileWith([
      [
        'tokenizer.chat_template',
        "{{ bos_token }}{% for m in messages %}[INST] {{ m['content'] }} [/INST]{% endfor %}{{ eos_token }}",
      ],
      ['tokenizer.ggml.tokens', ['<unk>', '<s>', '</s>']],
      ['tokenizer.ggml.bos_token_id', 1],
      ['tokenizer.ggml.eos_token_id', 2],
    ]);
    expect(applyChatTemplate(file, [{ role: 'user', content: 'x' }])).toBe('<s>[INST] x [/INST]</s>');
  });

  it('refuse a model without a template, a template that does not parse, and messages it rejects', () => {
    const none = fileWith([]);
    expect(hasChatTemplate(none)).toBe(false);
    expect(() => applyChatTemplate(none, [{ role: 'user', content: 'x' }])).toThrow(UnsupportedModelError);
    expect(() => applyChatTemplate(none, [{ role: 'user', content: 'x' }])).toThrow(
      /chat.gguf: key tokenizer.chat_template: expected a chat template/,
    );
    const broken = fileWith([['tokenizer.chat_template', '{% for m in messages %}']]);
    expect(() => applyChatTemplate(broken, [{ role: 'user', content: 'x' }])).toThrow(/expected a Jinja template/);
    const strict = fileWith([
      [
        'tokenizer.chat_template',
        "{% if messages[0]['role'] == 'system' %}{{ raise_exception('no system role') }}{% endif %}ok",
      ],
    ]);
    expect(() => applyChatTemplate(strict, [{ role: 'system', content: 'x' }])).toThrow(/no system role/);
    expect(() => applyChatTemplate(strict, [{ role: 'user', content: 1 as unknown as string }])).toThrow(
      InvalidOptionError,
    );
  });

  it('bound what a template in a model file can make: range() items and the rendered text', () => {
    // Before: range(1000000000) built a billion-item list and ended the process with a V8 fatal error.
    const huge = fileWith([['tokenizer.chat_template', '{% for i in range(1000000000) %}x{% endfor %}']]);
    expect(() => applyChatTemplate(huge, [{ role: 'user', content: 'x' }])).toThrow(
      /range\(\) calls make at most 100000 items in all, got 1000000000/,
    );
    const nested = fileWith([
      ['tokenizer.chat_template', '{% for i in range(1000) %}{% for j in range(1000) %}{% endfor %}{% endfor %}'],
    ]);
    expect(() => applyChatTemplate(nested, [{ role: 'user', content: 'x' }])).toThrow(UnsupportedModelError);
    const small = fileWith([
      [
        'tokenizer.chat_template',
        '{% for i in range(3) %}{{ i }}{% endfor %}{% for i in range(1, 7, 2) %}{{ i }}{% endfor %}',
      ],
    ]);
    expect(applyChatTemplate(small, [{ role: 'user', content: 'x' }])).toBe('012135');
    const long = fileWith([['tokenizer.chat_template', "{% for m in messages %}{{ m['content'] }}{% endfor %}"]]);
    const big = 'y'.repeat(3 * 1024 * 1024);
    expect(() =>
      applyChatTemplate(long, [
        { role: 'user', content: big },
        { role: 'user', content: big },
      ]),
    ).toThrow(/output stays within 4194304 characters/);
  });
});
