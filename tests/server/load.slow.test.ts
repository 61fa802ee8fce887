/**
 * Load and faults on the server (loopback only, bounded): 32 clients, 320 requests of mixed
 * lengths, streamed and not, on an engine batching 8 sequences; a share cancelled mid-stream, a share aborted while queued, a share
 * malformed. Every request ends in a complete answer, a clear error, or the client's own abort;
 * afterwards nothing is left running or queued, the server answers at once, and the process
 * grew by a bounded amount.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openEngine, type Engine } from '../../src/engine/engine.js';
import { createServer, type MoetierServer } from '../../src/server/app.js';
import { mulberry32 } from '../../src/core/prng.js';
import { tempDir, tinyModel } from '../engine/tier-helpers.js';

const { dir, cleanup } = tempDir('moetier-serve-load-');
let engine: Engine;
let server: MoetierServer;
let base: string;

beforeAll(async () => {
  const model = await tinyModel(dir, 'q8_0', 13);
  engine = await openEngine({
    model,
    threads: 1,
    contextTokens: 128,
    slotsPerLayer: 4,
    heat: false,
    parallel: 8,
    batchTokensMax: 64,
    requestQueueDepthMax: 64,
  });
  server = createServer(engine);
  base = await server.app.listen({ host: '127.0.0.1', port: 0 });
}, 120_000);
afterAll(async () => {
  await server?.shutdown(1000);
  await engine?.close();
  cleanup();
});

type Outcome = 'complete' | 'bad-request' | 'aborted' | 'other';

async function oneRequest(rng: () => number): Promise<{ kind: string; outcome: Outcome; detail?: string }> {
  const r = rng();
  const stream = rng() < 0.5;
  const maxTokens = 1 + Math.floor(rng() * 40);
  const controller = new AbortController();
  const kind = r < 0.1 ? 'malformed' : r < 0.25 ? 'cancel-mid-stream' : r < 0.35 ? 'abort-queued' : 'plain';
  const body =
    kind === 'malformed'
      ? rng() < 0.5
        ? '{"prompt": '
        : JSON.stringify({ prompt: 'x', max_tokens: 'many' })
      : JSON.stringify({
          prompt: 'the ship will sail across the sea',
          max_tokens: maxTokens,
          stream: stream || kind === 'cancel-mid-stream',
        });
  if (kind === 'abort-queued') setTimeout(() => controller.abort(), Math.floor(rng() * 20));
  try {
    const res = await fetch(`${base}/v1/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body,
      signal: controller.signal,
    });
    if (kind === 'malformed') {
      const err = (await res.json()) as { error?: { message?: string } };
      return {
        kind,
        outcome: res.status === 400 && typeof err.error?.message === 'string' ? 'bad-request' : 'other',
        detail: String(res.status),
      };
    }
    if (res.status !== 200) return { kind, outcome: 'other', detail: `${res.status} ${await res.text()}` };
    if (kind === 'cancel-mid-stream') {
      const reader = res.body!.getReader();
      await reader.read();
      controller.abort();
      await reader.cancel().catch(() => undefined);
      return { kind, outcome: 'aborted' };
    }
    const text = await res.text();
    const complete = stream
      ? text.trimEnd().endsWith('data: [DONE]')
      : Array.isArray((JSON.parse(text) as { choices?: unknown[] }).choices);
    return { kind, outcome: complete ? 'complete' : 'other', detail: text.slice(-200) };
  } catch (err) {
    return { kind, outcome: controller.signal.aborted ? 'aborted' : 'other', detail: String(err) };
  }
}

describe('the server under load and faults', () => {
  it('ends every request cleanly and leaks nothing', async () => {
    const rssBefore = process.memoryUsage().rss;
    const clients = 32,
      perClient = 10;
    const results = await Promise.all(
      Array.from({ length: clients }, async (_, c) => {
        const rng = mulberry32(1000 + c);
        const out = [];
        for (let i = 0; i < perClient; i++) out.push(await oneRequest(rng));
        return out;
      }),
    );
    const all = results.flat();
    const bad = all.filter((r) => r.outcome === 'other');
    expect(bad, JSON.stringify(bad.slice(0, 3))).toEqual([]);
    expect(all).toHaveLength(clients * perClient);
    expect(all.filter((r) => r.kind === 'malformed').every((r) => r.outcome === 'bad-request')).toBe(true);
    expect(all.filter((r) => r.outcome === 'complete').length).toBeGreaterThan(100);
    // Nothing left behind: the queue empty, nothing running, the server answers at once.
    const settle = Date.now() + 5000;
    while ((engine.queueDepth > 0 || server.metrics.running > 0 || engine.activeRequests > 0) && Date.now() < settle)
      await new Promise((r) => setTimeout(r, 10));
    expect(engine.queueDepth).toBe(0);
    expect(server.metrics.running).toBe(0);
    expect(engine.activeRequests).toBe(0); // no sequence leaked
    const t0 = performance.now();
    expect((await fetch(`${base}/health`)).status).toBe(200);
    expect(performance.now() - t0).toBeLessThan(1000);
    const again = (await (
      await fetch(`${base}/v1/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ prompt: 'red', max_tokens: 3 }),
      })
    ).json()) as { usage: { completion_tokens: number } };
    expect(again.usage.completion_tokens).toBe(3);
    expect(engine.tierStats()!.leases).toBe(0);
    expect(process.memoryUsage().rss - rssBefore).toBeLessThan(256 * 2 ** 20);
  }, 180_000);
});
