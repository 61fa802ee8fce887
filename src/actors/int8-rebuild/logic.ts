/**
 * Int8-rebuild logic (pure): which host copies to build, where, and when a block is free.
 * Blocks of the arena are handed out from a free list; a resident's block returns to it.
 * A rebuild whose expert became resident meanwhile is cancelled: its block is freed when the
 * worker finishes, and its copy is never published.
 */
import { InvalidOptionError } from '../../core/errors.js';
import type { Int8RebuildEffect, Int8RebuildLimits, Int8RebuildMessage } from './messages.js';

export const INT8_REBUILD_DEFAULTS: Int8RebuildLimits = { inflightMax: 2, queueDepthMax: 65536 };

export interface Int8RebuildState {
  nExpert: number;
  blockBytes: number;
  limits: Int8RebuildLimits;
  /** [nLayer * nExpert]: published offset or -1 (the JS mirror of the shared offsets). */
  published: Int32Array;
  freeBlocks: number[];
  queued: number[];
  /** key -> block offset, for rebuilds running; `cancelled` marks those whose expert became resident. */
  inflight: Map<number, number>;
  cancelled: Set<number>;
  counts: { built: number; failed: number; dropped: number; freed: number };
}

export function initialInt8Rebuild(
  nLayer: number,
  nExpert: number,
  blocks: number,
  blockBytes: number,
  limits: Partial<Int8RebuildLimits> = {},
): Int8RebuildState {
  const l = { ...INT8_REBUILD_DEFAULTS, ...limits };
  for (const [name, v] of Object.entries(l))
    if (!Number.isInteger(v) || v < 1) throw new InvalidOptionError(`int8Rebuild.${name}`, 'an integer >= 1', v);
  if (!Number.isInteger(blockBytes) || blockBytes < 1)
    throw new InvalidOptionError('int8Rebuild.blockBytes', 'an integer >= 1', blockBytes);
  return {
    nExpert,
    blockBytes,
    limits: l,
    published: new Int32Array(nLayer * nExpert).fill(-1),
    freeBlocks: Array.from({ length: blocks }, (_, i) => (blocks - 1 - i) * blockBytes),
    queued: [],
    inflight: new Map(),
    cancelled: new Set(),
    counts: { built: 0, failed: 0, dropped: 0, freed: 0 },
  };
}

/** Mutates `s` (the actor's private state) and returns the effects to perform, in order. */
export function stepInt8Rebuild(s: Int8RebuildState, m: Int8RebuildMessage): Int8RebuildEffect[] {
  const effects: Int8RebuildEffect[] = [];
  const key = (layer: number, expert: number): number => layer * s.nExpert + expert;
  if (m.kind === 'evicted') {
    for (const { layer, expert } of m.experts) {
      const k = key(layer, expert);
      if (s.cancelled.delete(k)) continue; // still being built: keep that rebuild
      if (s.published[k] >= 0 || s.inflight.has(k) || s.queued.includes(k)) continue;
      if (s.queued.length >= s.limits.queueDepthMax) s.counts.dropped++;
      else s.queued.push(k);
    }
  } else if (m.kind === 'resident') {
    for (const { layer, expert } of m.experts) {
      const k = key(layer, expert);
      s.queued = s.queued.filter((q) => q !== k);
      if (s.inflight.has(k)) s.cancelled.add(k);
      if (s.published[k] >= 0) {
        effects.push({ kind: 'unpublish', layer, expert });
        s.freeBlocks.push(s.published[k]);
        s.published[k] = -1;
        s.counts.freed++;
      }
    }
  } else {
    const k = key(m.layer, m.expert);
    const offset = s.inflight.get(k);
    if (offset !== undefined) {
      s.inflight.delete(k);
      const cancelled = s.cancelled.delete(k);
      if (m.ok && !cancelled) {
        s.published[k] = offset;
        s.counts.built++;
        effects.push({ kind: 'publish', layer: m.layer, expert: m.expert, offset });
      } else {
        if (!m.ok) s.counts.failed++;
        s.freeBlocks.push(offset);
      }
    }
  }
  while (s.inflight.size < s.limits.inflightMax && s.queued.length > 0 && s.freeBlocks.length > 0) {
    const k = s.queued.shift()!;
    const offset = s.freeBlocks.pop()!;
    s.inflight.set(k, offset);
    effects.push({ kind: 'rebuild', task: { layer: Math.floor(k / s.nExpert), expert: k % s.nExpert, offset } });
  }
  return effects;
}
