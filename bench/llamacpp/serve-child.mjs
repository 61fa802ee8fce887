/**
 * llama.cpp's side of the serve bench, in a child process: N sequences of one context generating
 * at once (node-llama-cpp batches the sequences' evaluations of one context together: its
 * continuous batching), greedy. Request on stdin: { modelPath, threads, maxTokens, prompts: number[][] }
 * (one prompt per sequence); reply on stdout: { ok, results: [{ tokens, startMs, firstMs, endMs }] }.
 */
import { performance } from 'node:perf_hooks';
import { getLlama, LlamaLogLevel } from 'node-llama-cpp';
import { runChild } from './child-io.mjs';

async function main(request) {
  const llama = await getLlama({
    gpu: false,
    build: 'never',
    usePrebuiltBinaries: true,
    skipDownload: true,
    progressLogs: false,
    maxThreads: request.threads,
    logLevel: LlamaLogLevel.error,
  });
  const model = await llama.loadModel({ modelPath: request.modelPath, gpuLayers: 0, useMmap: true });
  const n = request.prompts.length;
  const longest = Math.max(...request.prompts.map((p) => p.length));
  const context = await model.createContext({
    contextSize: n * (longest + request.maxTokens + 8),
    batchSize: Math.max(longest * n, 1),
    threads: { ideal: request.threads, min: request.threads },
    sequences: n,
  });
  const t0 = performance.now();
  const results = await Promise.all(
    request.prompts.map(async (prompt) => {
      const sequence = context.getSequence();
      const startMs = performance.now() - t0;
      let firstMs = startMs;
      let endMs = startMs;
      let tokens = 0;
      for await (const { token } of sequence.evaluateWithMetadata(
        prompt,
        {},
        { temperature: 0, yieldEogToken: true },
      )) {
        endMs = performance.now() - t0;
        if (tokens === 0) firstMs = endMs;
        tokens++;
        if (model.isEogToken(token) || tokens >= request.maxTokens) break;
      }
      return { tokens, startMs, firstMs, endMs };
    }),
  );
  await context.dispose();
  await model.dispose();
  await llama.dispose();
  return { ok: true, results };
}

runChild(main);
