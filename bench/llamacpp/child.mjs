/**
 * llama.cpp side of the peer harness, run as a child process (bad metadata can abort llama.cpp,
 * and an abort must not take the parent with it).
 *
 *   parent --(one JSON request on stdin)--> child --(one JSON line on stdout)--> parent
 *
 * Request: { modelPath, threads, maxTokens, logitsMode: 'none' | 'first' | 'all',
 *            runs: [{ promptTokens: number[], promptText?: string, maxTokens?, prefixTokens? }] }
 *   prefixTokens: evaluated first on the run's sequence, untimed (a conversation's earlier turn in
 *   the KV cache); the timings are then those of promptTokens over it (a second turn).
 * Reply:   { ok: true, llamaCppRelease, results: [{ tokens, stoppedAtEog, firstLogits, top2,
 *            tokenizationIdentical?, timings }] } | { ok: false, error }
 *
 * One model load serves all runs; each run gets a fresh context (empty KV cache).
 * Sampling is pure argmax: temperature 0 makes node-llama-cpp's sampler chain [greedy] alone;
 * token bias, repeat penalty, DRY and XTC join the chain only when asked for, and we ask for
 * none. Its greedy sampler keeps the first of equal logits: ties go to the lower id, as in moetier.
 *
 * Raw logits: node-llama-cpp 3.21.1 does not expose llama_get_logits to JavaScript. It exposes
 * `probabilities` = softmax over the sampler's candidates, which under the greedy chain are the
 * raw logits of the whole vocabulary; so log(p_i) - log(p_max) = l_i - l_max, the logits
 * shifted so that the top-1 is 0 (see ../lib/logits.mjs).
 */
import { performance } from 'node:perf_hooks';
import { getLlama, LlamaLogLevel } from 'node-llama-cpp';
import { runChild } from './child-io.mjs';
import { logitsFromProbabilities, topK } from '../lib/logits.mjs';

async function main(request) {
  const llama = await getLlama({
    gpu: false,
    build: 'never',
    usePrebuiltBinaries: true,
    skipDownload: true,
    progressLogs: false,
    maxThreads: request.threads,
    logLevel: LlamaLogLevel.error,
    logger: (level, message) => process.stderr.write(`[llama.cpp ${level}] ${message}`),
  });
  const loadStart = performance.now();
  const model = await llama.loadModel({ modelPath: request.modelPath, gpuLayers: 0, useMmap: true });
  const loadMs = performance.now() - loadStart;
  const results = [];
  for (const run of request.runs) results.push(await runOne(model, request, run));
  await model.dispose();
  const reply = { ok: true, llamaCppRelease: llama.llamaCppRelease, loadMs, results };
  await llama.dispose();
  return reply;
}

async function runOne(model, { threads, maxTokens: requestMaxTokens, logitsMode = 'none' }, run) {
  const { promptTokens, promptText, maxTokens = requestMaxTokens, prefixTokens = [] } = run;
  // One batch holds the whole prompt, so prefill is one evaluation, as in moetier.
  const context = await model.createContext({
    contextSize: prefixTokens.length + promptTokens.length + maxTokens + 8,
    batchSize: Math.max(promptTokens.length, prefixTokens.length, 1),
    threads: { ideal: threads, min: threads },
    sequences: 1,
  });
  const wantProbabilities = logitsMode !== 'none';
  const tokens = [];
  const top2 = [];
  let firstLogits = null;
  let stoppedAtEog = false;
  const sequence = context.getSequence();
  if (prefixTokens.length > 0) await sequence.evaluateWithoutGeneratingNewTokens(prefixTokens);
  const t0 = performance.now();
  let tFirst = t0;
  let tLast = t0;
  const generator = sequence.evaluateWithMetadata(
    promptTokens,
    { probabilities: wantProbabilities },
    { temperature: 0, yieldEogToken: true },
  );
  for await (const { token, probabilities } of generator) {
    tLast = performance.now();
    if (tokens.length === 0) tFirst = tLast;
    tokens.push(token);
    if (wantProbabilities && (logitsMode === 'all' || tokens.length === 1)) {
      const shifted = logitsFromProbabilities(probabilities);
      if (tokens.length === 1) firstLogits = Array.from(shifted, (v) => (Number.isFinite(v) ? v : null));
      top2.push(topK(shifted, 2));
    }
    if (model.isEogToken(token)) {
      stoppedAtEog = true;
      break;
    }
    if (tokens.length >= maxTokens) break;
  }
  const result = {
    contextThreads: context.currentThreads,
    tokens,
    stoppedAtEog,
    firstLogits,
    top2,
    ...(promptText == null ? {} : compareTokenization(model, promptText, promptTokens)),
    // llama.cpp's text of the prompt and the tokens, special tokens shown (its detokenizer's rules:
    // clean_spaces and the rest), for the parity's detokenizationIdentical.
    detokenized: model.detokenize([...promptTokens, ...tokens], true),
    timings: timings(promptTokens.length, tokens.length, tFirst - t0, tLast - tFirst),
  };
  await context.dispose();
  return result;
}

/** ttft covers the prompt's evaluation and the first sample; decode the N - 1 tokens after it. */
function timings(promptTokens, generatedTokens, ttftMs, decodeMs) {
  return {
    promptTokens,
    generatedTokens,
    ttftMs,
    prefillTokPerS: (promptTokens / ttftMs) * 1000,
    decodeTokPerS: generatedTokens > 1 ? ((generatedTokens - 1) / decodeMs) * 1000 : null,
  };
}

/**
 * llama.cpp's own tokenisation of the text, with BOS added the way the model's metadata asks, and
 * special tokens parsed: moetier's engine.tokenize parses them by default (parseSpecial), so both
 * sides read "<|im_start|>" as one token.
 */
function compareTokenization(model, text, ours) {
  const body = model.tokenize(text, true);
  const mine = model.tokens.shouldPrependBosToken ? [model.tokens.bos, ...body] : body;
  const identical = mine.length === ours.length && mine.every((t, i) => t === ours[i]);
  return { tokenizationIdentical: identical, llamaCppPromptTokens: mine };
}

runChild(main);
