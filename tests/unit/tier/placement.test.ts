/**
 * The placement without the addon, against FakeTierPort: it decides from the tier's states
 * (never a copy of its own), issues through the upload queue (the tier's one gate), and a refused or
 * failed swap needs no reconciliation: the next decision sees what the tier did.
 */
import { describe, expect, it } from 'vitest';
import { TierPlacement } from '../../../src/engine/tier/placement.js';
import { ExpertState } from '../../../src/native/binding.js';
import { lfruDefaults } from '../../../src/tiers/policies/lfru.js';
import { FakeTierPort } from './fake-tier-port.js';

const nLayer = 2,
  nExpert = 6,
  slots = 2,
  k = 2;
/** One decode token routed to `experts` in every layer. */
const routes = (...experts: number[]) => Int32Array.from({ length: nLayer * k }, (_, i) => experts[i % k]);
/** Tokens routed to 4 and 5 until the tier was asked for `n` swaps (LFRU swaps once the newcomer is hotter than the victim's bar). */
function routeUntil(port: FakeTierPort, placement: TierPlacement, n: number): void {
  for (let t = 0; t < 40 && port.requests.length < n; t++) placement.observeDecode(routes(4, 5));
  expect(port.requests.length).toBeGreaterThanOrEqual(n);
}
/** A placement ticking every token, one swap per tick. */
function setup(upload = {}) {
  const port = new FakeTierPort(nLayer, nExpert, slots);
  const placement = new TierPlacement(port, { ...lfruDefaults, tickTokens: 1, swapsPerTick: 1 }, upload, undefined);
  return { port, placement };
}

describe('placement against a fake tier port', () => {
  it('swaps a routed non-resident in for the coldest resident; the swap goes to the tier at once', () => {
    const { port, placement } = setup();
    routeUntil(port, placement, 1);
    for (const r of port.requests) {
      expect([4, 5]).toContain(r.newcomer);
      expect([0, 1]).toContain(r.victim);
    }
    expect(placement.swapsOutstanding).toBe(port.requests.length); // the fake gate queues none: all in flight
    // The policy's next view is the tier's: the newcomer (incoming) counts as resident.
    const first = port.requests[0];
    expect(port.state(first.layer, first.newcomer)).toBe(ExpertState.incoming);
  });

  it("gives the tier's gate its limits and reads its room from it, keeping no count of its own", () => {
    const { port, placement } = setup({ inflightTransfersMax: 1 });
    expect(port.gateLimits).toEqual({ inflightBytesMax: 512 * 2 ** 20, inflightTransfersMax: 1, queueDepthMax: 4096 });
    routeUntil(port, placement, 1);
    expect(placement.swapsOutstanding).toBe(port.inFlight.size);
    const first = port.requests[0];
    port.land(first.taskId, true);
    placement.settle(port.poll());
    expect(placement.swapsOutstanding).toBe(port.inFlight.size);
    placement.tune(undefined, { inflightBytesMax: 4000 });
    expect(port.gateLimits).toEqual({ inflightBytesMax: 4000, inflightTransfersMax: 1, queueDepthMax: 4096 });
    placement.endRequest();
    expect(port.cancelCalls).toBe(1); // a request's swaps still queued at the gate are dropped there
  });

  it('a refused swap is counted and the next decision reads the tier, with no resync', () => {
    const { port, placement } = setup();
    port.refuseNext = -2;
    routeUntil(port, placement, 1);
    expect(placement.counts.refused).toBe(1);
    const refused = port.requests[0];
    // The tier did nothing for it: its newcomer is still none, its victim resident.
    expect(port.state(refused.layer, refused.newcomer)).toBe(ExpertState.none);
    expect(port.state(refused.layer, refused.victim)).toBe(ExpertState.resident);
    // A later tick decides the same swap again (the policy saw the tier's truth, not its own guess).
    routeUntil(port, placement, 2);
    const again = port.requests.slice(1).find((r) => r.layer === refused.layer);
    expect(again?.newcomer).toBe(refused.newcomer);
  });

  it('a failed upload is counted; the slot it left is filled with the newcomer next', () => {
    const { port, placement } = setup({ inflightTransfersMax: 1 });
    routeUntil(port, placement, 1);
    const first = port.requests[0];
    port.land(first.taskId, false);
    placement.settle(port.poll());
    expect(placement.counts.failed).toBe(1);
    expect(port.state(first.layer, first.newcomer)).toBe(ExpertState.none);
    // The failed upload left a free slot (its victim's bytes were overwritten): the next ticks
    // decide a fill of it (done at the next request's start), hottest first: the same newcomer.
    for (let t = 0; t < 4; t++) placement.observeDecode(routes(4, 5));
    expect(placement.takeFills()).toContainEqual({ layer: first.layer, expert: first.newcomer });
  });

  it('a tier holding every expert skips the tick: nothing is read or decided', () => {
    const port = new FakeTierPort(nLayer, nExpert, nExpert);
    const placement = new TierPlacement(port, { ...lfruDefaults, tickTokens: 1 }, {}, undefined);
    placement.observeDecode(routes(4, 5));
    expect(placement.tick()).toEqual([]);
    expect(port.requests).toHaveLength(0);
  });
});
