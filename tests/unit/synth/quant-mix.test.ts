/**
 * The k-quant mixes: which tensor gets which type, per mix, on the small preset (every row a
 * multiple of 256: the k-quants themselves, 32 experts) and the tiny one (rows of 64 and 32:
 * llama-quantize's fallbacks, and 8 experts: the n_expert == 8 rules). Expected tables are
 * written out from llama.cpp src/llama-quant.cpp (see src/synth/quant-mix.ts for the rules).
 */
import { describe, expect, it } from 'vitest';
import { expectedTensors } from '../../../src/model/arch.js';
import type { GgmlTypeName, HParams } from '../../../src/model/types.js';
import { presetHParams } from '../../../src/synth/presets.js';
import { K_MIX_NAMES, tensorQuantType, useMoreBits, type KMixName } from '../../../src/synth/quant-mix.js';

type Kind = 'token_embd' | 'output' | 'attn_q' | 'attn_k' | 'attn_v' | 'attn_output' | 'gate_up' | 'ffn_down';
type Table = Record<Kind, GgmlTypeName | ((layer: number) => GgmlTypeName)>;

function kindOf(name: string): Kind | 'f32' {
  if (name === 'token_embd.weight' || name === 'output.weight')
    return name === 'output.weight' ? 'output' : 'token_embd';
  const k = name.replace(/^blk\.\d+\./, '');
  if (/norm|bias|ffn_gate_inp/.test(k)) return 'f32';
  if (k.startsWith('ffn_down')) return 'ffn_down';
  if (k.startsWith('ffn_gate') || k.startsWith('ffn_up')) return 'gate_up';
  return k.replace('.weight', '') as Kind;
}

function check(hp: HParams, mix: KMixName, table: Table): void {
  const seen = new Set<string>();
  for (const spec of expectedTensors(hp)) {
    const kind = kindOf(spec.name);
    const layer = Number(/^blk\.(\d+)\./.exec(spec.name)?.[1] ?? -1);
    const rule = kind === 'f32' ? 'F32' : table[kind];
    const want = typeof rule === 'function' ? rule(layer) : rule;
    expect([mix, spec.name, tensorQuantType(mix, spec, hp)]).toEqual([mix, spec.name, want]);
    seen.add(kind);
  }
  expect(seen.has('f32') && seen.has('ffn_down') && seen.has('attn_v')).toBe(true);
}

describe('use_more_bits', () => {
  it('picks the first and last eighth and every third layer between', () => {
    const layers = (n: number): number[] => Array.from({ length: n }, (_, i) => i).filter((i) => useMoreBits(i, n));
    expect(layers(8)).toEqual([0, 3, 6, 7]);
    expect(layers(4)).toEqual([2, 3]);
    expect(layers(24)).toEqual([0, 1, 2, 5, 8, 11, 14, 17, 20, 21, 22, 23]);
  });
});

describe('small preset (8 layers, 32 experts, GQA 2, rows multiples of 256)', () => {
  const more =
    (hi: GgmlTypeName, lo: GgmlTypeName) =>
    (layer: number): GgmlTypeName =>
      [0, 3, 6, 7].includes(layer) ? hi : lo;
  const tables: Record<KMixName, Table> = {
    q4_k_m: {
      token_embd: 'Q4_K',
      output: 'Q6_K',
      attn_q: 'Q4_K',
      attn_k: 'Q4_K',
      attn_v: more('Q6_K', 'Q4_K'),
      attn_output: 'Q4_K',
      gate_up: 'Q4_K',
      ffn_down: more('Q6_K', 'Q4_K'),
    },
    q5_k_m: {
      token_embd: 'Q5_K',
      output: 'Q6_K',
      attn_q: 'Q5_K',
      attn_k: 'Q5_K',
      attn_v: more('Q6_K', 'Q5_K'),
      attn_output: 'Q5_K',
      gate_up: 'Q5_K',
      ffn_down: more('Q6_K', 'Q5_K'),
    },
    q6_k: {
      token_embd: 'Q6_K',
      output: 'Q6_K',
      attn_q: 'Q6_K',
      attn_k: 'Q6_K',
      attn_v: 'Q6_K',
      attn_output: 'Q6_K',
      gate_up: 'Q6_K',
      ffn_down: 'Q6_K',
    },
    // attn_v: Q5_K for the first two attn_v tensors; ffn_down: Q5_K below n_layer / 16 = 0 layers, so Q4_K
    q3_k_m: {
      token_embd: 'Q3_K',
      output: 'Q6_K',
      attn_q: 'Q3_K',
      attn_k: 'Q3_K',
      attn_v: (l) => (l < 2 ? 'Q5_K' : 'Q4_K'),
      attn_output: 'Q4_K',
      gate_up: 'Q3_K',
      ffn_down: 'Q4_K',
    },
    // attn_v: Q3_K since n_gqa = 2 < 4
    q2_k: {
      token_embd: 'Q2_K',
      output: 'Q6_K',
      attn_q: 'Q2_K',
      attn_k: 'Q2_K',
      attn_v: 'Q3_K',
      attn_output: 'Q3_K',
      gate_up: 'Q2_K',
      ffn_down: 'Q3_K',
    },
    // attn_v: IQ4_XS since n_gqa = 2 < 4; ffn_down: Q5_K below n_layer / 8 = 1 (no imatrix)
    iq4_xs: {
      token_embd: 'IQ4_XS',
      output: 'Q6_K',
      attn_q: 'IQ4_XS',
      attn_k: 'IQ4_XS',
      attn_v: 'IQ4_XS',
      attn_output: 'IQ4_XS',
      gate_up: 'IQ4_XS',
      ffn_down: (l) => (l < 1 ? 'Q5_K' : 'IQ4_XS'),
    },
  };
  for (const mix of K_MIX_NAMES) {
    it(`${mix} on qwen3moe and qwen2moe (shared-expert down follows ffn_down)`, () => {
      check(presetHParams('small', 'qwen3moe'), mix, tables[mix]);
      check(presetHParams('small', 'qwen2moe'), mix, tables[mix]);
    });
  }
  it('iq4_xs raises attn_v to Q5_K when n_gqa >= 4', () => {
    const hp = { ...presetHParams('small', 'qwen3moe'), nHeadKv: 2 };
    const v = expectedTensors(hp).find((t) => t.name === 'blk.3.attn_v.weight')!;
    expect(hp.nHead / hp.nHeadKv).toBeGreaterThanOrEqual(4);
    expect(tensorQuantType('iq4_xs', v, hp)).toBe('Q5_K');
  });
  it('q2_k raises attn_v to Q4_K when n_gqa >= 4', () => {
    const hp = { ...presetHParams('small', 'qwen3moe'), nHeadKv: 2 };
    const v = expectedTensors(hp).find((t) => t.name === 'blk.0.attn_v.weight')!;
    expect(tensorQuantType('q2_k', v, hp)).toBe('Q4_K');
  });
});

describe('tiny preset (4 layers, 8 experts, rows of 64 and 32: fallbacks)', () => {
  // n_expert == 8: attn_v and attn_k Q8_0; attn_output Q5_K for q2_k, q3_k_m, q4_k_m.
  // Rows not a multiple of 256 fall back: Q2_K, Q3_K -> IQ4_NL (older llama.cpp's rule, quant-mix.ts);
  // Q4_K -> Q5_0; Q5_K -> Q5_1; Q6_K -> Q8_0; IQ4_XS -> IQ4_NL.
  // output: 64 % 256 != 0 -> Q8_0. use_more_bits(l, 4) is layers 2 and 3.
  const more =
    (hi: GgmlTypeName, lo: GgmlTypeName) =>
    (layer: number): GgmlTypeName =>
      layer >= 2 ? hi : lo;
  const tables: Record<KMixName, Table> = {
    q4_k_m: {
      token_embd: 'Q5_0',
      output: 'Q8_0',
      attn_q: 'Q5_0',
      attn_k: 'Q8_0',
      attn_v: 'Q8_0',
      attn_output: 'Q5_1',
      gate_up: 'Q5_0',
      ffn_down: more('Q8_0', 'Q5_0'),
    },
    q5_k_m: {
      token_embd: 'Q5_1',
      output: 'Q8_0',
      attn_q: 'Q5_1',
      attn_k: 'Q8_0',
      attn_v: 'Q8_0',
      attn_output: 'Q5_1',
      gate_up: 'Q5_1',
      ffn_down: more('Q8_0', 'Q5_1'),
    },
    q6_k: {
      token_embd: 'Q8_0',
      output: 'Q8_0',
      attn_q: 'Q8_0',
      attn_k: 'Q8_0',
      attn_v: 'Q8_0',
      attn_output: 'Q8_0',
      gate_up: 'Q8_0',
      ffn_down: 'Q8_0',
    },
    q3_k_m: {
      token_embd: 'IQ4_NL',
      output: 'Q8_0',
      attn_q: 'IQ4_NL',
      attn_k: 'Q8_0',
      attn_v: 'Q8_0',
      attn_output: 'Q5_1',
      gate_up: 'IQ4_NL',
      ffn_down: 'Q5_0',
    },
    q2_k: {
      token_embd: 'IQ4_NL',
      output: 'Q8_0',
      attn_q: 'IQ4_NL',
      attn_k: 'Q8_0',
      attn_v: 'Q8_0',
      attn_output: 'Q5_1',
      gate_up: 'IQ4_NL',
      ffn_down: 'IQ4_NL',
    },
    // IQ4_XS -> IQ4_NL; attn_output Q5_K (8 experts) -> Q5_1; no Q5_K ffn_down below n_layer / 8 = 0
    iq4_xs: {
      token_embd: 'IQ4_NL',
      output: 'Q8_0',
      attn_q: 'IQ4_NL',
      attn_k: 'Q8_0',
      attn_v: 'Q8_0',
      attn_output: 'Q5_1',
      gate_up: 'IQ4_NL',
      ffn_down: 'IQ4_NL',
    },
  };
  for (const mix of K_MIX_NAMES) {
    it(`${mix} on qwen3moe, olmoe and llama`, () => {
      for (const arch of ['qwen3moe', 'olmoe', 'llama'] as const) check(presetHParams('tiny', arch), mix, tables[mix]);
    });
  }
  it('a row of 48 columns falls back past Q5_0 to F16', () => {
    const hp = presetHParams('small', 'qwen3moe');
    expect(tensorQuantType('q4_k_m', { name: 'blk.1.attn_q.weight', dims: [48, 64], role: 'matrix' }, hp)).toBe('F16');
  });
});

describe("mxfp4 (llama-quantize's LLAMA_FTYPE_MOSTLY_MXFP4_MOE)", () => {
  for (const [preset, arch] of [
    ['tiny', 'gpt-oss'],
    ['gpt-oss-20b', 'gpt-oss'],
    ['tiny', 'qwen3moe'],
    ['small', 'qwen2moe'],
  ] as const) {
    it(`${preset} ${arch}: the 3-D expert matrices MXFP4, other matrices Q8_0 (output too), 1-D, biases, router F32`, () => {
      const hp = presetHParams(preset, arch);
      const types = new Map(expectedTensors(hp).map((spec) => [spec.name, tensorQuantType('mxfp4', spec, hp)]));
      for (const [name, type] of types) {
        const kind = kindOf(name);
        const want =
          kind === 'f32' || name.endsWith('attn_sinks.weight') ? 'F32' : /_exps\.weight$/.test(name) ? 'MXFP4' : 'Q8_0';
        expect([name, type]).toEqual([name, want]);
      }
      expect(types.get('blk.0.ffn_down_exps.weight')).toBe('MXFP4');
      expect(types.get('output.weight') ?? 'Q8_0').toBe('Q8_0'); // a tied output has no output.weight
    });
  }
});
