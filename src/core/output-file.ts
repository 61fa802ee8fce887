/**
 * Output files the user names (a generated model, a trace file, a route trace, a heat file):
 * never written over something that is not a regular file, never over one of the run's inputs,
 * and always through a unique temporary file beside the target, renamed over it when complete
 * (two runs writing one path each rename a whole file of their own; neither leaves a mix).
 */
import { randomBytes } from 'node:crypto';
import { closeSync, mkdirSync, openSync, renameSync, rmSync, statSync, writeFileSync, type Stats } from 'node:fs';
import path from 'node:path';
import { InvalidOptionError } from './errors.js';

function statOrUndefined(file: string): Stats | undefined {
  try {
    return statSync(file);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOENT' || code === 'ENOTDIR') return undefined; // nothing there (or a file where a folder would be)
    throw err;
  }
}

function kind(st: Stats): string {
  if (st.isFile()) return 'a regular file';
  if (st.isDirectory()) return 'a directory';
  if (st.isCharacterDevice()) return 'a character device';
  if (st.isBlockDevice()) return 'a block device';
  if (st.isFIFO()) return 'a FIFO';
  if (st.isSocket()) return 'a socket';
  return 'not a regular file';
}

/**
 * Refuses, before any work, an output path that exists and is not a regular file, that is one of
 * `inputs` (the same file by device and inode, whatever the spelling), or whose folder does not exist.
 * `flag` is the option as the user named it (`--out`, `--trace-file`).
 */
export function checkOutputPath(file: string, flag: string, inputs: readonly string[] = []): void {
  const dir = statOrUndefined(path.dirname(path.resolve(file)));
  if (dir === undefined || !dir.isDirectory())
    throw new InvalidOptionError(flag, 'a path in an existing directory', file);
  const target = statOrUndefined(file);
  if (target === undefined) return;
  if (!target.isFile())
    throw new InvalidOptionError(
      flag,
      `a regular file or a new path (this is ${kind(target)}, which it would replace)`,
      file,
    );
  checkNotInput(file, flag, inputs, target);
}

/** Refuses an output path that is one of `inputs` (the same file by device and inode); one that does not exist yet is none. */
export function checkNotInput(
  file: string,
  flag: string,
  inputs: readonly string[],
  target = statOrUndefined(file),
): void {
  if (target === undefined) return;
  for (const input of inputs) {
    const st = statOrUndefined(input);
    if (st !== undefined && st.dev === target.dev && st.ino === target.ino) {
      throw new InvalidOptionError(flag, `a file other than the input ${input} (it would be overwritten)`, file);
    }
  }
}

/**
 * checkOutputPath, and a probe that a file can be made beside it (created and removed at once): a
 * folder this process may not write (a read-only mount, /sys) is refused before the work whose
 * result would be lost, not after it.
 */
export function checkWritableOutput(file: string, flag: string, inputs: readonly string[] = []): void {
  checkOutputPath(file, flag, inputs);
  const probe = tempPathBeside(file);
  try {
    closeSync(openSync(probe, 'wx'));
  } catch (err) {
    throw new InvalidOptionError(
      flag,
      `a path this process can write (${(err as NodeJS.ErrnoException).code ?? 'write failed'} making a file beside it)`,
      file,
      { cause: err },
    );
  }
  rmSync(probe, { force: true });
}

/** A temporary path beside `file`, unique to this process and call (open it with flag 'wx'). */
export function tempPathBeside(file: string): string {
  return `${file}.${process.pid}.${randomBytes(6).toString('hex')}.tmp`;
}

/**
 * Writes `data` to `file` whole or not at all: a checked target, a unique temporary beside it, a
 * rename. A write the system refuses (EACCES in a folder this process may not write, ENOSPC) is the
 * option's error, naming what happened; nothing is left behind.
 */
export function writeFileAtomic(file: string, data: string | Uint8Array, flag = 'path'): void {
  checkOutputPath(file, flag);
  const tmp = tempPathBeside(file);
  try {
    writeFileSync(tmp, data, { flag: 'wx' });
    renameSync(tmp, file);
  } catch (err) {
    rmSync(tmp, { force: true });
    throw new InvalidOptionError(
      flag,
      `a path this process can write (${(err as NodeJS.ErrnoException).code ?? 'write failed'} writing it)`,
      file,
      { cause: err },
    );
  }
}

/**
 * Creates `dir` and its missing parents one level at a time. Node 20's recursive mkdir never
 * returns under /proc (MOETIER_CACHE_DIR=/proc/nope spun a core for ever); a level that cannot be
 * made is an error naming `what` (the flag or variable that chose the folder).
 */
export function ensureDir(dir: string, what: string): void {
  const missing: string[] = [];
  let at = path.resolve(dir);
  for (;;) {
    const st = statOrUndefined(at);
    if (st !== undefined) {
      if (!st.isDirectory()) throw new InvalidOptionError(what, `a folder path (${at} is ${kind(st)})`, dir);
      break;
    }
    missing.push(at);
    const parent = path.dirname(at);
    if (parent === at) break;
    at = parent;
  }
  for (const level of missing.reverse()) {
    try {
      mkdirSync(level);
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code === 'EEXIST' && statOrUndefined(level)?.isDirectory()) continue; // made by another run meanwhile
      throw new InvalidOptionError(what, `a folder that can be created (${level}: ${code ?? 'refused'})`, dir);
    }
  }
}
