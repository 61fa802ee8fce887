/**
 * moetier serve: the model behind an OpenAI-compatible HTTP server (src/server/app.ts), on
 * 127.0.0.1 unless told otherwise. Up to --parallel requests run together, batched into shared
 * steps (src/engine/batch). SIGTERM / SIGINT: stop accepting (503), let the running requests
 * finish within --grace-ms, then close the server and the engine (its heat file written whole).
 */
import { limits } from '../../core/limits.js';
import { openEngine } from '../../engine/engine.js';
import { createServer } from '../../server/app.js';
import { parseFlags, type FlagSpecs } from '../args.js';
import type { Command } from '../command.js';
import { memoryOptions, tierOptions } from './run.js';

/** Sequences a server runs together unless told otherwise (llama-server's default too). */
const serveParallelDefault = 4;

const usage = `usage: moetier serve -m F [--host H] [--port P] [--admin-token T] [options]

  -m, --model F           GGUF model file
  --host H                address to listen on (default 127.0.0.1)
  --port P                port (default 8080; 0: any free port, printed)
  --admin-token T         enables GET / POST /admin/tune for requests with Authorization: Bearer T
  --grace-ms N            on SIGTERM / SIGINT, how long running requests may finish (default 10000)
  -t, --threads N         compute threads (default 2)
  -c, --ctx N             context length in tokens of each sequence (default ${limits.contextTokensDefault})
  --parallel N            requests run together, batched into shared steps (default ${serveParallelDefault}, at most ${limits.parallelMax});
                          each has its own --ctx of KV cache
  --batch-tokens N        rows one batched step evaluates at most (default ${limits.batchTokensDefault}): decode rows
                          first, then chunks of new prompts
  --queue N               requests that may wait behind the running ones (default ${limits.requestQueueDepthDefault}); past it: 429
  --memory-budget SIZE|auto, --resident X, --slots-per-layer B, --backend K, --heat F|none, --prefetch M
                          the expert tier, as moetier run takes them

routes: POST /v1/chat/completions, POST /v1/completions (stream: SSE), GET /v1/models, GET /health,
GET /metrics (Prometheus), GET|POST /admin/tune (with --admin-token)`;

const flags: FlagSpecs = {
  model: { type: 'string', short: 'm' },
  host: { type: 'string' },
  port: { type: 'string' },
  'admin-token': { type: 'string' },
  'grace-ms': { type: 'string' },
  threads: { type: 'string', short: 't' },
  ctx: { type: 'string', short: 'c' },
  queue: { type: 'string' },
  parallel: { type: 'string' },
  'batch-tokens': { type: 'string' },
  'memory-budget': { type: 'string' },
  resident: { type: 'string' },
  'slots-per-layer': { type: 'string' },
  backend: { type: 'string' },
  heat: { type: 'string' },
  prefetch: { type: 'string' },
};

export const serveCommand: Command = {
  name: 'serve',
  summary: 'serve the model over HTTP: OpenAI-compatible routes, health, metrics, live tuning',
  usage,
  async run(argv) {
    const a = parseFlags(argv, flags, 'serve');
    const host = a.string('host') ?? '127.0.0.1';
    const port = a.int('port', 8080, 0, 65535);
    const graceMs = a.int('grace-ms', 10_000, 0, 600_000);
    const engine = await openEngine({
      model: a.requireString('model'),
      threads: a.int('threads', 2, 1, limits.threadsMax),
      contextTokens: a.int('ctx', limits.contextTokensDefault, 2, limits.contextTokensMax),
      requestQueueDepthMax: a.int('queue', limits.requestQueueDepthDefault, 0, limits.requestQueueDepthMax),
      parallel: a.int('parallel', serveParallelDefault, 1, limits.parallelMax),
      ...(a.string('batch-tokens') !== undefined && {
        batchTokensMax: a.int('batch-tokens', limits.batchTokensDefault, 1, limits.batchTokensMax),
      }),
      ...tierOptions(a),
      ...memoryOptions(a),
    });
    const adminToken = a.string('admin-token');
    const server = createServer(engine, adminToken !== undefined ? { adminToken } : {});
    try {
      const address = await server.app.listen({ host, port });
      console.error(`moetier: serving ${engine.modelPath} at ${address}`);
      await new Promise<void>((resolve) => {
        const stop = (): void => {
          process.off('SIGTERM', stop);
          process.off('SIGINT', stop);
          console.error('moetier: shutting down');
          void server.shutdown(graceMs).then(resolve, resolve);
        };
        process.on('SIGTERM', stop);
        process.on('SIGINT', stop);
      });
      return 0;
    } finally {
      await engine.close();
    }
  },
};
