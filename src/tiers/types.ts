/**
 * The vocabulary of placement policies, shared by the engine and `moetier replay`.
 *
 * A policy is pure: step(state, event) -> { state, decisions }. No I/O, no clock,
 * no randomness. The caller (engine or replay) moves the bytes that the decisions
 * name and keeps the statistics; the policy only decides.
 *
 *   events:    route(layer, experts)           one decode token's routing at one layer, rank order
 *              decodeTick(token)               after every layer of decode token `token` ran
 *              prefillCounts(layer, counts)    rows per expert over the prompt at one layer
 *   decisions: fill(expert)                    upload into a free slot
 *              swap(victim, newcomer)          overwrite the victim's slot: budget-neutral
 */
import type { Budget, Decision, ExpertKey } from './keys.js';
import type { Residency } from './residency.js';

export type { Budget, Decision, ExpertKey } from './keys.js';

export type TierEvent =
  | { kind: 'route'; layer: number; experts: readonly number[] }
  | { kind: 'decodeTick'; token: number }
  | { kind: 'prefillCounts'; layer: number; counts: readonly number[] };

/** Per layer and expert routing counts (a heat file, or a prompt's prefill): heat[layer][expert]. */
export type HeatTable = readonly (readonly number[])[];

/** A decode step's routing as the offline policies see the future: [layer][k] expert ids. */
export type FutureStep = readonly (readonly number[])[];

export interface PolicyContext {
  layers: number;
  experts: number;
  /** Device slots resident at the start (same for every policy compared). */
  start: Residency;
  /** Heat file counts, when one exists (LFRU scores start from it). */
  heat?: HeatTable;
  /** The decode routing to come: only offline policies (belady, oracle-static) may read it. */
  future?: readonly FutureStep[];
}

export interface PolicyStep<S> {
  state: S;
  decisions: readonly Decision[];
}

/**
 * demand: changes residency only to keep a routed miss (bounded by Belady's MIN).
 * ahead:  also swaps experts before they are routed (spends uploads to pass demand policies).
 * static: never changes residency after init.
 */
export type PolicyKind = 'demand' | 'ahead' | 'static';

export interface Policy<S extends { residency: Residency } = { residency: Residency }> {
  readonly name: string;
  readonly kind: PolicyKind;
  /** True when the policy reads ctx.future (an offline bound, not an online policy). */
  readonly offline: boolean;
  /** Decisions from ctx.start to the policy's own starting content (usually none). */
  init(ctx: PolicyContext): PolicyStep<S>;
  step(state: S, event: TierEvent): PolicyStep<S>;
}
