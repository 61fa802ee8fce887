/**
 * The model cache: generated synthetic models live in the cache folder (core/cache-dir.ts:
 * MOETIER_CACHE_DIR, else $XDG_CACHE_HOME/moetier, else ~/.cache/moetier). A file name carries
 * the generator version, so a changed generator writes a new file instead of serving a stale one.
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { cacheDir } from '../core/cache-dir.js';
import { ensureDir } from '../core/output-file.js';
import {
  GENERATOR_VERSION,
  checkSynthOptions,
  writeSynthModel,
  type ProgressFn,
  type SynthOptions,
} from '../synth/generate.js';

export function modelCacheDir(): string {
  return cacheDir();
}

export function presetModelFileName(o: SynthOptions): string {
  const routing = o.routing === 'planted' ? '-planted' : '';
  return `synth-${o.preset}-${o.arch}-${o.quant}-s${o.seed}${routing}-g${GENERATOR_VERSION}.gguf`;
}

/** In-process generations under way, so two callers wait on one file. */
const pending = new Map<string, Promise<string>>();

/** The path of the cached preset model, generating it first when it is missing. */
export async function ensurePresetModel(
  options: { preset: string; arch?: string; quant?: string; seed?: number; routing?: string },
  onProgress?: ProgressFn,
  signal?: AbortSignal,
): Promise<string> {
  const checked = checkSynthOptions(options);
  const dir = modelCacheDir();
  const path = join(dir, presetModelFileName(checked));
  if (existsSync(path)) return path;
  const running = pending.get(path);
  if (running) return running;
  const job = (async () => {
    ensureDir(dir, 'MOETIER_CACHE_DIR');
    await writeSynthModel(checked, path, onProgress, signal); // writes a temporary file beside path, renames when complete
    return path;
  })().finally(() => pending.delete(path));
  pending.set(path, job);
  return job;
}
