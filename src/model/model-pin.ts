/**
 * The model file, pinned for the engine's life: the mapping's descriptor stays open,
 * so readers that need the file again (the int8-rebuild workers) open that descriptor's file
 * (/proc/self/fd/N on Linux), never the path, which another file may have been renamed over; and
 * the file's identity and size are checked where they are used, so a truncated file is a typed
 * error (ModelFileChangedError) instead of a SIGBUS on the mapping, and a replaced one never
 * gives another model's tokens. A truncation during an eval is caught by the native SIGBUS guard
 * (native/addon/sigbus_guard.cc): the engine reads its fault count after each eval.
 */
import { existsSync, fstatSync, statSync } from 'node:fs';
import { ModelFileChangedError } from '../core/errors.js';

export interface ModelFileIdentity {
  /** Device and inode of the mapped file, and its size when mapped (bigint: inodes pass 2^53). */
  dev: bigint;
  ino: bigint;
  size: bigint;
  /** Its last modification when mapped (ns): a rewrite in place, same inode and size, moves it. */
  mtimeNs: bigint;
}

export interface PinnedModelFile {
  /** The path the user gave (messages only). */
  path: string;
  /** A path to this very file for readers in this process: /proc/self/fd/N where it exists, else `path`. */
  readerPath: string;
  identity: ModelFileIdentity;
}

export function pinModelFile(path: string, fd: number): PinnedModelFile {
  const st = fstatSync(fd, { bigint: true });
  const procPath = `/proc/self/fd/${fd}`;
  return {
    path,
    readerPath: existsSync(procPath) ? procPath : path,
    identity: { dev: st.dev, ino: st.ino, size: st.size, mtimeNs: st.mtimeNs },
  };
}

/**
 * Throws ModelFileChangedError unless the file at `readerPath` is the pinned one, at its pinned size,
 * unmodified, and its mapping never read past a truncated end (`mappingFaults`: the SIGBUS guard's
 * count, native mappedFaults; those reads returned zeros, so the mapping stays unlike the file
 * even if the file is put back).
 */
export function checkModelFile(pin: PinnedModelFile, cause?: unknown, mappingFaults = 0): void {
  const options = cause === undefined ? undefined : { cause };
  const st = statSync(pin.readerPath, { bigint: true });
  if (st.dev !== pin.identity.dev || st.ino !== pin.identity.ino)
    throw new ModelFileChangedError(pin.path, 'another file is at its path now', options);
  if (st.size !== pin.identity.size) {
    throw new ModelFileChangedError(pin.path, `its size went from ${pin.identity.size} to ${st.size} bytes`, options);
  }
  if (st.mtimeNs !== pin.identity.mtimeNs)
    throw new ModelFileChangedError(pin.path, 'it was written to in place since the engine opened it', options);
  if (mappingFaults > 0) {
    throw new ModelFileChangedError(
      pin.path,
      `it was cut short while the engine read it (${mappingFaults} read(s) past its end returned zeros)`,
      options,
    );
  }
}
