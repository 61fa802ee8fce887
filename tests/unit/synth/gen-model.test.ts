import { existsSync, mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { InvalidOptionError } from '../../../src/core/errors.js';
import { genModel, progressPrinter } from '../../../src/cli/commands/gen-model.js';
import { commands } from '../../../src/cli/commands/index.js';
import { ensurePresetModel, modelCacheDir, presetModelFileName } from '../../../src/model/cache.js';
import { parseGguf } from '../../../src/model/gguf/reader.js';
import { GENERATOR_VERSION, buildSynthModel } from '../../../src/synth/generate.js';
import { rowBytes } from '../../../src/model/quant.js';

const dir = mkdtempSync(join(tmpdir(), 'moetier-gen-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function collector(): { lines: string[]; write(text: string): void } {
  const lines: string[] = [];
  return { lines, write: (text: string) => void lines.push(text) };
}

describe('moetier gen-model', () => {
  it('is registered', () => {
    expect(commands.map((c) => c.name)).toContain('gen-model');
  });

  it('writes the same bytes twice for a seed, other bytes for another seed', async () => {
    const [a, b, c] = ['a', 'b', 'c'].map((n) => join(dir, `${n}.gguf`));
    const err = collector();
    expect(await genModel(['--preset', 'tiny', '--out', a], err)).toBe(0);
    expect(
      await genModel(
        ['--preset', 'tiny', '--seed', '1', '--arch', 'qwen3moe', '--quant', 'q8_0', '--out', b],
        collector(),
      ),
    ).toBe(0);
    expect(await genModel(['--preset', 'tiny', '--seed', '2', '--out', c], collector())).toBe(0);
    expect(Buffer.compare(readFileSync(a), readFileSync(b))).toBe(0);
    expect(Buffer.compare(readFileSync(a), readFileSync(c))).not.toBe(0);
    expect(existsSync(`${a}.tmp`)).toBe(false);
    expect(parseGguf(new Uint8Array(readFileSync(a)), a).metadata.get('general.architecture')).toBe('qwen3moe');
    // progress: a 100 % line with the size in MB, then the summary
    const text = err.lines.join('');
    expect(text).toMatch(/100% \d+\.\d \/ \d+\.\d MB/);
    expect(text).toContain(`wrote ${a}`);
  });

  it('writes each quant with its tensor type', async () => {
    for (const [quant, type] of [
      ['q4_0', 'Q4_0'],
      ['f16', 'F16'],
      ['bf16', 'BF16'],
      ['f32', 'F32'],
    ] as const) {
      const out = join(dir, `${quant}.gguf`);
      await genModel(['--preset', 'tiny', '--arch', 'olmoe', '--quant', quant, '--out', out], collector());
      const file = parseGguf(new Uint8Array(readFileSync(out)), out);
      expect(file.tensors.get('blk.0.ffn_down_exps.weight')!.type).toBe(type);
      expect(file.tensors.get('blk.0.ffn_gate_inp.weight')!.type).toBe('F32');
    }
  });

  it("writes the k-quant mixes: on tiny (rows of 64 and 32) llama-quantize's fallback types", async () => {
    // the full per-tensor tables are in quant-mix.test.ts; here the file as written and read back
    const expected = {
      q4_k_m: { q: 'Q5_0', v: 'Q8_0', o: 'Q5_1', down0: 'Q5_0', down3: 'Q8_0', out: 'Q8_0' },
      q5_k_m: { q: 'Q5_1', v: 'Q8_0', o: 'Q5_1', down0: 'Q5_1', down3: 'Q8_0', out: 'Q8_0' },
      q6_k: { q: 'Q8_0', v: 'Q8_0', o: 'Q8_0', down0: 'Q8_0', down3: 'Q8_0', out: 'Q8_0' },
      q3_k_m: { q: 'IQ4_NL', v: 'Q8_0', o: 'Q5_1', down0: 'Q5_0', down3: 'Q5_0', out: 'Q8_0' },
      q2_k: { q: 'IQ4_NL', v: 'Q8_0', o: 'Q5_1', down0: 'IQ4_NL', down3: 'IQ4_NL', out: 'Q8_0' },
      iq4_xs: { q: 'IQ4_NL', v: 'Q8_0', o: 'Q5_1', down0: 'IQ4_NL', down3: 'IQ4_NL', out: 'Q8_0' },
    } as const;
    for (const [quant, want] of Object.entries(expected)) {
      const out = join(dir, `${quant}.gguf`);
      expect(await genModel(['--preset', 'tiny', '--quant', quant, '--out', out], collector())).toBe(0);
      const file = parseGguf(new Uint8Array(readFileSync(out)), out);
      const type = (name: string): string => file.tensors.get(name)!.type;
      expect([
        quant,
        type('blk.0.attn_q.weight'),
        type('blk.1.attn_v.weight'),
        type('blk.2.attn_output.weight'),
        type('blk.0.ffn_down_exps.weight'),
        type('blk.3.ffn_down_exps.weight'),
        type('output.weight'),
      ]).toEqual([quant, want.q, want.v, want.o, want.down0, want.down3, want.out]);
      expect([type('blk.0.ffn_gate_inp.weight'), type('blk.0.attn_norm.weight')]).toEqual(['F32', 'F32']);
      expect(file.metadata.get('general.name')).toBe(`moetier-synth-tiny-qwen3moe-${quant}-s1`);
    }
  });

  it("writes mxfp4 (llama-quantize's MXFP4_MOE) on tiny gpt-oss: MXFP4 experts, Q8_0 matrices, F32 biases and sinks", async () => {
    const out = join(dir, 'mxfp4.gguf');
    expect(
      await genModel(['--preset', 'tiny', '--arch', 'gpt-oss', '--quant', 'mxfp4', '--out', out], collector()),
    ).toBe(0);
    const file = parseGguf(new Uint8Array(readFileSync(out)), out);
    const type = (name: string): string => file.tensors.get(name)!.type;
    expect(['gate', 'up', 'down'].map((m) => type(`blk.1.ffn_${m}_exps.weight`))).toEqual(['MXFP4', 'MXFP4', 'MXFP4']);
    expect(['blk.0.attn_q.weight', 'blk.0.attn_output.weight', 'token_embd.weight', 'output.weight'].map(type)).toEqual(
      ['Q8_0', 'Q8_0', 'Q8_0', 'Q8_0'],
    );
    expect(
      ['blk.0.ffn_gate_exps.bias', 'blk.0.attn_sinks.weight', 'blk.0.ffn_gate_inp.weight', 'blk.0.attn_q.bias'].map(
        type,
      ),
    ).toEqual(['F32', 'F32', 'F32', 'F32']);
  });

  it('refuses bad options with an InvalidOptionError naming the option', async () => {
    const out = join(dir, 'bad.gguf');
    const cases: Array<[string[], string]> = [
      [['--preset', 'huge', '--out', out], '--preset'],
      [['--preset', 'tiny', '--arch', 'gpt2', '--out', out], '--arch'],
      [['--preset', 'tiny', '--quant', 'q5_k', '--out', out], '--quant'],
      [['--preset', 'tiny', '--seed=-3', '--out', out], '--seed'],
      [['--preset', 'tiny', '--seed', '1.5', '--out', out], '--seed'],
      [['--preset', 'tiny'], '--out'],
      [['--preset', 'tiny', '-o', join(dir, 'no-such-dir', 'm.gguf')], '-o'],
      [['--preset', 'tiny', '--out', out, '--colour', 'red'], '--colour'],
    ];
    for (const [argv, option] of cases) {
      const error = await genModel(argv, collector()).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(InvalidOptionError);
      expect((error as InvalidOptionError).option).toBe(option);
    }
    expect(existsSync(out)).toBe(false);
  });

  it('throttles progress lines but always prints 100 %', () => {
    const sink = collector();
    let clock = 0;
    const progress = progressPrinter(sink, 250, () => clock);
    for (let done = 1; done <= 10; done++) {
      clock += 50;
      progress(done * 1e6, 10e6);
    }
    expect(sink.lines).toHaveLength(3); // t = 50 (first), 300, and the final 100 %
    expect(sink.lines[2]).toContain('100% 10.0 / 10.0 MB');
  });

  it('redraws one line on a terminal and ends it at 100 %', () => {
    const sink = { ...collector(), isTTY: true };
    let clock = 0;
    const progress = progressPrinter(sink, 250, () => clock);
    for (let done = 1; done <= 10; done++) {
      clock += 300;
      progress(done * 1e6, 10e6);
    }
    expect(sink.lines).toHaveLength(10);
    for (const line of sink.lines) expect(line.startsWith('\r\x1b[2K')).toBe(true); // column 0, erase the line
    expect(sink.lines.slice(0, 9).join('')).not.toContain('\n');
    expect(sink.lines[9]).toMatch(/100% 10\.0 \/ 10\.0 MB\n$/);
  });
});

describe('model cache', () => {
  it('generates a preset once into MOETIER_CACHE_DIR, named with the generator version', async () => {
    const previous = process.env.MOETIER_CACHE_DIR;
    process.env.MOETIER_CACHE_DIR = join(dir, 'cache');
    try {
      expect(modelCacheDir()).toBe(join(dir, 'cache'));
      const options = { preset: 'tiny', arch: 'llama', quant: 'q4_0', seed: 3 };
      const [first, concurrent] = await Promise.all([ensurePresetModel(options), ensurePresetModel(options)]);
      expect(concurrent).toBe(first);
      expect(first).toBe(
        join(dir, 'cache', presetModelFileName({ preset: 'tiny', arch: 'llama', quant: 'q4_0', seed: 3 })),
      );
      expect(first).toContain(`-g${GENERATOR_VERSION}.gguf`);
      const mtime = statSync(first).mtimeMs;
      expect(await ensurePresetModel(options)).toBe(first);
      expect(statSync(first).mtimeMs).toBe(mtime);
      expect(parseGguf(new Uint8Array(readFileSync(first)), first).metadata.get('general.architecture')).toBe('llama');
      await expect(ensurePresetModel({ preset: 'tiny', quant: 'int3' })).rejects.toBeInstanceOf(InvalidOptionError);
    } finally {
      if (previous === undefined) delete process.env.MOETIER_CACHE_DIR;
      else process.env.MOETIER_CACHE_DIR = previous;
    }
  });

  it('defaults to the user cache folder ($XDG_CACHE_HOME/moetier), not the package folder', () => {
    const previous = { own: process.env.MOETIER_CACHE_DIR, xdg: process.env.XDG_CACHE_HOME };
    delete process.env.MOETIER_CACHE_DIR;
    process.env.XDG_CACHE_HOME = join(dir, 'xdg');
    try {
      expect(modelCacheDir()).toBe(join(dir, 'xdg', 'moetier'));
    } finally {
      if (previous.own !== undefined) process.env.MOETIER_CACHE_DIR = previous.own;
      if (previous.xdg === undefined) delete process.env.XDG_CACHE_HOME;
      else process.env.XDG_CACHE_HOME = previous.xdg;
    }
  });
});

describe('preset sizes at Q8_0 (from the tensor list, nothing written)', () => {
  const bytesOf = (preset: 'tiny' | 'small' | 'medium'): number =>
    buildSynthModel({ preset, arch: 'qwen3moe', quant: 'q8_0', seed: 1 }).tensors.reduce(
      (sum, t) => sum + rowBytes(t.type, t.dims[0]) * t.dims.slice(1).reduce((a, b) => a * b, 1),
      0,
    );
  it('tiny is under 2 MB, small about 120 MB, medium about 2.0 GB', () => {
    expect(bytesOf('tiny')).toBeLessThan(2e6);
    expect(bytesOf('small')).toBeGreaterThan(90e6);
    expect(bytesOf('small')).toBeLessThan(130e6);
    expect(bytesOf('medium')).toBeGreaterThan(1.9e9);
    expect(bytesOf('medium')).toBeLessThan(2.1e9);
  });
});
