/**
 * Messages of the int8-rebuild actor: host int8 (Q8_0) copies of the experts that are not
 * resident, in a SharedArrayBuffer arena of fixed-size blocks that the native tier reads.
 *
 *   arena    Uint8Array (SAB) [blocks x hostCopyBytes]
 *   offsets  Int32Array (SAB) [nLayer * nExpert]: byte offset of the expert's copy, or -1
 */
import type { Context } from '@opentelemetry/api';
import type { ExpertKey } from '../../tiers/keys.js';

export type Int8RebuildMessage =
  /** These experts lost (or never had) a device slot: they need a host copy (traced under traceContext, a request's). */
  | { kind: 'evicted'; experts: readonly ExpertKey[]; traceContext?: Context }
  /** These experts became resident: their host copies are freed (RAM is what a 4-bit container saves). */
  | { kind: 'resident'; experts: readonly ExpertKey[] }
  /** A worker finished (or failed) a rebuild. */
  | { kind: 'done'; layer: number; expert: number; ok: boolean };

export interface Int8RebuildLimits {
  /** Rebuilds running on workers at once. */
  inflightMax: number;
  /** Experts waiting for a worker; past it a request is dropped and counted (the miss reads the container). */
  queueDepthMax: number;
}

export interface RebuildTask {
  layer: number;
  expert: number;
  /** Byte offset of the block the worker writes. */
  offset: number;
}

export type Int8RebuildEffect =
  | { kind: 'rebuild'; task: RebuildTask }
  /** Make the copy visible to the native tier (offsets[key] = offset). */
  | { kind: 'publish'; layer: number; expert: number; offset: number }
  /** Hide it before its block is reused (offsets[key] = -1). */
  | { kind: 'unpublish'; layer: number; expert: number };
