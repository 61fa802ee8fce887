/**
 * gen-model's native writer (src/synth/weights-native.ts) and the real-model presets:
 *  - the native path writes the TypeScript reference's file byte for byte (tiny, whose rows fall
 *    back to the 32-element types) and its tensors (small's real k-quant rows, every kind of filler),
 *    and the same bytes for the same options (through gen-model's own entry, writeSynthModel);
 *  - without the writer verbs the TypeScript writes;
 *  - olmoe-1b-7b and qwen3-30b-a3b: the geometry, their default architecture, any --arch given
 *    wins, and the sizes they plan (from the tensor table, without generating them);
 *  - a file that does not fit in the free space is refused before anything is written;
 *  - gen-model --cache writes the preset where the engine's loaders look for it.
 */
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { genModel } from '../../../src/cli/commands/gen-model.js';
import { DiskSpaceError, InvalidOptionError } from '../../../src/core/errors.js';
import { presetModelFileName } from '../../../src/model/cache.js';
import { writeGguf } from '../../../src/model/gguf/writer.js';
import { tensorByteLength } from '../../../src/model/gguf/values.js';
import type { HParams } from '../../../src/model/types.js';
import { buildSynthModel, checkSynthOptions, writeSynthModel } from '../../../src/synth/generate.js';
import { presetHParams } from '../../../src/synth/presets.js';
import {
  nativeTensorSources,
  nativeWriter,
  synthTensorSources,
  type NativeWriter,
} from '../../../src/synth/weights-native.js';

const dir = mkdtempSync(join(tmpdir(), 'moetier-native-writer-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function writer(): NativeWriter {
  const w = nativeWriter(2);
  if (!('verbs' in w)) throw new Error(`the native writer is missing: ${w.missing}`);
  return w;
}

describe('the native writer', () => {
  it("writes the TypeScript reference's bytes: tiny at every quant family", async () => {
    for (const quant of ['q8_0', 'q4_k_m', 'q4_0', 'bf16'] as const) {
      const model = buildSynthModel({ preset: 'tiny', arch: 'qwen3moe', quant, seed: 1 });
      const ts = join(dir, `tiny-${quant}-ts.gguf`),
        fast = join(dir, `tiny-${quant}-native.gguf`);
      await writeGguf(ts, model.metadata, model.tensors, { alignment: 32 });
      await writeGguf(fast, model.metadata, nativeTensorSources(model.plant, model.tensors, writer()), {
        alignment: 32,
      });
      expect({ quant, same: Buffer.compare(readFileSync(ts), readFileSync(fast)) === 0 }).toEqual({
        quant,
        same: true,
      });
    }
  });

  it("writes the TypeScript reference's bytes: tiny gpt-oss at mxfp4 (MXFP4 experts, Q8_0 matrices, F32 biases)", async () => {
    const model = buildSynthModel({ preset: 'tiny', arch: 'gpt-oss', quant: 'mxfp4', seed: 2 });
    expect(new Set(model.tensors.map((t) => t.type))).toEqual(new Set(['MXFP4', 'Q8_0', 'F32']));
    const ts = join(dir, 'tiny-gpt-oss-mxfp4-ts.gguf'),
      fast = join(dir, 'tiny-gpt-oss-mxfp4-native.gguf');
    await writeGguf(ts, model.metadata, model.tensors, { alignment: 32 });
    await writeGguf(fast, model.metadata, nativeTensorSources(model.plant, model.tensors, writer()), { alignment: 32 });
    expect(Buffer.compare(readFileSync(ts), readFileSync(fast))).toBe(0);
  });

  it("makes the TypeScript reference's tensors: small (512 wide) in real Q4_K / Q6_K / Q5_K rows, each kind of filler", async () => {
    const names = [
      'blk.0.ffn_gate_exps.weight',
      'blk.0.ffn_down_exps.weight',
      'blk.0.attn_q.weight',
      'blk.0.attn_v.weight',
      'blk.1.attn_output.weight',
      'blk.0.ffn_gate_inp.weight',
      'blk.0.attn_norm.weight',
      'output.weight',
    ];
    for (const [quant, only] of [
      ['q4_k_m', names],
      ['q5_k_m', names.slice(0, 1)],
    ] as const) {
      const model = buildSynthModel({ preset: 'small', arch: 'qwen3moe', quant, seed: 2 });
      const sources = nativeTensorSources(model.plant, model.tensors, writer());
      const types = new Set<string>();
      for (const name of only) {
        const i = model.tensors.findIndex((t) => t.name === name);
        types.add(model.tensors[i].type);
        const same = Buffer.compare(Buffer.from(model.tensors[i].data()), Buffer.from(await sources[i].data())) === 0;
        expect({ quant, name, same }).toEqual({ quant, name, same: true });
      }
      expect([...types].sort()).toEqual(quant === 'q4_k_m' ? ['F32', 'Q4_K', 'Q6_K'] : ['Q5_K']);
    }
  });

  it("same options, same bytes (writeSynthModel, gen-model's path)", async () => {
    const [a, b] = ['a', 'b'].map((n) => join(dir, `same-${n}.gguf`));
    await writeSynthModel({ preset: 'tiny', arch: 'olmoe', quant: 'q4_k_m', seed: 5 }, a);
    await writeSynthModel({ preset: 'tiny', arch: 'olmoe', quant: 'q4_k_m', seed: 5 }, b);
    expect(Buffer.compare(readFileSync(a), readFileSync(b))).toBe(0);
  });

  it('falls back to the TypeScript where the addon has no writer verbs', () => {
    const model = buildSynthModel({ preset: 'tiny', arch: 'qwen3moe', quant: 'q8_0', seed: 1 });
    expect(synthTensorSources(model.plant, model.tensors, { missing: 'not built' })).toEqual(model.tensors);
    expect(synthTensorSources(model.plant, model.tensors, writer()).map((s) => s.data)).not.toEqual(
      model.tensors.map((t) => t.data),
    );
  });
});

describe('the real-model presets', () => {
  it("have OLMoE-1B-7B's and Qwen3-30B-A3B's geometry and architecture by default; --arch wins", () => {
    const olmoe = checkSynthOptions({ preset: 'olmoe-1b-7b' });
    const qwen = checkSynthOptions({ preset: 'qwen3-30b-a3b', quant: 'q4_k_m' });
    expect([olmoe.arch, qwen.arch, checkSynthOptions({ preset: 'medium' }).arch]).toEqual([
      'olmoe',
      'qwen3moe',
      'qwen3moe',
    ]);
    expect(checkSynthOptions({ preset: 'olmoe-1b-7b', arch: 'qwen3moe' }).arch).toBe('qwen3moe');
    const pick = (hp: HParams) => [
      hp.nLayer,
      hp.nExpert,
      hp.nExpertUsed,
      hp.nEmbd,
      hp.nFfExp,
      hp.nHead,
      hp.nHeadKv,
      hp.headDim,
      hp.nVocab,
    ];
    expect(pick(presetHParams('olmoe-1b-7b', 'olmoe'))).toEqual([16, 64, 8, 2048, 1024, 16, 16, 128, 50304]);
    expect(pick(presetHParams('qwen3-30b-a3b', 'qwen3moe'))).toEqual([48, 128, 8, 2048, 768, 32, 4, 128, 151936]);
    expect(checkSynthOptions({ preset: 'gpt-oss-20b' }).arch).toBe('gpt-oss');
    const oss = presetHParams('gpt-oss-20b', 'gpt-oss');
    expect(pick(oss)).toEqual([24, 32, 4, 2880, 2880, 64, 8, 64, 201088]);
    expect(oss.slidingWindow).toEqual({ window: 128, period: 2 });
    expect(presetHParams('tiny', 'gpt-oss').slidingWindow).toEqual({ window: 8, period: 2 });
  });

  it('plan the sizes users download: Qwen3-30B-A3B Q4_K_M ~18.6 GB, OLMoE Q8_0 ~7.4 GB and Q4_K_M ~4.2 GB, gpt-oss-20b Q4_0 ~11.8 GB', () => {
    const planned = (preset: string, quant: string): number => {
      const model = buildSynthModel(checkSynthOptions({ preset, quant }));
      return model.tensors.reduce((sum, t) => sum + (tensorByteLength(t.type, t.dims) as number), 0);
    };
    const gb = (n: number) => Math.round(n / 1e8) / 10;
    expect([
      gb(planned('qwen3-30b-a3b', 'q4_k_m')),
      gb(planned('olmoe-1b-7b', 'q8_0')),
      gb(planned('olmoe-1b-7b', 'q4_k_m')),
    ]).toEqual([18.6, 7.4, 4.2]);
    expect(gb(planned('gpt-oss-20b', 'q4_0'))).toBe(11.8);
    // MXFP4_MOE: 768 experts of 3 x 2880 x 2880 at 17 / 32 bytes a weight (10.2 GB) and the rest Q8_0.
    expect(gb(planned('gpt-oss-20b', 'mxfp4'))).toBe(12.1);
  });
});

describe('free disk space', () => {
  it('a file larger than the free space: DiskSpaceError naming both sizes, before anything is written', async () => {
    const model = buildSynthModel({ preset: 'tiny', arch: 'qwen3moe', quant: 'q8_0', seed: 1 });
    const out = join(dir, 'full-disk', 'model.gguf');
    const sub = join(dir, 'full-disk');
    rmSync(sub, { recursive: true, force: true });
    mkdirSync(sub);
    let pulled = 0;
    const tensors = model.tensors.map((t) => ({ ...t, data: () => (pulled++, t.data()) }));
    const error = await writeGguf(out, model.metadata, tensors, {
      alignment: 32,
      diskFreeBytes: async () => 1000,
    }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(DiskSpaceError);
    const e = error as DiskSpaceError;
    expect(e.bytesFree).toBe(1000);
    expect(e.bytesNeeded).toBeGreaterThan(600_000);
    expect(e.message).toContain(`needs ${e.bytesNeeded} bytes`);
    expect(e.message).toContain('1000 bytes');
    expect([pulled, readdirSync(sub), existsSync(out)]).toEqual([0, [], false]);
    // enough space, or a filesystem that cannot say: written
    await writeGguf(out, model.metadata, tensors, {
      alignment: 32,
      diskFreeBytes: async () => {
        throw new Error('ENOSYS');
      },
    });
    expect(readFileSync(out).length).toBe(e.bytesNeeded);
  });
});

describe('gen-model --cache', () => {
  it('writes the preset into the model cache (the file ensurePresetModel opens), prints its path, keeps it there', async () => {
    const previous = process.env.MOETIER_CACHE_DIR;
    process.env.MOETIER_CACHE_DIR = join(dir, 'cache');
    const printed: string[] = [];
    const spy = vi.spyOn(process.stdout, 'write').mockImplementation((text) => (printed.push(String(text)), true));
    try {
      const err: string[] = [];
      const sink = { write: (text: string) => void err.push(text) };
      expect(await genModel(['--preset', 'tiny', '--quant', 'q4_0', '--cache'], sink)).toBe(0);
      const path = join(dir, 'cache', presetModelFileName(checkSynthOptions({ preset: 'tiny', quant: 'q4_0' })));
      expect(printed).toEqual([`${path}\n`]);
      const written = statSync(path).mtimeMs;
      expect(await genModel(['--preset', 'tiny', '--quant', 'q4_0', '--cache'], sink)).toBe(0);
      expect(statSync(path).mtimeMs).toBe(written);
      const both = await genModel(['--preset', 'tiny', '--cache', '--out', join(dir, 'x.gguf')], sink).catch(
        (e: unknown) => e,
      );
      expect(both).toBeInstanceOf(InvalidOptionError);
      expect((both as InvalidOptionError).option).toBe('--cache');
    } finally {
      spy.mockRestore();
      if (previous === undefined) delete process.env.MOETIER_CACHE_DIR;
      else process.env.MOETIER_CACHE_DIR = previous;
    }
  });
});
