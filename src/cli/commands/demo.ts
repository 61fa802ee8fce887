import { limits } from '../../core/limits.js';
import { openEngine } from '../../engine/engine.js';
import { ensurePresetModel } from '../../model/cache.js';
import { DEMO_PROMPT, promptText } from '../../synth/prompts.js';
import { intOption, parse } from '../args.js';
import type { Command } from '../command.js';
import { formatStats, streamCompletion } from '../completion.js';
import { progressPrinter } from './gen-model.js';

const usage = `usage: moetier demo [--preset small] [--arch qwen3moe] [--quant q8_0] [-n 64] [--threads 2] [--json]

The main job (npm start): generates the preset model into the cache if it is missing (with progress),
then streams a completion of the built-in prompt and prints its statistics.`;

export const demoCommand: Command = {
  name: 'demo',
  summary: 'generate the small demo model if needed, then stream a completion (npm start)',
  usage,
  async run(argv) {
    const v = parse(argv, {
      preset: { type: 'string' },
      arch: { type: 'string' },
      quant: { type: 'string' },
      'max-tokens': { type: 'string', short: 'n' },
      threads: { type: 'string' },
      json: { type: 'boolean' },
    });
    const arch = (v.arch as string | undefined) ?? 'qwen3moe';
    const model = await ensurePresetModel(
      { preset: (v.preset as string | undefined) ?? 'small', arch, quant: (v.quant as string | undefined) ?? 'q8_0', seed: 1 },
      progressPrinter(process.stderr),
    );
    const engine = await openEngine({ model, threads: intOption(v, 'threads', 2, 1, limits.threadsMax) });
    try {
      const prompt = promptText(DEMO_PROMPT, engine.tokenizer.kind);
      const json = v.json === true;
      if (!json) process.stdout.write(`model ${model}\n\n${prompt.trim()}`);
      const report = await streamCompletion(engine, prompt, { maxTokens: intOption(v, 'max-tokens', 64, 1, limits.maxTokensMax) }, json ? undefined : process.stdout);
      console.log(json ? JSON.stringify(report) : `\n\n${formatStats(report)}`);
      return 0;
    } finally {
      await engine.close();
    }
  },
};
