/**
 * The upload-queue actor is the face of the tier's one gate: each message reaches the gate at once
 * (requestSwap, cancelSwaps, setGate), the effects say what the gate answered, and what is in flight
 * is the gate's (read when asked), never a count of the actor's own. The gate itself (its budget,
 * priorities and ledger) is tested against the native tier: tests/native/tier-gate.test.ts.
 */
import { describe, expect, it } from 'vitest';
import { InvalidOptionError } from '../../src/core/errors.js';
import { UploadQueueActor, type GatePort } from '../../src/actors/upload-queue/actor.js';
import { SWAP_QUEUE_FULL, SWAP_STARTED, UPLOAD_QUEUE_DEFAULTS } from '../../src/actors/upload-queue/logic.js';
import type { UploadTask } from '../../src/actors/upload-queue/messages.js';
import type { NativeGateStats } from '../../src/native/binding.js';

const task = (id: number, extra: Partial<UploadTask> = {}): UploadTask => ({
  id,
  layer: 0,
  expert: id,
  victimExpert: 0,
  bytes: 100,
  ...extra,
});

/** A gate that answers the codes it is told to, and records every call. */
class RecordingGate implements GatePort {
  answers: number[] = [];
  calls: string[] = [];
  inflightBytes = 0;
  requestSwap(
    layer: number,
    victim: number,
    newcomer: number,
    taskId: number,
    options?: { issueNow?: boolean },
  ): number {
    this.calls.push(`swap ${layer} ${victim}->${newcomer} #${taskId}${options?.issueNow ? ' now' : ''}`);
    return this.answers.shift() ?? 0;
  }
  setGate(bytes: number, transfers: number, queue: number): void {
    this.calls.push(`gate ${bytes} ${transfers} ${queue}`);
  }
  cancelSwaps(): number {
    this.calls.push('cancel');
    return 3;
  }
  gate(): NativeGateStats {
    const l = { issued: 0, completed: 0, failed: 0, refused: 0, cancelled: 0 };
    return {
      inflightBytesMax: 1,
      inflightTransfersMax: 1,
      queueDepthMax: 1,
      inflightBytes: this.inflightBytes,
      inflightTransfers: 0,
      swapsQueued: 0,
      byClass: { miss: l, prefetch: l, swap: l, warm: l },
    };
  }
}

describe("upload-queue actor (the gate's face)", () => {
  it('sends each message to the gate at once and returns what it answered', () => {
    const gate = new RecordingGate();
    const actor = new UploadQueueActor(gate, { inflightTransfersMax: 2 });
    expect(gate.calls).toEqual([
      `gate ${UPLOAD_QUEUE_DEFAULTS.inflightBytesMax} 2 ${UPLOAD_QUEUE_DEFAULTS.queueDepthMax}`,
    ]);
    gate.answers = [0, SWAP_STARTED, SWAP_QUEUE_FULL, -2];
    expect(actor.send({ kind: 'enqueue', task: task(1) }).map((e) => e.kind)).toEqual(['queued']);
    expect(actor.send({ kind: 'enqueue', task: task(2, { issueNow: true }) }).map((e) => e.kind)).toEqual(['started']);
    expect(actor.send({ kind: 'enqueue', task: task(3) })).toMatchObject([
      { kind: 'dropped', reason: 'queue-full', code: SWAP_QUEUE_FULL },
    ]);
    expect(actor.send({ kind: 'enqueue', task: task(4) })).toMatchObject([
      { kind: 'dropped', reason: 'refused', code: -2 },
    ]);
    expect(actor.send({ kind: 'cancelQueued' })).toEqual([{ kind: 'cancelled', count: 3 }]);
    expect(gate.calls.slice(1)).toEqual([
      'swap 0 0->1 #1',
      'swap 0 0->2 #2 now',
      'swap 0 0->3 #3',
      'swap 0 0->4 #4',
      'cancel',
    ]);
    // What is in flight is the gate's, read when asked.
    gate.inflightBytes = 777;
    expect(actor.state.inflightBytes).toBe(777);
  });

  it('refuses a bad tune and changes nothing; a good one reaches the gate', () => {
    const gate = new RecordingGate();
    const actor = new UploadQueueActor(gate, { inflightBytesMax: 1000 });
    expect(() => actor.send({ kind: 'tune', limits: { inflightBytesMax: -1 } })).toThrow(InvalidOptionError);
    expect(() => actor.send({ kind: 'tune', limits: { queueDepthMax: 1.5 } })).toThrow(/upload.queueDepthMax/);
    expect(actor.limits.inflightBytesMax).toBe(1000);
    expect(gate.calls).toHaveLength(1);
    actor.send({ kind: 'tune', limits: { inflightBytesMax: 2000 } });
    expect(actor.limits.inflightBytesMax).toBe(2000);
    expect(gate.calls.at(-1)).toBe(
      `gate 2000 ${UPLOAD_QUEUE_DEFAULTS.inflightTransfersMax} ${UPLOAD_QUEUE_DEFAULTS.queueDepthMax}`,
    );
  });
});
