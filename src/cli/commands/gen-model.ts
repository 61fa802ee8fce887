/** `moetier gen-model`: write a synthetic MoE model with planted routing structure. */
import { existsSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { InvalidOptionError } from '../../core/errors.js';
import { ARCHS, PRESET_NAMES } from '../../synth/presets.js';
import { SYNTH_DEFAULTS, checkSynthOptions, writeSynthModel } from '../../synth/generate.js';
import { QUANT_NAMES } from '../../synth/weights.js';
import type { Command } from '../command.js';

const usage = `usage: moetier gen-model --preset ${PRESET_NAMES.join('|')} --out F [options]

  --preset P   model shape: tiny (~0.6 MB at q8_0, tests), small (~120 MB, demo), medium (~2 GB, benchmarks)
  --arch A     ${ARCHS.join(' | ')} (default ${SYNTH_DEFAULTS.arch})
  --quant Q    ${QUANT_NAMES.join(' | ')} (default ${SYNTH_DEFAULTS.quant})
  --seed S     integer seed; same seed, same bytes (default ${SYNTH_DEFAULTS.seed})
  --out F      output GGUF path (written to F.tmp, renamed when complete)`;

/** Where progress lines go: process.stderr, or a collector in tests. */
export interface TextSink {
  write(text: string): unknown;
}

/** A progress printer that writes at most every `intervalMs` (and always at 100 %). */
export function progressPrinter(sink: TextSink, intervalMs = 250, now: () => number = Date.now): (done: number, total: number) => void {
  let last = -Infinity;
  return (done, total) => {
    const t = now();
    if (done < total && t - last < intervalMs) return;
    last = t;
    const mb = (n: number): string => (n / 1e6).toFixed(1);
    sink.write(`gen-model: ${((100 * done) / total).toFixed(0).padStart(3)}% ${mb(done)} / ${mb(total)} MB\n`);
  };
}

export async function genModel(argv: string[], stderr: TextSink): Promise<number> {
  let values: Record<string, string | undefined>;
  try {
    values = parseArgs({
      args: argv,
      options: { preset: { type: 'string' }, arch: { type: 'string' }, quant: { type: 'string' }, seed: { type: 'string' }, out: { type: 'string' } },
      strict: true,
      allowPositionals: false,
    }).values as Record<string, string | undefined>;
  } catch (err) {
    throw new InvalidOptionError('arguments', 'the flags listed by moetier gen-model --help', (err as Error).message);
  }
  const out = values.out;
  if (out === undefined || out.length === 0) throw new InvalidOptionError('--out', 'an output file path', out);
  if (!existsSync(dirname(resolve(out)))) throw new InvalidOptionError('--out', 'a path in an existing directory', out);
  const seed = values.seed === undefined ? undefined : /^\d+$/.test(values.seed) ? Number(values.seed) : values.seed;
  const options = checkSynthOptions({ preset: values.preset, arch: values.arch, quant: values.quant, seed });
  const started = Date.now();
  await writeSynthModel(options, out, progressPrinter(stderr));
  stderr.write(`gen-model: wrote ${out} (${options.preset} ${options.arch} ${options.quant} seed ${options.seed}) in ${((Date.now() - started) / 1000).toFixed(1)} s\n`);
  return 0;
}

export const genModelCommand: Command = {
  name: 'gen-model',
  summary: 'write a synthetic MoE model (GGUF) with planted topic routing',
  usage,
  run: (argv) => genModel(argv, process.stderr),
};
