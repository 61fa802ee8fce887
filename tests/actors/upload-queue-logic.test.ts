import { describe, expect, it } from 'vitest';
import { InvalidOptionError } from '../../src/core/errors.js';
import { initialUploadQueue, stepUploadQueue, type UploadQueueState } from '../../src/actors/upload-queue/logic.js';
import type { UploadQueueMessage, UploadTask } from '../../src/actors/upload-queue/messages.js';

const task = (id: number, bytes = 100, generation = 1): UploadTask => ({ id, layer: 0, expert: id, bytes, generation });

function drive(state: UploadQueueState, messages: UploadQueueMessage[]) {
  const started: number[] = [];
  const dropped: string[] = [];
  for (const m of messages) {
    const r = stepUploadQueue(state, m);
    state = r.state;
    for (const e of r.effects) (e.kind === 'start' ? started.push(e.task.id) : dropped.push(`${e.task.id}:${e.reason}`));
    expect(state.inflightBytes).toBeLessThanOrEqual(Math.max(state.limits.inflightBytesMax, ...[...state.inflight.values()].map((t) => t.bytes)));
    expect(state.inflight.size).toBeLessThanOrEqual(state.limits.inflightTransfersMax);
  }
  return { state, started, dropped };
}

describe('upload-queue logic', () => {
  it('starts FIFO within the transfer and byte limits, and frees bytes once per task', () => {
    const s0 = initialUploadQueue({ inflightTransfersMax: 2, inflightBytesMax: 250, queueDepthMax: 10 });
    const { state, started } = drive(s0, [
      { kind: 'enqueue', task: task(1) },
      { kind: 'enqueue', task: task(2) },
      { kind: 'enqueue', task: task(3) },
      { kind: 'settled', id: 1, ok: true },
      { kind: 'settled', id: 1, ok: true }, // a duplicate settle changes nothing
      { kind: 'settled', id: 2, ok: false },
    ]);
    expect(started).toEqual([1, 2, 3]);
    expect(state.inflightBytes).toBe(100);
    expect(state.counts).toMatchObject({ started: 3, succeeded: 1, failed: 1 });
  });

  it('lets an oversized task run alone instead of deadlocking', () => {
    const { started } = drive(initialUploadQueue({ inflightBytesMax: 150 }), [
      { kind: 'enqueue', task: task(1, 100) },
      { kind: 'enqueue', task: task(2, 400) },
      { kind: 'settled', id: 1, ok: true },
    ]);
    expect(started).toEqual([1, 2]);
  });

  it('drops past the queue depth and cancels older generations, counting both', () => {
    const { state, started, dropped } = drive(initialUploadQueue({ inflightTransfersMax: 1, queueDepthMax: 2 }), [
      { kind: 'enqueue', task: task(1, 100, 1) }, // starts
      { kind: 'enqueue', task: task(2, 100, 1) },
      { kind: 'enqueue', task: task(3, 100, 2) },
      { kind: 'enqueue', task: task(4, 100, 2) }, // queue full
      { kind: 'cancelGeneration', generationBelow: 2 },
      { kind: 'settled', id: 1, ok: true },
    ]);
    expect(started).toEqual([1, 3]);
    expect(dropped).toEqual(['4:queue-full', '2:cancelled']);
    expect(state.counts).toMatchObject({ dropped: 1, cancelled: 1 });
  });

  it('applies tuned limits at once and refuses bad ones without changing anything', () => {
    let { state } = drive(initialUploadQueue({ inflightTransfersMax: 1 }), [{ kind: 'enqueue', task: task(1) }, { kind: 'enqueue', task: task(2) }]);
    expect(() => stepUploadQueue(state, { kind: 'tune', limits: { inflightTransfersMax: 0 } })).toThrow(InvalidOptionError);
    const r = stepUploadQueue(state, { kind: 'tune', limits: { inflightTransfersMax: 2 } });
    expect(r.effects.map((e) => e.kind === 'start' && e.task.id)).toEqual([2]);
    state = r.state;
    expect(state.limits.inflightTransfersMax).toBe(2);
  });
});
