/**
 * The model cache: generated synthetic models live in MOETIER_CACHE_DIR, or in
 * <repo root>/.cache/models (git-ignored). A file name carries the generator version,
 * so a changed generator writes a new file instead of serving a stale one.
 */
import { existsSync, readFileSync } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { GENERATOR_VERSION, checkSynthOptions, writeSynthModel, type ProgressFn, type SynthOptions } from '../synth/generate.js';

export function modelCacheDir(): string {
  const fromEnv = process.env.MOETIER_CACHE_DIR;
  if (fromEnv !== undefined && fromEnv.length > 0) return resolve(fromEnv);
  return join(repoRoot(), '.cache', 'models');
}

/** The directory of moetier's package.json, found upward from this file (src/ or dist/src/). */
function repoRoot(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (;;) {
    const manifest = join(dir, 'package.json');
    if (existsSync(manifest) && (JSON.parse(readFileSync(manifest, 'utf8')) as { name?: string }).name === 'moetier') return dir;
    const parent = dirname(dir);
    if (parent === dir) return process.cwd(); // installed without its manifest: fall back, never throw
    dir = parent;
  }
}

export function presetModelFileName(o: SynthOptions): string {
  return `synth-${o.preset}-${o.arch}-${o.quant}-s${o.seed}-g${GENERATOR_VERSION}.gguf`;
}

/** In-process generations under way, so two callers wait on one file. */
const pending = new Map<string, Promise<string>>();

/** The path of the cached preset model, generating it first when it is missing. */
export async function ensurePresetModel(
  options: { preset: string; arch?: string; quant?: string; seed?: number },
  onProgress?: ProgressFn,
): Promise<string> {
  const checked = checkSynthOptions(options);
  const dir = modelCacheDir();
  const path = join(dir, presetModelFileName(checked));
  if (existsSync(path)) return path;
  const running = pending.get(path);
  if (running) return running;
  const job = (async () => {
    await mkdir(dir, { recursive: true });
    await writeSynthModel(checked, path, onProgress); // writes path.tmp, renames when complete
    return path;
  })().finally(() => pending.delete(path));
  pending.set(path, job);
  return job;
}
