/** The lab on the real trace of ../shared/traces/ (OLMoE-1B-7B, 299 decode tokens), and the CLI. */
import { describe, expect, it } from 'vitest';
import { mkdtempSync, readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { loadTraceFiles, runLab } from '../../../src/tiers/lab.js';
import { policies, policyNames } from '../../../src/tiers/policies/index.js';
import { replayMain } from '../../../src/cli/commands/replay.js';
import type { ReplayRow } from '../../../src/tiers/report/rows.js';

const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');
const olmoe = path.resolve(repoRoot, '../shared/traces/olmoe-1b-7b.decode.jsonl');
const budgets = [16, 24, 32];

function checkBounds(rows: ReplayRow[]): void {
  for (const b of budgets) {
    const at = (name: string) => rows.find((r) => r.policy === name && r.budget === b)!;
    const bel = at('belady');
    for (const p of policies) {
      const r = at(p.name);
      if (p.kind === 'demand') expect(r.hitRate, `${p.name} @${b}`).toBeLessThanOrEqual(bel.hitRate);
      const loads = r.offload === 'hostless' ? r.uploads : r.misses + r.aheadUploads;
      expect(loads + r.setupUploads, `${p.name} @${b}`).toBeGreaterThanOrEqual(bel.misses);
    }
    expect(at('static').hitRate).toBeLessThanOrEqual(at('oracle-static').hitRate);
  }
  for (const name of ['belady', 'oracle-static']) {
    const hr = budgets.map((b) => rows.find((r) => r.policy === name && r.budget === b)!.hitRate);
    expect(hr[0]).toBeLessThan(hr[1]);
    expect(hr[1]).toBeLessThan(hr[2]);
  }
}

describe('replay of olmoe-1b-7b.decode.jsonl', () => {
  const traces = loadTraceFiles([olmoe]);

  it.each(['hosted', 'hostless'] as const)(
    'every policy at budgets 16/24/32 stays within the offline bounds (%s)',
    (offload) => {
      const rows = runLab(traces, { budgets, policies: policyNames, offload, scope: 'layer' });
      expect(rows).toHaveLength(budgets.length * policyNames.length);
      checkBounds(rows);
      for (const r of rows) {
        expect(r.tokens).toBe(299);
        expect(r.bytesPerToken).toBeCloseTo(r.uploadsPerToken * r.expertBytes, 6);
        expect(r.msPerTokenEstimate).toBeGreaterThan(0);
      }
    },
  );

  it('replays after a heat prefix, with prefill replan, under a global budget', () => {
    const rows = runLab(traces, {
      budgets,
      policies: policyNames,
      offload: 'hosted',
      scope: 'global',
      heatFromPrefix: 32,
      prefillFromPrefix: 32,
    });
    checkBounds(rows);
    expect(rows.every((r) => r.tokens === 299 - 32 && r.start === 'heat' && r.ttftMsEstimate !== null)).toBe(true);
  });

  it('moetier replay --json --plot writes the rows and an SVG with a line per policy', async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'replay-'));
    const svgPath = path.join(dir, 'out.svg');
    let text = '';
    const code = await replayMain(
      ['--trace', olmoe, '--budget', '16,24,32', '--json', '--plot', svgPath],
      (t) => (text += t),
    );
    expect(code).toBe(0);
    const rows = JSON.parse(text) as ReplayRow[];
    expect(rows).toHaveLength(3 * policyNames.length);
    for (const r of rows) {
      for (const k of [
        'trace',
        'policy',
        'budget',
        'hitRate',
        'uploadsPerToken',
        'bytesPerToken',
        'msPerTokenEstimate',
      ])
        expect(r).toHaveProperty(k);
      expect(r.costModel.h2dGBps).toBe(25);
      // Hosted, the engine's default is LFRU with the guarded replan in reserve: that row alone is marked.
      expect(r.default, r.policy).toBe(r.policy === 'lfru-guarded');
    }
    const svg = readFileSync(svgPath, 'utf8');
    for (const name of policyNames) {
      const m = svg.match(new RegExp(`<polyline data-series="${name}"[^>]* points="([^"]+)"`));
      expect(m, name).not.toBeNull();
      expect(m![1].split(' ')).toHaveLength(3);
    }
  });

  it('moetier replay --offload hostless --json reads per token against Belady, without belady in --policy', async () => {
    let text = '';
    await replayMain(
      ['--trace', olmoe, '--budget', '16,24', '--policy', 'lru,dlfu', '--offload', 'hostless', '--json'],
      (t) => (text += t),
    );
    const rows = JSON.parse(text) as ReplayRow[];
    const bel = runLab(traces, { budgets: [16, 24], policies: ['belady'], offload: 'hostless', scope: 'layer' });
    expect(rows.map((r) => `${r.policy}@${r.budget}`)).toEqual(['lru@16', 'dlfu@16', 'lru@24', 'dlfu@24']);
    // Host-less (the disk tier), the engine's default is dlfu, decided in the tier.
    expect(rows.filter((r) => r.default).map((r) => r.policy)).toEqual(['dlfu', 'dlfu']);
    for (const r of rows) {
      for (const k of ['readsPerToken', 'readBytesPerToken', 'beladyMissesPerToken', 'readsOverBelady'] as const) {
        expect(typeof r[k], `${r.policy}@${r.budget} ${k}`).toBe('number');
      }
      const b = bel.find((x) => x.budget === r.budget)!;
      expect(r.beladyMissesPerToken).toBe(b.misses / b.tokens);
      expect(r.readsOverBelady).toBeGreaterThan(1);
    }
  });

  it('prints a table with the cost-model assumptions', async () => {
    let text = '';
    await replayMain(
      ['--trace', olmoe, '--budget', '24', '--policy', 'lru,belady', '--offload', 'hostless'],
      (t) => (text += t),
    );
    expect(text).toContain('330 us/transfer');
    expect(text).toContain('olmoe-1b-7b-q4k');
    expect(text.split('\n').filter((l) => /^(lru|belady\*)\s+24\s/.test(l))).toHaveLength(2);
    expect(text).toMatch(/reads\/tok +MB read\/tok +Belady misses\/tok +reads\/Belady/);
    expect(text).toMatch(/^belady\*\s+24\s.*\s1\.00\s/m);
  });

  it('names the option and what it expects on bad input', async () => {
    await expect(replayMain(['--trace', olmoe, '--policy', 'fifo'], () => {})).rejects.toThrow(/--policy.*lru/);
    await expect(replayMain(['--trace', olmoe, '--budget', '65'], () => {})).rejects.toThrow(/--budget.*\[1, 64\]/);
    await expect(replayMain(['--trace', olmoe, '--heat-from-prefix', '299'], () => {})).rejects.toThrow(
      /--heat-from-prefix/,
    );
  });
});
