/**
 * The upload-queue actor: the TypeScript face of the tier's one gate (include/mt_tier.h,
 * native/tier/tier_gate.cc), which owns the queue, the in-flight budget and the ledger; this
 * handle holds no copy of them. Placement sends it enqueue / cancelQueued / tune messages; each
 * reaches the gate at once, and the effects send returns say what the gate did (a synchronous
 * call: no stream of its own).
 *
 *   placement ──send(message)──> gate (requestSwap | cancelSwaps | setGate) ──effects──> placement
 *   inflightBytes, inflightTransfers, queuedTransfers: the gate's, read when asked (tierGate)
 */
import type { NativeGateStats } from '../../native/binding.js';
import { swapEffect, UPLOAD_QUEUE_DEFAULTS, validateUploadLimits } from './logic.js';
import type { UploadQueueEffect, UploadQueueLimits, UploadQueueMessage } from './messages.js';

/** The tier verbs the face speaks (src/engine/tier/port.ts). */
export interface GatePort {
  requestSwap(
    layer: number,
    victim: number,
    newcomer: number,
    taskId: number,
    options?: { issueNow?: boolean },
  ): number;
  setGate(inflightBytesMax: number, inflightTransfersMax: number, queueDepthMax: number): void;
  cancelSwaps(): number;
  gate(): NativeGateStats;
}

export class UploadQueueActor {
  private current: UploadQueueLimits;

  constructor(
    private readonly port: GatePort,
    limits: Partial<UploadQueueLimits> = {},
  ) {
    this.current = validateUploadLimits({ ...UPLOAD_QUEUE_DEFAULTS, ...limits });
    this.applyLimits();
  }

  /** Applies one message at the gate; returns its effects (a bad tune throws and changes nothing). */
  send(message: UploadQueueMessage): UploadQueueEffect[] {
    const out: UploadQueueEffect[] = [];
    switch (message.kind) {
      case 'enqueue': {
        const t = message.task;
        const code = this.port.requestSwap(
          t.layer,
          t.victimExpert,
          t.expert,
          t.id,
          t.issueNow ? { issueNow: true } : undefined,
        );
        out.push(swapEffect(t, code));
        break;
      }
      case 'cancelQueued':
        out.push({ kind: 'cancelled', count: this.port.cancelSwaps() });
        break;
      case 'tune':
        this.current = validateUploadLimits({ ...this.current, ...message.limits });
        this.applyLimits();
        break;
    }
    return out;
  }

  private applyLimits(): void {
    this.port.setGate(this.current.inflightBytesMax, this.current.inflightTransfersMax, this.current.queueDepthMax);
  }

  get limits(): UploadQueueLimits {
    return this.current;
  }
  /** The gate's state now: bytes and transfers in flight (every class), swaps it holds queued. */
  get state(): NativeGateStats {
    return this.port.gate();
  }
}
