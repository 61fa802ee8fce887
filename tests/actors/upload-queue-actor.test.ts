import { describe, expect, it } from 'vitest';
import { InvalidOptionError } from '../../src/core/errors.js';
import { UploadQueueActor } from '../../src/actors/upload-queue/actor.js';
import type { UploadQueueEffect, UploadTask } from '../../src/actors/upload-queue/messages.js';

const task = (id: number, bytes = 100): UploadTask => ({ id, layer: 0, expert: id, bytes, generation: 1 });

describe('upload-queue actor', () => {
  it('returns and publishes the effects of each message, and keeps the in-flight accounting', () => {
    const actor = new UploadQueueActor({ inflightTransfersMax: 1 });
    const seen: UploadQueueEffect[] = [];
    let completed = false;
    actor.effects$().subscribe({ next: (e) => seen.push(e), complete: () => (completed = true) });
    expect(actor.send({ kind: 'enqueue', task: task(1) }).map((e) => e.kind)).toEqual(['start']);
    expect(actor.send({ kind: 'enqueue', task: task(2) })).toEqual([]);
    expect(actor.inflightTransfers).toBe(1);
    expect(actor.queuedTransfers).toBe(1);
    expect(actor.send({ kind: 'settled', id: 1, ok: true }).map((e) => e.kind === 'start' && e.task.id)).toEqual([2]);
    expect(seen.map((e) => e.task.id)).toEqual([1, 2]);
    expect(actor.inflightBytes).toBe(100);
    expect(actor.counts).toMatchObject({ started: 2, succeeded: 1 });
    actor.close();
    expect(completed).toBe(true);
  });

  it('refuses a bad tune and changes nothing', () => {
    const actor = new UploadQueueActor({ inflightBytesMax: 1000 });
    expect(() => actor.send({ kind: 'tune', limits: { inflightBytesMax: -1 } })).toThrow(InvalidOptionError);
    expect(actor.limits.inflightBytesMax).toBe(1000);
    actor.send({ kind: 'tune', limits: { inflightBytesMax: 2000 } });
    expect(actor.limits.inflightBytesMax).toBe(2000);
  });
});
