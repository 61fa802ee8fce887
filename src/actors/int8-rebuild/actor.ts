/**
 * The int8-rebuild actor: a bounded piscina pool of worker threads (worker.ts) building host
 * copies into a SharedArrayBuffer arena; the logic (logic.ts) decides, this handle moves bytes.
 *
 *   send(evicted | resident) ──logic──> rebuild ──pool.run──> worker ──done──> publish (Atomics.store)
 *
 * Offsets change on the event loop only: `resident` unpublishes before its block is reused,
 * and the engine sends it between steps, so no running evaluation reads a reused block. A
 * worker that dies or throws is recorded in `failure`; the engine fails the request with it.
 * A rebuild asked for inside a request (its `evicted` message carries the request's context) is
 * traced as a moetier.rebuild span, from its start on a worker to its end, on the main thread.
 */
import { existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { trace, type Context } from '@opentelemetry/api';
import { Piscina } from 'piscina';
import { ModelFileChangedError, NativeError } from '../../core/errors.js';
import { checkModelFile, type PinnedModelFile } from '../../engine/model-pin.js';
import { moetierTracer, rebuildAttributes, recordTimedSpan, SpanNames } from '../../telemetry/index.js';
import { initialInt8Rebuild, stepInt8Rebuild, type Int8RebuildState } from './logic.js';
import type { Int8RebuildEffect, Int8RebuildLimits, Int8RebuildMessage } from './messages.js';
import type { RebuildJob } from './worker.js';

/** The worker as compiled JavaScript: next to this module (dist/), or in dist/ when running from src/ (tests). */
export function rebuildWorkerFile(): string {
  const here = path.dirname(fileURLToPath(import.meta.url));
  const candidates = [path.join(here, 'worker.js'), path.resolve(here, '../../../dist/src/actors/int8-rebuild/worker.js')];
  const found = candidates.find((p) => existsSync(p));
  if (!found) throw new NativeError(`int8-rebuild worker not built (looked in ${candidates.join(', ')}); run \`npm run build:ts\``);
  return found;
}

export class Int8RebuildActor {
  readonly arena: Uint8Array;
  readonly offsets: Int32Array;
  private readonly state: Int8RebuildState;
  private readonly pool: Piscina;
  private running = 0;
  private idleWaiters: Array<() => void> = [];
  /** The first worker failure since the last `takeFailure`. */
  private failure: Error | undefined;
  /** The trace context of experts whose rebuild a request asked for (by layer * nExpert + expert), until it starts. */
  private readonly traceContexts = new Map<number, Context>();

  constructor(
    private readonly pin: PinnedModelFile,
    nLayer: number,
    nExpert: number,
    blocks: number,
    blockBytes: number,
    limits: Partial<Int8RebuildLimits> = {},
  ) {
    this.state = initialInt8Rebuild(nLayer, nExpert, blocks, blockBytes, limits);
    this.arena = new Uint8Array(new SharedArrayBuffer(Math.max(1, blocks * blockBytes)));
    this.offsets = new Int32Array(new SharedArrayBuffer(nLayer * nExpert * 4)).fill(-1);
    const threads = this.state.limits.inflightMax;
    this.pool = new Piscina({ filename: rebuildWorkerFile(), minThreads: 1, maxThreads: threads, maxQueue: threads, idleTimeout: 30_000 });
  }

  get counts(): Int8RebuildState['counts'] {
    return this.state.counts;
  }

  send(message: Int8RebuildMessage): void {
    const ctx = message.kind === 'evicted' ? message.traceContext : undefined;
    if (message.kind === 'evicted' && ctx && trace.getSpan(ctx)?.isRecording()) for (const k of message.experts) this.traceContexts.set(k.layer * this.state.nExpert + k.expert, ctx);
    if (message.kind === 'resident') for (const k of message.experts) this.traceContexts.delete(k.layer * this.state.nExpert + k.expert);
    for (const effect of stepInt8Rebuild(this.state, message)) this.perform(effect);
  }

  private perform(e: Int8RebuildEffect): void {
    const key = (layer: number, expert: number): number => layer * this.state.nExpert + expert;
    if (e.kind === 'publish') Atomics.store(this.offsets, key(e.layer, e.expert), e.offset);
    else if (e.kind === 'unpublish') Atomics.store(this.offsets, key(e.layer, e.expert), -1);
    else {
      const { layer, expert, offset } = e.task;
      const job: RebuildJob = { pin: this.pin, arena: this.arena.buffer as SharedArrayBuffer, layer, expert, offset };
      const ctx = this.traceContexts.get(key(layer, expert));
      if (ctx) this.traceContexts.delete(key(layer, expert));
      const startNs = ctx ? process.hrtime.bigint() : 0n;
      this.running++;
      this.pool
        .run(job)
        .then(
          () => {
            if (ctx) recordTimedSpan(moetierTracer(), SpanNames.rebuild, startNs, process.hrtime.bigint(), rebuildAttributes({ layer, expert, bytes: this.state.blockBytes }), ctx);
            this.send({ kind: 'done', layer, expert, ok: true });
          },
          (err: unknown) => {
            this.failure ??= fileChanged(this.pin) ??
              new NativeError(`int8-rebuild worker failed on expert ${layer}/${expert}: ${(err as Error).message}`, { cause: err });
            this.send({ kind: 'done', layer, expert, ok: false });
          },
        )
        .finally(() => {
          if (--this.running === 0) for (const resolve of this.idleWaiters.splice(0)) resolve();
        });
    }
  }

  /** The failure to fail the current request with (cleared: the pool replaces dead workers). */
  takeFailure(): Error | undefined {
    const f = this.failure;
    this.failure = undefined;
    return f;
  }

  /** No rebuild running (nor queued: a queued one starts as a running one ends). */
  get idle(): boolean {
    return this.running === 0;
  }

  /** Resolves when no rebuild is running (before a step, tests, close). */
  whenIdle(): Promise<void> {
    return this.running === 0 ? Promise.resolve() : new Promise((r) => this.idleWaiters.push(r));
  }

  async close(): Promise<void> {
    await this.whenIdle();
    await this.pool.destroy();
  }
}

/** The typed reason a rebuild failed when it is the model file (errors lose their class across threads). */
function fileChanged(pin: PinnedModelFile): ModelFileChangedError | undefined {
  try {
    checkModelFile(pin);
    return undefined;
  } catch (err) {
    return err instanceof ModelFileChangedError ? err : undefined;
  }
}
