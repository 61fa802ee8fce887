/** `moetier run` in process: every documented spelling, and errors under the flag the user typed. */
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { runCommand } from '../../src/cli/commands/run.js';
import { InvalidOptionError } from '../../src/core/errors.js';
import { collect, tempDir, tinyModel } from '../engine/tier-helpers.js';
import { refusal } from './refusal.js';
import { openEngine } from '../../src/engine/engine.js';
import { SHORT_PREFILL_TOKENS_AUTO } from '../../src/engine/tier/prefill-path.js';

const { dir, cleanup } = tempDir('moetier-run-flags-');
afterAll(cleanup);
let model: string;
beforeAll(async () => {
  model = await tinyModel(dir);
});

describe('moetier run flags', () => {
  it('sample as the long flags do, with llama-cli spellings (-n --n-predict -c --ctx-size --temp -s)', async () => {
    const lines: string[] = [];
    const spy = vi.spyOn(console, 'log').mockImplementation((s: string) => void lines.push(s));
    try {
      await runCommand.run([
        '-m',
        model,
        '-p',
        'red green blue',
        '--n-predict',
        '4',
        '-t',
        '1',
        '--ctx-size',
        '64',
        '--temp',
        '0.9',
        '--top-k',
        '4',
        '-s',
        '5',
        '--json',
      ]);
    } finally {
      spy.mockRestore();
    }
    const out = JSON.parse(lines.at(-1)!) as { tokens: number[] };
    const engine = await openEngine({ model, threads: 1, contextTokens: 64 });
    try {
      expect(out.tokens).toEqual(
        await collect(engine, 'red green blue', { maxTokens: 4, temperature: 0.9, topK: 4, seed: 5 }),
      );
    } finally {
      await engine.close();
    }
  });

  it('refuses a bad command line naming the flag as typed', async () => {
    const base = ['-m', model, '-p', 'x'];
    expect((await refusal([...base, '-c', '1'])).message).toMatch(/^option -c: expected an integer in \[2, /);
    expect((await refusal([...base, '--ctx-size', '1'])).option).toBe('--ctx-size');
    expect((await refusal([...base, '-n', '0'])).option).toBe('-n');
    expect((await refusal(['-m', model])).message).toMatch(/^option --prompt: expected a value/);
    expect((await refusal(['-m', `${model}.missing`, '-p', 'x'])).message).toMatch(
      /^option -m: expected an existing \.gguf file/,
    );
    expect((await refusal([...base, '--top-p', '2'])).message).toMatch(
      /^option --top-p: expected a number in \(0, 1\]/,
    );
    expect((await refusal([...base, '--slots-per-layer', '48'])).message).toMatch(
      /^option --slots-per-layer: expected an integer in \[1, 8\]/,
    );
    expect((await refusal([...base, '--resident', '0.5', '--slots-per-layer', '2'])).message).toMatch(
      /either --resident or --slots-per-layer/,
    );
    expect((await refusal([...base, '--resident', '0', '--heat', 'none'])).option).toBe('--resident');
  });
});

describe('moetier run --replan-guard', () => {
  async function jsonOf(args: string[]): Promise<Record<string, unknown>> {
    const lines: string[] = [];
    const spy = vi.spyOn(console, 'log').mockImplementation((s: string) => void lines.push(s));
    try {
      await runCommand.run(args);
    } finally {
      spy.mockRestore();
    }
    return JSON.parse(lines.at(-1)!) as Record<string, unknown>;
  }
  it("reports the guard's layers in --json (on by default, both modes), none when off; a bad value names the flag", async () => {
    const base = [
      '-m',
      model,
      '-p',
      'red green blue yellow',
      '-n',
      '40',
      '-t',
      '1',
      '-c',
      '64',
      '--heat',
      'none',
      '--slots-per-layer',
      '2',
      '--json',
    ];
    const shadow = (await jsonOf(base)).replanGuard as Record<string, number>;
    expect(shadow).toMatchObject({ mode: 'shadow', reverted: 0, watching: 0 });
    const replan = (await jsonOf([...base, '--prefill-replan'])).replanGuard as Record<string, number>;
    expect(replan).toMatchObject({ mode: 'replan', appliedLate: 0, watching: 0 });
    // 40 tokens outlive the last checkpoint: every watched layer was decided.
    expect(replan.kept + replan.reverted).toBeGreaterThan(0);
    expect((await jsonOf([...base, '--prefill-replan', '--replan-guard', 'off'])).replanGuard).toBeUndefined();
    expect((await refusal([...base, '--replan-guard', 'yes'])).option).toBe('--replan-guard');
  });
});

describe('moetier run --memory-budget', () => {
  it('plans the memory, reports the plan in --json and --verbose, and names the flag when refused', async () => {
    const lines: string[] = [],
      errs: string[] = [];
    const log = vi.spyOn(console, 'log').mockImplementation((s: string) => void lines.push(s));
    const err = vi.spyOn(console, 'error').mockImplementation((s: string) => void errs.push(String(s)));
    try {
      await runCommand.run([
        '-m',
        model,
        '-p',
        'red green blue',
        '-n',
        '4',
        '-t',
        '1',
        '-c',
        '64',
        '--heat',
        'none',
        '--memory-budget',
        '1G',
        '--json',
        '--verbose',
      ]);
    } finally {
      log.mockRestore();
      err.mockRestore();
    }
    const out = JSON.parse(lines.at(-1)!) as {
      memoryPlan: { budgetBytes: number; holdsEveryExpert: boolean; parts: Record<string, number> };
      config: { memoryBudgetBytes: number; tier: unknown; threads: number };
    };
    expect(out.memoryPlan.budgetBytes).toBe(1024 ** 3);
    // The resolved configuration: a budget that holds every expert needs no tier.
    expect(out.config).toMatchObject({ memoryBudgetBytes: 1024 ** 3, tier: null, threads: 1 });
    expect(errs.join('\n')).toContain('config: 1 threads, context 64 tokens, no expert tier');
    expect(out.memoryPlan.holdsEveryExpert).toBe(true);
    expect(out.memoryPlan.parts.dense).toBeGreaterThan(0);
    expect(errs.join('\n')).toMatch(/memory plan: budget 1\.00 GiB[\s\S]*every expert fits/);
    expect((await refusal(['-m', model, '-p', 'x', '--memory-budget', 'lots'])).option).toBe('--memory-budget');
    expect((await refusal(['-m', model, '-p', 'x', '--memory-budget', '1G', '--slots-per-layer', '2'])).option).toBe(
      '--memory-budget',
    );
  });
});

describe('moetier run --short-prefill-tokens and --prefetch', () => {
  it('report the prefill path and the prefetch in --json, and refuse a bad value or a missing tier by the flag', async () => {
    const lines: string[] = [];
    const log = vi.spyOn(console, 'log').mockImplementation((s: string) => void lines.push(s));
    try {
      const args = [
        '-m',
        model,
        '-p',
        'red green blue yellow',
        '-n',
        '4',
        '-t',
        '1',
        '-c',
        '64',
        '--heat',
        'none',
        '--backend',
        'disk',
        '--slots-per-layer',
        '2',
        '--json',
      ];
      await runCommand.run([...args, '--short-prefill-tokens', '0', '--prefetch', 'enforce']);
      await runCommand.run([...args, '--short-prefill-tokens', '1000']);
      await runCommand.run([...args, '--short-prefill-tokens', 'auto']);
    } finally {
      log.mockRestore();
    }
    type Out = {
      promptTokens: number;
      prefillPath: string;
      prefillExpertReads: number;
      prefetch?: { coverage: number | null; issued: number };
      config: { tier: Record<string, unknown> };
    };
    const [whole, onDemand, auto] = lines.slice(-3).map((l) => JSON.parse(l) as Out);
    // The resolved configuration in --json: the disk tier's defaults filled in (dlfu, misses admitted, the file read).
    expect(whole.config.tier).toMatchObject({
      backend: 'disk',
      slotsPerLayer: 2,
      readsFile: true,
      placementPolicy: 'dlfu',
      shortPrefillTokens: 0,
      disk: { admitMisses: true },
    });
    expect((whole.config.tier.prefetch as { mode: string }).mode).toBe('enforce');
    expect(onDemand.config.tier.shortPrefillTokens).toBe(1000);
    expect(whole.prefillPath).toBe('whole-layer');
    expect(whole.prefillExpertReads).toBeGreaterThan(0);
    expect(whole.prefetch?.issued).toBeGreaterThanOrEqual(0);
    expect(onDemand.prefillPath).toBe('on-demand');
    expect(onDemand.prefetch).toBeUndefined();
    expect(auto.prefillPath).toBe(auto.promptTokens <= SHORT_PREFILL_TOKENS_AUTO ? 'on-demand' : 'whole-layer');
    const base = ['-m', model, '-p', 'x'];
    expect(
      (await refusal([...base, '--backend', 'disk', '--slots-per-layer', '2', '--short-prefill-tokens', 'some']))
        .option,
    ).toBe('--short-prefill-tokens');
    expect((await refusal([...base, '--short-prefill-tokens', '8'])).option).toBe('--short-prefill-tokens');
    expect((await refusal([...base, '--prefetch', 'enforce'])).option).toBe('--prefetch');
    expect((await refusal([...base, '--slots-per-layer', '2', '--prefetch', 'always'])).option).toBe('--prefetch');
  });
});
