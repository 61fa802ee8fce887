/**
 * bench/profile.mjs splits callgrind's counts by the forward pass's phase functions: each name it
 * looks for must be a phase of the native forward pass (a renamed phase would silently count 0).
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';

describe('bench/profile.mjs', () => {
  it('names only phase functions the native forward pass defines, each in one category', async () => {
    // @ts-expect-error plain .mjs bench module without declarations
    const { PHASES } = (await import('../../bench/profile.mjs')) as { PHASES: Record<string, string[]> };
    const source = ['forward_eval.cc', 'forward_attention.cc', 'forward_mla.cc', 'forward_moe.cc']
      .map((f) => readFileSync(new URL(`../../native/cpu/${f}`, import.meta.url), 'utf8'))
      .join('\n');
    const all = Object.values(PHASES).flat();
    expect(new Set(all).size).toBe(all.length);
    for (const fn of all) expect(source, fn).toMatch(new RegExp(`\\bvoid ${fn}\\(void\\* arg`));
    expect(Object.keys(PHASES)).toEqual(['attention', 'router', 'experts', 'head']);
  });
});
