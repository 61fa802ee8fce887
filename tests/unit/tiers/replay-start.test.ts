/**
 * The replay reproduces a real start (issue 15): --heat F (an engine heat file), --score-from N (a
 * warm-up replayed but not scored), --prefill-from F (another trace's real prefill rows) and
 * --prefill-permute SEED (a misleading prefill), through the CLI's parse and the lab.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { parseReplayArgs, replayMain } from '../../../src/cli/commands/replay.js';
import { InvalidOptionError } from '../../../src/core/errors.js';
import { routeCounts } from '../../../src/routes/load.js';
import { labScenario, loadTraceFiles } from '../../../src/tiers/lab.js';
import { policyByName } from '../../../src/tiers/policies/index.js';
import { replay } from '../../../src/tiers/replay.js';
import { isResident } from '../../../src/tiers/residency.js';
import { permuteCounts } from '../../../src/tiers/scenario.js';
import { hottestFirst } from '../../../src/tiers/start.js';
import { readHeatTable } from '../../../src/engine/heat-file.js';

const fixtures = path.join(__dirname, '../../fixtures/routes');
const stars = path.join(fixtures, 'small-stars.jsonl');
const rocket = path.join(fixtures, 'small-rocket.jsonl');
const heatFile = path.join(fixtures, 'heat-code.json');
const olmoe = path.join(__dirname, '../../../../shared/traces/olmoe-1b-7b.decode.jsonl');
const scratch = mkdtempSync(path.join(os.tmpdir(), 'moetier-replay-start-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

async function jsonRows(argv: string[]): Promise<Array<Record<string, unknown>>> {
  let text = '';
  await replayMain([...argv, '--json'], (t) => (text += t));
  return JSON.parse(text);
}

describe('--heat F', () => {
  it("starts every policy from the heat file's hottest experts per layer, as the engine's warm start does", () => {
    const [trace] = loadTraceFiles([stars]);
    const heat = readHeatTable(heatFile, 8, 32);
    const sc = labScenario(trace, { scope: 'layer', heat }, 12);
    expect(sc.startKind).toBe('heat');
    for (let l = 0; l < 8; l++) {
      for (const e of hottestFirst(heat[l]).slice(0, 12)) expect(isResident(sc.start, l, e)).toBe(true);
    }
    // The LFRU scores start from it too: without it the same trace replays to another hit rate.
    const withHeat = replay(policyByName('lfru')!, sc, 'hosted');
    const cold = replay(policyByName('lfru')!, labScenario(trace, { scope: 'layer' }, 12), 'hosted');
    expect(withHeat.hits).not.toBe(cold.hits);
  });

  it('through the CLI: the rows say start heat; a missing, malformed or misshapen file is a typed error', async () => {
    const rows = await jsonRows(['--trace', stars, '--heat', heatFile, '--budget', '12', '--policy', 'lfru']);
    expect(rows[0]).toMatchObject({ start: 'heat', policy: 'lfru' });
    await expect(jsonRows(['--trace', stars, '--heat', path.join(scratch, 'none.json')])).rejects.toThrow(/--heat/);
    const bad = path.join(scratch, 'bad.json');
    writeFileSync(bad, '{"version": 1, "arch": "x", "layers": 8');
    await expect(jsonRows(['--trace', stars, '--heat', bad])).rejects.toThrow(/heat file/);
    await expect(jsonRows(['--trace', olmoe, '--heat', heatFile])).rejects.toThrow(InvalidOptionError); // 8 x 32 against 16 x 64
    await expect(jsonRows(['--trace', stars, '--heat', heatFile, '--heat-from-prefix', '8'])).rejects.toThrow(
      /not both/,
    );
  });
});

describe('--score-from N', () => {
  it('replays the first N tokens (their decisions count) but scores only the later ones', () => {
    const [trace] = loadTraceFiles([olmoe]);
    const full = labScenario(trace, { scope: 'layer' }, 16);
    const warm = labScenario(trace, { scope: 'layer', scoreFrom: 100 }, 16);
    const static_ = policyByName('static')!;
    const a = replay(static_, full, 'hosted');
    const b = replay(static_, warm, 'hosted');
    expect(b.tokens).toBe(a.tokens - 100);
    expect(b.routed).toBe((a.tokens - 100) * 16 * 8);
    // A static set hits the same on every token: the scored part is the full replay less the first 100 tokens.
    let firstHits = 0;
    for (const step of full.decode.slice(0, 100))
      step.forEach((ids, l) => ids.forEach((e) => (firstHits += isResident(full.start, l, e) ? 1 : 0)));
    expect(b.hits).toBe(a.hits - firstHits);
    // An adaptive policy learns during the warm-up: its scored hits differ from a replay that starts at token 100.
    const lru = policyByName('lru')!;
    const cut = labScenario({ ...trace, decode: trace.decode.slice(100) }, { scope: 'layer' }, 16);
    expect(replay(lru, warm, 'hosted').hits).not.toBe(replay(lru, cut, 'hosted').hits);
  });

  it('is checked against the tokens left after the prefixes', () => {
    expect(parseReplayArgs(['--trace', olmoe, '--score-from', '20']).lab.scoreFrom).toBe(20);
    const [trace] = loadTraceFiles([olmoe]);
    expect(() => labScenario(trace, { scope: 'layer', heatFromPrefix: 200, scoreFrom: 99 }, 16)).toThrow(
      /--score-from/,
    );
    expect(() => labScenario(trace, { scope: 'layer', scoreFrom: -1 }, 16)).toThrow(InvalidOptionError);
  });
});

describe('--prefill-from F and --prefill-permute SEED', () => {
  it("take another trace's real prefill rows, or relabel the prefill per layer", async () => {
    const [s, r] = loadTraceFiles([stars, rocket]);
    const rows = await jsonRows([
      '--trace',
      stars,
      '--prefill-from',
      rocket,
      '--budget',
      '12',
      '--policy',
      'replan-unguarded',
    ]);
    const expected = replay(
      policyByName('replan-unguarded')!,
      labScenario(s, { scope: 'layer', prefill: routeCounts(r.prefill, 8, 32) }, 12),
      'hosted',
    );
    expect(rows[0].hits).toBe(expected.hits);
    const own = replay(policyByName('replan-unguarded')!, labScenario(s, { scope: 'layer' }, 12), 'hosted');
    expect(own.hits).not.toBe(expected.hits);
    await expect(jsonRows(['--trace', stars, '--prefill-from', olmoe])).rejects.toThrow(/prefill rows/);

    const counts = routeCounts(s.prefill, 8, 32);
    const permuted = permuteCounts(counts, 3);
    expect(permuted).toEqual(permuteCounts(counts, 3));
    permuted.forEach((row, l) => expect([...row].sort((a, b) => a - b)).toEqual([...counts[l]].sort((a, b) => a - b)));
    expect(permuted).not.toEqual(counts);
    await expect(jsonRows(['--trace', olmoe, '--prefill-permute', '3'])).rejects.toThrow(/a prefill to permute/);
  });

  it('the prefetch replay refuses them (it has no prefill, heat file or warm-up)', () => {
    for (const flag of ['--heat', '--prefill-from', '--prefill-permute', '--score-from']) {
      expect(() => parseReplayArgs(['--trace', olmoe, '--prefetch', 'off,enforce', flag, '1'])).toThrow(
        new RegExp(flag),
      );
    }
  });
});

describe('rows', () => {
  it("every row has its hit rate over Belady's; guarded policies report their layers", async () => {
    const rows = await jsonRows([
      '--trace',
      stars,
      '--heat',
      heatFile,
      '--budget',
      '12',
      '--policy',
      'lfru,replan,belady',
    ]);
    const by = Object.fromEntries(rows.map((r) => [r.policy, r]));
    expect(by.belady.hitRateOverBelady).toBe(1);
    expect(by.lfru.hitRateOverBelady).toBeCloseTo((by.lfru.hitRate as number) / (by.belady.hitRate as number), 12);
    expect(by.lfru.guardKept).toBeNull();
    // The stars prompt misleads every layer: the guard reverts all 8.
    expect(by.replan).toMatchObject({ guardKept: 0, guardSwitched: 8 });
  });
});
