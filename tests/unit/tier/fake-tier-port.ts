/**
 * FakeTierPort: a TierPort in plain TypeScript for testing the placement without the addon. It
 * keeps the tier's expert states as the native tier does (include/mt_tier.h): a swap makes the
 * victim outgoing and the newcomer incoming; issuing it (at once here) makes the victim none;
 * `land` settles uploads (ok or failed) and reports them on the next poll. Its gate takes the
 * limits it is given and counts what is in flight, but holds nothing back (the native gate's
 * budget is tested in tests/native/tier-gate.test.ts). It is a fake for tests only: no bytes move.
 */
import { ExpertState, type NativeGateStats } from '../../../src/native/binding.js';
import type { TierExpertStates, TierPoll, TierPort, TierStats, TierUpload } from '../../../src/engine/tier/port.js';
import type { ExpertKey } from '../../../src/tiers/keys.js';

export class FakeTierPort implements TierPort {
  readonly expertBytes = { container: 1000, hostCopy: 0 };
  readonly readsMisses = false;
  readonly slotsPerLayer: number[];
  private readonly snapshot: TierExpertStates;
  /** Uploads issued and not landed: task id -> swap. */
  readonly inFlight = new Map<number, { layer: number; victim: number; newcomer: number }>();
  private reports: TierUpload[] = [];
  private evicted: ExpertKey[] = [];
  /** requestSwap calls, in order. */
  readonly requests: Array<{ layer: number; victim: number; newcomer: number; taskId: number; issueNow: boolean }> = [];
  /** The next requestSwap answers this code instead (then clears it). */
  refuseNext: number | undefined;

  constructor(
    readonly nLayer: number,
    readonly nExpert: number,
    slots: number,
  ) {
    this.slotsPerLayer = Array(nLayer).fill(slots);
    this.snapshot = { states: new Uint8Array(nLayer * nExpert), slots: new Int32Array(nLayer * nExpert).fill(-1) };
    for (let l = 0; l < nLayer; l++) for (let e = 0; e < slots; e++) this.set(l, e, ExpertState.resident, e);
  }

  private set(layer: number, expert: number, state: number, slot = -1): void {
    this.snapshot.states[layer * this.nExpert + expert] = state;
    this.snapshot.slots[layer * this.nExpert + expert] = slot;
  }
  state(layer: number, expert: number): number {
    return this.snapshot.states[layer * this.nExpert + expert];
  }

  async warmstart(): Promise<void> {}
  requestSwap(
    layer: number,
    victim: number,
    newcomer: number,
    taskId: number,
    options?: { issueNow?: boolean },
  ): number {
    this.requests.push({ layer, victim, newcomer, taskId, issueNow: options?.issueNow === true });
    if (this.refuseNext !== undefined) {
      const code = this.refuseNext;
      this.refuseNext = undefined;
      return code;
    }
    if (this.state(layer, victim) !== ExpertState.resident) return -2;
    if (this.state(layer, newcomer) !== ExpertState.none) return -3;
    this.set(layer, victim, ExpertState.none); // issued at once: the victim's slot is being overwritten
    this.evicted.push({ layer, expert: victim });
    this.set(layer, newcomer, ExpertState.incoming);
    this.inFlight.set(taskId, { layer, victim, newcomer });
    return 0;
  }
  /** Settles an upload in flight: ok -> the newcomer resident; failed -> none (its slot free). */
  land(taskId: number, ok: boolean): void {
    const f = this.inFlight.get(taskId)!;
    this.inFlight.delete(taskId);
    this.set(f.layer, f.newcomer, ok ? ExpertState.resident : ExpertState.none, ok ? 0 : -1);
    this.reports.push({
      taskId,
      layer: f.layer,
      expert: f.newcomer,
      victim: f.victim,
      ok,
      inPlace: true,
      fellBack: false,
      admitted: false,
      prefetch: false,
      bytes: 1000,
      issuedNs: 1,
      startNs: 2,
      endNs: 3,
    });
  }
  /** The limits the placement gave the gate (setGate), and the cancelSwaps calls. */
  gateLimits: { inflightBytesMax: number; inflightTransfersMax: number; queueDepthMax: number } | undefined;
  cancelCalls = 0;
  setGate(inflightBytesMax: number, inflightTransfersMax: number, queueDepthMax: number): void {
    this.gateLimits = { inflightBytesMax, inflightTransfersMax, queueDepthMax };
  }
  cancelSwaps(): number {
    this.cancelCalls++;
    return 0;
  }
  gate(): NativeGateStats {
    const ledger = { issued: 0, completed: 0, failed: 0, refused: 0, cancelled: 0 };
    return {
      ...this.gateLimits!,
      inflightBytes: this.inFlight.size * this.expertBytes.container,
      inflightTransfers: this.inFlight.size,
      swapsQueued: 0,
      byClass: { miss: ledger, prefetch: ledger, swap: ledger, warm: ledger },
    };
  }
  setPolicy(): void {}
  policyTick(): void {}
  policyScores(): Float64Array {
    return new Float64Array(this.nLayer * this.nExpert);
  }
  setPrefetch(): void {}
  setPrefillPath(): void {}
  poll(): TierPoll {
    const out = { uploads: this.reports, evicted: this.evicted, reads: [] };
    this.reports = [];
    this.evicted = [];
    return out;
  }
  resize(): void {
    throw new Error('FakeTierPort: resize is not faked');
  }
  expertStates(): TierExpertStates {
    return this.snapshot;
  }
  stats(): TierStats {
    return {
      hits: 0,
      misses: 0,
      lazyMisses: 0,
      leases: 0,
      slotsUsed: this.slotsPerLayer.slice(),
      slotsBudget: this.slotsPerLayer.slice(),
    };
  }
  resetStats(): void {}
  free(): void {}
}
