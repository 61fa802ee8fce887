/**
 * The baseline placement, live: decode routes feed the LFRU policy (src/tiers, unchanged);
 * its swaps go to the tier's one gate (mt_tier.h, tier_gate.cc: one in-flight budget for every
 * upload into a slot) through the upload-queue actor, the gate's face, which keeps no state.
 *
 *   tier.expertStates ──view──> policy residency
 *   route(l, ids) x nLayer, decodeTick ──> lfru.step ──> swap(v, n) ──> uploadQueue(enqueue)
 *        ──> port.requestSwap (queued at the gate, issued at the layer's boundary, budget allowing)
 *
 * The policy is LFRU unless openEngine's placementPolicy is 'dlfu' (decayed LFU, a demand policy,
 * the default on a tier that admits the misses it reads). dlfu lives in the tier (mt_tier.h
 * mt_tier_set_policy): each bind counts its routes there and each eviction is decided there, once,
 * at the moment a slot is needed (a miss kept or admitted, a prefetch); the placement only ticks its
 * clock per decode token and reads its scores for a shrink. With LFRU the tier's own counts still
 * decide where a prefetch (enforce) evicts; misses a disk tier admits need dlfu (options.ts).
 *
 * With prefill replan on (replan-options.ts) the policy is src/tiers' replan (LFRU plus the
 * prefill's victim-first swaps), fed one layer at a time by the eval's hook while later layers
 * compute; its swaps start at once (issueNow), as many as the gate's budget has room for, the
 * rest stay pending in the policy and drain on later calls and four per decode token. Its guard
 * (on by default; also with replan off, holding the replan in reserve: replan-guard.ts) decides on
 * the decode ticks; its switch swaps go out with the tick's decisions.
 *
 * The tier owns residency and every expert's state; the placement keeps no copy of either.
 * Before each call into the policy, its residency is the tier's snapshot (one read), where an
 * incoming expert counts as resident and an outgoing one as gone (a swap counts as done once
 * issued; a swap the gate holds queued shows so too), with the fills waiting for the next request
 * applied on top (decided, not yet the tier's). A refused, failed or dropped swap needs no
 * reconciliation: the next snapshot shows what the tier did.
 */
import { UploadQueueActor } from '../../actors/upload-queue/actor.js';
import type { UploadQueueEffect, UploadQueueLimits, UploadQueueMessage } from '../../actors/upload-queue/messages.js';
import type { NativeGateStats } from '../../native/binding.js';
import { ExpertState } from '../../native/binding.js';
import { type Residency } from '../../tiers/residency.js';
import { lfruScore, makeLfru, type LfruParams, type LfruState } from '../../tiers/policies/lfru.js';
import {
  makeReplan,
  replanDefaults,
  withReplanFields,
  type ReplanParams,
  type ReplanState,
} from '../../tiers/policies/replan.js';
import { guardInit, guardSummary, type GuardSummary } from '../../tiers/policies/replan-guard.js';
import { dlfuDefaults, heatPrior, type DlfuParams } from '../../tiers/policies/dlfu.js';
import type { PlacementPolicyName } from './options.js';
import { prefillReplanDefaults, replanDrainPerToken, type PrefillReplanConfig } from './replan-options.js';
import type { Decision, ExpertKey, HeatTable, Policy } from '../../tiers/types.js';
import type { TierPoll, TierPort } from './port.js';
import type { CalibrationSnapshot } from '../../actors/calibration/messages.js';
import { prefetchCount } from '../../tiers/prefetch.js';
import { prefetchDefaults, type PrefetchConfig } from '../prefetch-options.js';
import { transferWindowBytes } from '../../tiers/transfer-window.js';

export interface PlacementCounts {
  decided: number;
  refused: number;
  dropped: number;
  failed: number;
}

/** The policy the placement runs and its parameters (options.ts PlacementPolicyName). */
export interface PlacementChoice {
  policy: PlacementPolicyName;
  dlfu: DlfuParams;
}

/** What every policy's state has; the scores are read through the chosen policy's own function (score()). */
type PlacementState = { residency: Residency };

export class TierPlacement {
  /** LFRU or replan, stepped here; undefined with dlfu, which the tier runs (tierOwnsPolicy). */
  private policy: Policy<PlacementState> | undefined;
  private params: LfruParams;
  private state: PlacementState;
  /** A demand policy's decisions on this token's routes (dlfu keeps each miss), issued with the tick's. */
  private routeDecisions: Decision[] = [];
  private readonly queue: UploadQueueActor;
  private fills: ExpertKey[] = [];
  private nextTaskId = 1;
  private token = 0;
  /** Layers whose counts reached the policy through the eval's hook in the current prefill. */
  private replanned = new Set<number>();
  readonly counts: PlacementCounts = { decided: 0, refused: 0, dropped: 0, failed: 0 };
  private prefetchBudget: Int32Array | undefined;
  /** The mode last sent to the tier (it starts off). */
  private prefetchSent: PrefetchConfig['mode'] = 'off';
  /**
   * Every layer holds all its experts (budgets are per layer; recomputed when a tune resizes
   * them): no swap or fill can ever be decided, so the decode tick is skipped.
   */
  private full: boolean;

  constructor(
    private readonly port: TierPort,
    params: LfruParams,
    uploadLimits: Partial<UploadQueueLimits>,
    heat: HeatTable | undefined,
    private replan: PrefillReplanConfig = prefillReplanDefaults,
    /** Misses read from the file may evict the policy's lowest-scored resident (the tier decides, at need). */
    private readonly admitMisses = true,
    private prefetch: PrefetchConfig = prefetchDefaults,
    /** The model's experts per token: the prefetch's default candidates per layer. */
    private readonly nExpertUsed = 1,
    private readonly choice: PlacementChoice = { policy: 'lfru', dlfu: dlfuDefaults },
  ) {
    this.params = params;
    this.queue = new UploadQueueActor(port, uploadLimits);
    this.policy = this.tierOwnsPolicy ? undefined : this.policyFor(0);
    this.state = this.policy?.init({ layers: port.nLayer, experts: port.nExpert, start: this.view(), heat }).state ?? {
      residency: this.view(),
    };
    this.full = port.slotsPerLayer.every((slots) => slots >= port.nExpert);
    this.setTierPolicy(heat);
  }

  /** dlfu is the tier's: it counts the routes at each bind and decides each eviction at need. */
  private get tierOwnsPolicy(): boolean {
    return this.choice.policy === 'dlfu';
  }

  /**
   * The tier's policy (mt_tier_set_policy): with dlfu, keep every miss; with LFRU, evict at need for
   * prefetches only (LFRU's own swaps pass the upload queue); off where a disk tier's misses are only
   * streamed (disk.admitMisses false). The heat file, scaled to one half-life of routings, is its prior.
   */
  private setTierPolicy(heat: HeatTable | undefined): void {
    const mode = this.tierOwnsPolicy ? 'keep' : this.port.readsMisses && !this.admitMisses ? 'off' : 'evict';
    const h = this.choice.dlfu.halfLifeTokens;
    this.port.setPolicy(mode, h, heat && Float64Array.from(heatPrior(heat, h).flat()));
  }

  get uploadLimits(): UploadQueueLimits {
    return this.queue.limits;
  }
  get inflightBytes(): number {
    return this.queue.state.inflightBytes;
  }
  /**
   * Swaps the gate has not retired: uploads in flight and swaps it holds queued. While any, a step's
   * poll may have an eviction to report (a queued swap is issued at its layer's boundary, and the
   * poll's flush issues the boundaries the issuer has not reached).
   */
  get swapsOutstanding(): number {
    const g = this.queue.state;
    return g.inflightTransfers + g.swapsQueued;
  }

  get replanEnabled(): boolean {
    return this.replan.enabled;
  }
  /** Replan swaps decided but not started yet (waiting in the policy), those dropped as stale, and those a revert dropped. */
  get replanPending(): { pending: number; staleDropped: number; revertDropped: number } {
    const s = this.state as Partial<ReplanState>;
    return { pending: s.pending?.length ?? 0, staleDropped: s.staleDropped ?? 0, revertDropped: s.revertDropped ?? 0 };
  }

  /** The guard's layers of the last prefill (kept, switched, still watched); undefined with the guard off. */
  get guard(): GuardSummary | undefined {
    const g = (this.state as Partial<ReplanState>).guard;
    return g ? guardSummary(g) : undefined;
  }

  /**
   * One prefill layer's rows per expert (the eval's hook, while later layers compute): the replan
   * policy's swaps start now, as many as the upload queue has room for; the rest stay pending.
   */
  replanLayer(layer: number, counts: ArrayLike<number>): void {
    if (!this.replan.enabled) return;
    this.replanned.add(layer);
    if (!this.policy) return;
    this.look();
    const policy = this.policyFor(this.uploadRoom());
    const step = policy.step(this.state, { kind: 'prefillCounts', layer, counts: Array.from(counts) });
    this.state = step.state;
    for (const d of step.decisions) this.decide(d, true);
  }

  /**
   * After the prefill: its rows count into the heat (as in the replay); with replan on, the layers
   * the hook did not deliver are replanned from the routes now. routes: [nTokens][nLayer][k].
   */
  observePrefill(routes: Int32Array, nTokens: number): void {
    const policy = this.policy;
    if (!policy) return; // the tier counted the prefill's rows as they were bound
    const { nLayer, nExpert } = this.port;
    const k = routes.length / (nTokens * nLayer);
    this.look();
    for (let l = 0; l < nLayer; l++) {
      if (this.replanned.has(l)) continue;
      const counts = new Array<number>(nExpert).fill(0);
      for (let t = 0; t < nTokens; t++) for (let j = 0; j < k; j++) counts[routes[(t * nLayer + l) * k + j]]++;
      if (this.replan.enabled) this.replanLayer(l, counts);
      else this.state = policy.step(this.state, { kind: 'prefillCounts', layer: l, counts }).state;
    }
    this.replanned.clear();
  }

  /** Transfers the gate would start right now (free transfer and byte room, less the swaps it holds queued). */
  private uploadRoom(): number {
    const g = this.queue.state;
    const byBytes = Math.floor((g.inflightBytesMax - g.inflightBytes) / Math.max(1, this.port.expertBytes.container));
    return Math.max(0, Math.min(g.inflightTransfersMax - g.inflightTransfers, byBytes) - g.swapsQueued);
  }

  /** One decode token's routing [nLayer][k], then its tick; swaps go to the upload queue. */
  observeDecode(routes: Int32Array): void {
    this.observeRoutes(routes);
    this.issue(this.tick());
  }

  /**
   * observe: a decode step's routing [rows][nLayer][k] into the policy (the tier's residency first):
   * one row, or a batched step's rows of several sequences, each row a route of its own.
   */
  observeRoutes(routes: Int32Array, rows = 1): void {
    const policy = this.policy;
    if (this.full || !policy) return;
    const { nLayer } = this.port;
    const k = routes.length / (nLayer * rows);
    this.look();
    for (let t = 0; t < rows; t++) {
      for (let l = 0; l < nLayer; l++) {
        const at = (t * nLayer + l) * k;
        const experts = new Array<number>(k);
        for (let j = 0; j < k; j++) experts[j] = routes[at + j];
        const step = policy.step(this.state, { kind: 'route', layer: l, experts });
        this.state = step.state;
        if (step.decisions.length > 0) this.routeDecisions.push(...step.decisions);
      }
    }
  }

  /** decide: the decode tick after observeRoutes; its decisions (none when every expert is resident). */
  tick(): readonly Decision[] {
    if (!this.policy) {
      this.port.policyTick(); // the tier's clock: one decode token passed
      return [];
    }
    if (this.full) return [];
    const step = this.policy.step(this.state, { kind: 'decodeTick', token: this.token++ });
    this.state = step.state;
    if (this.routeDecisions.length === 0) return step.decisions;
    const decided = [...this.routeDecisions, ...step.decisions];
    this.routeDecisions = [];
    return decided;
  }

  /** issue: decisions through the upload queue to the tier; fills wait for the next request. */
  issue(decisions: readonly Decision[]): void {
    for (const d of decisions) this.decide(d);
  }

  /**
   * Prefetch (observe / enforce, any tier): each layer's budget of reads a prediction may start,
   * from the transfer window of the layer it starts beside (layer l's prediction is made at layer
   * l - 1's start, so l - 1's measured compute is its window; docs/SPEC.md section 4), less the bytes the
   * upload queue has in flight; one expert until both a compute and a transfer sample exist. Sent to
   * the tier before every eval (a tuned mode applies there: the next step's first layer boundary);
   * off is sent once, when a tune turns it off.
   */
  publishPrefetch(calibration: CalibrationSnapshot | undefined): void {
    const mode = this.prefetch.mode;
    if (mode === 'off') {
      if (this.prefetchSent !== 'off') this.port.setPrefetch('off', 0);
      this.prefetchSent = 'off';
      return;
    }
    const { nLayer, nExpert } = this.port;
    const budget = (this.prefetchBudget ??= new Int32Array(nLayer));
    const gate: NativeGateStats = this.queue.state;
    const limits = {
      safety: this.prefetch.safety,
      windowBytesMax: this.prefetch.windowBytesMax,
      inflightBytesMax: gate.inflightBytesMax,
    };
    for (let l = 0; l < nLayer; l++) {
      const window =
        l === 0 || calibration === undefined
          ? undefined
          : transferWindowBytes(calibration, l - 1, gate.inflightBytes, 0, limits);
      budget[l] = Math.min(nExpert, prefetchCount(window, this.port.expertBytes.container));
    }
    this.port.setPrefetch(mode, this.prefetch.candidates ?? this.nExpertUsed, budget, this.prefetch.queueMax);
    this.prefetchSent = mode;
  }

  /** The prefetch's settings now (a tune changes them from the next step on). */
  get prefetchConfig(): PrefetchConfig {
    return this.prefetch;
  }

  /** A tuned prefetch (validated by the caller): sent before the next eval (the tier evicts for it at need). */
  tunePrefetch(next: PrefetchConfig): void {
    this.prefetch = next;
  }

  private decide(d: Decision, now = false): void {
    this.counts.decided++;
    if (d.kind === 'fill') {
      // Slots only come free through a failed upload; fills wait for the next request's start
      // (takeFills), where the tier can upload and wait without racing a running step.
      if (!this.fills.some((f) => f.layer === d.expert.layer && f.expert === d.expert.expert))
        this.fills.push(d.expert);
      return;
    }
    const id = this.nextTaskId++;
    this.send({
      kind: 'enqueue',
      task: {
        id,
        layer: d.newcomer.layer,
        expert: d.newcomer.expert,
        victimExpert: d.victim.expert,
        bytes: this.port.expertBytes.container,
        ...(now ? { issueNow: true } : {}),
      },
    });
  }

  private send(message: UploadQueueMessage): void {
    this.apply(this.queue.send(message));
  }

  private apply(effects: UploadQueueEffect[]): void {
    for (const e of effects) {
      if (e.kind === 'cancelled') this.counts.dropped += e.count;
      else if (e.kind === 'dropped') {
        if (e.reason === 'refused') this.counts.refused++;
        else this.counts.dropped++;
      }
    }
  }

  /** Counts the placement's swaps that failed (the gate retired every upload itself). Returns the poll for stats and traces. */
  settle(poll: TierPoll): TierPoll {
    for (const u of poll.uploads) if (u.taskId > 0 && !u.ok) this.counts.failed++; // task 0: the tier's own (misses, prefetches)
    return poll;
  }

  /** The fills decided since the last call (free slots after failed uploads), one list per layer. */
  takeFills(): ExpertKey[] {
    const out = this.fills;
    this.fills = [];
    return out;
  }

  /** Queued (not yet issued) swaps of this request are dropped; issued ones finish on their own. */
  endRequest(): void {
    this.send({ kind: 'cancelQueued' });
    // A request's guard watches end with it (its summary was read): the next prefill starts anew.
    const s = this.state as Partial<ReplanState>;
    if (s.guard) this.state = { ...this.state, guard: guardInit(s.guard.mode, this.port.nLayer) } as ReplanState;
  }

  /** Live tuning: validated by the caller; applied now, so before the next step's boundary. */
  tune(
    params: LfruParams | undefined,
    limits: Partial<UploadQueueLimits> | undefined,
    replan?: PrefillReplanConfig,
  ): void {
    if (limits) this.send({ kind: 'tune', limits });
    if (params) this.params = params;
    if (replan) this.replan = replan;
    if ((params || replan) && this.policy) {
      this.policy = this.policyFor(0);
      const p = this.choice.policy === 'lfru' ? replanParams(this.params, this.replan, 0) : undefined;
      if (p) this.state = withReplanFields(this.state as LfruState, p, this.port.nLayer);
    }
  }

  /** Residents of `layer` in the policy's view, lowest score first (the victims of a shrink). */
  coldestResidents(layer: number): number[] {
    this.look();
    return this.byScore(layer, true)
      .sort((a, b) => a.score - b.score)
      .map((x) => x.expert);
  }

  /** Up to n non-residents of `layer` in the policy's view, highest score (heat, then recency) first. */
  hottestOutside(layer: number, n: number): number[] {
    this.look();
    return this.byScore(layer, false)
      .sort((a, b) => b.score - a.score)
      .slice(0, Math.max(0, n))
      .map((x) => x.expert);
  }

  /** The chosen policy's scores (higher: keep): LFRU's (heat << 8) | recent, or the tier's dlfu scores. */
  private byScore(layer: number, resident: boolean): Array<{ expert: number; score: number }> {
    const row = this.state.residency.resident[layer];
    const tierScores = this.tierOwnsPolicy ? this.port.policyScores() : undefined;
    const score = (e: number): number =>
      tierScores ? tierScores[layer * this.port.nExpert + e] : lfruScore(this.state as LfruState, layer, e);
    const out: Array<{ expert: number; score: number }> = [];
    for (let e = 0; e < row.length; e++) if ((row[e] === 1) === resident) out.push({ expert: e, score: score(e) });
    return out;
  }

  /**
   * The placement's stepped policy: LFRU, or replan over it (guarded or not; with replan off
   * and the guard on, the replan held in reserve). startPerCall is the upload queue's room at the
   * call (replan is rebuilt per prefill call with it). Every state a policy steps came from its own
   * init or step (a tune between LFRU and replan gives the state the replan fields: withReplanFields),
   * so the casts hold.
   */
  private policyFor(startPerCall: number): Policy<PlacementState> {
    const p = replanParams(this.params, this.replan, startPerCall);
    return (p ? makeReplan(p) : makeLfru(this.params)) as unknown as Policy<PlacementState>;
  }

  /** After the tier's slot budgets changed: a tier that now holds every expert skips the tick. */
  afterResize(): void {
    this.full = this.port.slotsPerLayer.every((slots) => slots >= this.port.nExpert);
  }

  /** The policy's residency becomes the tier's (see the top of this file). */
  private look(): void {
    this.state = { ...this.state, residency: this.view() };
  }

  /**
   * The tier's snapshot as the policy sees it: resident or incoming = resident (a swap the gate holds
   * queued: its newcomer incoming, its victim outgoing), then the fills waiting for the next request.
   */
  private view(): Residency {
    const { nLayer, nExpert } = this.port;
    const { states } = this.port.expertStates();
    const resident = Array.from({ length: nLayer }, (_, l) => {
      const row = new Uint8Array(nExpert);
      for (let e = 0; e < nExpert; e++) {
        const s = states[l * nExpert + e];
        row[e] = s === ExpertState.resident || s === ExpertState.incoming ? 1 : 0;
      }
      return row;
    });
    for (const f of this.fills) resident[f.layer][f.expert] = 1;
    const used = resident.map((row) => row.reduce((n, v) => n + v, 0));
    return {
      budget: { scope: 'layer', slots: Math.max(...this.port.slotsPerLayer) },
      experts: nExpert,
      resident,
      used,
      total: used.reduce((a, b) => a + b, 0),
    };
  }
}

/** The replan policy's parameters, or undefined for plain LFRU (replan and the guard both off). */
function replanParams(params: LfruParams, replan: PrefillReplanConfig, startPerCall: number): ReplanParams | undefined {
  if (!replan.enabled && !replan.guard) return undefined;
  return {
    ...params,
    capPerLayer: replan.maxSwapsPerLayer,
    startPerCall,
    drainPerToken: replanDrainPerToken,
    guard: replan.guard ? replanDefaults.guard : undefined,
    apply: replan.enabled,
    planLeadMin: replan.guard ? replanDefaults.planLeadMin : 1,
  };
}
