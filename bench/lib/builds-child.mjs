/**
 * One measured run of bench/builds.mjs in its own process: the moetier built at `root` (its dist/
 * and native build) on `model` at `threads` threads, the decode bench's protocol (a warm-up of 16
 * prompt tokens and 4 generated, then a 128-token prompt and 64 greedy tokens, a fresh engine);
 * prints { decodeTokPerS, prefillTokPerS } as one JSON line.
 */
import { pathToFileURL } from 'node:url';
import path from 'node:path';

const [root, model, threadsText, promptText, tokensText] = process.argv.slice(2);
const threads = Number(threadsText);
const promptTokens = Number(promptText);
const maxTokens = Number(tokensText);
const { openEngine } = await import(pathToFileURL(path.join(root, 'dist/src/index.js')).href);
const prompt = Array.from({ length: promptTokens }, (_, i) => 100 + ((i * 37) % 5000));
const engine = await openEngine({ model, threads, contextTokens: promptTokens + maxTokens + 8 });
try {
  const run = async (ids, n) => {
    for await (const token of engine.generate(ids, { maxTokens: n, temperature: 0, stopAtEos: false })) void token;
    return engine.lastStats;
  };
  await run(prompt.slice(0, 16), 4);
  const stats = await run(prompt, maxTokens);
  process.stdout.write(
    `${JSON.stringify({ decodeTokPerS: stats.decodeTokPerS, prefillTokPerS: stats.prefillTokPerS })}\n`,
  );
} finally {
  await engine.close();
}
