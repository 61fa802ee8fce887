/**
 * A tier request's step is one async function, top to bottom (src/engine/tier/request.ts runStep):
 * evaluate, settle, rebuild, observe, decide, issue, batch, calibrate. Here with stand-ins for the
 * port, the placement and the layer-compute actor: the stages run in that order, once per step; a
 * throw in a stage rejects the step and no later stage runs; a failed eval runs none of them.
 */
import { describe, expect, it } from 'vitest';
import type { LayerStepReport } from '../../src/actors/layer-compute/messages.js';
import { TierRequest } from '../../src/engine/tier/request.js';
import type { Decision } from '../../src/tiers/types.js';

const boom = new Error('stage failed');
const swap: Decision = { kind: 'swap', victim: { layer: 0, expert: 1 }, newcomer: { layer: 0, expert: 2 } };

function request(fail: { eval?: boolean; tick?: boolean } = {}) {
  const calls: string[] = [];
  const none = { uploads: [], evicted: [], reads: [] };
  const port = {
    resetStats: () => undefined,
    poll: () => (calls.push('settle'), none),
    readsMisses: true,
    stats: () => ({}),
  };
  const placement = {
    replanEnabled: false,
    inflightTransfers: 0,
    settle: (p: unknown) => p,
    observeRoutes: () => void calls.push('observe'),
    tick: () => {
      calls.push('decide');
      if (fail.tick) throw boom;
      return [swap];
    },
    issue: (d: readonly Decision[]) => void calls.push(`issue ${d.length}`),
    publishPrefetch: () => undefined,
  };
  const compute = {
    evaluate: async (step: { position: number }): Promise<LayerStepReport> => {
      calls.push('evaluate');
      if (fail.eval) throw boom;
      return {
        phase: 'decode',
        position: step.position,
        nTokens: 1,
        firstToken: 1,
        routes: new Int32Array(0),
        layerStats: new Float64Array(0),
        slot: 0,
      };
    },
  };
  const r = new TierRequest(port as never, placement as never, compute as never);
  const step = (position: number) => r.evaluate('decode', Int32Array.of(1), position, new Float32Array(1));
  return { calls, step };
}

describe('a tier request step', () => {
  it('runs its stages in order, once per step', async () => {
    const { calls, step } = request();
    await step(5);
    await step(6);
    expect(calls).toEqual([
      'evaluate',
      'settle',
      'observe',
      'decide',
      'issue 1',
      'evaluate',
      'settle',
      'observe',
      'decide',
      'issue 1',
    ]);
  });

  it('a throw in a stage rejects the step; the stages after it do not run', async () => {
    const { calls, step } = request({ tick: true });
    await expect(step(5)).rejects.toBe(boom);
    expect(calls).toEqual(['evaluate', 'settle', 'observe', 'decide']);
  });

  it('a failed eval runs no stage after it', async () => {
    const { calls, step } = request({ eval: true });
    await expect(step(5)).rejects.toBe(boom);
    expect(calls).toEqual(['evaluate']);
  });
});
