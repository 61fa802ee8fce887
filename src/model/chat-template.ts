/**
 * Chat prompts from the model's own Jinja template (`tokenizer.chat_template`),
 * rendered with @huggingface/jinja. The result is text: tokenize it with
 * parseSpecial (the default) so "<|im_start|>" becomes its control token, and
 * with addBos: false when the template already writes bos_token.
 */
import { Template } from '@huggingface/jinja';
import { InvalidOptionError, UnsupportedModelError } from '../core/errors.js';
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
  try {
    return template.render({
      messages,
      add_generation_prompt: options.addGenerationPrompt ?? true,
      bos_token: tokenText('bos_token_id'),
      eos_token: tokenText('eos_token_id'),
    });
  } catch (error) {
    // Templates reject message sequences they do not support (raise_exception): the caller's input.
    throw new InvalidOptionError('messages', `messages that the model's chat template accepts (${(error as Error).message})`, messages.map((m) => m.role));
  }
}

function templateOf(file: GgufFile): Template {
  const cached = compiled.get(file);
  if (cached !== undefined) return cached;
  if (!file.metadata.has(KEY)) {
    throw new UnsupportedModelError(file.path, `key ${KEY}`, 'a chat template in the model file; without one, pass a raw prompt');
  }
  const source = metaString(file, KEY);
  let template: Template;
  try {
    template = new Template(source);
  } catch (error) {
    throw new UnsupportedModelError(file.path, `key ${KEY}`, `a Jinja template @huggingface/jinja can parse (${(error as Error).message})`);
  }
  compiled.set(file, template);
  return template;
}

function checkMessages(messages: unknown): asserts messages is ChatMessage[] {
  if (!Array.isArray(messages) || messages.length === 0) throw new InvalidOptionError('messages', 'a non-empty array of { role, content }', messages);
  messages.forEach((m, i) => {
    if (typeof m !== 'object' || m === null || typeof m.role !== 'string' || typeof m.content !== 'string') {
      throw new InvalidOptionError(`messages[${i}]`, '{ role: string, content: string }', m);
    }
  });
}
