/**
 * node bench/profile-peer.mjs [--quant q4_k_m] [--tokens 256] [--threads 1] [--update-results]
 *
 * Where one decode token's time goes in moetier and in llama.cpp (node-llama-cpp in a child), kernel
 * by kernel, in one run (issue 31 item 2): each engine decodes `tokens` greedy tokens after a 16-token
 * prompt on the medium qwen3moe preset (realistic synthetic routing) under `perf record` (cpu-clock
 * samples at 4 kHz, the same clock for both), and each native function's samples become microseconds
 * per decode token (samples / 4 kHz / tokens: the short prompt and the warm-up are in the samples too,
 * a few percent). Timings, so noisy on a shared machine: the shares and the same-run ratio are the
 * figures to read; bench/profile.mjs counts moetier's instructions exactly. Needs perf (linux-perf).
 * Writes results/local/profile-peer.json, or with --update-results results/profile-peer.json.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { BenchSetupError } from './lib/errors.mjs';
import { ensureBenchDeps } from './lib/deps.mjs';
import { presetModel, repoRoot } from './lib/moetier.mjs';
import { oneOf, parseBenchArgs, positiveInt, runBenchMain } from './lib/options.mjs';
import { resultsTarget, writeResults } from './lib/output.mjs';
import { runLlamaCpp } from './llamacpp/runner.mjs';

const HZ = 4000;
const PROMPT = 16;
const TOP = 10;
// Work done once when the model opens, not per token (in the samples all the same): moetier's
// preload (populateMapping), llama.cpp's repacking of Q4_K into its 8x8 layout, fresh pages zeroed.
const LOAD_TIME = /PopulateWorker|repack_|clear_page/;
const child = fileURLToPath(new URL('./lib/builds-child.mjs', import.meta.url));
const usage = `usage: node bench/profile-peer.mjs [options]

moetier and llama.cpp decoding the medium preset under perf record: microseconds per decode token for
each native function, both engines in one run.`;
const options = {
  quant: { type: 'string', default: 'q4_k_m', help: 'q4_k_m | q8_0 | q4_0' },
  tokens: { type: 'string', default: '256', help: 'decode tokens per engine' },
  threads: { type: 'string', default: '1', help: 'threads of both engines' },
};

export async function main(argv) {
  const values = parseBenchArgs(argv, { usage, options });
  if (!values) return;
  const quant = oneOf('quant', values.quant, ['q4_k_m', 'q8_0', 'q4_0']);
  const tokens = positiveInt('tokens', values.tokens, 4096);
  const threads = positiveInt('threads', values.threads, 64);
  if (spawnSync('perf', ['--version']).status !== 0)
    throw new BenchSetupError('perf is not installed', 'apt-get install linux-perf');
  ensureBenchDeps();
  const model = await presetModel({ preset: 'medium', arch: 'qwen3moe', quant, seed: 1 });
  const dir = mkdtempSync(path.join(os.tmpdir(), 'moetier-profile-peer-'));
  try {
    const record = (file) => (argv) => ['perf', ['record', '-q', '-F', String(HZ), '-o', file, '--', ...argv]];
    const oursFile = path.join(dir, 'moetier.data');
    const [cmd, args] = record(oursFile)([
      process.execPath,
      child,
      repoRoot,
      model,
      String(threads),
      String(PROMPT),
      String(tokens),
    ]);
    const ours = JSON.parse(execFileSync(cmd, args, { encoding: 'utf8' }).trim().split('\n').pop());
    const theirsFile = path.join(dir, 'llamacpp.data');
    const prompt = Array.from({ length: PROMPT }, (_, i) => 100 + ((i * 37) % 5000));
    const reply = await runLlamaCpp(
      {
        modelPath: model,
        threads,
        maxTokens: tokens,
        logitsMode: 'none',
        runs: [{ promptTokens: prompt.slice(0, 4), maxTokens: 4 }, { promptTokens: prompt }],
      },
      { wrap: record(theirsFile) },
    );
    const theirs = reply.results[1];
    // llama.cpp stops at an end-of-generation token; moetier's child does not (stopAtEos false).
    const theirTokens = theirs.tokens.length;
    const engines = {
      moetier: { decodeTokPerS: ours.decodeTokPerS, tokens, functions: perFunction(oursFile, tokens) },
      llamaCpp: {
        decodeTokPerS: theirs.timings.decodeTokPerS,
        tokens: theirTokens,
        release: reply.llamaCppRelease,
        functions: perFunction(theirsFile, theirTokens),
      },
    };
    const results = {
      bench: 'profile-peer',
      date: new Date().toISOString(),
      config: { quant, tokens, threads, promptTokens: PROMPT, hz: HZ, routing: 'realistic synthetic' },
      machine: { cpus: os.cpus().length, cpuModel: os.cpus()[0]?.model, loadAverage: os.loadavg() },
      engines,
    };
    writeResults(resultsTarget(values['update-results']), 'profile-peer', JSON.stringify(results, null, 2) + '\n');
    process.stdout.write(`${table(results)}\n`);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Each sampled function of the native libraries and the kernel: µs per decode token, largest first. */
function perFunction(file, tokens) {
  const out = execFileSync('perf', ['report', '-i', file, '-n', '--no-children', '--sort', 'dso,symbol', '--stdio'], {
    encoding: 'utf8',
    maxBuffer: 64 << 20,
    stdio: ['ignore', 'pipe', 'ignore'],
  });
  return parsePerfReport(out, tokens, HZ).slice(0, 40);
}

/**
 * perf report --stdio -n --sort dso,symbol lines ("  12.50%  1234  lib.so  [.] symbol   ...") -> rows of
 * { dso, symbol, share, usPerToken (samples / hz / tokens), atLoad }, in the report's order.
 */
export function parsePerfReport(text, tokens, hz) {
  const rows = [];
  for (const line of text.split('\n')) {
    const m = /^\s+([\d.]+)%\s+(\d+)\s+(\S+)\s+\[(.)\]\s+(.+?)\s*$/.exec(line);
    if (!m) continue;
    const symbol = m[5].replace(/\s{2,}.*$/, ''); // perf pads the column and may add others after it
    rows.push({
      dso: m[3],
      symbol,
      share: Number(m[1]) / 100,
      usPerToken: (Number(m[2]) / hz / tokens) * 1e6,
      atLoad: LOAD_TIME.test(symbol),
    });
  }
  return rows;
}

export function table(results) {
  const lines = [];
  for (const [name, e] of Object.entries(results.engines)) {
    lines.push(`${name}: ${e.decodeTokPerS.toFixed(1)} tok/s decode over ${e.tokens} tokens`);
    for (const f of e.functions.slice(0, TOP))
      lines.push(
        `  ${f.usPerToken.toFixed(0).padStart(6)} us/token ${(f.share * 100).toFixed(1).padStart(5)} %  ${f.dso}  ${f.symbol}${f.atLoad ? '  (at load)' : ''}`,
      );
  }
  return lines.join('\n');
}

if (import.meta.url === `file://${process.argv[1]}`) runBenchMain('profile-peer', main);
