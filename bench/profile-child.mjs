/**
 * The program bench/profile.mjs runs under callgrind (--dump-after=mt_eval: one profile part per
 * eval): four evals of the built engine, one thread.
 *   part 1  one token          (warm-up: the kernels' one-time ISA check runs here)
 *   part 2  the prompt          one prefill chunk of PROMPT rows
 *   part 3  8 prompt tokens     a request's prefill
 *   part 4  one decode token    that request's next token
 */
import { importDist } from './lib/moetier.mjs';

const [model, promptText] = process.argv.slice(2);
const rows = Number(promptText);
const { openEngine } = await importDist('src/index.js');
const engine = await openEngine({ model, threads: 1, contextTokens: Math.max(64, rows + 16) });
const prompt = Array.from({ length: rows }, (_, i) => 100 + ((i * 37) % 1000));
await engine.logits([5]);
await engine.logits(prompt);
for await (const _ of engine.generate(prompt.slice(0, 8), { maxTokens: 2, stopAtEos: false }));
await engine.close();
