#!/usr/bin/env node
/**
 * npm run bench -- serve [--streams 1,2,4,8,16] [--tokens N] [--tiers ram,disk] [--peers llama|none]
 *
 * moetier serve under concurrent streams: for each stream count N, N clients each stream one
 * completion (greedy, --tokens tokens, a different built-in prompt each) from the server at once,
 * on the medium qwen3moe preset (Q4_0, realistic synthetic routing), in RAM (no tier) and on the disk
 * tier at half the file (--memory-budget), for N streams an engine of N sequences (`parallel` N,
 * continuous batching; each sequence with the positions its prompt and answer need, as llama.cpp's
 * context gets them: the memory plan counts them); against llama.cpp (node-llama-cpp, a child process) with
 * N sequences in one context. Per N: aggregate decode tok/s (every stream's tokens over the wall time
 * from the first request to the last token), per-stream decode tok/s (median), TTFT p50 / p99, and on
 * the disk tier the bytes read from the model file per generated token.
 *
 * Results: results/local/serve.json; --update-results: results/serve.json and the README table.
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, statSync } from 'node:fs';
import path from 'node:path';
import os from 'node:os';
import { fileURLToPath } from 'node:url';
import { importDist, presetModel } from './lib/moetier.mjs';
import { parseBenchArgs, positiveInt, runBenchMain } from './lib/options.mjs';
import { resultsTarget, updateReadme, writeResults } from './lib/output.mjs';
import { median, quantile } from './lib/stats.mjs';

const usage = 'usage: npm run bench -- serve [options]';
const options = {
  streams: { type: 'string', default: '1,2,4,8,16', help: 'concurrent streams, comma-separated' },
  tokens: { type: 'string', default: '48', help: 'tokens generated per stream' },
  tiers: { type: 'string', default: 'ram,disk', help: 'ram (no tier) and/or disk (memory budget at half the file)' },
  threads: { type: 'string', default: '2', help: 'compute threads of each engine' },
  peers: { type: 'string', default: 'llama', help: 'llama: node-llama-cpp with N sequences in one context; none' },
  'update-results': { type: 'boolean', help: 'write results/serve.json and the README table' },
};

export async function main(argv) {
  const values = parseBenchArgs(argv, { usage, options });
  if (!values) return;
  const streams = values.streams.split(',').map((s) => positiveInt('streams', s, 64));
  const tokens = positiveInt('tokens', values.tokens, 1024);
  const threads = positiveInt('threads', values.threads, 64);
  const tiers = values.tiers.split(',');
  const model = await presetModel({ preset: 'medium', arch: 'qwen3moe', quant: 'q4_0' });
  const { ROUTING_PROMPTS, promptText } = await importDist('src/synth/prompts.js');
  const prompts = ROUTING_PROMPTS.map((p) => promptText(p, 'gpt2'));
  const load = [os.loadavg()[0]];
  const rows = [];
  // The dashboard during the disk tier's runs, saved as a screenshot where Chromium is installed.
  const screenshotTo = fileURLToPath(new URL('serve-dashboard.png', resultsTarget(values['update-results']).dir));
  for (const tier of tiers) {
    const run = await moetierRuns(
      model,
      tier,
      streams,
      tokens,
      threads,
      prompts,
      tier === 'disk' ? screenshotTo : undefined,
    );
    rows.push(...run);
  }
  if (values.peers === 'llama') rows.push(...(await llamaRuns(model, streams, tokens, threads, prompts)));
  load.push(os.loadavg()[0]);
  const results = {
    date: new Date().toISOString(),
    cpu: os.cpus()[0]?.model,
    threads,
    tokens,
    load1m: load,
    model: 'medium qwen3moe q4_0 (realistic synthetic routing)',
    rows,
  };
  const target = resultsTarget(values['update-results']);
  writeResults(target, 'serve', JSON.stringify(results, null, 2) + '\n');
  updateReadme(target, 'serve', serveTable(results));
  process.stdout.write(serveTable(results) + '\n');
}

async function moetierRuns(model, tier, streams, tokens, threads, prompts, screenshot) {
  const { openEngine } = await importDist('src/index.js');
  const { createServer } = await importDist('src/server/app.js');
  const budget = tier === 'disk' ? { memoryBudgetBytes: Math.floor(statSync(model).size / 2), heat: false } : {};
  const contextTokens = await sequenceTokens(model, prompts, tokens);
  const rows = [];
  for (const n of streams) {
    // N streams, N sequences batched into shared steps (continuous batching), each with the positions
    // its prompt and answer need: the KV cache llama.cpp's context gets for N sequences (llamaChild).
    const engine = await openEngine({
      model,
      threads,
      contextTokens,
      parallel: n,
      requestQueueDepthMax: 64,
      ...budget,
    });
    const server = createServer(engine);
    const base = await server.app.listen({ host: '127.0.0.1', port: 0 });
    const last = n === streams.at(-1);
    const page = screenshot && last ? await openDashboard(base) : undefined;
    try {
      await streamAll(base, prompts.slice(0, 1), 4); // warm-up
      const before = engine.fileReads?.();
      const r = await streamAll(
        base,
        Array.from({ length: n }, (_, i) => prompts[i % prompts.length]),
        tokens,
      );
      const after = engine.fileReads?.();
      const read =
        before && after
          ? after.uploadBytes + after.streamedBytes - before.uploadBytes - before.streamedBytes
          : undefined;
      rows.push({
        engine: 'moetier',
        tier,
        streams: n,
        ...(engine.memoryPlan ? { slotsPerLayer: engine.memoryPlan.slotsPerLayer } : {}),
        ...summary(r),
        ...(read !== undefined ? { fileBytesPerToken: read / r.reduce((a, s) => a + s.tokens, 0) } : {}),
      });
      process.stderr.write(
        `moetier ${tier} ${n} streams: ${rows.at(-1).aggregateTokPerS.toFixed(1)} tok/s aggregate\n`,
      );
      if (page) {
        mkdirSync(path.dirname(screenshot), { recursive: true });
        await page.page.screenshot({ path: screenshot, fullPage: true });
        process.stderr.write(`dashboard screenshot: ${screenshot}\n`);
      }
    } finally {
      await page?.browser.close();
      await server.shutdown(1000);
      await engine.close();
    }
  }
  return rows;
}

/** Positions one stream needs: its prompt (the longest of the built-in ones) and its answer, as llamaChild sizes them. */
async function sequenceTokens(model, prompts, tokens) {
  const { openEngine } = await importDist('src/index.js');
  const tok = await openEngine({ model, threads: 1, contextTokens: 64 });
  const longest = Math.max(...prompts.map((p) => tok.tokenize(p).length));
  await tok.close();
  return longest + tokens + 8;
}

/** The live dashboard in headless Chromium (Debian's, through puppeteer-core), or undefined without one. */
async function openDashboard(base) {
  const chromium = ['/usr/bin/chromium', '/usr/bin/chromium-browser'].find((p) => existsSync(p));
  if (!chromium) return undefined;
  const { launch } = await import('puppeteer-core');
  const browser = await launch({ executablePath: chromium, headless: true, args: ['--no-sandbox', '--disable-gpu'] });
  const page = await browser.newPage();
  await page.setViewport({ width: 1280, height: 900 });
  await page.goto(`${base}/dashboard`);
  return { browser, page };
}

/** N streamed completions at once; per stream: start, first chunk, end (ms from the start), tokens. */
async function streamAll(base, texts, tokens) {
  const t0 = performance.now();
  return Promise.all(
    texts.map(async (prompt) => {
      const startMs = performance.now() - t0;
      const res = await fetch(`${base}/v1/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ prompt, max_tokens: tokens, stream: true, stream_options: { include_usage: true } }),
      });
      const reader = res.body.getReader();
      let firstMs,
        body = '';
      for (let r = await reader.read(); !r.done; r = await reader.read()) {
        firstMs ??= performance.now() - t0;
        body += Buffer.from(r.value).toString();
      }
      const endMs = performance.now() - t0;
      const usage = body
        .split('\n\n')
        .map((e) => e.slice(6))
        .filter((d) => d.startsWith('{'))
        .map((d) => JSON.parse(d))
        .find((e) => e.usage)?.usage;
      return { startMs, firstMs, endMs, tokens: usage?.completion_tokens ?? 0 };
    }),
  );
}

async function llamaRuns(model, streams, tokens, threads, prompts) {
  const { openEngine } = await importDist('src/index.js');
  const tok = await openEngine({ model, threads: 1, contextTokens: 64 });
  const ids = prompts.map((p) => tok.tokenize(p));
  await tok.close();
  const rows = [];
  for (const n of streams) {
    const reply = await llamaChild({
      modelPath: model,
      threads,
      maxTokens: tokens,
      prompts: Array.from({ length: n }, (_, i) => ids[i % ids.length]),
    });
    rows.push({ engine: 'llama.cpp', tier: 'ram', streams: n, ...summary(reply.results) });
    process.stderr.write(`llama.cpp ${n} sequences: ${rows.at(-1).aggregateTokPerS.toFixed(1)} tok/s aggregate\n`);
  }
  return rows;
}

function llamaChild(request) {
  const child = spawn(process.execPath, [fileURLToPath(new URL('llamacpp/serve-child.mjs', import.meta.url))], {
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  child.stdin.end(JSON.stringify(request));
  let out = '';
  child.stdout.on('data', (d) => (out += d));
  return new Promise((resolve, reject) =>
    child.on('exit', () => {
      const reply = JSON.parse(out.trim().split('\n').at(-1) ?? '{}');
      if (reply.ok) resolve(reply);
      else reject(new Error(`llama.cpp child: ${reply.error ?? out}`));
    }),
  );
}

/** Aggregate and per-stream decode rates, TTFT quantiles. */
function summary(streams) {
  const total = streams.reduce((a, s) => a + s.tokens, 0);
  const wall = Math.max(...streams.map((s) => s.endMs)) - Math.min(...streams.map((s) => s.startMs));
  const perStream = streams.map((s) => (s.tokens > 1 ? ((s.tokens - 1) / (s.endMs - s.firstMs)) * 1000 : 0));
  const ttft = streams.map((s) => s.firstMs - s.startMs);
  return {
    tokens: total,
    aggregateTokPerS: (total / wall) * 1000,
    perStreamTokPerS: median(perStream),
    ttftP50Ms: quantile(ttft, 0.5),
    ttftP99Ms: quantile(ttft, 0.99),
  };
}

export function serveTable(r) {
  const head = `Concurrent streams, ${r.model}, ${r.tokens} tokens a stream, ${r.threads} threads, ${r.cpu}, load ${r.load1m.map((x) => x.toFixed(1)).join(' -> ')}, ${r.date}. moetier batches N streams into shared steps (an engine of N sequences: continuous batching; on the disk tier the plan's slots per layer shrink as the N caches grow); llama.cpp runs N sequences in one context. Per-stream tok/s counts each stream's own decode time, so it falls as streams share steps while the aggregate rises.`;
  const lines = [
    '| engine | tier | streams | aggregate tok/s | per-stream tok/s (median) | TTFT p50 ms | TTFT p99 ms | file bytes / token |',
    '|---|---|---|---|---|---|---|---|',
  ];
  for (const x of r.rows) {
    lines.push(
      `| ${x.engine} | ${x.tier}${x.slotsPerLayer !== undefined ? ` (${x.slotsPerLayer} slots/layer)` : ''} | ${x.streams} | ${x.aggregateTokPerS.toFixed(1)} | ${x.perStreamTokPerS.toFixed(1)} | ${x.ttftP50Ms.toFixed(0)} | ${x.ttftP99Ms.toFixed(0)} | ${x.fileBytesPerToken === undefined ? '-' : (x.fileBytesPerToken / 1e6).toFixed(2) + ' MB'} |`,
    );
  }
  return `${head}\n\n${lines.join('\n')}`;
}

if (import.meta.url === `file://${process.argv[1]}`) runBenchMain('serve', main);
