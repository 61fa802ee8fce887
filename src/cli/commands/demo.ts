import { limits } from '../../core/limits.js';
import { openEngine } from '../../engine/engine.js';
import { ensurePresetModel } from '../../model/cache.js';
import { DEMO_PROMPT, promptText } from '../../synth/prompts.js';
import { parseFlags } from '../args.js';
import type { Command } from '../command.js';
import { formatStats, printStats, streamCompletion } from '../completion.js';
import { progressPrinter } from '../progress.js';

const usage = `usage: moetier demo [--preset small] [--arch qwen3moe] [--quant q8_0] [-n 64] [-t 2] [--json]

The main job (npm start): generates the preset model into the cache if it is missing (with progress),
then streams a completion of the built-in prompt (stdout) and prints its statistics (stderr).`;

export const demoCommand: Command = {
  name: 'demo',
  summary: 'generate the small demo model if needed, then stream a completion (npm start)',
  usage,
  async run(argv) {
    const a = parseFlags(
      argv,
      {
        preset: { type: 'string' },
        arch: { type: 'string' },
        quant: { type: 'string' },
        'max-tokens': { type: 'string', short: 'n', aliases: ['n-predict'] },
        threads: { type: 'string', short: 't' },
        json: { type: 'boolean' },
      },
      'demo',
    );
    const maxTokens = a.int('max-tokens', 64, 1, limits.maxTokensMax);
    const threads = a.int('threads', 2, 1, limits.threadsMax);
    const preset = {
      preset: a.string('preset') ?? 'small',
      arch: a.string('arch') ?? 'qwen3moe',
      quant: a.string('quant') ?? 'q8_0',
      seed: 1,
    };
    const model = await a.renamingErrors({ preset: 'preset', arch: 'arch', quant: 'quant' }, () =>
      ensurePresetModel(preset, progressPrinter(process.stderr)),
    );
    const engine = await openEngine({ model, threads });
    try {
      const prompt = promptText(DEMO_PROMPT, engine.tokenizer.kind);
      const json = a.bool('json');
      if (!json) {
        process.stderr.write(`model ${model}\n\n`);
        process.stdout.write(prompt.trim());
      }
      const report = await streamCompletion(engine, prompt, { maxTokens }, json ? undefined : process.stdout);
      if (json) console.log(JSON.stringify(report));
      else printStats(formatStats(report));
      return 0;
    } finally {
      await engine.close();
    }
  },
};
