/**
 * moetier's HTTP server (Fastify): OpenAI's routes over one engine, health, Prometheus metrics,
 * and the token-guarded tune routes.
 *
 *   POST /v1/chat/completions   the messages through the model's chat template; SSE with stream
 *   POST /v1/completions        a text prompt or token ids
 *   GET  /v1/models             the one model served
 *   GET  /health                200 { status: 'ready' } (503 'shutting down' while closing)
 *   GET  /metrics               Prometheus text (metrics.ts)
 *   GET  /dashboard             the live page (dashboard-page.ts), fed by
 *   GET  /events                SSE: `step` (engine.steps$()), `calibration` (engine.calibration$()),
 *                               `counters` every countersIntervalMs (queue, active, tokens, hit rate, gate, tune)
 *   GET  /admin/tune            the tier's settings now (engine.tuneSettings())
 *   POST /admin/tune            engine.tune(body): a bad value changes nothing and says why (400)
 *
 * The admin routes answer only a request with `Authorization: Bearer <adminToken>`; without an
 * admin token they do not exist (404). Errors are OpenAI's JSON (api-error.ts). Requests run one at
 * a time in the engine's bounded queue (429 with Retry-After when it is full).
 */
import { randomUUID } from 'node:crypto';
import path from 'node:path';
import Fastify, { type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify';
import type { Engine } from '../engine/engine.js';
import { ApiError, apiErrorOf } from './api-error.js';
import { startCompletion, type CompletionEnd } from './completion.js';
import { ServerMetrics } from './metrics.js';
import { DASHBOARD_HTML } from './dashboard-page.js';
import { liveEvents } from './live-events.js';
import { parseChatRequest, parseCompletionRequest, type CompletionRequest } from './openai-request.js';

export interface ServerOptions {
  /** The bearer token of the admin routes; undefined: no admin routes. */
  adminToken?: string;
  /** The name /v1/models lists and responses carry (default: the model file's name). */
  modelName?: string;
  /** Largest request body, bytes (default 1 MiB). */
  bodyLimitBytes?: number;
  /** How often /events sends its counters (default 500 ms). */
  countersIntervalMs?: number;
}

export interface MoetierServer {
  app: FastifyInstance;
  metrics: ServerMetrics;
  /** Stop accepting (503), wait for running requests up to graceMs, then close the listener. */
  shutdown(graceMs: number): Promise<void>;
}

type Kind = 'chat' | 'text';

export function createServer(engine: Engine, options: ServerOptions = {}): MoetierServer {
  const app = Fastify({ bodyLimit: options.bodyLimitBytes ?? 1 << 20 });
  const metrics = new ServerMetrics(engine);
  const model = options.modelName ?? path.basename(engine.modelPath).replace(/\.gguf$/, '');
  let closing = false;
  /** The open /events feeds: each one's end. */
  const feeds = new Set<() => void>();
  const running = new Set<Promise<unknown>>();

  app.setErrorHandler((err, request, reply) => {
    // Fastify's own (a body that is not JSON, too large): 4xx as OpenAI's shape.
    const status = (err as { statusCode?: number }).statusCode;
    const api =
      status && status < 500 ? new ApiError(status, (err as Error).message, 'invalid_request_error') : apiErrorOf(err);
    void sendError(reply, api, routeOf(request), metrics);
  });
  app.setNotFoundHandler(
    (request, reply) =>
      void sendError(
        reply,
        new ApiError(404, `no route ${request.method} ${request.url}`, 'invalid_request_error', null, 'not_found'),
        'other',
        metrics,
      ),
  );

  app.get('/health', async (_req, reply) => {
    if (closing) return reply.code(503).send({ status: 'shutting down' });
    return { status: 'ready' };
  });
  app.get('/metrics', async (_req, reply) =>
    reply.type(metrics.registry.contentType).send(await metrics.registry.metrics()),
  );
  app.get('/dashboard', async (_req, reply) => reply.type('text/html; charset=utf-8').send(DASHBOARD_HTML));
  app.get('/events', async (request, reply) => {
    const end = liveEvents(engine, metrics, model, options.countersIntervalMs ?? 500, request, reply);
    feeds.add(end);
    reply.raw.on('close', () => feeds.delete(end));
  });
  app.get('/v1/models', async () => ({
    object: 'list',
    data: [{ id: model, object: 'model', created: 0, owned_by: 'moetier' }],
  }));

  const complete = (kind: Kind) => async (request: FastifyRequest, reply: FastifyReply) => {
    if (closing) throw new ApiError(503, 'the server is shutting down', 'server_error', null, 'shutting_down', 1);
    const req = kind === 'chat' ? parseChatRequest(request.body) : parseCompletionRequest(request.body);
    const work = answer(kind, req, request, reply);
    running.add(work);
    try {
      await work;
    } finally {
      running.delete(work);
    }
  };
  app.post('/v1/chat/completions', complete('chat'));
  app.post('/v1/completions', complete('text'));

  async function answer(
    kind: Kind,
    req: CompletionRequest,
    request: FastifyRequest,
    reply: FastifyReply,
  ): Promise<void> {
    const cancel = new AbortController();
    // A client that goes away cancels its request at once (queued: it leaves the queue).
    const onClose = (): void => {
      if (!reply.raw.writableEnded) cancel.abort();
    };
    reply.raw.on('close', onClose);
    const id = `${kind === 'chat' ? 'chatcmpl' : 'cmpl'}-${randomUUID()}`;
    const created = Math.floor(Date.now() / 1000);
    try {
      const completion = await startCompletion(engine, req, cancel.signal, () => metrics.generatedTokens++);
      metrics.running++;
      try {
        if (req.stream) await streamAnswer(kind, req, reply, completion.deltas, id, created);
        else await wholeAnswer(kind, reply, completion.deltas, id, created);
      } finally {
        metrics.running--;
      }
      metrics.request(routeOf(request), 200);
    } finally {
      reply.raw.off('close', onClose);
    }
  }

  async function wholeAnswer(
    kind: Kind,
    reply: FastifyReply,
    deltas: AsyncGenerator<string, CompletionEnd>,
    id: string,
    created: number,
  ): Promise<void> {
    let text = '';
    let step = await deltas.next();
    for (; !step.done; step = await deltas.next()) text += step.value;
    const end = step.value;
    metrics.finished(end.stats);
    const choice =
      kind === 'chat'
        ? { index: 0, message: { role: 'assistant', content: text }, finish_reason: end.finishReason }
        : { index: 0, text, finish_reason: end.finishReason };
    await reply.send({
      id,
      object: kind === 'chat' ? 'chat.completion' : 'text_completion',
      created,
      model,
      choices: [choice],
      usage: usageOf(end),
    });
  }

  async function streamAnswer(
    kind: Kind,
    req: CompletionRequest,
    reply: FastifyReply,
    deltas: AsyncGenerator<string, CompletionEnd>,
    id: string,
    created: number,
  ): Promise<void> {
    reply.hijack();
    const raw = reply.raw;
    raw.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', connection: 'keep-alive' });
    const object = kind === 'chat' ? 'chat.completion.chunk' : 'text_completion';
    // A slow client slows its request down (the socket's backpressure), instead of buffering its answer.
    const send = async (choices: unknown[], extra: Record<string, unknown> = {}): Promise<void> => {
      if (
        !raw.write(`data: ${JSON.stringify({ id, object, created, model, choices, ...extra })}\n\n`) &&
        !raw.destroyed
      ) {
        await new Promise((resolve) => {
          raw.once('drain', resolve);
          raw.once('close', resolve);
        });
      }
    };
    const piece = (text: string, finish: string | null) =>
      kind === 'chat'
        ? {
            index: 0,
            delta:
              text === '' && finish === null ? { role: 'assistant', content: '' } : finish ? {} : { content: text },
            finish_reason: finish,
          }
        : { index: 0, text, finish_reason: finish };
    try {
      if (kind === 'chat') await send([piece('', null)]);
      let step = await deltas.next();
      for (; !step.done; step = await deltas.next()) if (!raw.destroyed) await send([piece(step.value, null)]);
      const end = step.value;
      metrics.finished(end.stats);
      if (raw.destroyed) return;
      await send([piece('', end.finishReason)]);
      if (req.includeUsage) await send([], { usage: usageOf(end) });
      raw.write('data: [DONE]\n\n');
    } catch (err) {
      // Past the headers an error can only be told in the stream, then it ends.
      if (!raw.destroyed) raw.write(`data: ${JSON.stringify(apiErrorOf(err).body())}\n\n`);
    } finally {
      raw.end();
    }
  }

  if (options.adminToken !== undefined) {
    const token = options.adminToken;
    const guard = async (request: FastifyRequest): Promise<void> => {
      if (request.headers.authorization !== `Bearer ${token}`)
        throw new ApiError(
          401,
          'the admin routes need Authorization: Bearer <admin token>',
          'authentication_error',
          null,
          'unauthorized',
        );
    };
    app.get('/admin/tune', { preHandler: guard }, async () => engine.tuneSettings() ?? null);
    app.post('/admin/tune', { preHandler: guard }, async (request) => {
      engine.tune((request.body ?? {}) as Parameters<Engine['tune']>[0]);
      return engine.tuneSettings() ?? null;
    });
  }

  async function shutdown(graceMs: number): Promise<void> {
    closing = true;
    const grace = new Promise((r) => setTimeout(r, graceMs).unref());
    await Promise.race([Promise.allSettled([...running]), grace]);
    // The live feeds never end by themselves: end them, or the listener's close would wait on an open page.
    for (const end of feeds) end();
    await app.close();
  }

  return { app, metrics, shutdown };
}

function usageOf(end: CompletionEnd): { prompt_tokens: number; completion_tokens: number; total_tokens: number } {
  return {
    prompt_tokens: end.promptTokens,
    completion_tokens: end.completionTokens,
    total_tokens: end.promptTokens + end.completionTokens,
  };
}

function routeOf(request: FastifyRequest): string {
  return request.routeOptions?.url ?? 'other';
}

async function sendError(reply: FastifyReply, err: ApiError, route: string, metrics: ServerMetrics): Promise<void> {
  metrics.request(route, err.status);
  if (reply.sent || reply.raw.headersSent) return;
  if (err.retryAfterS !== undefined) void reply.header('retry-after', String(err.retryAfterS));
  await reply.code(err.status === 499 ? 400 : err.status).send(err.body());
}
