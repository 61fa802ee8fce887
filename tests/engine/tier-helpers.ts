/** Shared by the tier tests: a tiny synthetic model in a temp folder, and token collection. */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { openEngine, type Engine, type GenerateOptions } from '../../src/engine/engine.js';
import { writeSynthModel } from '../../src/synth/generate.js';
import type { RoutingKind } from '../../src/synth/routing.js';
import type { MemoryPlan } from '../../src/engine/memory-plan.js';

export function tempDir(prefix: string): { dir: string; cleanup: () => void } {
  const dir = mkdtempSync(path.join(tmpdir(), prefix));
  return { dir, cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}

/**
 * A tiny qwen3moe model: 4 layers x 8 experts, top-2. Planted routing for the tests that count on a
 * prompt's decode staying within its topic's experts (which experts a short prompt reads, replan swaps).
 */
export async function tinyModel(
  dir: string,
  quant: 'q8_0' | 'q4_0' | 'q2_k' | 'q3_k_m' = 'q8_0',
  seed = 7,
  routing: RoutingKind = 'realistic',
): Promise<string> {
  const file = path.join(dir, `tiny-${quant}-${seed}-${routing}.gguf`);
  await writeSynthModel({ preset: 'tiny', arch: 'qwen3moe', quant, seed, routing }, file);
  return file;
}

export async function collect(
  engine: Engine,
  prompt: string | number[],
  options: GenerateOptions = {},
): Promise<number[]> {
  const ids: number[] = [];
  for await (const t of engine.generate(prompt, options)) ids.push(t.id);
  return ids;
}

/** The prompt's ids and the tokens an engine without a tier generates from them: what every tier run must reproduce. */
export async function referenceRun(
  model: string,
  text: string,
  maxTokens: number,
): Promise<{ prompt: number[]; reference: number[] }> {
  const plain = await openEngine({ model, threads: 1, contextTokens: 128 });
  try {
    const prompt = plain.tokenize(text);
    return { prompt, reference: await collect(plain, prompt, { maxTokens, stopAtEos: false }) };
  } finally {
    await plain.close();
  }
}

/** The parts of a memory plan that do not shrink with the budget: a budget of this plus n slot strides per layer plans n slots. */
export function fixedPlanBytes(plan: MemoryPlan): number {
  const p = plan.parts;
  return p.dense + p.kvCache + p.scratch + p.ioBuffers + p.workingSet + p.prefillBuffer;
}
