/**
 * The engine and `moetier replay` make the same placement decisions on the same route trace.
 *
 *   engine:  openEngine(tier) -> generate(traceRoutes F)   policy calls recorded (mocked factories)
 *   replay:  F -> loadTraceFiles -> labScenario -> replay(policy, observer)   (the CLI's path)
 *   assert:  init context, then every step: event, residency given, decisions, item by item
 *
 * LFRU and replan are stepped by the placement in TypeScript; dlfu runs in the tier and decides each
 * eviction there (tests/engine/replay-evictions.test.ts compares those with the replay's).
 *
 * How the engine's calls are seen without touching src/engine/tier: TierPlacement builds every
 * policy it steps through makeLfru (src/tiers/policies/lfru.ts) or makeReplan (replan.ts), so
 * those two factories are mocked to wrap what they build in a recorder. With replan on, the
 * placement builds a new replan policy for every prefill layer (its startPerCall is the upload
 * queue's room at the call): each of those is wrapped too, and their steps land in order.
 *
 * Where the engine and the replay legitimately differ, the setup keeps them apart:
 *   - start:  the engine warmstarts from a heat file when it has one; the replay of a trace
 *             without a heat prefix starts from `ids` (each layer's lowest ids). heat: false
 *             makes the engine's cold start the same `ids` residency (checked: init context).
 *   - state across requests: the placement keeps its policy state (heat, ticks, residency)
 *             from request to request; a trace holds one request and its replay starts fresh.
 *             One request per engine here.
 *   - the tier's view: before each policy call the placement takes its residency from the
 *             tier's expert states (src/engine/tier/placement.ts), so a refused, failed or
 *             dropped swap (or fills, or a resize) shows in what the policy sees next; the
 *             replay applies decisions as made. No failure is injected, the budget is not
 *             tuned, and the residency each step was given is compared, so a view that differs
 *             from the decisions applied fails the test.
 *   - replan's startPerCall: the engine's is the upload queue's room at each prefill layer,
 *             the CLI's replan starts 8; with 2 slots a layer plans at most 2 swaps, so neither
 *             room binds (checked per call). Its cap is min(24, nExpert) = 8 against the CLI's
 *             24: both uncapped on 8 experts.
 *   - geometry: `moetier replay` refuses a trace whose model has no known byte geometry (the
 *             tiny synthetic model has none); the figures it prices are not decisions, so the test
 *             runs the CLI's parse, scenario and replay() and leaves out runLab's cost rows.
 */
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import path from 'node:path';
import { openEngine, type EngineOptions } from '../../src/engine/engine.js';
import type { GenerationStats } from '../../src/engine/stats.js';
import { parseReplayArgs } from '../../src/cli/commands/replay.js';
import { labScenario, loadTraceFiles } from '../../src/tiers/lab.js';
import { lfruDefaults } from '../../src/tiers/policies/lfru.js';
import { residencyOf, type Residency } from '../../src/tiers/residency.js';
import type { Policy } from '../../src/tiers/types.js';
import type { TierPlacement } from '../../src/engine/tier/placement.js';
import { replanDefaults } from '../../src/tiers/policies/replan.js';
import { policyByName } from '../../src/tiers/policies/index.js';
import { replay } from '../../src/tiers/replay.js';
import type { GuardSummary } from '../../src/tiers/policies/replan-guard.js';
import type { RouteStep } from '../../src/routes/types.js';
import { collect, referenceRun, tempDir, tinyModel } from './tier-helpers.js';
import { engineLog, idsOf, type RecordedInit, type RecordedStep } from './policy-recorder.js';

vi.mock(import('../../src/tiers/policies/lfru.js'), async (importOriginal) => {
  const m = await importOriginal();
  const { engineLog: log, recording } = await import('./policy-recorder.js');
  return { ...m, makeLfru: (p = m.lfruDefaults) => recording(m.makeLfru(p), p, log) };
});
vi.mock(import('../../src/tiers/policies/replan.js'), async (importOriginal) => {
  const m = await importOriginal();
  const { engineLog: log, recording } = await import('./policy-recorder.js');
  return { ...m, makeReplan: (p = m.replanDefaults) => recording(m.makeReplan(p), p, log) };
});

const { dir, cleanup } = tempDir('moetier-replay-decisions-');
afterAll(cleanup);
let model: string;
let prompt: number[];
let reference: number[];
/** Generated tokens: the first comes from the prefill, each later one from a decode step (63 decode ticks, 3 LFRU ticks at the default 16). */
const maxTokens = 64;
const slotsPerLayer = 2;
const budget = { scope: 'layer', slots: slotsPerLayer } as const;

beforeAll(async () => {
  model = await tinyModel(dir, 'q8_0', 13, 'planted');
  // Mixed topics: the prompt's routing disagrees with the cold start's experts 0..1, so replan swaps.
  ({ prompt, reference } = await referenceRun(
    model,
    'the ship will sail across the sea and we compile the function to debug the program then the rocket will launch',
    maxTokens,
  ));
});

type Step = Omit<RecordedStep, 'params'>;

/** One line per event, for a readable first diff: 'prefillCounts 0', 'route 3', 'decodeTick 12'. */
function shape(steps: readonly Step[]): string[] {
  return steps.map(({ event: e }) => `${e.kind} ${e.kind === 'decodeTick' ? e.token : e.layer}`);
}

/** The events the engine must feed: every layer's prefill counts, then per decode token every layer's route and the tick. */
function expectedShape(layers: number, decodeTokens: number): string[] {
  const out = Array.from({ length: layers }, (_, l) => `prefillCounts ${l}`);
  for (let t = 0; t < decodeTokens; t++)
    out.push(...Array.from({ length: layers }, (_, l) => `route ${l}`), `decodeTick ${t}`);
  return out;
}

/** `moetier replay --trace F --budget B --policy P`, up to the replay itself, with an observer. */
function replayAsCli(
  file: string,
  policyName: string,
): { init: RecordedInit; steps: Step[]; decode: RouteStep[]; guard: GuardSummary | undefined } {
  const { files, lab } = parseReplayArgs(['--trace', file, '--budget', String(slotsPerLayer), '--policy', policyName]);
  const [trace] = loadTraceFiles(files);
  const policy = policyByName(lab.policies[0])!;
  const sc = labScenario(trace, lab, lab.budgets[0]);
  const steps: Step[] = [];
  const counts = replay(policy, sc, lab.offload, (event, before, decisions) => {
    if (event.kind === 'init') expect(decisions).toEqual([]);
    else
      steps.push({ event: structuredClone(event), before: idsOf(before), decisions: structuredClone([...decisions]) });
  });
  return {
    init: { layers: sc.layers, experts: sc.experts, start: idsOf(sc.start), heat: sc.heat?.map((r) => [...r]) },
    steps,
    decode: trace.decode,
    guard: counts.guard,
  };
}

/** The engine's four placements: replan off or on, the guard (replan-guard.ts) on (the default) or off. */
/** The unmocked factory of a policy by its replay name, building it from a recorded step's parameters. */
async function pureFactory(
  name: string,
): Promise<(params: Record<string, unknown>) => Policy<{ residency: Residency }>> {
  if (name === 'lfru') {
    const { makeLfru } = await vi.importActual<typeof import('../../src/tiers/policies/lfru.js')>(
      '../../src/tiers/policies/lfru.js',
    );
    return (p) => makeLfru(p as never) as never;
  }
  const { makeReplan } = await vi.importActual<typeof import('../../src/tiers/policies/replan.js')>(
    '../../src/tiers/policies/replan.js',
  );
  return (p) => makeReplan(p as never) as never;
}

const cases = [
  { name: 'lfru (guard off)', policy: 'lfru', replanOn: false, guard: false },
  { name: 'lfru with the replan held in reserve (the default)', policy: 'lfru-guarded', replanOn: false, guard: true },
  { name: 'guarded prefill replan', policy: 'replan', replanOn: true, guard: true },
  { name: 'unguarded prefill replan', policy: 'replan-unguarded', replanOn: true, guard: false },
] as const;

describe.each(['cpu', 'fake'] as const)('engine and replay decisions on the %s backend', (backend) => {
  it.each(cases)(
    "$name: the replay of the engine's route trace sees the same events and makes the same decisions",
    async ({ policy, replanOn, guard }) => {
      const file = path.join(dir, `routes-${backend}-${policy}.jsonl`);
      const options: EngineOptions = {
        model,
        backend,
        threads: 1,
        contextTokens: 128,
        slotsPerLayer,
        heat: false,
        prefillReplan: { enabled: replanOn, guard },
      };
      engineLog.clear();
      const engine = await openEngine(options);
      const { nLayer: layers, nExpert: experts } = engine.hparams;
      let engineGuard: GenerationStats['replanGuard'];
      let refused = 0;
      try {
        expect(await collect(engine, prompt, { maxTokens, stopAtEos: false, traceRoutes: file })).toEqual(reference);
        // No swap failed (a failure shows in the tier's states, which the replay would not know of).
        expect(engine.lastStats!.failedUploads).toBe(0);
        engineGuard = engine.lastStats!.replanGuard;
        refused = (engine as unknown as { tier: { placement: TierPlacement } }).tier.placement.counts.refused;
        if (replanOn) {
          // Every layer's counts came through the eval's hook (a dropped post is replanned after the prefill, behind the layers that came).
          expect(engine.tierStats()!.layerHookCalls).toBe(layers);
          expect(engine.tierStats()!.layerHookDropped).toBe(0);
        }
      } finally {
        await engine.close();
      }
      const recorded = engineLog.steps;
      const cli = replayAsCli(file, policy);
      expect(cli.decode.length).toBe(maxTokens - 1);

      // The same parameters: the engine's defaults are the CLI's policies' (replan: see the file's top).
      for (const s of recorded) {
        expect(s.params).toMatchObject(lfruDefaults);
        if (replanOn || guard)
          expect(s.params).toMatchObject({
            capPerLayer: Math.min(replanDefaults.capPerLayer, experts),
            drainPerToken: replanDefaults.drainPerToken,
          });
        if (replanOn && s.event.kind === 'prefillCounts') {
          // The upload queue's room did not cut the layer's swaps short (nor did the CLI's 8).
          expect(s.decisions.length).toBeLessThan(s.params.startPerCall);
          expect(s.decisions.length).toBeLessThan(replanDefaults.startPerCall);
        }
      }
      // One placement, one policy init: the cold start the replay starts from. (Nothing recorded: the
      // placement no longer builds its policies through makeLfru / makeReplan, and this test must follow.)
      expect(engineLog.inits, "the engine's policy init, seen through the mocked factories").toEqual([cli.init]);
      const engineSteps: Step[] = recorded.map(({ event, before, decisions }) => ({ event, before, decisions }));
      expect(shape(engineSteps)).toEqual(expectedShape(layers, maxTokens - 1));
      expect(shape(cli.steps)).toEqual(shape(engineSteps));
      if (refused > 0) {
        // A policy may evict an expert whose own upload is still arriving (the guard: a replan swap it
        // reverts at the first checkpoints). The tier
        // takes swaps of plainly resident victims only, so it refuses that one, and the views part from
        // the replay's (which applies every decision at once), by the timing of an upload. What must
        // hold then is that the engine runs the pure policy: the same events, with the residency the
        // tier showed at each, make the same decisions (with the parameters each step was built with).
        const make = await pureFactory(policy);
        let state = make(recorded[0].params).init({
          layers,
          experts,
          start: residencyOf(experts, budget, cli.init.start),
        }).state;
        for (let i = 0; i < engineSteps.length; i++) {
          const step = make(recorded[i].params).step(
            { ...state, residency: residencyOf(experts, budget, engineSteps[i].before) },
            engineSteps[i].event,
          );
          expect(step.decisions, `policy step ${i} (${shape(engineSteps)[i]})`).toEqual(engineSteps[i].decisions);
          state = step.state;
        }
        // The events themselves are the trace's, one for one.
        for (let i = 0; i < engineSteps.length; i++) expect(cli.steps[i].event).toEqual(engineSteps[i].event);
        expect(refused).toBeLessThanOrEqual(layers * slotsPerLayer); // only the reverts of swaps in flight
      } else {
        for (let i = 0; i < engineSteps.length; i++)
          expect(cli.steps[i], `policy step ${i} (${shape(engineSteps)[i]})`).toEqual(engineSteps[i]);
      }
      // Not a vacuous pass: the run decided swaps (LFRU ticks; replan also in the prefill).
      const decided = engineSteps.flatMap((s) => s.decisions.map((d) => ({ d, kind: s.event.kind })));
      expect(decided.some((x) => x.kind === 'decodeTick')).toBe(true);
      if (replanOn) expect(decided.some((x) => x.kind === 'prefillCounts')).toBe(true);
      // The guard's verdicts per layer are the replay's (and the request outlived its last checkpoint).
      if (guard) {
        const g = cli.guard!;
        expect(engineGuard).toEqual({
          mode: g.mode,
          kept: g.kept,
          watching: 0,
          reverted: g.mode === 'replan' ? g.switched : 0,
          appliedLate: g.mode === 'shadow' ? g.switched : 0,
        });
        expect(g.kept + g.switched, 'the replan changed some layer, so the guard watched it').toBeGreaterThan(0);
      } else expect(engineGuard).toBeUndefined();
    },
  );
});
