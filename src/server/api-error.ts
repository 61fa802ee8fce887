/**
 * Errors in OpenAI's JSON shape, `{ error: { message, type, param, code } }`, with the status
 * the library's typed error means: a bad option 400, a prompt past the context 413, a full queue
 * 429 (with Retry-After), shutting down 503, anything else 500.
 */
import {
  InvalidOptionError,
  LimitExceededError,
  MoetierError,
  RequestAbortedError,
  UnsupportedModelError,
} from '../core/errors.js';

export class ApiError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly type: string,
    readonly param: string | null = null,
    readonly code: string | null = null,
    /** Seconds, for 429 and 503. */
    readonly retryAfterS?: number,
  ) {
    super(message);
  }

  body(): { error: { message: string; type: string; param: string | null; code: string | null } } {
    return { error: { message: this.message, type: this.type, param: this.param, code: this.code } };
  }
}

export const badRequest = (message: string, param: string | null = null): ApiError =>
  new ApiError(400, message, 'invalid_request_error', param, 'invalid_request');

/** The library's typed errors (and anything else) as the response they mean. */
export function apiErrorOf(err: unknown): ApiError {
  if (err instanceof ApiError) return err;
  if (err instanceof InvalidOptionError) return badRequest(err.message, err.option);
  if (err instanceof LimitExceededError) {
    if (err.limit === 'contextTokens') {
      return new ApiError(413, err.message, 'invalid_request_error', 'messages', 'context_length_exceeded');
    }
    if (err.limit === 'requestQueueDepthMax') {
      return new ApiError(
        429,
        'the server is busy: its request queue is full; retry shortly',
        'rate_limit_error',
        null,
        'queue_full',
        1,
      );
    }
    return badRequest(err.message, err.limit);
  }
  // The model cannot serve this kind of request (a chat without a chat template).
  if (err instanceof UnsupportedModelError) return badRequest(err.message, 'messages');
  if (err instanceof RequestAbortedError)
    return new ApiError(499, 'the request was cancelled', 'cancelled', null, 'cancelled');
  const code = err instanceof MoetierError ? err.code : null;
  return new ApiError(500, (err as Error)?.message ?? String(err), 'server_error', null, code);
}
