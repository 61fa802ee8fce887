/**
 * Tiny synthetic models, read back with our GGUF reader: valid files, the planted
 * structure measured from the stored (quantised) weights, and greedy generation through
 * the reference forward pass.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseGguf } from '../../../src/model/gguf/reader.js';
import { readHParams } from '../../../src/model/hparams.js';
import { createTokenizer } from '../../../src/model/tokenizer/index.js';
import { dequantizeRow } from '../../../src/model/quant.js';
import type { Arch, GgufFile } from '../../../src/model/types.js';
import { createReferenceSession } from '../../../src/reference/forward.js';
import { matVec, rmsNorm, topK } from '../../../src/reference/math.js';
import { writeSynthModel, type SynthModel } from '../../../src/synth/generate.js';
import { ARCHS, PRESETS, presetHParams } from '../../../src/synth/presets.js';
import { DEMO_PROMPT, PARITY_PROMPTS, promptText } from '../../../src/synth/prompts.js';
import type { QuantName } from '../../../src/synth/weights.js';

/** The top-1 margin we promise at every greedy step (logits); measured minimum is ~6.9. */
const MARGIN_MIN = 2;
const STEPS = 32;

const dir = mkdtempSync(join(tmpdir(), 'moetier-synth-'));
const models = new Map<string, { model: SynthModel; file: GgufFile }>();

async function tiny(arch: Arch, quant: QuantName): Promise<{ model: SynthModel; file: GgufFile }> {
  const key = `${arch}-${quant}`;
  let hit = models.get(key);
  if (!hit) {
    const path = join(dir, `${key}.gguf`);
    const model = await writeSynthModel({ preset: 'tiny', arch, quant, seed: 1, routing: 'planted' }, path);
    hit = { model, file: parseGguf(new Uint8Array(readFileSync(path)), path) };
    models.set(key, hit);
  }
  return hit;
}

function cosine(a: Float32Array, b: Float32Array): number {
  let ab = 0,
    aa = 0,
    bb = 0;
  for (let i = 0; i < a.length; i++) [ab, aa, bb] = [ab + a[i] * b[i], aa + a[i] * a[i], bb + b[i] * b[i]];
  return ab / Math.sqrt(aa * bb);
}

beforeAll(async () => {
  for (const arch of ARCHS) await tiny(arch, 'q8_0');
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe.each(ARCHS)('tiny %s', (arch) => {
  it('is a valid GGUF whose hyper-parameters are the preset', async () => {
    const { file, model } = await tiny(arch, 'q8_0');
    // rms epsilon is stored as f32
    expect(readHParams(file)).toEqual({ ...presetHParams('tiny', arch), rmsEps: Math.fround(1e-6) });
    expect(file.alignment).toBe(32);
    const m = file.metadata;
    // gpt-oss's: 131072, YaRN x32 of a 4096-token original context.
    expect(m.get(`${arch}.context_length`)).toBe(arch === 'gpt-oss' ? 131072 : 4096);
    // glm4moe rotates half of each head (partial rotary, as GLM-4.5's converter writes it).
    expect(m.get(`${arch}.rope.dimension_count`)).toBe(arch === 'glm4moe' ? 8 : 16);
    // deepseek2's is its leading dense layer's width (4 x the expert width).
    expect(m.get(`${arch}.feed_forward_length`)).toBe(PRESETS.tiny.nFfExp * (arch === 'deepseek2' ? 4 : 1));
    expect(m.get(`${arch}.expert_shared_feed_forward_length`)).toBe(
      arch === 'qwen2moe' ? PRESETS.tiny.nFfShexp : undefined,
    );
    expect(m.get('tokenizer.ggml.model')).toBe(arch === 'llama' ? 'llama' : 'gpt2');
    expect(m.get('tokenizer.ggml.tokens')).toEqual(model.vocab.tokens);
    expect(m.get('tokenizer.ggml.add_bos_token')).toBe(arch === 'llama');
    if (arch !== 'llama') {
      // gpt-oss: o200k_harmony's pre-tokenizer and Harmony's template (src/synth/vocab.ts).
      expect(m.get('tokenizer.ggml.pre')).toBe(arch === 'gpt-oss' ? 'gpt-4o' : 'qwen2');
      expect(m.get('tokenizer.ggml.merges')).toEqual(model.vocab.merges);
      expect(String(m.get('tokenizer.chat_template'))).toContain(arch === 'gpt-oss' ? '<|start|>' : '<|im_start|>');
    } else {
      expect((m.get('tokenizer.ggml.scores') as number[]).length).toBe(PRESETS.tiny.nVocab);
    }
    for (const [name, info] of file.tensors) {
      // gpt-oss's per-expert biases are 2-D and F32 too.
      const f32 = info.dims.length === 1 || name.endsWith('ffn_gate_inp.weight') || name.endsWith('_exps.bias');
      expect([name, info.type]).toEqual([name, f32 ? 'F32' : 'Q8_0']);
    }
    expect(file.tensors.has('output.weight')).toBe(true);
  });

  it('tokenizes every built-in prompt to one token per word with our tokenizer', async () => {
    const { file, model } = await tiny(arch, 'q8_0');
    const tokenizer = createTokenizer(file);
    expect(tokenizer.kind).toBe(model.vocab.model);
    for (const prompt of [DEMO_PROMPT, ...PARITY_PROMPTS]) {
      const text = promptText(prompt, model.vocab.model);
      const words = prompt.words.map((w) => model.vocab.wordToken.get(w)!);
      const bos = arch === 'llama' ? [model.vocab.bosId] : [];
      expect(tokenizer.encode(text)).toEqual([...bos, ...words]);
      expect(tokenizer.decode(words, { special: false }).trim()).toBe(prompt.words.join(' '));
    }
    const end = arch === 'gpt-oss' ? '<|return|>' : '<|im_end|>';
    if (arch !== 'llama') expect(tokenizer.eogIds.has(model.vocab.tokens.indexOf(end))).toBe(true);
  });
});

describe('planted structure (tiny qwen3moe q8_0, read from the file)', () => {
  it('clusters token embeddings by topic', async () => {
    const { file, model } = await tiny('qwen3moe', 'q8_0');
    const emb = (v: number): Float32Array => tokenRow(file, 'token_embd.weight', v);
    const sample = model.vocab.cycles.map((c) => c.slice(0, 20).map(emb));
    let within = 0,
      withinN = 0,
      across = 0,
      acrossN = 0;
    sample.forEach((ts, t) =>
      ts.forEach((a, i) =>
        sample.forEach((us, u) =>
          us.forEach((b, j) => {
            if (t === u && i < j) [within, withinN] = [within + cosine(a, b), withinN + 1];
            if (t < u) [across, acrossN] = [across + cosine(a, b), acrossN + 1];
          }),
        ),
      ),
    );
    expect(within / withinN).toBeGreaterThan(0.4);
    expect(Math.abs(across / acrossN)).toBeLessThan(0.05);
  });

  it("routes a topic's tokens into that topic's preferred experts at every layer", async () => {
    const { file, model } = await tiny('qwen3moe', 'q8_0');
    const hp = model.hparams;
    let inSet = 0,
      picks = 0;
    for (let l = 0; l < hp.nLayer; l++) {
      const router = tensorF32(file, `blk.${l}.ffn_gate_inp.weight`);
      const norm = tensorF32(file, `blk.${l}.ffn_norm.weight`);
      model.vocab.cycles.forEach((cycle, topic) => {
        const preferred = model.plant.preferred[l][topic];
        expect(preferred).toHaveLength(2 * hp.nExpertUsed);
        for (const v of cycle) {
          const h = rmsNorm(tokenRow(file, 'token_embd.weight', v), norm, hp.rmsEps);
          for (const e of topK(matVec(router, hp.nExpert, hp.nEmbd, h), hp.nExpertUsed)) {
            picks++;
            if (preferred.includes(e)) inSet++;
          }
        }
      });
    }
    // Chance would be 2k / nExpert = 0.5.
    expect(inSet / picks).toBeGreaterThan(0.9);
  });

  it('prefers different experts at different layers', async () => {
    const { model } = await tiny('qwen3moe', 'q8_0');
    const sets = model.plant.preferred.map((layer) => JSON.stringify(layer[0].slice().sort()));
    expect(new Set(sets).size).toBeGreaterThan(1);
  });
});

describe.each(ARCHS.flatMap((arch) => (['q8_0', 'q4_0'] as const).map((quant) => [arch, quant] as const)))(
  'greedy generation on tiny %s %s (reference forward pass)',
  (arch, quant) => {
    it(`stays on topic for ${STEPS} steps with top-1 margins above ${MARGIN_MIN}, and prefill routing predicts decode routing`, async () => {
      const { file, model } = await tiny(arch, quant);
      const hparams = readHParams(file);
      for (const prompt of [DEMO_PROMPT, ...PARITY_PROMPTS]) {
        const session = createReferenceSession({ hparams, tensors: file.tensors, bytes: file.bytes }, 64);
        const tokens = prompt.words.map((w) => model.vocab.wordToken.get(w)!);
        let out = session.eval(tokens);
        const prefill = out.routes;
        let margin = Infinity;
        let covered = 0,
          routed = 0;
        for (let step = 0; step < STEPS; step++) {
          const logits = out.logits[out.logits.length - 1];
          const [best, second] = topK(logits, 2);
          margin = Math.min(margin, logits[best] - logits[second]);
          expect([prompt.name, step, model.vocab.topicOf[best]]).toEqual([prompt.name, step, prompt.topic]);
          out = session.eval([best]);
          out.routes[0].forEach((experts, l) => {
            const seen = new Set(prefill.flatMap((r) => r[l]));
            for (const e of experts) [covered, routed] = [covered + (seen.has(e) ? 1 : 0), routed + 1];
          });
        }
        expect(margin).toBeGreaterThan(MARGIN_MIN);
        expect(covered / routed).toBeGreaterThan(0.9);
      }
    });
  },
);

function tokenRow(file: GgufFile, name: string, r: number): Float32Array {
  const info = file.tensors.get(name)!;
  const rows = info.dims.slice(1).reduce((a, b) => a * b, 1);
  const out = new Float32Array(info.dims[0]);
  dequantizeRow(info.type, file.bytes, info.offset + r * (info.byteLength / rows), info.dims[0], out);
  return out;
}

function tensorF32(file: GgufFile, name: string): Float32Array {
  const info = file.tensors.get(name)!;
  const rows = info.dims.slice(1).reduce((a, b) => a * b, 1);
  const out = new Float32Array(info.dims[0] * rows);
  for (let r = 0; r < rows; r++) out.set(tokenRow(file, name, r), r * info.dims[0]);
  return out;
}
