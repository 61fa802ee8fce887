/**
 * GET /events: the dashboard's feed, as server-sent events. The engine's streams are the sources
 * (engine.steps$() and engine.calibration$(), RxJS: a tier's steps and estimates as they come),
 * and the counters are read on a timer. The subscription ends when the client goes away.
 */
import type { FastifyReply, FastifyRequest } from 'fastify';
import { interval, map, merge, type Observable } from 'rxjs';
import type { Engine } from '../engine/engine.js';
import { decodeHitRate, type ServerMetrics } from './metrics.js';

interface LiveEvent {
  event: 'step' | 'calibration' | 'counters';
  data: unknown;
}

export function liveEvents(
  engine: Engine,
  metrics: ServerMetrics,
  model: string,
  everyMs: number,
  request: FastifyRequest,
  reply: FastifyReply,
): () => void {
  reply.hijack();
  const raw = reply.raw;
  raw.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', connection: 'keep-alive' });
  raw.write(`event: hello\ndata: ${JSON.stringify({ model })}\n\n`);
  const hasTier = engine.tuneSettings() !== undefined;
  const sources: Array<Observable<LiveEvent>> = [
    interval(everyMs).pipe(map(() => ({ event: 'counters' as const, data: counters(engine, metrics) }))),
  ];
  if (hasTier) {
    sources.push(engine.steps$().pipe(map((data) => ({ event: 'step' as const, data }))));
    sources.push(engine.calibration$().pipe(map((data) => ({ event: 'calibration' as const, data }))));
  }
  const subscription = merge(...sources).subscribe({
    next: (e) => {
      if (!raw.destroyed) raw.write(`event: ${e.event}\ndata: ${JSON.stringify(e.data)}\n\n`);
    },
    complete: () => raw.end(),
    error: () => raw.end(),
  });
  request.raw.on('close', () => subscription.unsubscribe());
  raw.on('close', () => subscription.unsubscribe());
  return () => {
    subscription.unsubscribe();
    raw.end();
  };
}

function counters(engine: Engine, metrics: ServerMetrics): Record<string, unknown> {
  const stats = engine.lastStats;
  return {
    queueDepth: engine.queueDepth,
    active: engine.activeRequests,
    generatedTokens: metrics.generatedTokens,
    decodeHitRate: decodeHitRate(engine, stats),
    inflightBytes: engine.tierStats()?.gate?.inflightBytes ?? 0,
    tune: engine.tuneSettings() ?? null,
  };
}
