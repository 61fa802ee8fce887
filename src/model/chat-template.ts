/**
 * Chat prompts from the model's own Jinja template (`tokenizer.chat_template`),
 * rendered with @huggingface/jinja. The result is text: tokenize it with
 * parseSpecial (the default) so "<|im_start|>" becomes its control token, and
 * with addBos: false when the template already writes bos_token.
 */
import { Template } from '@huggingface/jinja';
import { InvalidOptionError, UnsupportedModelError } from '../core/errors.js';
import { limits } from '../core/limits.js';
import { metaString } from './gguf/metadata.js';
import type { GgufFile } from './types.js';

export interface ChatMessage {
  role: string;
  content: string;
}

export interface ChatTemplateOptions {
  /** End with the assistant's turn header so the model answers; default true. */
  addGenerationPrompt?: boolean;
}

const KEY = 'tokenizer.chat_template';
const compiled = new WeakMap<GgufFile, Template>();

export function hasChatTemplate(file: GgufFile): boolean {
  return typeof file.metadata.get(KEY) === 'string';
}

export function applyChatTemplate(file: GgufFile, messages: ChatMessage[], options: ChatTemplateOptions = {}): string {
  checkMessages(messages);
  const template = templateOf(file);
  const tokenText = (key: string): string => {
    const id = file.metadata.get(`tokenizer.ggml.${key}`);
    const tokens = file.metadata.get('tokenizer.ggml.tokens');
    return typeof id === 'number' && Array.isArray(tokens) && typeof tokens[id] === 'string' ? tokens[id] : '';
  };
  let text: string;
  try {
    text = template.render({
      messages,
      add_generation_prompt: options.addGenerationPrompt ?? true,
      bos_token: tokenText('bos_token_id'),
      eos_token: tokenText('eos_token_id'),
      [BOUNDED_RANGE]: boundedRange(file.path),
    });
  } catch (error) {
    if (error instanceof UnsupportedModelError) throw error;
    // Templates reject message sequences they do not support (raise_exception): the caller's input.
    throw new InvalidOptionError(
      'messages',
      `messages that the model's chat template accepts (${(error as Error).message})`,
      messages.map((m) => m.role),
    );
  }
  if (text.length > limits.chatTemplateOutputCharsMax) {
    throw new UnsupportedModelError(
      file.path,
      `key ${KEY}`,
      `a template whose output stays within ${limits.chatTemplateOutputCharsMax} characters, got ${text.length}`,
    );
  }
  return text;
}

/**
 * The template's range(), with the elements it makes over one render bounded by
 * limits.chatTemplateRangeItemsMax: jinja's own builds the whole list first, so
 * `range(1000000000)` in a model file ended the process with a V8 out-of-memory fatal error.
 */
function boundedRange(file: string): (start: number, stop?: number, step?: number) => number[] {
  let made = 0;
  return (start, stop, step = 1) => {
    const [from, to] = stop === undefined ? [0, start] : [start, stop];
    if (![from, to, step].every(Number.isFinite) || step === 0) {
      throw new UnsupportedModelError(
        file,
        `key ${KEY}`,
        `range() over finite numbers with a non-zero step, got range(${from}, ${to}, ${step})`,
      );
    }
    const count = Math.max(0, Math.ceil((to - from) / step));
    made += count;
    if (made > limits.chatTemplateRangeItemsMax) {
      throw new UnsupportedModelError(
        file,
        `key ${KEY}`,
        `a template whose range() calls make at most ${limits.chatTemplateRangeItemsMax} items in all, got ${made}`,
      );
    }
    return Array.from({ length: count }, (_, i) => from + i * step);
  };
}

function templateOf(file: GgufFile): Template {
  const cached = compiled.get(file);
  if (cached !== undefined) return cached;
  if (!file.metadata.has(KEY)) {
    throw new UnsupportedModelError(
      file.path,
      `key ${KEY}`,
      'a chat template in the model file; without one, pass a raw prompt',
    );
  }
  const source = metaString(file, KEY);
  let template: Template;
  try {
    template = new Template(source);
  } catch (error) {
    throw new UnsupportedModelError(
      file.path,
      `key ${KEY}`,
      `a Jinja template @huggingface/jinja can parse (${(error as Error).message})`,
    );
  }
  renameIdentifier(template.parsed, 'range', BOUNDED_RANGE);
  compiled.set(file, template);
  return template;
}

/** The name the template's range() calls are bound to (jinja's own range cannot be replaced in its environment). */
const BOUNDED_RANGE = '__moetier_bounded_range';

/** Every Identifier node named `from` in the parsed template becomes `to` (a walk over the plain AST objects). */
function renameIdentifier(node: unknown, from: string, to: string, seen = new Set<object>()): void {
  if (typeof node !== 'object' || node === null || seen.has(node)) return;
  seen.add(node);
  const n = node as { type?: unknown; value?: unknown };
  if (n.type === 'Identifier' && n.value === from) n.value = to;
  for (const child of Object.values(node)) renameIdentifier(child, from, to, seen);
}

function checkMessages(messages: unknown): asserts messages is ChatMessage[] {
  if (!Array.isArray(messages) || messages.length === 0)
    throw new InvalidOptionError('messages', 'a non-empty array of { role, content }', messages);
  messages.forEach((m, i) => {
    if (typeof m !== 'object' || m === null || typeof m.role !== 'string' || typeof m.content !== 'string') {
      throw new InvalidOptionError(`messages[${i}]`, '{ role: string, content: string }', m);
    }
  });
}
