/** The addon's expert tier behind the TierPort interface: a thin pass-through. */
import type { NativeGateStats, NativeTierHandle, NativeTierVerbs, TierPolicyMode } from '../../native/binding.js';
import type { TierExpertStates, TierPoll, TierPort, TierStats } from './port.js';

export class NativeTierPort implements TierPort {
  readonly expertBytes: { container: number; hostCopy: number };
  private handle: NativeTierHandle | undefined;
  private readonly slots: number[];
  private readonly states: TierExpertStates;

  constructor(
    private readonly native: NativeTierVerbs,
    handle: NativeTierHandle,
    readonly nLayer: number,
    readonly nExpert: number,
    slotsPerLayer: readonly number[],
    /** The tier was created with streamFile: misses are read from the model file before they run. */
    readonly readsMisses = false,
  ) {
    this.slots = slotsPerLayer.slice();
    this.handle = handle;
    this.expertBytes = native.tierExpertBytes(handle);
    this.states = { states: new Uint8Array(nLayer * nExpert), slots: new Int32Array(nLayer * nExpert) };
  }

  private get h(): NativeTierHandle {
    if (!this.handle) throw new Error('tier used after free');
    return this.handle;
  }

  warmstart(layer: number, experts: Int32Array): Promise<void> {
    return this.native.tierWarmstart(this.h, layer, experts);
  }
  requestSwap(
    layer: number,
    victim: number,
    newcomer: number,
    taskId: number,
    options?: { issueNow?: boolean },
  ): number {
    return options
      ? this.native.tierRequestSwap(this.h, layer, victim, newcomer, taskId, options)
      : this.native.tierRequestSwap(this.h, layer, victim, newcomer, taskId);
  }
  get slotsPerLayer(): readonly number[] {
    return this.slots;
  }
  resize(layer: number, slots: number, victims: Int32Array): void {
    this.native.tierResize(this.h, layer, slots, victims);
    this.slots[layer] = slots;
  }
  poll(): TierPoll {
    return this.native.tierPoll(this.h);
  }
  setPrefetch(mode: 'off' | 'observe' | 'enforce', predictK: number, budget?: Int32Array, queueMax?: number): void {
    this.native.tierSetPrefetch(this.h, mode, predictK, budget, queueMax);
  }
  setGate(inflightBytesMax: number, inflightTransfersMax: number, queueDepthMax: number): void {
    this.native.tierSetGate(this.h, inflightBytesMax, inflightTransfersMax, queueDepthMax);
  }
  cancelSwaps(): number {
    return this.native.tierCancelSwaps(this.h);
  }
  gate(): NativeGateStats {
    return this.native.tierGate(this.h);
  }
  setPrefillPath(path: 'on-demand' | 'whole-layer'): void {
    this.native.tierSetPrefillPath(this.h, path);
  }
  setPolicy(mode: TierPolicyMode, halfLifeTokens: number, prior?: Float64Array): void {
    if (prior) this.native.tierSetPolicy(this.h, mode, halfLifeTokens, prior);
    else this.native.tierSetPolicy(this.h, mode, halfLifeTokens);
  }
  policyTick(): void {
    this.native.tierPolicyTick(this.h);
  }
  policyScores(): Float64Array {
    return this.native.tierPolicyScores(this.h);
  }
  expertStates(): TierExpertStates {
    return this.native.tierExpertStates(this.h, this.states);
  }
  stats(): TierStats {
    return this.native.tierStats(this.h);
  }
  resetStats(): void {
    this.native.tierResetStats(this.h);
  }
  free(): void {
    if (!this.handle) return;
    const h = this.handle;
    this.handle = undefined;
    this.native.freeTier(h);
  }
}
