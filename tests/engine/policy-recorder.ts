/**
 * A placement policy wrapped so that every call it answers is written down: for init, the context
 * it started from; for each step, the event, the residency of the state it was given and the
 * decisions it returned. Used by replay-decisions.test.ts on both sides: the engine's policies
 * (its factories mocked to wrap what they build) and the replay's.
 */
import { residentIds, type Residency } from '../../src/tiers/residency.js';
import type { Decision, Policy, TierEvent } from '../../src/tiers/types.js';

export interface RecordedInit {
  layers: number;
  experts: number;
  /** Resident expert ids per layer of ctx.start. */
  start: number[][];
  heat: number[][] | undefined;
}

export interface RecordedStep {
  event: TierEvent;
  /** Resident expert ids per layer in the state the policy was given. */
  before: number[][];
  decisions: Decision[];
  /** The parameters the policy was built with (replan: startPerCall, the upload queue's room). */
  params: Record<string, number>;
}

export class PolicyLog {
  inits: RecordedInit[] = [];
  steps: RecordedStep[] = [];

  clear(): void {
    this.inits = [];
    this.steps = [];
  }
}

/** Where the engine's policies write (the mocked factories wrap into it). */
export const engineLog = new PolicyLog();

export function idsOf(r: Residency): number[][] {
  return r.resident.map((_, l) => residentIds(r, l));
}

export function recording<S extends { residency: Residency }>(
  policy: Policy<S>,
  params: object,
  into: PolicyLog,
): Policy<S> {
  const p = { ...params } as Record<string, number>;
  return {
    name: policy.name,
    kind: policy.kind,
    offline: policy.offline,
    init(ctx) {
      const r = policy.init(ctx);
      into.inits.push({
        layers: ctx.layers,
        experts: ctx.experts,
        start: idsOf(ctx.start),
        heat: ctx.heat?.map((row) => Array.from(row)),
      });
      return r;
    },
    step(s, event) {
      const before = idsOf(s.residency);
      const r = policy.step(s, event);
      into.steps.push({
        event: structuredClone(event),
        before,
        decisions: structuredClone([...r.decisions]),
        params: p,
      });
      return r;
    },
  };
}
