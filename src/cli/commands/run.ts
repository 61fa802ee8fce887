import { InvalidOptionError } from '../../core/errors.js';
import { limits } from '../../core/limits.js';
import { openEngine, type Engine, type EngineOptions } from '../../engine/engine.js';
import { startTelemetry } from '../../../otel/setup.js';
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
  --top-k K, --top-p P, --seed S   sampling controls

expert tier (attached with --resident or --slots-per-layer):
  --backend cpu|fake      the device that holds resident experts (default cpu; fake: a simulated 8 GB card)
  --resident X            fraction of all experts resident, in (0, 1]
  --slots-per-layer B     device slots on every layer (instead of --resident)
  --heat F|none           heat file to warmstart from and merge into (default: the model's in the cache folder)
  --prefill-replan        re-plan each layer's residents from the prompt's own prefill routing (also MOETIER_PREFILL_REPLAN=1)
  --replan-max N          swaps per layer at most (default 24; also MOETIER_PREFILL_REPLAN_MAX)
  --trace-routes F        write this request's routing as a route trace (JSONL, the policy lab's format)
  --trace-file F          write the spans (layer compute, uploads, calibration) as Chrome/Perfetto trace JSON;
                          OTLP export follows the standard OTEL_* variables (e.g. OTEL_EXPORTER_OTLP_ENDPOINT)
  with a tier, --json adds decodeHitRate, prefillHitRate, moeMsPerToken, msPerToken, uploads, uploadBytes`;

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
      backend: { type: 'string' },
      resident: { type: 'string' },
      'slots-per-layer': { type: 'string' },
      heat: { type: 'string' },
      'prefill-replan': { type: 'boolean' },
      'replan-max': { type: 'string' },
      'trace-routes': { type: 'string' },
      'trace-file': { type: 'string' },
    });
    const telemetry = startTelemetry({ traceFile: typeof v['trace-file'] === 'string' ? requireString(v, 'trace-file') : undefined });
    try {
      return await runWith(v);
    } finally {
      const report = await telemetry.shutdown();
      if (report.traceFile) console.error(`trace file: ${report.traceFile.file} (${report.traceFile.spans} spans)`);
    }
  },
};

async function runWith(v: Record<string, string | boolean | undefined>): Promise<number> {
  const engine = await openEngine({
    model: requireString(v, 'model'),
    threads: intOption(v, 'threads', 2, 1, limits.threadsMax),
    contextTokens: intOption(v, 'ctx', limits.contextTokensDefault, 2, limits.contextTokensMax),
    ...tierOptions(v),
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
        traceRoutes: typeof v['trace-routes'] === 'string' ? requireString(v, 'trace-routes') : undefined,
      },
      json ? undefined : process.stdout,
    );
    const full = { ...report, ...tierReport(engine) };
    if (json) console.log(JSON.stringify(full));
    else console.log(`\n\n${formatStats(report)}${formatTier(full)}`);
    return 0;
  } finally {
    await engine.close();
  }
}

function tierOptions(v: Record<string, string | boolean | undefined>): Partial<EngineOptions> {
  const o: Partial<EngineOptions> = {};
  if (v.backend !== undefined) {
    if (v.backend !== 'cpu' && v.backend !== 'fake') throw new InvalidOptionError('--backend', '"cpu" or "fake"', v.backend);
    o.backend = v.backend;
  }
  if (v.resident !== undefined) o.resident = numberOption(v, 'resident', 1);
  if (v['slots-per-layer'] !== undefined) o.slotsPerLayer = intOption(v, 'slots-per-layer', 1, 1);
  if (v.heat !== undefined) o.heat = v.heat === 'none' ? false : requireString(v, 'heat');
  if (v['prefill-replan'] === true || v['replan-max'] !== undefined) {
    o.prefillReplan = {};
    if (v['prefill-replan'] === true) o.prefillReplan.enabled = true;
    if (v['replan-max'] !== undefined) o.prefillReplan.maxSwapsPerLayer = intOption(v, 'replan-max', 24, 1);
  }
  return o;
}

interface TierReport {
  msPerToken: number;
  decodeHitRate?: number | null;
  prefillHitRate?: number | null;
  moeMsPerToken?: number | null;
  uploads?: number;
  uploadBytes?: number;
}

/** The tier's figures of the last request; a figure that does not exist (no decode step, no native timing) is null. */
function tierReport(engine: Engine): TierReport {
  const s = engine.lastStats!;
  const r: TierReport = { msPerToken: round(s.msPerToken) };
  if (s.decodeHitRate === undefined) return r;
  return {
    ...r,
    decodeHitRate: finite(s.decodeHitRate, 4),
    prefillHitRate: finite(s.prefillHitRate!, 4),
    moeMsPerToken: finite(s.moeMsPerToken!, 3),
    uploads: s.uploads,
    uploadBytes: s.uploadBytes,
  };
}

function formatTier(r: TierReport): string {
  if (r.decodeHitRate === undefined) return '';
  const pct = (x: number | null | undefined) => (x == null ? 'n/a' : `${(x * 100).toFixed(1)} %`);
  return `\nhits: decode ${pct(r.decodeHitRate)} | prefill ${pct(r.prefillHitRate)} | uploads ${r.uploads} (${r.uploadBytes} bytes) | ${r.msPerToken.toFixed(2)} ms/token`;
}

function finite(x: number, digits: number): number | null {
  return Number.isFinite(x) ? Number(x.toFixed(digits)) : null;
}

function round(x: number): number {
  return Math.round(x * 100) / 100;
}
