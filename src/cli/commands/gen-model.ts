/** `moetier gen-model`: write a synthetic MoE model (realistic routing, or the planted topic lock). */
import { InvalidOptionError, RequestAbortedError } from '../../core/errors.js';
import { checkOutputPath } from '../../core/output-file.js';
import { ensurePresetModel } from '../../model/cache.js';
import { ARCHS, PRESET_NAMES } from '../../synth/presets.js';
import { SYNTH_DEFAULTS, checkSynthOptions, writeSynthModel, type SynthOptions } from '../../synth/generate.js';
import { QUANT_NAMES } from '../../synth/weights.js';
import { nativeWriter } from '../../synth/weights-native.js';
import { parseFlags } from '../args.js';
import type { Command } from '../command.js';
import type { Stream } from '../completion.js';
import { progressPrinter } from '../progress.js';
import { catchInterrupt, exitCodeInterrupted } from '../interrupt.js';

export { progressPrinter } from '../progress.js';

const usage = `usage: moetier gen-model --preset ${PRESET_NAMES.join('|')} (--out F | --cache) [options]

  --preset P   model shape: tiny (~0.6 MB at q8_0, tests), small (~120 MB, demo), medium (~2 GB, benchmarks);
               real models' shapes: olmoe-1b-7b (OLMoE-1B-7B: 16 layers x 64 experts, top-8; 7.4 GB at q8_0,
               4.2 GB at q4_k_m), qwen3-30b-a3b (Qwen3-30B-A3B: 48 x 128, top-8; 18.6 GB at q4_k_m, minutes
               on the native quantiser; the free disk space is checked first), gpt-oss-20b (24 x 32, top-4;
               11.8 GB at q4_0), deepseek-v2-lite (27 layers, the first dense, 64 experts, top-6, latent
               attention; 8.85 GB at q4_0), glm-4.5-air (46 layers, the first dense, 128 experts, top-8;
               about 62 GB at q4_0); tiny-yarn (YaRN x4), tiny-dense (glm4moe, layer 0 dense)
  --arch A     ${ARCHS.join(' | ')} (default: the preset's own, olmoe for olmoe-1b-7b, else ${SYNTH_DEFAULTS.arch})
  --quant Q    ${QUANT_NAMES.join(' | ')} (default ${SYNTH_DEFAULTS.quant})
               q*_k*, iq4_xs: llama-quantize's per-tensor mix for that ftype (norms and router F32; rows that
               are not a multiple of 256, as all of tiny's, fall back as llama-quantize does: Q2_K, Q3_K ->
               IQ4_NL (older llama.cpp; today Q4_0), Q4_K -> Q5_0, Q5_K -> Q5_1, Q6_K -> Q8_0, IQ4_XS -> IQ4_NL;
               IQ4_NL / IQ4_XS by moetier's own encoders, not llama-quantize's search)
               mxfp4: llama-quantize's MXFP4_MOE, as gpt-oss's published files: expert matrices MXFP4 (moetier's
               own encoder), the other matrices Q8_0, norms, router, biases F32
  --seed S     integer seed; same seed, same bytes (default ${SYNTH_DEFAULTS.seed})
  --routing R  realistic: routing with a real model's statistics (spread over the experts, reuse from a
               slowly drifting context; see moetier routes stats); planted: each prompt's decode locks into
               one topic's 2k experts per layer (the tests' models) (default ${SYNTH_DEFAULTS.routing})
  -o, --out F  output GGUF path (a regular file or a new path; written beside it, renamed when complete)
  --cache      write into the model cache instead (${'$'}MOETIER_CACHE_DIR, else ~/.cache/moetier; the file the
               engine's preset loaders open; kept if already there) and print its path on stdout`;

/** Where progress lines go: process.stderr, or a collector in tests. */
export type TextSink = Stream;

export async function genModel(argv: string[], stderr: TextSink): Promise<number> {
  const a = parseFlags(
    argv,
    {
      preset: { type: 'string' },
      arch: { type: 'string' },
      quant: { type: 'string' },
      seed: { type: 'string' },
      routing: { type: 'string' },
      out: { type: 'string', short: 'o' },
      cache: { type: 'boolean' },
    },
    'gen-model',
  );
  const out = a.string('out');
  const toCache = a.bool('cache');
  if (out === undefined && !toCache)
    throw new InvalidOptionError(a.flag('out'), 'an output file path (or --cache)', out);
  if (out !== undefined && toCache)
    throw new InvalidOptionError(a.flag('cache'), 'either --out or --cache, not both', true);
  if (out !== undefined) checkOutputPath(out, a.flag('out')); // before any work: a device, folder or FIFO is never replaced
  const seedText = a.string('seed');
  const seed = seedText === undefined ? undefined : /^\d+$/.test(seedText) ? Number(seedText) : seedText;
  const synth = {
    preset: a.string('preset'),
    arch: a.string('arch'),
    quant: a.string('quant'),
    seed,
    routing: a.string('routing'),
  };
  const options = await a.renamingErrors(
    { preset: 'preset', arch: 'arch', quant: 'quant', seed: 'seed', routing: 'routing' },
    async () => checkSynthOptions(synth),
  );
  const writer = nativeWriter();
  if ('missing' in writer) stderr.write(`gen-model: quantising in TypeScript, ~40x slower (${writer.missing})\n`);
  const started = Date.now();
  // Ctrl-C: the write stops before its next tensor and removes its temporary file; exit 130.
  const interrupt = catchInterrupt();
  try {
    return await write(out, options, stderr, started, interrupt.signal);
  } catch (err) {
    if (interrupt.signal.aborted && err instanceof RequestAbortedError) {
      stderr.write('gen-model: interrupted; nothing was written\n');
      return exitCodeInterrupted;
    }
    throw err;
  } finally {
    interrupt.dispose();
  }
}

async function write(
  out: string | undefined,
  options: SynthOptions,
  stderr: Stream,
  started: number,
  signal: AbortSignal,
): Promise<number> {
  if (out === undefined) {
    const path = await ensurePresetModel(options, progressPrinter(stderr), signal);
    stderr.write(
      `gen-model: ${path} (${options.preset} ${options.arch} ${options.quant} seed ${options.seed}, ${options.routing} routing) in ${((Date.now() - started) / 1000).toFixed(1)} s\n`,
    );
    process.stdout.write(`${path}\n`);
    return 0;
  }
  await writeSynthModel(options, out, progressPrinter(stderr), signal);
  stderr.write(
    `gen-model: wrote ${out} (${options.preset} ${options.arch} ${options.quant} seed ${options.seed}, ${options.routing} routing) in ${((Date.now() - started) / 1000).toFixed(1)} s\n`,
  );
  return 0;
}

export const genModelCommand: Command = {
  name: 'gen-model',
  summary: 'write a synthetic MoE model (GGUF) with realistic or planted routing',
  usage,
  run: (argv) => genModel(argv, process.stderr),
};
