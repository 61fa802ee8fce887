import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { runCommand } from '../../src/cli/commands/run.js';
import { InvalidOptionError } from '../../src/core/errors.js';
import { openEngine } from '../../src/engine/engine.js';
import { readHeatFile } from '../../src/engine/heat-file.js';
import { parseTraceJsonl } from '../../src/routes/jsonl.js';
import { collect, tempDir, tinyModel } from './tier-helpers.js';

const { dir, cleanup } = tempDir('moetier-tier-stats-');
afterAll(cleanup);
let model: string;
const prompt = 'the quick brown fox jumps over the lazy dog and then the dog';

beforeAll(async () => {
  model = await tinyModel(dir);
});

async function runJson(args: string[]): Promise<Record<string, unknown>> {
  const lines: string[] = [];
  const spy = vi.spyOn(console, 'log').mockImplementation((s: string) => void lines.push(s));
  try {
    expect(
      await runCommand.run(['--model', model, '--prompt', prompt, '--json', '--threads', '1', '--ctx', '128', ...args]),
    ).toBe(0);
  } finally {
    spy.mockRestore();
  }
  return JSON.parse(lines.at(-1)!) as Record<string, unknown>;
}

describe('moetier run with an expert tier', () => {
  it('--resident 0.37 reports a decode hit rate in (0, 1) and the tokens of --resident 1 and of no tier', async () => {
    const common = ['-n', '24', '--heat', 'none'];
    const partial = await runJson([...common, '--resident', '0.37']);
    const full = await runJson([...common, '--resident', '1']);
    const none = await runJson(common);
    expect(partial.tokens).toEqual(full.tokens);
    expect(partial.tokens).toEqual(none.tokens);
    expect(partial.decodeHitRate).toBeGreaterThan(0);
    expect(partial.decodeHitRate).toBeLessThan(1);
    expect(partial.prefillHitRate).toBeGreaterThan(0);
    expect(partial.prefillHitRate).toBeLessThan(1);
    expect(full.decodeHitRate).toBe(1);
    expect(full.prefillHitRate).toBe(1);
    expect(full.uploads).toBe(0); // nothing to swap when every expert is resident
    for (const key of ['msPerToken', 'ttftMs', 'uploads', 'uploadBytes', 'moeMsPerToken', 'decodeTokPerS'])
      expect(partial).toHaveProperty(key);
    expect(partial.msPerToken).toBeGreaterThan(0);
    expect(none).not.toHaveProperty('decodeHitRate');
  });

  it('writes the route trace in the policy lab format and merges the heat file', async () => {
    const heat = path.join(dir, 'heat.json');
    const trace = path.join(dir, 'routes.jsonl');
    const out = await runJson(['-n', '6', '--slots-per-layer', '3', '--heat', heat, '--trace-routes', trace]);
    const [t] = parseTraceJsonl(readFileSync(trace, 'utf8'), trace);
    expect(t.header).toMatchObject({ layers: 4, experts: 8, topK: 2, rankOrder: true });
    expect(t.prefill.length).toBe(out.promptTokens);
    expect(t.decode.length).toBe((out.generatedTokens as number) - 1); // the last token is sampled, never evaluated
    expect(t.decode.map((s) => s.token)).toEqual((out.tokens as number[]).slice(0, -1));
    expect(existsSync(heat)).toBe(true);
    const h = readHeatFile(heat, { arch: 'qwen3moe', nLayer: 4, nExpert: 8 })!;
    const rows = t.prefill.length + t.decode.length;
    expect(h.routedPairs).toBe(rows * 4 * 2);
    // A second run merges: the counts double for the same prompt.
    await runJson(['-n', '6', '--slots-per-layer', '3', '--heat', heat]);
    expect(readHeatFile(heat, { arch: 'qwen3moe', nLayer: 4, nExpert: 8 })!.routedPairs).toBe(2 * rows * 4 * 2);
  });

  it('warmstarts from the heat file: the hottest experts per layer are resident', async () => {
    const heat = path.join(dir, 'heat-warm.json');
    const engine = await openEngine({ model, threads: 1, contextTokens: 128, slotsPerLayer: 2, heat });
    try {
      await collect(engine, prompt, { maxTokens: 12, stopAtEos: false });
      const cold = engine.lastStats!;
      await engine.close();
      const warm = await openEngine({ model, threads: 1, contextTokens: 128, slotsPerLayer: 2, heat });
      try {
        await collect(warm, prompt, { maxTokens: 12, stopAtEos: false });
        // The heat file of the same prompt is an oracle for it: better prefill hits than a cold start by id.
        expect(warm.lastStats!.prefillHitRate!).toBeGreaterThan(cold.prefillHitRate!);
      } finally {
        await warm.close();
      }
    } finally {
      await engine.close();
    }
  });

  it('refuses bad tier options with typed errors naming the option', async () => {
    await expect(openEngine({ model, resident: 0 })).rejects.toMatchObject({ option: 'resident' });
    await expect(openEngine({ model, resident: 1.5 })).rejects.toBeInstanceOf(InvalidOptionError);
    await expect(openEngine({ model, slotsPerLayer: 9 })).rejects.toMatchObject({ option: 'slotsPerLayer' });
    await expect(openEngine({ model, resident: 0.5, slotsPerLayer: 2 })).rejects.toBeInstanceOf(InvalidOptionError);
    await expect(openEngine({ model, resident: 0.5, backend: 'gpu' as 'cpu' })).rejects.toMatchObject({
      option: 'backend',
    });
    await expect(runCommand.run(['--model', model, '--prompt', 'x', '--backend', 'tpu'])).rejects.toMatchObject({
      option: '--backend',
    });
  });
});
