/**
 * Shared by the tier tests: tiny models, backends, a greedy run that records every step's
 * logits bytes, routes and layer stats, and host copies built with the requantize verb.
 */
import type { GgmlTypeName, HParams } from '../../src/model/types.js';
import type {
  NativeBackendConfig,
  NativeBackendHandle,
  NativeBinding,
  NativeContextHandle,
  NativeTierHandle,
} from '../../src/native/binding.js';
import type { NativeDiagnostics } from '../../src/native/diagnostics.js';
import { LAYER_STAT_FIELDS } from '../../src/native/constants.js';
import { tinyHParams } from '../fixtures/random-model.js';
import { mapModel, native as loaded, type MappedModel } from './forward-helpers.js';

/** The binding with the diagnostics verbs the tier tests use too (forward-helpers loads it). */
export const native = loaded as NativeBinding & NativeDiagnostics;

/** A 3-layer qwen3moe: 8 experts, top-2, sharp router (routes spread over experts). */
export function tinyModel(type: GgmlTypeName, overrides: Partial<HParams> = {}, seed = 5): MappedModel {
  return mapModel(tinyHParams('qwen3moe', { nLayer: 3, ...overrides }), { type, seed, routerScale: 8 });
}

export function cpuBackend(budgetBytes = 1 << 24): NativeBackendHandle {
  return native.createBackend('cpu', { budgetBytes });
}

export function fakeBackend(config: Partial<NativeBackendConfig> = {}): NativeBackendHandle {
  return native.createBackend('fake', {
    budgetBytes: 1 << 24,
    bandwidthBytesPerS: 1e9,
    transferFixedUs: 5,
    computeBytesPerS: 2e9,
    overwriteSupported: true,
    failTransferAfterBytes: 0,
    ...config,
  });
}

export interface Step {
  /** The logits' bits (Uint32), so equality is byte equality. */
  logits: Uint32Array;
  token: number;
  routes: Int32Array;
  /** [nLayer * LAYER_STAT_FIELDS]: startNs, endNs, moeStartNs, moeEndNs, hits, misses, deviceStartNs, deviceEndNs. */
  stats: Float64Array;
}

export const PROMPT = [5, 17, 3, 90, 42, 0];

/** Prefill PROMPT, then `decode` greedy steps; between steps `between(stepIndex)` may act on the tier. */
export async function greedyRun(
  m: MappedModel,
  ctx: NativeContextHandle,
  decode: number,
  between: (step: number) => void | Promise<void> = () => {},
): Promise<Step[]> {
  const hp = m.model.hparams;
  const steps: Step[] = [];
  let tokens = Int32Array.from(PROMPT);
  let pos = 0;
  for (let s = 0; s <= decode; s++) {
    const logits = new Float32Array(hp.nVocab);
    const routes = new Int32Array(tokens.length * hp.nLayer * hp.nExpertUsed);
    const stats = new Float64Array(hp.nLayer * LAYER_STAT_FIELDS);
    await native.evalAsync(ctx, tokens, pos, logits, { routes, layerStats: stats });
    pos += tokens.length;
    let best = 0;
    for (let i = 1; i < logits.length; i++) if (logits[i] > logits[best]) best = i;
    steps.push({ logits: new Uint32Array(logits.buffer), token: best, routes, stats });
    tokens = Int32Array.of(best);
    await between(s);
  }
  return steps;
}

/** Host copies of every expert (SharedArrayBuffer arena, offsets -1 where `skip` says so). */
export function buildHostCopies(
  m: MappedModel,
  tier: NativeTierHandle,
  skip: (layer: number, expert: number) => boolean = () => false,
) {
  const hp = m.model.hparams;
  const bytes = native.tierExpertBytes(tier).hostCopy;
  const hostCopies = new Uint8Array(new SharedArrayBuffer(bytes * hp.nLayer * hp.nExpert));
  const hostCopyOffsets = new Int32Array(new SharedArrayBuffer(4 * hp.nLayer * hp.nExpert)).fill(-1);
  for (let l = 0; l < hp.nLayer; l++)
    for (let x = 0; x < hp.nExpert; x++) {
      if (skip(l, x)) continue;
      const at = (l * hp.nExpert + x) * bytes;
      native.requantizeExpertToQ8(m.handle, l, x, hostCopies, at);
      Atomics.store(hostCopyOffsets, l * hp.nExpert + x, at);
    }
  return { hostCopies, hostCopyOffsets };
}

export function range(n: number): Int32Array {
  return Int32Array.from({ length: n }, (_, i) => i);
}

/** tierRequestSwap's answers (native/include/mt_tier.h mt_tier_status). */
export const TIER_SWAP_CODES = { ok: 0, notResident: -2, alreadyResident: -3 } as const;
