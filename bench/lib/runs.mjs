/**
 * The runs the disk-tier benches share (bench/disk.mjs, bench/prefetch.mjs): moetier's CLI and
 * llama.cpp's child on one prompt, each optionally inside a memory cgroup (bench/lib/cgroup.mjs)
 * whose peak is read before it is removed.
 */
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { cgroupCommand, createMemoryCgroup } from './cgroup.mjs';
import { importDist, repoRoot } from './moetier.mjs';
import { runLlamaCpp } from '../llamacpp/runner.mjs';

export const prompt = 'The ocean is deep and the waves roll over the sand while the tide';

/** root: the checkout whose built CLI runs (another build, e.g. the previous commit's, for a before/after in one run). */
export function moetierRun(model, tokens, extra, group, root = repoRoot) {
  const argv = [
    process.execPath,
    path.join(root, 'dist/src/cli/main.js'),
    'run',
    '-m',
    model,
    '-p',
    prompt,
    '-n',
    String(tokens),
    '-t',
    '2',
    '--heat',
    'none',
    '--json',
    ...extra,
  ];
  const [cmd, args] = group ? cgroupCommand(group, argv) : [argv[0], argv.slice(1)];
  const r = spawnSync(cmd, args, { encoding: 'utf8', maxBuffer: 1 << 26 });
  if (r.status !== 0)
    throw Object.assign(new Error(`moetier ${r.signal ?? `exit ${r.status}`}: ${r.stderr.slice(-300)}`), {
      code: 'E_RUN',
    });
  const out = JSON.parse(r.stdout);
  return {
    ...out,
    streamedBytes: out.streamedBytes ?? 0,
    uploadBytes: out.uploadBytes ?? 0,
    decodeUploadBytes: out.decodeUploadBytes ?? 0,
  };
}

/** The prompt's token ids as moetier tokenizes it (llama.cpp is given the same ids). */
export async function promptIds(model) {
  const { openEngine } = await importDist('src/engine/engine.js');
  const engine = await openEngine({ model, threads: 1, contextTokens: 64 });
  try {
    return engine.tokenize(prompt);
  } finally {
    await engine.close();
  }
}

export async function llamaRun(model, promptTokens, threads, maxTokens, group, timeoutMs = 600_000) {
  const reply = await runLlamaCpp(
    { modelPath: model, threads, maxTokens, logitsMode: 'none', runs: [{ promptText: prompt, promptTokens }] },
    { timeoutMs, wrap: (argv) => cgroupCommand(group, argv) },
  );
  const t = reply.results[0].timings;
  return { decodeTokPerS: t.decodeTokPerS, prefillTokPerS: t.prefillTokPerS };
}

export function inCgroup(name, limitBytes, fn) {
  const g = createMemoryCgroup(name, limitBytes);
  try {
    return { result: fn(g), peakBytes: g.peakBytes() };
  } catch (err) {
    return { failure: err.message, peakBytes: g.peakBytes() };
  } finally {
    g.remove();
  }
}

export async function inCgroupAsync(name, limitBytes, fn) {
  const g = createMemoryCgroup(name, limitBytes);
  try {
    return { result: await fn(g), peakBytes: g.peakBytes() };
  } catch (err) {
    return { failure: String(err.message).split('\n')[0], peakBytes: g.peakBytes() };
  } finally {
    g.remove();
  }
}
