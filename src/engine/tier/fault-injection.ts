/**
 * Fault injection for tests: not an option of openEngine (users have no use for a read that fails
 * on purpose). A test arms it around one openEngine (withTierFaults); the tier reads it once, when
 * it is created, and hands it to its backend (a slot transfer: the disk backend's read, cuda-sim's
 * copy, the fake's upload) and to the disk tier's streamed reads. Each fails once, EIO-like, on the
 * call that takes its bytes past the count.
 */
import { assert } from '../../core/assert.js';

export interface TierFaults {
  /** The backend's transfer into a slot that takes its bytes past this fails (disk, cuda-sim, fake). */
  transferAfterBytes?: number;
  /** The disk tier's streamed read (a miss read into scratch for its call) that takes its bytes past this fails. */
  streamedReadAfterBytes?: number;
}

let armed: TierFaults = {};

/** Runs `open` (an openEngine) with these faults armed for the tier it creates; disarmed after. */
export async function withTierFaults<T>(faults: TierFaults, open: () => Promise<T>): Promise<T> {
  for (const n of Object.values(faults)) assert(Number.isSafeInteger(n) && n >= 1, 'a fault count is an integer >= 1');
  armed = faults;
  try {
    return await open();
  } finally {
    armed = {};
  }
}

/** The faults armed now ({} outside withTierFaults): read once by the tier at its creation. */
export function armedTierFaults(): TierFaults {
  return armed;
}
