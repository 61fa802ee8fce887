import { limits } from '../../core/limits.js';
import { openEngine } from '../../engine/engine.js';
import { intOption, numberOption, parse, requireString } from '../args.js';
import type { Command } from '../command.js';
import { formatStats, streamCompletion } from '../completion.js';

const usage = `usage: moetier run --model F --prompt P [-n N] [--json] [options]

  --model F         GGUF model file
  --prompt P        prompt text
  -n, --max-tokens  tokens to generate (default ${limits.maxTokensDefault})
  --json            print one JSON object (tokens, text, ttftMs, prefillTokPerS, decodeTokPerS, ...) instead of streaming
  --threads T       native compute threads (default 2)
  --ctx N           context length in tokens (default ${limits.contextTokensDefault})
  --temperature X   0 = greedy (default 0)
  --top-k K, --top-p P, --seed S   sampling controls`;

export const runCommand: Command = {
  name: 'run',
  summary: 'stream a completion from a GGUF model and print its timings',
  usage,
  async run(argv) {
    const v = parse(argv, {
      model: { type: 'string' },
      prompt: { type: 'string' },
      'max-tokens': { type: 'string', short: 'n' },
      json: { type: 'boolean' },
      threads: { type: 'string' },
      ctx: { type: 'string' },
      temperature: { type: 'string' },
      'top-k': { type: 'string' },
      'top-p': { type: 'string' },
      seed: { type: 'string' },
    });
    const engine = await openEngine({
      model: requireString(v, 'model'),
      threads: intOption(v, 'threads', 2, 1, limits.threadsMax),
      contextTokens: intOption(v, 'ctx', limits.contextTokensDefault, 2, limits.contextTokensMax),
    });
    try {
      const json = v.json === true;
      const report = await streamCompletion(
        engine,
        requireString(v, 'prompt'),
        {
          maxTokens: intOption(v, 'max-tokens', limits.maxTokensDefault, 1, limits.maxTokensMax),
          temperature: numberOption(v, 'temperature', 0),
          topK: intOption(v, 'top-k', 0, 0),
          topP: numberOption(v, 'top-p', 1),
          seed: intOption(v, 'seed', 0),
        },
        json ? undefined : process.stdout,
      );
      if (json) console.log(JSON.stringify(report));
      else console.log(`\n\n${formatStats(report)}`);
      return 0;
    } finally {
      await engine.close();
    }
  },
};
