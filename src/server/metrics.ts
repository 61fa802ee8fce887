/**
 * The server's Prometheus metrics through prom-client (a registry of its own, text format on
 * GET /metrics): requests by route and status, tokens, TTFT and time per token, the engine's queue
 * and running requests, and with a tier its hit rate, reads per token and the one gate's bytes in
 * flight, read from the engine when scraped.
 */
import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { Engine } from '../engine/engine.js';
import type { GenerationStats } from '../engine/stats.js';

export class ServerMetrics {
  readonly registry = new Registry();
  private readonly requests = new Counter({
    name: 'moetier_requests_total',
    help: 'HTTP requests answered, by route and status',
    labelNames: ['route', 'status'],
    registers: [this.registry],
  });
  private readonly tokens = new Counter({
    name: 'moetier_tokens_total',
    help: 'tokens evaluated (prompt) and generated (completion)',
    labelNames: ['kind'],
    registers: [this.registry],
  });
  private readonly ttft = new Histogram({
    name: 'moetier_ttft_seconds',
    help: 'time to the first token, queue wait included',
    buckets: [0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30],
    registers: [this.registry],
  });
  private readonly perToken = new Histogram({
    name: 'moetier_time_per_token_seconds',
    help: 'decode time per generated token',
    buckets: [0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 1],
    registers: [this.registry],
  });
  private readonly hitRate = new Gauge({
    name: 'moetier_decode_hit_rate',
    help: 'resident hits / routed pairs of the last request with a tier (batching: of the busy period so far)',
    registers: [this.registry],
  });
  running = 0;
  /** Tokens generated since the server started, counted as they come (the dashboard's rate). */
  generatedTokens = 0;

  constructor(private readonly engine: Engine) {
    const registry = this.registry;
    new Gauge({
      name: 'moetier_queue_depth',
      help: 'requests waiting behind the running one',
      registers: [registry],
      collect() {
        this.set(engine.queueDepth);
      },
    });
    const self = this;
    new Gauge({
      name: 'moetier_active_sequences',
      help: 'sequences the engine is generating now (each request runs on one)',
      registers: [registry],
      collect() {
        this.set(engine.activeRequests);
      },
    });
    new Gauge({
      name: 'moetier_http_requests_in_flight',
      help: 'completion requests the server is answering now, queued ones included',
      registers: [registry],
      collect() {
        this.set(self.running);
      },
    });
    new Gauge({
      name: 'moetier_inflight_bytes',
      help: 'bytes in flight under the tier gate (0 without a tier)',
      registers: [registry],
      collect() {
        this.set(engine.tierStats()?.gate?.inflightBytes ?? 0);
      },
    });
  }

  request(route: string, status: number): void {
    this.requests.inc({ route, status: String(status) });
  }

  finished(stats: GenerationStats | undefined): void {
    if (!stats) return;
    this.tokens.inc({ kind: 'prompt' }, stats.promptTokens);
    this.tokens.inc({ kind: 'completion' }, stats.generatedTokens);
    if (stats.generatedTokens > 0) this.ttft.observe(stats.ttftMs / 1000);
    if (Number.isFinite(stats.msPerToken) && stats.msPerToken > 0) this.perToken.observe(stats.msPerToken / 1000);
    const hitRate = decodeHitRate(this.engine, stats);
    if (hitRate !== null) this.hitRate.set(hitRate);
  }
}

/**
 * The tier's decode hit rate: the request's own (one request at a time), else the tier's counters
 * (a batching engine's requests share the steps: its hits count over the busy period); null without a tier.
 */
export function decodeHitRate(engine: Engine, stats: GenerationStats | undefined): number | null {
  if (stats?.decodeHitRate !== undefined && Number.isFinite(stats.decodeHitRate)) return stats.decodeHitRate;
  const tier = engine.tierStats();
  return tier && tier.hits + tier.misses > 0 ? tier.hits / (tier.hits + tier.misses) : null;
}
