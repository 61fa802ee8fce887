/**
 * moetier's HTTP server (src/server/app.ts), on a real socket with real clients (fetch): the
 * OpenAI routes streaming and not, stop strings across token boundaries, errors in OpenAI's shape
 * with their statuses (400, 404, 413, 429 with Retry-After), a client that disconnects cancelling
 * its request, the token-guarded tune routes, health and Prometheus metrics.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openEngine, type Engine } from '../../src/engine/engine.js';
import { createServer, type MoetierServer } from '../../src/server/app.js';
import { tempDir, tinyModel } from '../engine/tier-helpers.js';

const { dir, cleanup } = tempDir('moetier-serve-');
let engine: Engine;
let server: MoetierServer;
let base: string;
let model: string;
const prompt = 'The tide came in over the old harbour wall and';

beforeAll(async () => {
  model = await tinyModel(dir, 'q8_0', 11);
  engine = await openEngine({
    model,
    threads: 1,
    contextTokens: 96,
    slotsPerLayer: 4,
    heat: false,
    requestQueueDepthMax: 1,
  });
  server = createServer(engine, { adminToken: 'sesame' });
  base = await server.app.listen({ host: '127.0.0.1', port: 0 });
}, 120_000);
afterAll(async () => {
  await server?.shutdown(1000);
  await engine?.close();
  cleanup();
});

const post = (route: string, body: unknown, headers: Record<string, string> = {}) =>
  fetch(`${base}${route}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify(body),
  });

/** The text the engine generates for `prompt` alone (greedy), without the server. */
async function reference(n: number): Promise<string> {
  let text = '';
  for await (const t of engine.generate(prompt, { maxTokens: n, stopAtEos: false })) text += t.text;
  return text;
}

async function until(test: () => boolean, ms = 5000): Promise<void> {
  const end = Date.now() + ms;
  while (!test()) {
    if (Date.now() > end) throw new Error('timed out waiting');
    await new Promise((r) => setTimeout(r, 5));
  }
}

/** The SSE events of a streamed response, parsed ([DONE] as the string). */
async function events(res: Response): Promise<unknown[]> {
  const body = await res.text();
  return body
    .split('\n\n')
    .filter((e) => e.startsWith('data: '))
    .map((e) => e.slice(6))
    .map((d) => (d === '[DONE]' ? d : JSON.parse(d)));
}

describe('moetier serve', () => {
  it('answers /health and /v1/models', async () => {
    expect(await (await fetch(`${base}/health`)).json()).toEqual({ status: 'ready' });
    const models = (await (await fetch(`${base}/v1/models`)).json()) as { data: Array<{ id: string }> };
    expect(models.data[0].id).toContain('tiny-q8_0-11');
  });

  it('completes a prompt, whole and streamed, with the tokens the engine gives alone', async () => {
    const expected = await reference(12);
    const res = await post('/v1/completions', { prompt, max_tokens: 12, temperature: 0 });
    expect(res.status).toBe(200);
    const whole = (await res.json()) as {
      choices: Array<{ text: string; finish_reason: string }>;
      usage: { completion_tokens: number; prompt_tokens: number };
    };
    expect(whole.choices[0].text).toBe(expected);
    expect(whole.usage.completion_tokens).toBe(12);
    expect(whole.usage.prompt_tokens).toBe(engine.tokenize(prompt).length);
    const streamed = await post('/v1/completions', {
      prompt,
      max_tokens: 12,
      stream: true,
      stream_options: { include_usage: true },
    });
    expect(streamed.headers.get('content-type')).toContain('text/event-stream');
    const ev = await events(streamed);
    expect(ev.at(-1)).toBe('[DONE]');
    const chunks = ev.filter(
      (e): e is { choices: Array<{ text: string }> } =>
        typeof e === 'object' && (e as { choices: unknown[] }).choices.length > 0,
    );
    expect(chunks.map((c) => c.choices[0].text).join('')).toBe(expected);
    expect((ev.at(-2) as { usage: { completion_tokens: number } }).usage.completion_tokens).toBe(12);
  });

  it("renders a chat through the model's template and streams deltas", async () => {
    const res = await post('/v1/chat/completions', {
      messages: [{ role: 'user', content: 'hello' }],
      max_tokens: 6,
      stream: true,
    });
    const ev = (await events(res)).filter((e) => e !== '[DONE]') as Array<{
      object: string;
      choices: Array<{ delta: { role?: string; content?: string }; finish_reason: string | null }>;
    }>;
    expect(ev[0].object).toBe('chat.completion.chunk');
    expect(ev[0].choices[0].delta.role).toBe('assistant');
    expect(ev.at(-1)!.choices[0].finish_reason).toMatch(/stop|length/);
    const whole = (await (
      await post('/v1/chat/completions', { messages: [{ role: 'user', content: 'hello' }], max_tokens: 6 })
    ).json()) as { choices: Array<{ message: { content: string } }> };
    expect(ev.map((e) => e.choices[0].delta.content ?? '').join('')).toBe(whole.choices[0].message.content);
  });

  it('stops at a stop string that spans tokens, and never sends a part of it', async () => {
    const expected = await reference(16);
    // A stop string from the middle of the text, across at least two tokens' texts.
    const at = Math.floor(expected.length / 2);
    const stop = expected.slice(at, at + 5);
    const cut = expected.indexOf(stop);
    const res = (await (await post('/v1/completions', { prompt, max_tokens: 16, stop: [stop] })).json()) as {
      choices: Array<{ text: string; finish_reason: string }>;
    };
    expect(res.choices[0].text).toBe(expected.slice(0, cut));
    expect(res.choices[0].finish_reason).toBe('stop');
    const streamed = (
      await events(await post('/v1/completions', { prompt, max_tokens: 16, stop, stream: true }))
    ).filter((e) => e !== '[DONE]') as Array<{ choices: Array<{ text: string }> }>;
    expect(streamed.map((c) => c.choices[0].text).join('')).toBe(expected.slice(0, cut));
  });

  it("answers errors in OpenAI's shape with their statuses", async () => {
    const bad = await post('/v1/completions', { prompt, max_tokens: -1 });
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as { error: { param: string; type: string } }).error).toMatchObject({
      param: 'max_tokens',
      type: 'invalid_request_error',
    });
    expect((await post('/v1/completions', { prompt, temperature: 'hot' })).status).toBe(400);
    expect(
      (
        await fetch(`${base}/v1/completions`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: '{not json',
        })
      ).status,
    ).toBe(400);
    expect((await fetch(`${base}/v1/nothing`)).status).toBe(404);
    const long = await post('/v1/completions', { prompt: new Array(200).fill(1) });
    expect(long.status).toBe(413);
    expect(((await long.json()) as { error: { code: string } }).error.code).toBe('context_length_exceeded');
  });

  it('answers 429 with Retry-After when the queue is full; a queued client that leaves is out of the queue at once', async () => {
    // The engine is held by a request of the test's own (its iterator paused after the first token).
    const held = engine.generate(prompt, { maxTokens: 50, stopAtEos: false })[Symbol.asyncIterator]();
    await held.next();
    const leaving = new AbortController();
    const waiting = fetch(`${base}/v1/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ prompt, max_tokens: 4 }),
      signal: leaving.signal,
    });
    await until(() => engine.queueDepth === 1);
    const refused = await post('/v1/completions', { prompt, max_tokens: 4 });
    expect(refused.status).toBe(429);
    expect(refused.headers.get('retry-after')).toBe('1');
    expect(((await refused.json()) as { error: { code: string } }).error.code).toBe('queue_full');
    // The waiting client goes away: its request leaves the queue while the engine is still held.
    leaving.abort();
    await waiting.catch(() => undefined);
    await until(() => engine.queueDepth === 0, 1000);
    const next = post('/v1/completions', { prompt, max_tokens: 4 });
    await until(() => engine.queueDepth === 1);
    await held.return?.(undefined);
    expect((await next).status).toBe(200);
    expect(engine.queueDepth).toBe(0);
  });

  it('guards the tune routes with the admin token, returns the settings and refuses a bad value unchanged', async () => {
    expect((await fetch(`${base}/admin/tune`)).status).toBe(401);
    expect((await fetch(`${base}/admin/tune`, { headers: { authorization: 'Bearer wrong' } })).status).toBe(401);
    const auth = { authorization: 'Bearer sesame' };
    const before = (await (await fetch(`${base}/admin/tune`, { headers: auth })).json()) as {
      uploadInflightTransfersMax: number;
      residentSlotsPerLayer: number;
    };
    expect(before.residentSlotsPerLayer).toBe(4);
    const bad = await post('/admin/tune', { uploadInflightTransfersMax: -2 }, auth);
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as { error: { message: string } }).error.message).toMatch(
      /uploadInflightTransfersMax|upload.inflightTransfersMax/,
    );
    const good = (await (await post('/admin/tune', { uploadInflightTransfersMax: 3 }, auth)).json()) as {
      uploadInflightTransfersMax: number;
    };
    expect(good.uploadInflightTransfersMax).toBe(3);
  });

  it('exposes Prometheus metrics', async () => {
    const text = await (await fetch(`${base}/metrics`)).text();
    expect(text).toMatch(/moetier_requests_total\{route="\/v1\/completions",status="200"\} [1-9]/);
    expect(text).toMatch(/moetier_tokens_total\{kind="completion"\} [1-9]/);
    expect(text).toContain('moetier_ttft_seconds_bucket');
    expect(text).toMatch(/moetier_queue_depth 0/);
  });
});
