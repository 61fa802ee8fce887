/**
 * Realistic routing (issue 25, item 2): the small preset's greedy decodes of the routing prompts
 * route with the statistics of a real model (the bands around the OLMoE-1B-7B trace's values; small
 * has k / E = 4 / 32, OLMoE's ratio, so no statistic needs rescaling), and planted routing still locks.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openEngine } from '../../src/index.js';
import { buildSynthModel, writeSynthModel } from '../../src/synth/generate.js';
import { ROUTING_PROMPTS, promptText } from '../../src/synth/prompts.js';
import type { RoutingKind } from '../../src/synth/routing.js';
import { loadTraceFiles } from '../../src/tiers/lab.js';
import { pooledPhase, traceRouteStats } from '../../src/tiers/route-stats.js';

const dir = mkdtempSync(path.join(os.tmpdir(), 'moetier-routing-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

async function decodeStats(routing: RoutingKind) {
  const model = path.join(dir, `small-${routing}.gguf`);
  await writeSynthModel({ preset: 'small', arch: 'qwen3moe', quant: 'q8_0', seed: 1, routing }, model);
  const engine = await openEngine({ model, threads: 2, contextTokens: 256 });
  const files: string[] = [];
  const texts: string[] = [];
  const ids: number[][] = [];
  try {
    for (const [i, p] of ROUTING_PROMPTS.entries()) {
      const traceRoutes = path.join(dir, `${routing}-${i}.jsonl`);
      const prompt = promptText(p, engine.tokenizer.kind);
      const seq = [...engine.tokenizer.encode(prompt)].slice(-1);
      let text = '';
      for await (const t of engine.generate(prompt, { maxTokens: 64, traceRoutes, stopAtEos: false })) {
        text += t.text;
        seq.push(t.id);
      }
      files.push(traceRoutes);
      texts.push(text);
      ids.push(seq);
    }
  } finally {
    await engine.close();
  }
  return { stats: pooledPhase(loadTraceFiles(files).map(traceRouteStats), 'decode')!, texts, ids };
}

describe('realistic routing on the small preset (6 prompts x 64 greedy tokens)', () => {
  let realistic: Awaited<ReturnType<typeof decodeStats>>;
  beforeAll(async () => {
    realistic = await decodeStats('realistic');
  }, 120_000);

  it('sits inside the bands of a real trace', () => {
    const m = realistic.stats.mean;
    expect(realistic.stats.traces).toBe(ROUTING_PROMPTS.length);
    expect(m.entropy).toBeGreaterThanOrEqual(0.85);
    expect(m.entropy).toBeLessThanOrEqual(0.95);
    expect(m.topQuarterShare).toBeGreaterThanOrEqual(0.45);
    expect(m.topQuarterShare).toBeLessThanOrEqual(0.65);
    expect(m.reuseOverChance).toBeGreaterThanOrEqual(2.5);
    expect(m.reuseOverChance).toBeLessThanOrEqual(5);
    expect(m.window16Share).toBeGreaterThanOrEqual(0.45);
    expect(m.window16Share).toBeLessThanOrEqual(0.75);
    const [, lru25, , lru50] = m.lruHitRate as number[];
    expect(lru25).toBeGreaterThanOrEqual(0.5);
    expect(lru25).toBeLessThanOrEqual(0.7);
    expect(lru50).toBeGreaterThanOrEqual(0.7);
    expect(lru50).toBeLessThanOrEqual(0.88);
  });

  it("keeps the text: each decode walks its topic's word cycle from the prompt's last word", () => {
    const { vocab } = buildSynthModel({ preset: 'small', arch: 'qwen3moe', quant: 'q8_0', seed: 1 });
    for (const seq of realistic.ids) {
      expect(seq).toHaveLength(65);
      for (let t = 1; t < seq.length; t++) expect(vocab.pred[seq[t]], `token ${t}`).toBe(seq[t - 1]);
    }
    expect(realistic.texts[0]).toMatch(/^ anchor coral reef/); // after "... to the harbor"
  });

  it("planted routing still locks a decode into one topic's experts", async () => {
    const planted = await decodeStats('planted');
    expect(planted.stats.mean.topQuarterShare).toBeGreaterThan(0.95);
    expect(planted.stats.mean.window16Share).toBeLessThan(0.3);
    // the same words come out: routing moves expert outputs, which the planted LM head barely reads
    expect(planted.texts.slice(0, 2).map((t) => t.split(' ').slice(0, 4).join(' '))).toEqual(
      realistic.texts.slice(0, 2).map((t) => t.split(' ').slice(0, 4).join(' ')),
    );
  }, 120_000);
});
