/**
 * Expert byte sizes from a model geometry: one expert = gate + up + down of a
 * SwiGLU FFN = 3 x hidden x expertFfn weights, stored in the device format
 * (`deviceQuant`); the host runner computes a miss from an int8 copy (Q8_0-like:
 * 32 int8 + one f16 scale = 34 bytes per 32 weights).
 */
import { InvalidOptionError } from '../core/errors.js';

export interface Quant {
  name: string;
  blockElements: number;
  blockBytes: number;
}

export const quants = {
  /** 256 weights: 128 bytes of nibbles, 12 bytes of 6-bit scales/mins, 2 f16 super-scales. */
  Q4_K: { name: 'Q4_K', blockElements: 256, blockBytes: 144 },
  /** int4 with one f16 scale per 32 weights (Q4_0-like). */
  INT4_G32: { name: 'int4+f16/32', blockElements: 32, blockBytes: 18 },
  /** The host copy: int8 with one f16 scale per 32 weights (Q8_0-like). */
  INT8_G32: { name: 'int8+f16/32', blockElements: 32, blockBytes: 34 },
} as const satisfies Record<string, Quant>;

export interface ModelGeometry {
  name: string;
  /** Trace model names this geometry describes. */
  aliases: readonly string[];
  layers: number;
  experts: number;
  topK: number;
  hidden: number;
  expertFfn: number;
  deviceQuant: Quant;
  hostQuant: Quant;
  note: string;
}

export const geometries: readonly ModelGeometry[] = [
  {
    name: 'qwen3-30b-a3b-q4k',
    aliases: ['qwen3-30b-a3b', 'qwen3moe'],
    layers: 48,
    experts: 128,
    topK: 8,
    hidden: 2048,
    expertFfn: 768,
    deviceQuant: quants.Q4_K,
    hostQuant: quants.INT8_G32,
    note: 'every expert matrix at Q4_K (a Q4_K_M file keeps some down matrices at Q6_K: slightly larger)',
  },
  {
    name: 'olmoe-1b-7b-q4k',
    aliases: ['olmoe-1b-7b', 'olmoe'],
    layers: 16,
    experts: 64,
    topK: 8,
    hidden: 2048,
    expertFfn: 1024,
    deviceQuant: quants.Q4_K,
    hostQuant: quants.INT8_G32,
    note: 'assumed Q4_K like the Qwen3 geometry, so the two compare',
  },
  {
    name: 'moe-35b-a3b-int4',
    aliases: ['35b-a3b', 'moe-35b-a3b'],
    layers: 40,
    experts: 256,
    topK: 8,
    hidden: 2048,
    expertFfn: 512,
    deviceQuant: quants.INT4_G32,
    hostQuant: quants.INT8_G32,
    note: 'a 256-expert 35B-A3B class model at int4 with an f16 scale per 32 weights',
  },
];

export function expertWeights(g: ModelGeometry): number {
  return 3 * g.hidden * g.expertFfn;
}

function bytesIn(q: Quant, weights: number): number {
  return Math.ceil(weights / q.blockElements) * q.blockBytes;
}

/** Bytes of one expert in a device slot (and of one upload). */
export function expertBytes(g: ModelGeometry): number {
  return bytesIn(g.deviceQuant, expertWeights(g));
}

/** Bytes of one expert's host int8 copy (what the host runner reads per call). */
export function hostExpertBytes(g: ModelGeometry): number {
  return bytesIn(g.hostQuant, expertWeights(g));
}

export function geometryByName(name: string): ModelGeometry | undefined {
  const n = name.toLowerCase();
  return geometries.find((g) => g.name === n || g.aliases.includes(n));
}

/** Block layouts of the GGML types a trace's expertType may name (weights per block, bytes per block). */
const ggmlQuants: Record<string, Quant> = {
  F32: { name: 'F32', blockElements: 1, blockBytes: 4 },
  F16: { name: 'F16', blockElements: 1, blockBytes: 2 },
  BF16: { name: 'BF16', blockElements: 1, blockBytes: 2 },
  Q8_0: { name: 'Q8_0', blockElements: 32, blockBytes: 34 },
  Q4_0: { name: 'Q4_0', blockElements: 32, blockBytes: 18 },
  Q4_K: quants.Q4_K,
  // ggml's k-quant super-blocks (block_q*_K in ggml-common.h): 256 weights each.
  Q2_K: { name: 'Q2_K', blockElements: 256, blockBytes: 84 },
  Q3_K: { name: 'Q3_K', blockElements: 256, blockBytes: 110 },
  Q5_K: { name: 'Q5_K', blockElements: 256, blockBytes: 176 },
  Q6_K: { name: 'Q6_K', blockElements: 256, blockBytes: 210 },
  // ggml's block_iq4_nl / block_iq4_xs (llama-quantize's fallback for rows not a multiple of 256).
  IQ4_NL: { name: 'IQ4_NL', blockElements: 32, blockBytes: 18 },
  IQ4_XS: { name: 'IQ4_XS', blockElements: 256, blockBytes: 136 },
  // ggml's block_mxfp4 (gpt-oss's experts).
  MXFP4: { name: 'MXFP4', blockElements: 32, blockBytes: 17 },
};

/**
 * The geometry a trace's header carries (the engine writes it: src/routes/types.ts TraceGeometry),
 * for a model with no named geometry (a synthetic preset, a model given by the user). undefined
 * when the header has none or names a type this table does not know.
 */
export function geometryFromTrace(h: {
  model: string;
  layers: number;
  experts: number;
  topK: number;
  geometry?: { hidden: number; expertFfn: number; expertType: string };
}): ModelGeometry | undefined {
  const g = h.geometry;
  const deviceQuant = g ? ggmlQuants[g.expertType] : undefined;
  if (!g || !deviceQuant) return undefined;
  return {
    name: h.model,
    aliases: [],
    layers: h.layers,
    experts: h.experts,
    topK: h.topK,
    hidden: g.hidden,
    expertFfn: g.expertFfn,
    deviceQuant,
    hostQuant: quants.INT8_G32,
    note: "from the trace's header (the recording engine's model)",
  };
}

export function requireGeometry(name: string, option = 'geometry'): ModelGeometry {
  const g = geometryByName(name);
  if (!g) throw new InvalidOptionError(option, `one of ${geometries.map((x) => x.name).join(', ')}`, name);
  return g;
}
