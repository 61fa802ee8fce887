/**
 * Heat files: per (layer, expert) routing counts from earlier requests, persisted between runs
 * (docs/SPEC.md section 1). One JSON file per model (keyed by its identity: model/identity.ts), in the
 * cache folder (core/cache-dir.ts) unless a path is given;
 * merged after each request under a lock file (core/file-lock.ts), so concurrent runs lose no counts;
 * written atomically (a unique tmp + rename) so a crash never leaves half a file.
 */
import { existsSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { FileFormatError, InvalidOptionError } from '../core/errors.js';
import { cacheDir } from '../core/cache-dir.js';
import { limits } from '../core/limits.js';
import { withFileLock } from '../core/file-lock.js';
import { checkInputFile } from '../core/input-file.js';
import { checkOutputPath, ensureDir, tempPathBeside } from '../core/output-file.js';
import { moeLayers, type HParams } from '../model/types.js';

export const HEAT_FILE_VERSION = 1;

export interface HeatFile {
  version: number;
  arch: string;
  layers: number;
  experts: number;
  /** Routed (token, expert) pairs counted into it. */
  routedPairs: number;
  /** counts[layer][expert] */
  counts: number[][];
}

/** Default location: <cache>/heat/<model identity>.heat.json (not the file name: two `model.gguf` differ). */
export function defaultHeatPath(identity: string): string {
  return path.join(cacheDir(), 'heat', `${identity}.heat.json`);
}

export function emptyHeat(hp: Pick<HParams, 'arch' | 'nLayer' | 'nExpert' | 'denseLayers'>): HeatFile {
  return {
    version: HEAT_FILE_VERSION,
    arch: hp.arch,
    layers: moeLayers(hp),
    experts: hp.nExpert,
    routedPairs: 0,
    counts: Array.from({ length: moeLayers(hp) }, () => new Array<number>(hp.nExpert).fill(0)),
  };
}

/** Reads a heat file for this model; undefined when it does not exist. A file for another geometry is refused. */
type HeatShape = Pick<HParams, 'nLayer' | 'nExpert' | 'denseLayers'> & { arch: string | undefined };

export function readHeatFile(file: string, hp: HeatShape): HeatFile | undefined {
  if (!existsSync(file)) return undefined;
  // By type and size before reading: a FIFO would block for ever, /dev/zero would never end.
  const st = checkInputFile(file, 'heat', 'heat file');
  if (st.size > limits.heatFileBytesMax)
    throw new FileFormatError(file, 'heat file', `at most ${limits.heatFileBytesMax} bytes, got ${st.size}`);
  let parsed: unknown;
  try {
    parsed = JSON.parse(readFileSync(file, 'utf8'));
  } catch (err) {
    throw new FileFormatError(file, 'heat file', 'JSON written by moetier', { cause: err });
  }
  return checkHeat(file, parsed, hp);
}

/**
 * A heat file's counts for `moetier replay --heat F` (a trace carries no architecture name, so only
 * the shape is checked against it). A missing file is an error here: the replay has nothing to merge into.
 */
export function readHeatTable(file: string, layers: number, experts: number): number[][] {
  if (!existsSync(file)) throw new InvalidOptionError('--heat', 'an existing heat file (written by moetier run)', file);
  return readHeatFile(file, { arch: undefined, nLayer: layers, nExpert: experts })!.counts;
}

/** Field by field: a heat file is only counts, and a wrong one must not warm (or grow) anything. arch undefined: any. */
function checkHeat(file: string, parsed: unknown, hp: HeatShape): HeatFile {
  const fail = (where: string, expected: string): never => {
    throw new FileFormatError(file, where ? `heat file ${where}` : 'heat file', expected, { code: 'E_HEAT_FILE' });
  };
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) fail('', 'a JSON object');
  const heat = parsed as Record<string, unknown>;
  const count = (v: unknown) => typeof v === 'number' && Number.isSafeInteger(v) && v >= 0;
  if (heat.version !== HEAT_FILE_VERSION) fail('version', `${HEAT_FILE_VERSION}`);
  if (hp.arch !== undefined && heat.arch !== hp.arch) fail('arch', `"${hp.arch}" (this model's architecture)`);
  if (typeof heat.arch !== 'string') fail('arch', 'a string');
  if (heat.layers !== moeLayers(hp) || heat.experts !== hp.nExpert) {
    throw new InvalidOptionError(
      'heat',
      `a version-${HEAT_FILE_VERSION} heat file for ${moeLayers(hp)} layers x ${hp.nExpert} experts`,
      file,
    );
  }
  if (!count(heat.routedPairs)) fail('routedPairs', 'an integer >= 0');
  const counts = heat.counts;
  if (!Array.isArray(counts) || counts.length !== moeLayers(hp)) fail('counts', `${moeLayers(hp)} rows`);
  (counts as unknown[]).forEach((row, l) => {
    if (!Array.isArray(row) || row.length !== hp.nExpert || !row.every(count))
      fail(`counts[${l}]`, `${hp.nExpert} integers >= 0`);
  });
  return heat as unknown as HeatFile;
}

/** Adds a request's routes ([row][layer] = expert ids) into the heat. */
export function addRoutes(heat: HeatFile, routes: readonly (readonly (readonly number[])[])[]): HeatFile {
  const counts = heat.counts.map((row) => row.slice());
  let pairs = 0;
  for (const row of routes) {
    row.forEach((experts, layer) => {
      for (const e of experts) counts[layer][e]++;
      pairs += experts.length;
    });
  }
  return { ...heat, counts, routedPairs: heat.routedPairs + pairs };
}

export function writeHeatFile(file: string, heat: HeatFile): void {
  ensureDir(path.dirname(file), 'heat');
  checkOutputPath(file, 'heat');
  const tmp = tempPathBeside(file);
  writeFileSync(tmp, JSON.stringify(heat), { flag: 'wx' });
  renameSync(tmp, file);
}

/**
 * Adds a request's routes to the heat file on disk: read, add, write under the file's lock, so runs
 * that merge at once each add their counts (a plain read-merge-rename lets one run's write drop
 * another's). Returns false when the lock could not be had in time (the counts are not added).
 */
export function mergeIntoHeatFile(
  file: string,
  hp: Pick<HParams, 'arch' | 'nLayer' | 'nExpert' | 'denseLayers'>,
  routes: readonly (readonly (readonly number[])[])[],
): boolean {
  ensureDir(path.dirname(file), 'heat');
  return (
    withFileLock(file, () => writeHeatFile(file, addRoutes(readHeatFile(file, hp) ?? emptyHeat(hp), routes))) !==
    undefined
  );
}
