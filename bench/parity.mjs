/**
 * npm run parity [-- --threads T --tokens N --update-results]
 *
 * moetier vs llama.cpp (node-llama-cpp, in a child process) on the same generated GGUF files,
 * greedy from the same prompt ids:
 *
 *   for each model (tiny/small x q8_0/q4_0 qwen3moe, and tiny q8_0 of each architecture):
 *     moetier:   open engine -> tokenize the 3 parity prompts -> greedy N -> first-step logits
 *     llama.cpp: one child, one load -> the same ids -> greedy N, top-2 at every step
 *                (and its own tokenization of the text, special tokens parsed as moetier's default
 *                 does: tokenize(text, specialTokens = true); tokenizationIdentical compares the two)
 *     compare:   identical ids? max |first-step logit diff|; on divergence, both top-2 there
 *
 * Prints one JSON line { allTokensIdentical, cases, ... } and saves it to results/local/parity.json
 * (git-ignored); with --update-results to results/parity.json and its summary to the parity table
 * in README.md.
 * Exit code 1 when a case diverges or a run fails.
 */
import { basename } from 'node:path';
import { compareCase, summarizeParity } from './lib/compare.mjs';
import { ensureBenchDeps } from './lib/deps.mjs';
import { greedy, importDist, openMoetier, presetModel, shiftedLogits, top2AtStep } from './lib/moetier.mjs';
import { parseBenchArgs, positiveInt, runBenchMain } from './lib/options.mjs';
import { resultsTarget, updateReadme, writeResults } from './lib/output.mjs';
import { parityTable } from './lib/readme.mjs';
import { runLlamaCpp } from './llamacpp/runner.mjs';

const models = [
  { preset: 'tiny', arch: 'qwen3moe', quant: 'q8_0' },
  { preset: 'tiny', arch: 'qwen3moe', quant: 'q4_0' },
  { preset: 'small', arch: 'qwen3moe', quant: 'q8_0' },
  { preset: 'small', arch: 'qwen3moe', quant: 'q4_0' },
  { preset: 'tiny', arch: 'qwen2moe', quant: 'q8_0' },
  { preset: 'tiny', arch: 'olmoe', quant: 'q8_0' },
  { preset: 'tiny', arch: 'llama', quant: 'q8_0' },
  // The files users download (issue 16): llama-quantize's k-quant mixes (src/synth/quant-mix.ts).
  // Tiny's rows (64, 32) are not multiples of 256, so its mixes are llama-quantize's fallback types.
  ...['q4_k_m', 'q5_k_m', 'q6_k', 'q2_k'].flatMap((quant) => [
    { preset: 'tiny', arch: 'qwen3moe', quant },
    { preset: 'small', arch: 'qwen3moe', quant },
  ]),
  ...['qwen2moe', 'olmoe', 'llama'].map((arch) => ({ preset: 'tiny', arch, quant: 'q4_k_m' })),
  { preset: 'small', arch: 'qwen3moe', quant: 'iq4_xs' }, // IQ4_XS experts (tiny's rows fall back to IQ4_NL, as q2_k's)
  // YaRN-scaled RoPE (issue 30's rotation: src/model/rope.ts).
  { preset: 'tiny-yarn', arch: 'qwen3moe', quant: 'q8_0' },
  // GLM-4.5's layers (issue 30): partial rotary, q/k/v biases, sigmoid routing with a selection bias, x2.5, an ungated shared expert.
  { preset: 'tiny', arch: 'glm4moe', quant: 'q8_0' },
  { preset: 'small', arch: 'glm4moe', quant: 'q8_0' },
  // GLM-4.5's leading dense layer (issue 30): layer 0 a plain FFN of 4x the expert width, no router, no experts.
  { preset: 'tiny-dense', arch: 'glm4moe', quant: 'q8_0' },
  // DeepSeek-V2 / V3's layers (issue 30): latent attention (K_b absorbed into the query, one cached row of
  // latent + roped key), a leading dense layer, two ungated shared experts; tiny without q-LoRA and with
  // V2-Lite's softmax routing, small with q-LoRA and V3's sigmoid routing, selection bias, x2.5 and groups.
  { preset: 'tiny', arch: 'deepseek2', quant: 'q8_0' },
  { preset: 'small', arch: 'deepseek2', quant: 'q8_0' },
  // gpt-oss's layers (issue 30, experts in Q8_0, not MXFP4): attention sinks, a sliding window of 8 on the
  // even layers, q/k/v/o biases, YaRN x32, the router bias, softmax over the top-k logits, expert biases, swiglu_oai.
  { preset: 'tiny', arch: 'gpt-oss', quant: 'q8_0' },
  { preset: 'small', arch: 'gpt-oss', quant: 'q8_0' },
  // gpt-oss as published (issue 30): MXFP4 experts (llama-quantize's MXFP4_MOE: the other matrices Q8_0).
  { preset: 'tiny', arch: 'gpt-oss', quant: 'mxfp4' },
  { preset: 'small', arch: 'gpt-oss', quant: 'mxfp4' },
];
const seed = 1;
const contextTokens = 512;

const usage = `usage: npm run parity [-- options]   (or: node bench/parity.mjs [options])

moetier vs llama.cpp on the same generated GGUF files, greedy from the same prompt ids: are the
tokens identical, how far apart are the first-step logits (needs the bench install: cd bench && npm ci).
Exit code 1 when a case diverges or a run fails.`;

const options = {
  threads: { type: 'string', default: '1', help: 'compute threads of both engines' },
  tokens: { type: 'string', default: '64', help: 'greedy tokens per prompt' },
  models: { type: 'string', default: '', help: 'only these cases: preset/arch/quant,... (default: every case)' },
};

async function main(argv) {
  const values = parseBenchArgs(argv, { usage, options });
  if (!values) return;
  const threads = positiveInt('threads', values.threads, 64);
  const maxTokens = positiveInt('tokens', values.tokens, 4096);
  ensureBenchDeps();
  const { PARITY_PROMPTS, promptText } = await importDist('src/synth/prompts.js');
  const cases = [];
  const only = values.models ? values.models.split(',') : undefined;
  const chosen = only ? models.filter((m) => only.includes(`${m.preset}/${m.arch}/${m.quant}`)) : models;
  if (only && chosen.length !== only.length)
    throw new Error(`--models: cases from ${models.map((m) => `${m.preset}/${m.arch}/${m.quant}`).join(', ')}`);
  for (const spec of chosen)
    cases.push(...(await parityForModel(spec, PARITY_PROMPTS, promptText, threads, maxTokens)));
  const summary = summarizeParity(cases, {
    threads,
    maxTokens,
    seed,
    logitsAre:
      "shifted so that each engine's top-1 logit is 0 (node-llama-cpp exposes softmax probabilities, not raw logits)",
  });
  const line = JSON.stringify(summary);
  const target = resultsTarget(values['update-results']);
  writeResults(target, 'parity', JSON.stringify(summary, null, 2) + '\n');
  updateReadme(target, 'parity', parityTable(summary));
  process.stdout.write(line + '\n');
  if (!summary.allTokensIdentical) process.exitCode = 1;
}

/** All prompts of one model: one moetier engine, one llama.cpp child. */
async function parityForModel(spec, prompts, promptText, threads, maxTokens) {
  process.stderr.write(`parity: ${spec.preset}/${spec.arch}/${spec.quant}\n`);
  const modelPath = await presetModel({ ...spec, seed });
  const engine = await openMoetier(modelPath, threads, contextTokens);
  try {
    // The prompt text as the model's tokenizer kind wants it (gpt2 needs a leading space).
    const texts = prompts.map((p) => promptText(p, engine.tokenizer.kind));
    const promptTokens = texts.map((text) => engine.tokenize(text));
    const runs = texts.map((text, i) => ({ promptText: text, promptTokens: promptTokens[i] }));
    let peer;
    try {
      peer = await runLlamaCpp({ modelPath, threads, maxTokens, logitsMode: 'all', runs });
    } catch (error) {
      process.stderr.write(`  ${error.message}\n`);
      return prompts.map((p) => ({
        ...spec,
        prompt: p.name,
        identical: false,
        maxAbsLogitDiff: null,
        error: error.message,
      }));
    }
    const cases = [];
    for (const [i, { name: prompt }] of prompts.entries()) {
      const ours = await greedy(engine, promptTokens[i], maxTokens);
      const firstLogits = await shiftedLogits(engine, promptTokens[i]);
      const theirs = peer.results[i];
      const verdict = await compareCase({ tokens: ours.tokens, firstLogits }, theirs, (step) =>
        top2AtStep(engine, promptTokens[i], ours.tokens, step),
      );
      cases.push({
        ...spec,
        prompt,
        model: basename(modelPath),
        ...verdict,
        promptTokens: promptTokens[i].length,
        tokenizationIdentical: theirs.tokenizationIdentical,
        // The same ids (llama.cpp's) through both detokenizers.
        detokenizationIdentical: engine.detokenize([...promptTokens[i], ...theirs.tokens]) === theirs.detokenized,
        firstStepMargin: marginOf(theirs.top2[0]),
        minStepMargin: Math.min(...theirs.top2.map(marginOf).filter((m) => m !== null)),
      });
      process.stderr.write(
        `  ${prompt}: ${verdict.identical ? 'identical' : `diverges at step ${verdict.divergence.step}`}, max |dlogit| ${verdict.maxAbsLogitDiff.toExponential(2)}\n`,
      );
    }
    return cases;
  } finally {
    await engine.close();
  }
}

/** Top-1 minus top-2 logit (llama.cpp's): how decisive a greedy choice was. */
function marginOf(top2) {
  return top2 && top2.length === 2 ? top2[0].logit - top2[1].logit : null;
}

runBenchMain('parity', main);
