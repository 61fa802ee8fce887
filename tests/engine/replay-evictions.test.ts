/**
 * One implementation of the eviction policy (issue 26): the evictions the engine's tier decides at
 * the moment a slot is needed (native/tier/tier_policy.cc, decayed LFU) are the decisions
 * `moetier replay --policy dlfu` makes on the engine's own route trace (src/tiers/policies/dlfu.ts,
 * which runs the same native code over its own rows).
 *
 *   engine:  openEngine(dlfu, 2 slots a layer, cold start 'ids') -> generate(traceRoutes F); every
 *            poll's uploads recorded: a kept or admitted miss is an upload of task 0 into its
 *            victim's slot (layer, newcomer, victim), in the order the tier issued them
 *   replay:  F -> the CLI's parse, scenario and replay(dlfu) with an observer: its swap decisions
 *   assert:  per layer, the same (victim, newcomer) pairs in the same order; the tokens unchanged
 *
 * disk: each miss is read into its slot before it runs (admit before run). On the cpu tier each
 * decode miss runs from its host copy and is uploaded into the victim's slot while the layer
 * computes (mode keep): checked apart, see below. The prompt is longer than the disk tier's short-prefill limit, so its misses are read
 * whole-layer and none is admitted (the replay's prefillCounts keeps none either).
 */
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import path from 'node:path';
import { openEngine } from '../../src/engine/engine.js';
import { TierPlacement } from '../../src/engine/tier/placement.js';
import type { TierPoll, TierUpload } from '../../src/engine/tier/port.js';
import { parseReplayArgs } from '../../src/cli/commands/replay.js';
import { labScenario, loadTraceFiles } from '../../src/tiers/lab.js';
import { policyByName } from '../../src/tiers/policies/index.js';
import { replay } from '../../src/tiers/replay.js';
import { collect, referenceRun, tempDir, tinyModel } from './tier-helpers.js';

const { dir, cleanup } = tempDir('moetier-replay-evictions-');
afterAll(cleanup);
let model: string;
let prompt: number[];
let reference: number[];
const maxTokens = 64;
const slotsPerLayer = 2;

beforeAll(async () => {
  model = await tinyModel(dir, 'q8_0', 13);
  ({ prompt, reference } = await referenceRun(
    model,
    'the ship will sail across the sea and we compile the function to debug the program then the rocket will launch',
    maxTokens,
  ));
});

type Pair = { victim: number; newcomer: number };

/** Every poll's uploads, as the placement settles them (restore the spy after). */
function recordUploads(): { uploads: TierUpload[]; spy: { mockRestore(): void } } {
  const uploads: TierUpload[] = [];
  const settle = TierPlacement.prototype.settle;
  const spy = vi.spyOn(TierPlacement.prototype, 'settle').mockImplementation(function (
    this: TierPlacement,
    poll: TierPoll,
  ) {
    uploads.push(...poll.uploads);
    return settle.call(this, poll);
  });
  return { uploads, spy };
}

/** Per layer, the replay's swaps in decision order (and no fill: every slot starts full). */
function replayedSwaps(file: string, layers: number): Pair[][] {
  const { files, lab } = parseReplayArgs([
    '--trace',
    file,
    '--budget',
    String(slotsPerLayer),
    '--policy',
    'dlfu',
    '--offload',
    'hostless',
  ]);
  const [trace] = loadTraceFiles(files);
  const out: Pair[][] = Array.from({ length: layers }, () => []);
  replay(policyByName('dlfu')!, labScenario(trace, lab, lab.budgets[0]), lab.offload, (event, _before, decisions) => {
    if (event.kind !== 'route') expect(decisions, `${event.kind}: dlfu decides on routes only`).toEqual([]);
    for (const d of decisions) {
      expect(d.kind).toBe('swap');
      if (d.kind === 'swap') out[d.newcomer.layer].push({ victim: d.victim.expert, newcomer: d.newcomer.expert });
    }
  });
  return out;
}

/** Per layer, the tier's swaps of task 0 (kept or admitted misses) in the order it issued them. */
function engineSwaps(uploads: readonly TierUpload[], layers: number): Pair[][] {
  const out: Pair[][] = Array.from({ length: layers }, () => []);
  const swaps = uploads.filter((u) => u.victim >= 0).sort((a, b) => a.issuedNs - b.issuedNs);
  for (const u of swaps) {
    expect(u.taskId, 'decided by the tier, not queued by the placement').toBe(0);
    expect(u.ok).toBe(true);
    out[u.layer].push({ victim: u.victim, newcomer: u.expert });
  }
  return out;
}

describe.each(['disk'] as const)("the %s tier's evictions at need", (backend) => {
  it("are the replay's dlfu decisions on the engine's route trace, one for one", async () => {
    const file = path.join(dir, `routes-${backend}.jsonl`);
    const { uploads, spy } = recordUploads();
    const engine = await openEngine({
      model,
      backend,
      threads: 1,
      contextTokens: 128,
      slotsPerLayer,
      heat: false,
      placementPolicy: 'dlfu',
    });
    const layers = engine.hparams.nLayer;
    try {
      expect(await collect(engine, prompt, { maxTokens, stopAtEos: false, traceRoutes: file })).toEqual(reference);
    } finally {
      await engine.close();
      spy.mockRestore();
    }
    const fromEngine = engineSwaps(uploads, layers);
    const fromReplay = replayedSwaps(file, layers);
    for (let l = 0; l < layers; l++) expect(fromEngine[l], `layer ${l}`).toEqual(fromReplay[l]);
    // Not a vacuous pass: the decode kept misses on every layer.
    expect(fromReplay.every((pairs) => pairs.length > 0)).toBe(true);
  });
});

describe('the cpu tier (host copies, mode keep)', () => {
  it('keeps each decode miss by the same policy, with the tokens unchanged', async () => {
    // Not compared one for one: a kept miss's upload overlaps its layer on the backend's thread,
    // and an expert whose upload has not landed when its layer next needs a slot is no victim
    // there (the replay applies each decision at once). The disk tier's admitted reads land
    // within their own layer call, so there the two agree exactly (above).
    const { uploads, spy } = recordUploads();
    const engine = await openEngine({
      model,
      backend: 'cpu',
      threads: 1,
      contextTokens: 128,
      slotsPerLayer,
      heat: false,
      placementPolicy: 'dlfu',
    });
    try {
      expect(await collect(engine, prompt, { maxTokens, stopAtEos: false })).toEqual(reference);
      expect(engine.lastStats!.failedUploads).toBe(0);
    } finally {
      await engine.close();
      spy.mockRestore();
    }
    const kept = engineSwaps(uploads, engine.hparams.nLayer);
    expect(kept.every((pairs) => pairs.length > 0)).toBe(true);
    // Each kept newcomer displaced a resident of its own layer, never itself.
    for (const pairs of kept) for (const p of pairs) expect(p.victim).not.toBe(p.newcomer);
  });
});
