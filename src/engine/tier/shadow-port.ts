/**
 * The TypeScript fallback tier, for an addon without the tier verbs. It keeps the placement
 * and moves the bytes for real (uploads from the mapped container into backend slots, in
 * place or free-then-upload), and counts hits from each step's routing; compute still reads
 * every expert from the container, so outputs are the foundation's. No per-layer timing.
 *
 *   slots: layer l owns backend slots [base[l], base[l] + slotsPerLayer[l])
 *   swap:  requested -> pending -> (after the next eval) victim evicted, upload issued -> poll: resident
 */
import { assert } from '../../core/assert.js';
import type { GgufFile, HParams } from '../../model/types.js';
import { Backend, BackendError } from '../../native/backend.js';
import { expertSources } from './experts.js';
import type { TierPoll, TierPort, TierStats, TierUpload } from './port.js';

/** Refusal codes of requestSwap (the native tier's may differ: callers only test < 0). */
export const SWAP_QUEUE_FULL = -1;
export const SWAP_NOT_RESIDENT = -2;
export const SWAP_ALREADY_RESIDENT = -3;
const pendingSwapsMax = 1024;

interface Swap {
  taskId: number;
  layer: number;
  victim: number;
  expert: number;
}
interface InFlight extends Swap {
  slot: number;
  event: number;
  issuedNs: number;
  inPlace: boolean;
  fellBack: boolean;
}

export class ShadowTierPort implements TierPort {
  readonly kind = 'shadow' as const;
  readonly hasLayerStats = false;
  readonly expertBytes: { container: number; hostCopy: number };
  private readonly slotOf: Int32Array;
  private readonly freeSlots: number[][];
  private readonly pending: Swap[] = [];
  private inflight: InFlight[] = [];
  private readonly uploads: TierUpload[] = [];
  private readonly evicted: Array<{ layer: number; expert: number }> = [];
  private hits = 0;
  private misses = 0;

  constructor(
    private readonly backend: Backend,
    private readonly file: GgufFile,
    private readonly hp: Pick<HParams, 'nLayer' | 'nExpert' | 'nExpertUsed'>,
    readonly slotsPerLayer: readonly number[],
    containerBytes: number,
  ) {
    this.expertBytes = { container: containerBytes, hostCopy: 0 };
    this.slotOf = new Int32Array(hp.nLayer * hp.nExpert).fill(-1);
    const first = backend.reserve(slotsPerLayer.reduce((a, b) => a + b, 0), containerBytes);
    let next = first;
    this.freeSlots = slotsPerLayer.map((n) => Array.from({ length: n }, () => next++));
  }

  get nLayer(): number {
    return this.hp.nLayer;
  }
  get nExpert(): number {
    return this.hp.nExpert;
  }

  async warmstart(layer: number, experts: Int32Array): Promise<void> {
    for (const e of experts) {
      if (this.slotOf[layer * this.nExpert + e] >= 0) continue;
      const slot = this.freeSlots[layer].pop();
      if (slot === undefined) break;
      try {
        await this.backend.waitUploaded(this.backend.upload(slot, expertSources(this.file, this.hp, layer, e)));
      } catch (err) {
        if (this.backend.slotState(slot) !== 'empty') this.backend.free(slot);
        this.freeSlots[layer].push(slot);
        throw err;
      }
      this.slotOf[layer * this.nExpert + e] = slot;
    }
  }

  requestSwap(layer: number, victim: number, newcomer: number, taskId: number): number {
    if (this.pending.length >= pendingSwapsMax) return SWAP_QUEUE_FULL;
    const base = layer * this.nExpert;
    if (this.slotOf[base + victim] < 0 || this.pending.some((s) => s.layer === layer && s.victim === victim)) return SWAP_NOT_RESIDENT;
    const moving = (s: Swap): boolean => s.layer === layer && s.expert === newcomer;
    if (this.slotOf[base + newcomer] >= 0 || this.pending.some(moving) || this.inflight.some(moving)) return SWAP_ALREADY_RESIDENT;
    this.pending.push({ taskId, layer, victim, expert: newcomer });
    return 0;
  }

  /** Counts the step's hits, then issues the swaps queued before it (the step's "boundary"). */
  afterEval(routes: Int32Array, nTokens: number): void {
    const { nLayer, nExpert, nExpertUsed } = this.hp;
    let hitBytes = 0;
    for (let i = 0; i < nTokens * nLayer * nExpertUsed; i++) {
      const layer = Math.floor(i / nExpertUsed) % nLayer;
      if (this.slotOf[layer * nExpert + routes[i]] >= 0) {
        this.hits++;
        hitBytes += this.expertBytes.container;
      } else this.misses++;
    }
    this.backend.recordCompute(0, hitBytes); // moves the fake's virtual clock; a marker on cpu
    for (const swap of this.pending.splice(0)) this.issue(swap);
  }

  private issue(swap: Swap): void {
    const key = swap.layer * this.nExpert;
    const slot = this.slotOf[key + swap.victim];
    assert(slot >= 0, `swap ${swap.layer}/${swap.victim}: victim resident at issue`);
    this.slotOf[key + swap.victim] = -1;
    this.evicted.push({ layer: swap.layer, expert: swap.victim });
    const sources = expertSources(this.file, this.hp, swap.layer, swap.expert);
    const issuedNs = Number(process.hrtime.bigint());
    let inPlace = this.backend.overwriteSupported;
    let event: number;
    try {
      event = inPlace ? this.backend.upload(slot, sources, { overwrite: true, label: swap.taskId }) : this.freeThenUpload(slot, sources, swap.taskId);
    } catch (err) {
      if (!(err instanceof BackendError) || err.reason !== 'no-overwrite') throw err;
      inPlace = false;
      event = this.freeThenUpload(slot, sources, swap.taskId);
    }
    this.inflight.push({ ...swap, slot, event, issuedNs, inPlace, fellBack: !inPlace });
  }

  private freeThenUpload(slot: number, sources: Uint8Array[], label: number): number {
    this.backend.free(slot);
    return this.backend.upload(slot, sources, { label });
  }

  poll(): TierPoll {
    this.inflight = this.inflight.filter((t) => {
      const ev = this.backend.query(t.event);
      if (ev.state === 'pending') return true;
      const ok = ev.state === 'done';
      if (ok) this.slotOf[t.layer * this.nExpert + t.expert] = t.slot;
      else {
        this.backend.free(t.slot); // an invalid slot: its bytes are half old, half new
        this.freeSlots[t.layer].push(t.slot);
      }
      const startNs = Number(ev.startNs);
      // The fake's events run on its virtual clock: its issue time is its start.
      const issuedNs = this.backend.kind === 'fake' ? startNs : Math.min(t.issuedNs, startNs);
      this.uploads.push({
        taskId: t.taskId, layer: t.layer, expert: t.expert, victim: t.victim, ok,
        inPlace: t.inPlace, fellBack: t.fellBack, bytes: ev.bytes, issuedNs, startNs, endNs: Number(ev.endNs),
      });
      return false;
    });
    return { uploads: this.uploads.splice(0), evicted: this.evicted.splice(0) };
  }

  /** Waits for every issued upload (the engine's close, tests). */
  async drain(): Promise<void> {
    for (const t of this.inflight) await this.backend.wait(t.event);
  }

  residency(): Int32Array {
    return this.slotOf.slice();
  }

  stats(): TierStats {
    const used = this.slotsPerLayer.map((n, l) => n - this.freeSlots[l].length);
    return { hits: this.hits, misses: this.misses, lazyMisses: 0, leases: this.backend.leaseCount(), slotsUsed: used, slotsBudget: [...this.slotsPerLayer] };
  }

  resetStats(): void {
    this.hits = 0;
    this.misses = 0;
  }

  /** Drops the swaps not issued yet; the engine then destroys the backend (which waits for in-flight uploads). */
  free(): void {
    this.pending.length = 0;
  }
}
