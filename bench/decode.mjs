/**
 * npm run bench -- decode [--rounds R] [--prompt-tokens P] [--tokens N] [--preset medium] [--update-results]
 *
 * Decode and prefill tok/s of moetier and llama.cpp on the medium qwen3moe preset, Q8_0, Q4_0 and
 * the Q4_K_M mix (llama-quantize's per-tensor types), at 1 and 2 threads, in one run so that both see the same machine state:
 *
 *   per quant: bytes/token (napkin math, lib/weights.mjs) and read bandwidth (1, 2 threads)
 *              round r = 1..R:  moetier@1  llama@1  moetier@2  llama@2   (alternating)
 *              medians per (engine, threads); each engine's best setting; ratios; bound and
 *              each engine's fraction of it (best decode tok/s / bandwidth bound)
 *
 * Each measured run is preceded, in its own process/engine, by a short warm-up run (page cache,
 * thread pool). Results go to results/local/decode.json (git-ignored); with --update-results to
 * results/decode.json and the table in README.md.
 */
import os from 'node:os';
import { measureReadBandwidth } from './lib/bandwidth.mjs';
import { ensureBenchDeps } from './lib/deps.mjs';
import { greedy, importDist, openMoetier, presetModel } from './lib/moetier.mjs';
import { oneOf, parseBenchArgs, positiveInt, runBenchMain } from './lib/options.mjs';
import { resultsTarget, updateReadme, writeResults } from './lib/output.mjs';
import { decodeTable } from './lib/readme.mjs';
import { bestByMedian, median } from './lib/stats.mjs';
import { decodeBytesPerToken } from './lib/weights.mjs';
import { runLlamaCpp } from './llamacpp/runner.mjs';

const threadCounts = [1, 2];
// q4_k_m: what users download (issue 16). Each quant is its own same-run comparison.
const QUANTS = ['q8_0', 'q4_0', 'q4_k_m'];
const arch = 'qwen3moe';
const bandwidthBytes = 512 * 1024 * 1024;
const warmupTokens = 4;

const usage = `usage: npm run bench -- decode [options]   (or: node bench/decode.mjs [options])

Decode and prefill tok/s of moetier and llama.cpp on the medium qwen3moe preset, Q8_0, Q4_0 and
Q4_K_M, at 1 and 2 threads, alternating rounds (needs the bench install: cd bench && npm ci; takes many
minutes and quiet CPUs).`;

const options = {
  rounds: { type: 'string', default: '5', help: 'alternating rounds per engine and thread count' },
  'prompt-tokens': { type: 'string', default: '128', help: 'prompt length' },
  tokens: { type: 'string', default: '64', help: 'tokens generated per run' },
  preset: { type: 'string', default: 'medium', help: 'tiny | small | medium' },
  quants: { type: 'string', default: QUANTS.join(','), help: `comma-separated, among ${QUANTS.join(', ')}` },
};

export async function main(argv) {
  const values = parseBenchArgs(argv, { usage, options });
  if (!values) return;
  const config = {
    preset: oneOf('preset', values.preset, ['tiny', 'small', 'medium']),
    rounds: positiveInt('rounds', values.rounds, 100),
    promptTokens: positiveInt('prompt-tokens', values['prompt-tokens'], 4096),
    maxTokens: positiveInt('tokens', values.tokens, 4096),
    quants: values.quants.split(',').map((q) => oneOf('quants', q.trim(), QUANTS)),
  };
  ensureBenchDeps();
  // The load average says whether other work shared the cores while this ran.
  const machine = { cpus: os.cpus().length, cpuModel: os.cpus()[0]?.model, loadAverageAtStart: os.loadavg() };
  const cases = [];
  for (const quant of config.quants) cases.push(await benchQuant(quant, config));
  machine.loadAverageAtEnd = os.loadavg();
  const results = { bench: 'decode', date: new Date().toISOString(), config, machine, cases };
  const target = resultsTarget(values['update-results']);
  writeResults(target, 'decode', JSON.stringify(results, null, 2) + '\n');
  updateReadme(target, 'decode', decodeTable(results));
  if (!target.readme) process.stdout.write(`${decodeTable(results)}\n`);
  for (const c of cases) process.stdout.write(JSON.stringify(headline(c)) + '\n');
}

async function benchQuant(quant, config) {
  const modelPath = await presetModel({ preset: config.preset, arch, quant, seed: 1 });
  const napkin = await napkinMath(modelPath);
  const bandwidth = {};
  for (const threads of threadCounts) {
    bandwidth[threads] = await measureReadBandwidth(bandwidthBytes, threads);
    progress(
      `${quant}: read bandwidth ${threads}T ${(bandwidth[threads].bytesPerS / 1e9).toFixed(1)} GB/s (${bandwidth[threads].source})`,
    );
  }
  const promptTokens = await benchPrompt(modelPath, config.promptTokens);
  const runs = { moetier: { 1: [], 2: [] }, llamaCpp: { 1: [], 2: [] } };
  for (let round = 0; round < config.rounds; round++) {
    for (const threads of threadCounts) {
      const ours = await moetierRun(modelPath, threads, promptTokens, config.maxTokens);
      runs.moetier[threads].push(ours);
      const theirs = await llamaRun(modelPath, threads, promptTokens, config.maxTokens);
      runs.llamaCpp[threads].push({ ...theirs, tokensIdentical: sameTokens(ours.tokens, theirs.tokens) });
      progress(
        `${quant} round ${round + 1}/${config.rounds} ${threads}T: moetier ${ours.decodeTokPerS.toFixed(1)} tok/s decode, ` +
          `llama.cpp ${theirs.decodeTokPerS.toFixed(1)} tok/s`,
      );
    }
  }
  return summarize({ quant, preset: config.preset, arch, modelPath, napkin, bandwidth, runs });
}

function summarize({ quant, preset, modelPath, napkin, bandwidth, runs }) {
  const ours = {
    decode: bestByMedian(runs.moetier, 'decodeTokPerS'),
    prefill: bestByMedian(runs.moetier, 'prefillTokPerS'),
  };
  const theirs = {
    decode: bestByMedian(runs.llamaCpp, 'decodeTokPerS'),
    prefill: bestByMedian(runs.llamaCpp, 'prefillTokPerS'),
  };
  const boundByThreads = Object.fromEntries(
    threadCounts.map((t) => [t, bandwidth[t].bytesPerS / napkin.bytesPerToken]),
  );
  const bound = Math.max(...Object.values(boundByThreads));
  const medians = (byThreads) =>
    Object.fromEntries(
      threadCounts.map((t) => [
        t,
        {
          decodeTokPerS: median(byThreads[t].map((r) => r.decodeTokPerS)),
          prefillTokPerS: median(byThreads[t].map((r) => r.prefillTokPerS)),
        },
      ]),
    );
  return {
    arch,
    preset,
    quant,
    model: modelPath,
    moetierDecodeTokPerS: ours.decode.median,
    moetierDecodeThreads: ours.decode.threads,
    llamaCppDecodeTokPerS: theirs.decode.median,
    llamaCppDecodeThreads: theirs.decode.threads,
    decodeRatio: ours.decode.median / theirs.decode.median,
    moetierPrefillTokPerS: ours.prefill.median,
    llamaCppPrefillTokPerS: theirs.prefill.median,
    prefillRatio: ours.prefill.median / theirs.prefill.median,
    bandwidthBoundTokPerS: bound,
    moetierBoundFraction: ours.decode.median / bound,
    llamaCppBoundFraction: theirs.decode.median / bound,
    bandwidthBoundByThreads: boundByThreads,
    readBandwidthGBPerS: Object.fromEntries(threadCounts.map((t) => [t, bandwidth[t].bytesPerS / 1e9])),
    bandwidthSource: bandwidth[threadCounts[0]].source,
    weightBytesPerToken: napkin.bytesPerToken,
    weightBytesPerTokenBreakdown: napkin.breakdown,
    fileWeightBytes: napkin.fileWeightBytes,
    medians: { moetier: medians(runs.moetier), llamaCpp: medians(runs.llamaCpp) },
    runs,
  };
}

/** Weight bytes per decode token from the file's own tensor table (read by node-llama-cpp's parser). */
async function napkinMath(modelPath) {
  const { readGgufFileInfo } = await import('node-llama-cpp');
  const info = await readGgufFileInfo(modelPath, { readTensorInfo: true, logWarnings: false });
  const meta = info.metadata;
  const archMeta = meta[meta.general.architecture];
  const tensors = info.tensorInfo.map((t) => ({ name: t.name, ggmlType: t.ggmlType, dims: t.dimensions }));
  return decodeBytesPerToken(tensors, {
    nExpert: archMeta.expert_count,
    nExpertUsed: archMeta.expert_used_count,
    nVocab: meta.tokenizer.ggml.tokens.length,
  });
}

/** The parity prompts, tokenized and repeated up to `count` ids (BOS once, at the start). */
async function benchPrompt(modelPath, count) {
  const { PARITY_PROMPTS, promptText } = await importDist('src/synth/prompts.js');
  const engine = await openMoetier(modelPath, 1, count + 8);
  try {
    const text = PARITY_PROMPTS.map((p) => promptText(p, engine.tokenizer.kind)).join(' ');
    const ids = engine.tokenize(text);
    const body = engine.tokenize(` ${text.trimStart()}`, { addBos: false });
    while (ids.length < count) ids.push(...body);
    return ids.slice(0, count);
  } finally {
    await engine.close();
  }
}

async function moetierRun(modelPath, threads, promptTokens, maxTokens) {
  const engine = await openMoetier(modelPath, threads, promptTokens.length + maxTokens + 8);
  try {
    await greedy(engine, promptTokens.slice(0, 16), warmupTokens);
    const { tokens, stats } = await greedy(engine, promptTokens, maxTokens);
    return { threads, tokens, ...pickTimings(stats) };
  } finally {
    await engine.close();
  }
}

async function llamaRun(modelPath, threads, promptTokens, maxTokens) {
  const warmup = { promptTokens: promptTokens.slice(0, 16), maxTokens: warmupTokens };
  const reply = await runLlamaCpp({
    modelPath,
    threads,
    maxTokens,
    logitsMode: 'none',
    runs: [warmup, { promptTokens }],
  });
  const measured = reply.results[1];
  return {
    threads,
    contextThreads: measured.contextThreads,
    tokens: measured.tokens,
    llamaCppRelease: reply.llamaCppRelease,
    ...pickTimings(measured.timings),
  };
}

function pickTimings({ promptTokens, generatedTokens, ttftMs, prefillTokPerS, decodeTokPerS }) {
  return { promptTokens, generatedTokens, ttftMs, prefillTokPerS, decodeTokPerS };
}

function sameTokens(a, b) {
  return a.length === b.length && a.every((t, i) => t === b[i]);
}

function headline(c) {
  const keys = [
    'quant',
    'moetierDecodeTokPerS',
    'llamaCppDecodeTokPerS',
    'decodeRatio',
    'moetierPrefillTokPerS',
    'llamaCppPrefillTokPerS',
    'prefillRatio',
    'bandwidthBoundTokPerS',
    'moetierBoundFraction',
  ];
  return Object.fromEntries(keys.map((k) => [k, typeof c[k] === 'number' ? Number(c[k].toFixed(3)) : c[k]]));
}

function progress(line) {
  process.stderr.write(`bench decode: ${line}\n`);
}

if (import.meta.url === `file://${process.argv[1]}`) runBenchMain('decode', main);
