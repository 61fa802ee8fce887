/**
 * A lock file beside a file that several processes read, merge and rewrite (the heat file): the
 * merge runs only while `file.lock` exists and is ours (created with O_EXCL). Waits at most
 * limits.heatLockWaitMs; a lock older than limits.heatLockStaleMs is taken as left by a process
 * that died mid-merge and removed.
 */
import { closeSync, openSync, statSync, unlinkSync, writeSync } from 'node:fs';
import { limits } from './limits.js';

const sleeper = new Int32Array(new SharedArrayBuffer(4));
const sleepMs = (ms: number): void => void Atomics.wait(sleeper, 0, 0, ms);

/** Runs fn under the lock; returns undefined (fn not run) when the lock could not be had in time. */
export function withFileLock<T>(
  file: string,
  fn: () => T,
  waitMs: number = limits.heatLockWaitMs,
): { value: T } | undefined {
  const lock = `${file}.lock`;
  const deadline = Date.now() + waitMs;
  for (let attempt = 0; ; attempt++) {
    let fd: number;
    try {
      fd = openSync(lock, 'wx');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      if (isStale(lock)) {
        try {
          unlinkSync(lock);
        } catch {
          /* another waiter removed it first */
        }
        continue;
      }
      if (Date.now() >= deadline) return undefined;
      sleepMs(Math.min(1 + attempt, 10));
      continue;
    }
    try {
      writeSync(fd, String(process.pid));
      closeSync(fd);
      return { value: fn() };
    } finally {
      try {
        unlinkSync(lock);
      } catch {
        /* already gone */
      }
    }
  }
}

function isStale(lock: string): boolean {
  try {
    return Date.now() - statSync(lock).mtimeMs > limits.heatLockStaleMs;
  } catch {
    return false; // gone between open and stat: retry
  }
}
