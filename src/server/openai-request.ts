/**
 * OpenAI request bodies (`/v1/chat/completions`, `/v1/completions`) to what the engine takes: the
 * prompt (chat: the messages through the model's chat template), the sampling options, `stop`, and
 * how to answer (stream, usage in the stream). Every field is checked; a bad one is a 400 that
 * names it. The sampling values themselves are checked again by the engine (validateSampling).
 */
import type { GenerateOptions } from '../engine/generate-options.js';
import { limits } from '../core/limits.js';
import { badRequest } from './api-error.js';

export interface CompletionRequest {
  /** Text (a completion's prompt or a rendered chat) or token ids. */
  prompt: string | number[];
  /** The chat's messages, for the caller to render; undefined for /v1/completions. */
  messages?: Array<{ role: string; content: string }>;
  options: GenerateOptions;
  stop: string[];
  stream: boolean;
  includeUsage: boolean;
}

/** Limits of a request body: stop strings (count, length) and messages. */
export const REQUEST_LIMITS = { stopStringsMax: 4, stopStringCharsMax: 256, messagesMax: 1024 } as const;

type Body = Record<string, unknown>;

export function parseChatRequest(body: unknown): CompletionRequest {
  const b = objectBody(body);
  const messages = b.messages;
  if (!Array.isArray(messages) || messages.length === 0 || messages.length > REQUEST_LIMITS.messagesMax) {
    throw badRequest(`messages: expected 1 to ${REQUEST_LIMITS.messagesMax} messages`, 'messages');
  }
  const checked = messages.map((m, i) => {
    if (typeof m !== 'object' || m === null) throw badRequest(`messages[${i}]: expected an object`, `messages[${i}]`);
    const { role, content } = m as Body;
    if (typeof role !== 'string' || role === '')
      throw badRequest(`messages[${i}].role: expected a string`, `messages[${i}].role`);
    return { role, content: contentText(content, i) };
  });
  return { ...common(b), prompt: '', messages: checked };
}

export function parseCompletionRequest(body: unknown): CompletionRequest {
  const b = objectBody(body);
  const p = b.prompt;
  const ids = Array.isArray(p) && p.length > 0 && p.every((x) => Number.isInteger(x));
  if (!(typeof p === 'string' && p.length > 0) && !ids) {
    throw badRequest('prompt: expected a non-empty string or an array of token ids', 'prompt');
  }
  return { ...common(b), prompt: p as string | number[] };
}

function objectBody(body: unknown): Body {
  if (typeof body !== 'object' || body === null || Array.isArray(body))
    throw badRequest('the body: expected a JSON object');
  return body as Body;
}

/** A message's content: a string, or OpenAI's parts of type "text" (joined). */
function contentText(content: unknown, i: number): string {
  if (typeof content === 'string') return content;
  if (
    Array.isArray(content) &&
    content.every(
      (c) => typeof c === 'object' && c !== null && (c as Body).type === 'text' && typeof (c as Body).text === 'string',
    )
  ) {
    return content.map((c) => (c as Body).text as string).join('');
  }
  throw badRequest(`messages[${i}].content: expected a string or text parts`, `messages[${i}].content`);
}

function common(b: Body): Omit<CompletionRequest, 'prompt' | 'messages'> {
  const options: GenerateOptions = {};
  const maxTokens = b.max_completion_tokens ?? b.max_tokens;
  if (maxTokens !== undefined && maxTokens !== null) {
    if (!Number.isInteger(maxTokens) || (maxTokens as number) < 1 || (maxTokens as number) > limits.maxTokensMax) {
      throw badRequest(`max_tokens: expected an integer in [1, ${limits.maxTokensMax}]`, 'max_tokens');
    }
    options.maxTokens = maxTokens as number;
  }
  const number = (key: string, set: (v: number) => void): void => {
    const v = b[key];
    if (v === undefined || v === null) return;
    if (typeof v !== 'number' || !Number.isFinite(v)) throw badRequest(`${key}: expected a number`, key);
    set(v);
  };
  number('temperature', (v) => (options.temperature = v));
  number('top_p', (v) => (options.topP = v));
  number('top_k', (v) => (options.topK = v));
  number('seed', (v) => (options.seed = v));
  const stream = b.stream ?? false;
  if (typeof stream !== 'boolean') throw badRequest('stream: expected true or false', 'stream');
  const so = b.stream_options;
  if (so !== undefined && so !== null && (typeof so !== 'object' || Array.isArray(so)))
    throw badRequest('stream_options: expected an object', 'stream_options');
  const includeUsage = (so as Body | undefined)?.include_usage ?? false;
  if (typeof includeUsage !== 'boolean')
    throw badRequest('stream_options.include_usage: expected true or false', 'stream_options.include_usage');
  return { options, stop: stopStrings(b.stop), stream, includeUsage };
}

function stopStrings(v: unknown): string[] {
  if (v === undefined || v === null) return [];
  const list = typeof v === 'string' ? [v] : v;
  const ok =
    Array.isArray(list) &&
    list.length <= REQUEST_LIMITS.stopStringsMax &&
    list.every((s) => typeof s === 'string' && s.length > 0 && s.length <= REQUEST_LIMITS.stopStringCharsMax);
  if (!ok) {
    throw badRequest(
      `stop: expected a string or up to ${REQUEST_LIMITS.stopStringsMax} non-empty strings of at most ${REQUEST_LIMITS.stopStringCharsMax} characters`,
      'stop',
    );
  }
  return list as string[];
}
