/**
 * moetier side of the peer harness: the built engine from dist/ (the bench measures what users run).
 */
import { existsSync } from 'node:fs';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { BenchSetupError } from './errors.mjs';
import { shiftToMax, topK } from './logits.mjs';

export const repoRoot = fileURLToPath(new URL('../../', import.meta.url));

/** Import a module of the built engine, e.g. 'src/index.js'; a missing build says how to fix it. */
export async function importDist(relativePath) {
  const file = fileURLToPath(new URL(`../../dist/${relativePath}`, import.meta.url));
  if (!existsSync(file))
    throw new BenchSetupError(`moetier is not built (no dist/${relativePath})`, 'run `npm run build` first');
  return import(pathToFileURL(file).href);
}

/** Path of a generated preset model (realistic routing unless `routing: 'planted'`; cached in the user cache folder: ~/.cache/moetier or $MOETIER_CACHE_DIR); progress goes to stderr. */
export async function presetModel({ preset, arch, quant, seed = 1, routing = 'realistic' }) {
  const { ensurePresetModel } = await importDist('src/model/cache.js');
  let lastPercent = -1;
  return ensurePresetModel({ preset, arch, quant, seed, routing }, (done, total) => {
    const percent = total > 0 ? Math.floor((done / total) * 100) : 0;
    if (percent >= lastPercent + 10) {
      lastPercent = percent;
      process.stderr.write(`  generating ${preset}/${arch}/${quant}: ${percent}%\n`);
    }
  });
}

export async function openMoetier(modelPath, threads, contextTokens) {
  const { openEngine } = await importDist('src/index.js');
  return openEngine({ model: modelPath, threads, contextTokens });
}

/** Greedy run from prompt ids: { tokens, stats }. */
export async function greedy(engine, promptTokens, maxTokens) {
  const tokens = [];
  for await (const token of engine.generate(promptTokens, { maxTokens, temperature: 0 })) tokens.push(token.id);
  return { tokens, stats: engine.lastStats };
}

/** Logits after `tokens` from a fresh context, shifted so that the top-1 is 0 (see logits.mjs). */
export async function shiftedLogits(engine, tokens) {
  return shiftToMax(await engine.logits(tokens));
}

/** moetier's top-2 at a greedy step: the logits after prompt + the tokens generated before it. */
export async function top2AtStep(engine, promptTokens, generated, step) {
  return topK(await shiftedLogits(engine, [...promptTokens, ...generated.slice(0, step)]), 2);
}
