#!/usr/bin/env node
/**
 * node bench/path-count.mjs [--tokens N]
 *
 * How many TypeScript files and functions one decode token passes (ARCHITECTURE.md's path
 * counts): runs one request of N decode tokens on the tiny preset in a child process under V8
 * coverage (NODE_V8_COVERAGE), with a tier of 2 slots per layer (--heat none, LFRU ticking
 * every 2 tokens, so swaps happen) and without a tier, once with N and once with 2N tokens, and
 * counts the functions of dist/src whose calls grew by at least N (once per decode step or
 * more; loading and per-request work cancel out) and their files. Native files are not seen by
 * V8; ARCHITECTURE.md lists them by reading. Prints one JSON line.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { parseBenchArgs, positiveInt, runBenchMain } from './lib/options.mjs';

const root = fileURLToPath(new URL('../', import.meta.url));
const usage = 'node bench/path-count.mjs [--tokens N]';
const options = { tokens: { type: 'string', default: '48', help: 'decode tokens of the measured request' } };

// The child: open an engine (with or without a tier), run one request, exit.
const child = `
const { openEngine } = await import(${JSON.stringify(pathToFileURL(path.join(root, 'dist/src/engine/engine.js')).href)});
const { ensurePresetModel } = await import(${JSON.stringify(pathToFileURL(path.join(root, 'dist/src/model/cache.js')).href)});
const [tier, tokens] = [process.argv[1] === 'tier', Number(process.argv[2])];
const model = await ensurePresetModel({ preset: 'tiny', arch: 'qwen3moe', quant: 'q8_0', seed: 1 });
const engine = await openEngine({ model, threads: 1, contextTokens: 256, ...(tier ? { slotsPerLayer: 2, heat: false, lfru: { tickTokens: 2 } } : {}) });
for await (const _ of engine.generate('one two three four five six', { maxTokens: tokens, stopAtEos: false })) {}
await engine.close();
`;

function callCounts(mode, tokens) {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'moetier-cov-'));
  try {
    execFileSync(process.execPath, ['--input-type=module', '-e', child, mode, String(tokens)], {
      env: { ...process.env, NODE_V8_COVERAGE: dir },
      stdio: ['ignore', 'ignore', 'inherit'],
    });
    const counts = new Map();
    for (const f of readdirSync(dir)) {
      for (const script of JSON.parse(readFileSync(path.join(dir, f), 'utf8')).result) {
        if (!script.url.includes('/dist/src/')) continue;
        const file = script.url.slice(script.url.indexOf('/dist/src/') + 6).replace(/\.js$/, '.ts');
        for (const fn of script.functions) {
          if (fn.functionName === '') continue;
          const key = `${file}#${fn.functionName}@${fn.ranges[0].startOffset}`;
          counts.set(key, (counts.get(key) ?? 0) + fn.ranges[0].count);
        }
      }
    }
    return counts;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

function perToken(mode, tokens) {
  const once = callCounts(mode, tokens),
    twice = callCounts(mode, 2 * tokens);
  const files = new Map();
  for (const [key, n] of twice) {
    if (n - (once.get(key) ?? 0) < tokens) continue;
    const [file, rest] = key.split('#');
    files.set(file, [...(files.get(file) ?? []), rest.replace(/@\d+$/, '')]);
  }
  return {
    files: files.size,
    functions: [...files.values()].reduce((n, f) => n + f.length, 0),
    byFile: Object.fromEntries([...files].sort()),
  };
}

async function main(argv) {
  const values = parseBenchArgs(argv, { usage, options });
  if (!values) return;
  const tokens = positiveInt('tokens', values.tokens, 4096);
  const out = { tokens, tier: perToken('tier', tokens), plain: perToken('plain', tokens) };
  process.stdout.write(JSON.stringify(out) + '\n');
}

runBenchMain('path-count', main);
