/**
 * Operating errors: typed, with a stable `code`, and a message that says what to do.
 * Bugs are not errors of this kind: they fail an `assert` (see assert.ts).
 */
export class MoetierError extends Error {
  readonly code: string;
  constructor(code: string, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.code = code;
    this.name = new.target.name;
  }
}

/** Longest `where` / `expected` text an error quotes from a file (a corrupt length can make a key name 30 KB). */
export const QUOTED_CHARS_MAX = 240;

/**
 * Text read from a file, made safe to print: control characters (C0, DEL, C1, the line and
 * paragraph separators, bidi overrides) shown as \xNN or \u{N}, so a file cannot write terminal
 * escapes to the user's screen, and cut at `max` characters with a count of what was left out.
 */
export function printable(text: string, max = QUOTED_CHARS_MAX): string {
  const chars = Array.from(text);
  const shown = chars.slice(0, max).map((c) => {
    const cp = c.codePointAt(0)!;
    if (cp < 0x20 || (cp >= 0x7f && cp < 0xa0)) return `\\x${cp.toString(16).padStart(2, '0')}`;
    if (cp === 0x2028 || cp === 0x2029 || (cp >= 0x202a && cp <= 0x202e) || (cp >= 0x2066 && cp <= 0x2069))
      return `\\u{${cp.toString(16)}}`;
    return c;
  });
  return chars.length > max ? `${shown.join('')}... (${chars.length - max} more characters)` : shown.join('');
}

/** A file moetier reads (heat file, route trace, ...) that is corrupt or inconsistent. */
export class FileFormatError extends MoetierError {
  readonly file: string;
  readonly where: string;
  constructor(file: string, where: string, expected: string, options?: { cause?: unknown; code?: string }) {
    super(
      options?.code ?? 'E_FILE_FORMAT',
      `${printable(file, 4 * QUOTED_CHARS_MAX)}: ${printable(where)}: expected ${printable(expected, 2 * QUOTED_CHARS_MAX)}`,
      options,
    );
    this.file = file;
    this.where = where;
  }
}

/** A model file that is not a valid GGUF v3 file (truncated, corrupt, inconsistent). */
export class GgufFormatError extends FileFormatError {
  constructor(file: string, where: string, expected: string, options?: { cause?: unknown }) {
    super(file, where, expected, { ...options, code: 'E_GGUF_FORMAT' });
  }
}

/** A valid GGUF file whose architecture, tensor type or metadata moetier does not support. */
export class UnsupportedModelError extends MoetierError {
  readonly file: string;
  readonly where: string;
  constructor(file: string, where: string, expected: string) {
    super(
      'E_UNSUPPORTED_MODEL',
      `${printable(file, 4 * QUOTED_CHARS_MAX)}: ${printable(where)}: expected ${printable(expected, 2 * QUOTED_CHARS_MAX)}`,
    );
    this.file = file;
    this.where = where;
  }
}

/** A bad option passed to the API or the CLI; nothing was changed. */
export class InvalidOptionError extends MoetierError {
  readonly option: string;
  /** Kept so that a front end can say the same under its own name for the option (the CLI's flag). */
  readonly expected: string;
  readonly got: unknown;
  constructor(option: string, expected: string, got: unknown, options?: { cause?: unknown }) {
    super('E_INVALID_OPTION', `option ${option}: expected ${expected}, got ${describe(got)}`, options);
    this.option = option;
    this.expected = expected;
    this.got = got;
  }
}

/** Layers, experts per layer and experts routed per token (top-k) of a model or a route trace. */
export interface RouteShape {
  layers: number;
  experts: number;
  topK: number;
}

/**
 * A route trace given to drive the engine (routesFrom, `--routes-from`) whose shape is not the
 * model's: other layers, experts or top-k. Refused when the engine opens, before anything runs.
 * An InvalidOptionError of option `routesFrom` (the CLI names its flag and exits 2). A headerless
 * trace (../shared/traces/) does not say its expert count: `trace.experts` is then its largest id + 1.
 */
export class RouteTraceMismatchError extends InvalidOptionError {
  readonly file: string;
  readonly trace: RouteShape;
  readonly model: RouteShape;
  constructor(file: string, trace: RouteShape, model: RouteShape, headerless = false) {
    const experts = headerless ? `expert ids up to ${trace.experts - 1}` : `${trace.experts} experts`;
    super(
      'routesFrom',
      `a route trace of the model's shape (${model.layers} layers x ${model.experts} experts, top-${model.topK})`,
      `${printable(file)}: ${trace.layers} layers x ${experts}, top-${trace.topK}`,
    );
    this.file = file;
    this.trace = trace;
    this.model = model;
  }
}

/** A failure inside the native addon (allocation, mapping, I/O). */
export class NativeError extends MoetierError {
  constructor(message: string, options?: { cause?: unknown }) {
    super('E_NATIVE', message, options);
  }
}

/** A NaN or inf logit: the weights or activations overflowed, so no token can be sampled (greedy gave token 0 for ever). */
export class NonFiniteLogitsError extends MoetierError {
  /** The position of the first token of the eval that produced them (the request's step). */
  readonly position: number;
  constructor(message: string, position: number, options?: { cause?: unknown }) {
    super('E_NONFINITE_LOGITS', `${message} (the eval from position ${position})`, options);
    this.position = position;
  }
}

/**
 * An expert's read from the model file failed or came back short (the disk tier reads experts on
 * demand): the request fails with it; the slot it was read into is freed and the engine stays
 * usable. The native message names the file, layer, expert, offset and the system's reason.
 */
export class ExpertReadError extends MoetierError {
  readonly file: string;
  readonly layer: number;
  readonly expert: number;
  /** The file offset of the read that failed. */
  readonly offset: number;
  constructor(
    message: string,
    where: { file: string; layer: number; expert: number; offset: number },
    options?: { cause?: unknown },
  ) {
    super('E_EXPERT_READ', message, options);
    this.file = where.file;
    this.layer = where.layer;
    this.expert = where.expert;
    this.offset = where.offset;
  }
}

/**
 * A resident expert could not be computed on the device (the cuda backends' run_expert: a failed
 * copy of its rows, a kernel launch or the device itself). The request fails; the layer's leases
 * were released, and on a device whose errors are sticky (CUDA's) later requests fail the same way.
 */
export class DeviceComputeError extends MoetierError {
  readonly layer: number;
  /** The backend slot the expert was resident in: the first of the failed call's. */
  readonly slot: number;
  /** Every slot whose run was in the failed device call (a layer's residents run in one call). */
  readonly slots: readonly number[];
  constructor(
    message: string,
    where: { layer: number; slot: number; slots?: readonly number[] },
    options?: { cause?: unknown },
  ) {
    super('E_DEVICE_COMPUTE', message, options);
    this.layer = where.layer;
    this.slot = where.slot;
    this.slots = where.slots ?? [where.slot];
  }
}

/** The model file was replaced or truncated under a running engine; its mapping can no longer be trusted. */
export class ModelFileChangedError extends MoetierError {
  readonly file: string;
  constructor(file: string, what: string, options?: { cause?: unknown }) {
    super(
      'E_MODEL_FILE_CHANGED',
      `${file}: the model file changed under the running engine (${what}); reopen the engine on the file as it is now`,
      options,
    );
    this.file = file;
  }
}

/** A named limit was reached (context length, queue depth, ...). */
export class LimitExceededError extends MoetierError {
  readonly limit: string;
  constructor(limit: string, value: number, max: number) {
    super('E_LIMIT', `limit ${limit} exceeded: ${value} > ${max}`);
    this.limit = limit;
  }
}

/**
 * A conversation's turn that would not fit in the engine's KV cache: the tokens already cached, the
 * tokens the turn evaluates and its maxTokens together pass contextTokens (one position stays for the
 * turn's last token, sampled but evaluated only by the next turn). Refused before any eval; nothing
 * changed, so a shorter maxTokens or prompt may still fit.
 */
export class ContextFullError extends MoetierError {
  readonly limit = 'contextTokens';
  readonly cachedTokens: number;
  readonly newTokens: number;
  readonly maxTokens: number;
  readonly contextTokens: number;
  constructor(cachedTokens: number, newTokens: number, maxTokens: number, contextTokens: number) {
    super(
      'E_CONTEXT_FULL',
      `context full: ${cachedTokens} cached + ${newTokens} new tokens + maxTokens ${maxTokens} = ${cachedTokens + newTokens + maxTokens} > contextTokens ${contextTokens}; ` +
        'ask for fewer tokens, start a new conversation with a shorter history, or open the engine with a larger contextTokens',
    );
    this.cachedTokens = cachedTokens;
    this.newTokens = newTokens;
    this.maxTokens = maxTokens;
    this.contextTokens = contextTokens;
  }
}

/**
 * The engine has one KV cache: another request ran on it since this conversation's last turn and
 * overwrote the conversation's cached tokens. The turn was refused before any eval; the history
 * stays readable (conversation.tokens), to start a new conversation with, or the conversation can be
 * opened with { onEvicted: 'replay' } to evaluate it again from position 0.
 */
export class ConversationEvictedError extends MoetierError {
  /** Cached positions the conversation had, now overwritten. */
  readonly lostTokens: number;
  /** Requests that ran on the engine since the conversation's last turn, and what the last one was. */
  readonly requestsSince: number;
  readonly lastRequest: string;
  constructor(lostTokens: number, requestsSince: number, lastRequest: string) {
    super(
      'E_CONVERSATION_EVICTED',
      `conversation evicted: ${requestsSince} other request${requestsSince === 1 ? '' : 's'} (the last: ${lastRequest}) ran on the engine's one KV cache since this ` +
        `conversation's last turn and overwrote its ${lostTokens} cached tokens; its history stays in conversation.tokens: start a new conversation with ` +
        "those ids, or open the conversation with { onEvicted: 'replay' } to evaluate the history again",
    );
    this.lostTokens = lostTokens;
    this.requestsSince = requestsSince;
    this.lastRequest = lastRequest;
  }
}

/** Why a device backend has no usable device (native/include/mt_backend_cuda.h's mt_cuda_unavailable). */
export type DeviceUnavailableReason = 'not-built' | 'load-failed' | 'no-driver' | 'no-device';

/**
 * A CUDA backend was asked for but cannot run here: the kernels library was not built (no nvcc at
 * build time), it failed to load, the driver is missing or too old, or there is no device. The
 * message names what is missing; nothing was created.
 */
export class DeviceUnavailableError extends MoetierError {
  readonly reason: DeviceUnavailableReason;
  constructor(reason: DeviceUnavailableReason, message: string, options?: { cause?: unknown }) {
    super('E_DEVICE_UNAVAILABLE', message, options);
    this.reason = reason;
  }
}

/** The request was cancelled through its AbortSignal. */
export class RequestAbortedError extends MoetierError {
  constructor() {
    super('E_ABORTED', 'request aborted');
  }
}

/**
 * Telemetry was asked for (an OTEL_* exporter, a trace file) but the OpenTelemetry SDK, an
 * optional peer dependency, is not installed; the message names the packages to install.
 */
export class TelemetryUnavailableError extends MoetierError {
  readonly missing: string;
  constructor(askedBy: string, missing: string, packages: readonly string[], options?: { cause?: unknown }) {
    super(
      'E_TELEMETRY_UNAVAILABLE',
      `${askedBy} needs the OpenTelemetry SDK, which is not installed (${missing} not found): npm install ${packages.join(' ')}`,
      options,
    );
    this.missing = missing;
  }
}

/** A file that would not fit in the free space of its filesystem: refused before anything is written. */
export class DiskSpaceError extends MoetierError {
  readonly path: string;
  readonly bytesNeeded: number;
  readonly bytesFree: number;
  constructor(path: string, bytesNeeded: number, bytesFree: number) {
    const gb = (n: number): string => `${(n / 1e9).toFixed(2)} GB`;
    super(
      'E_DISK_SPACE',
      `${path}: needs ${bytesNeeded} bytes (${gb(bytesNeeded)}) of disk space, ${bytesFree} bytes (${gb(bytesFree)}) are free there; free some space or write it elsewhere`,
    );
    this.path = path;
    this.bytesNeeded = bytesNeeded;
    this.bytesFree = bytesFree;
  }
}

function describe(value: unknown): string {
  if (typeof value === 'string') return JSON.stringify(value);
  if (typeof value === 'number' || typeof value === 'boolean' || value == null) return String(value);
  try {
    return JSON.stringify(value).slice(0, 80);
  } catch {
    return typeof value;
  }
}
