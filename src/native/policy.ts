/**
 * The eviction policy's pure native verbs (include/mt_policy.h), the one door from src/tiers into the
 * addon: decayed LFU's arithmetic and victim choice over rows the caller owns, the code the tier runs
 * at need. No I/O and no state: a replay calling them stays a pure function of its trace.
 */
import { loadNative, type NativePolicyVerbs } from './binding.js';

export function nativePolicy(): NativePolicyVerbs {
  return loadNative();
}
