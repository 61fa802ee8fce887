/**
 * The int8-rebuild actor: a bounded piscina pool of worker threads (worker.ts) building host
 * copies into a SharedArrayBuffer arena; the logic (logic.ts) decides, this handle moves bytes.
 *
 *   send(evicted | resident) ──logic──> rebuild ──pool.run──> worker ──done──> publish (Atomics.store)
 *
 * Offsets change on the event loop only: `resident` unpublishes before its block is reused,
 * and the engine sends it between steps, so no running evaluation reads a reused block. A
 * worker that dies or throws rejects that rebuild's promise with a typed error; `settled()`
 * awaits every rebuild's promise, so the request's next step throws it.
 * A rebuild asked for inside a request (its `evicted` message carries the request's context) is
 * traced as a moetier.rebuild span, from its start on a worker to its end, on the main thread.
 */
import { existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { trace, type Context } from '@opentelemetry/api';
import { Piscina } from 'piscina';
import { ModelFileChangedError, NativeError } from '../../core/errors.js';
import { checkModelFile, type PinnedModelFile } from '../../model/model-pin.js';
import { moetierTracer, rebuildAttributes, recordTimedSpan, SpanNames } from '../../telemetry/index.js';
import { initialInt8Rebuild, stepInt8Rebuild, type Int8RebuildState } from './logic.js';
import type { Int8RebuildEffect, Int8RebuildLimits, Int8RebuildMessage } from './messages.js';
import type { RebuildJob } from './worker.js';

/** The worker as compiled JavaScript: next to this module (dist/), or in dist/ when running from src/ (tests). */
export function rebuildWorkerFile(): string {
  const here = path.dirname(fileURLToPath(import.meta.url));
  const candidates = [
    path.join(here, 'worker.js'),
    path.resolve(here, '../../../dist/src/actors/int8-rebuild/worker.js'),
  ];
  const found = candidates.find((p) => existsSync(p));
  if (!found)
    throw new NativeError(
      `int8-rebuild worker not built (looked in ${candidates.join(', ')}); run \`npm run build:ts\``,
    );
  return found;
}

export class Int8RebuildActor {
  readonly arena: Uint8Array;
  readonly offsets: Int32Array;
  private readonly state: Int8RebuildState;
  private readonly pool: Piscina;
  private running = 0;
  private idleWaiters: Array<() => void> = [];
  /**
   * Each rebuild's outcome, until awaited: a running one, or one that failed (its promise rejects
   * with the typed error). One that succeeds leaves at once; settled() takes the rest.
   */
  private readonly outcomes = new Set<Promise<void>>();
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
    this.pool = new Piscina({
      filename: rebuildWorkerFile(),
      minThreads: 1,
      maxThreads: threads,
      maxQueue: threads,
      idleTimeout: 30_000,
    });
  }

  get counts(): Int8RebuildState['counts'] {
    return this.state.counts;
  }

  send(message: Int8RebuildMessage): void {
    const ctx = message.kind === 'evicted' ? message.traceContext : undefined;
    if (message.kind === 'evicted' && ctx && trace.getSpan(ctx)?.isRecording())
      for (const k of message.experts) this.traceContexts.set(k.layer * this.state.nExpert + k.expert, ctx);
    if (message.kind === 'resident')
      for (const k of message.experts) this.traceContexts.delete(k.layer * this.state.nExpert + k.expert);
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
      const outcome = this.pool.run(job).then(
        () => {
          if (ctx)
            recordTimedSpan(
              moetierTracer(),
              SpanNames.rebuild,
              startNs,
              process.hrtime.bigint(),
              rebuildAttributes({ layer, expert, bytes: this.state.blockBytes }),
              ctx,
            );
          this.send({ kind: 'done', layer, expert, ok: true });
        },
        (err: unknown) => {
          this.send({ kind: 'done', layer, expert, ok: false });
          throw (
            fileChanged(this.pin) ??
            new NativeError(`int8-rebuild worker failed on expert ${layer}/${expert}: ${(err as Error).message}`, {
              cause: err,
            })
          );
        },
      );
      this.outcomes.add(outcome);
      // Handled here so that a failure nobody awaits yet is not an unhandled rejection; settled() still gets it.
      outcome
        .then(
          () => this.outcomes.delete(outcome),
          () => undefined,
        )
        .finally(() => {
          if (--this.running === 0) for (const resolve of this.idleWaiters.splice(0)) resolve();
        });
    }
  }

  /**
   * Resolves when every rebuild asked for so far has ended (and those their ends started); rejects
   * with the first that failed, typed, once every rebuild running then has ended too (a dead
   * worker fails the jobs beside it: one incident, one error). Each failure is thrown once: the
   * pool replaces dead workers, and the rebuilds after it go on.
   */
  async settled(): Promise<void> {
    let first: { error: unknown } | undefined;
    while (this.outcomes.size > 0) {
      const outcomes = [...this.outcomes];
      this.outcomes.clear();
      for (const r of await Promise.allSettled(outcomes)) if (r.status === 'rejected') first ??= { error: r.reason };
    }
    if (first) throw first.error;
  }

  /** Nothing to await: no rebuild running, none failed unseen (settled() would resolve at once). */
  get idle(): boolean {
    return this.outcomes.size === 0;
  }

  /** Resolves when no rebuild is running, whatever their outcomes (close, tests). */
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
