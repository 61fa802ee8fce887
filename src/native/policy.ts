/**
 * The policies' pure native verbs, the one door from src/tiers into the addon: decayed LFU's arithmetic
 * and victim choice over rows the caller owns (include/mt_policy.h), and the prefetch queue and its
 * ledger in a handle (include/mt_prefetch_ledger.h): the code the tier runs. No I/O and no clock: a
 * replay calling them stays a pure function of its trace.
 */
import { loadNative, type NativePolicyVerbs } from './binding.js';

export type { NativePolicyVerbs };
/** One native prefetch ledger's state (prefetchLedgerCreate). */
export type NativePrefetchLedger = ReturnType<NativePolicyVerbs['prefetchLedgerCreate']>;

export function nativePolicy(): NativePolicyVerbs {
  return loadNative();
}
