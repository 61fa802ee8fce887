import { readFileSync } from 'node:fs';
import { configSummary, formatConfig } from '../../engine/config.js';
import { autoBudget, formatBytes, parseByteSize, type MemoryPlan } from '../../engine/memory-plan.js';
import { InvalidOptionError, RequestAbortedError } from '../../core/errors.js';
import { availableMemoryBytes } from '../../core/available-memory.js';
import { limits } from '../../core/limits.js';
import { checkOutputPath } from '../../core/output-file.js';
import { openEngine, type Engine, type EngineOptions } from '../../engine/engine.js';
import { isTierBackendKind, TIER_BACKEND_EXPECTED } from '../../engine/tier/options.js';
import { SEED_MAX } from '../../engine/sampler.js';
import type { GenerationStats } from '../../engine/stats.js';
import { loadTelemetry } from '../../../otel/load.js';
import { exportProblem, type Telemetry } from '../../../otel/telemetry.js';
import { replanFromEnv } from '../replan-env.js';
import { parseFlags, type Args, type FlagSpecs } from '../args.js';
import type { Command } from '../command.js';
import { formatStats, printStats, streamCompletion } from '../completion.js';
import { catchInterrupt, exitCodeInterrupted } from '../interrupt.js';

const usage = `usage: moetier run -m F -p P [-n N] [--json] [options]

  -m, --model F                 GGUF model file
  -p, --prompt P                prompt text
  -n, --max-tokens N            tokens to generate (default ${limits.maxTokensDefault}; also --n-predict)
  --json                        print one JSON object (tokens, text, ttftMs, prefillTokPerS, decodeTokPerS, ...) instead of streaming
  -t, --threads T               native compute threads (default 2)
  -c, --ctx N                   context length in tokens (default ${limits.contextTokensDefault}; also --ctx-size)
  --temp X, --temperature X     0 = greedy (default 0)
  --top-k K, --top-p P, -s, --seed S   sampling controls
  the generated text goes to stdout, the statistics to stderr (moetier run ... > out.txt keeps only the text);
  exit code 2: a bad command line, 1: a failure while running

memory (a model bigger than the RAM it may use):
  --memory-budget B|auto  all the RAM the engine may hold (1.5G, 800M; auto: 75 % of the memory available):
                          dense weights, KV cache, scratch and the expert slots that fit; the other experts
                          are read from the model file when routed (the disk tier); --json adds memoryPlan,
                          --verbose prints it. With --backend cuda and --resident/--slots-per-layer: the
                          slots are the GPU's (outside the budget), the budget bounds the host's parts, and
                          misses and uploads read the model file (never its mapping)
  --short-prefill-tokens N|auto  on the disk tier: a prompt of at most N tokens reads its routed experts once
                          routed (on demand), a longer one reads each layer whole while the previous layer
                          computes (0: always whole layers; default auto: the crossover bench prefill measured)
  --prefetch off|observe|enforce  with a tier (this one, or --resident/--slots-per-layer): predict the next
                          layer's experts (its router on the current stream) and read them ahead within
                          the measured transfer window (enforce), or only count what that would read and
                          cover (observe); default off; --json adds prefetch (coverage, lateMs,
                          wastedBytes, covered, late, uncovered, issued, cancelled, byLayer, ...)

expert tier (attached with --resident or --slots-per-layer):
  --backend cpu|fake|disk|cuda|cuda-sim
                          the device that holds resident experts (default cpu; fake: a simulated 8 GB card;
                          disk: RAM slots read from the model file, dense weights held by the engine, misses
                          read from the file for their call: the page cache holds none of the model's tensors;
                          cuda: the GPU's memory, residents computed there while the CPU computes the misses
                          (refused where there is no device or driver); cuda-sim: the cuda code on a simulated
                          runtime with the CPU's kernels, for tests)
  --resident X            fraction of all experts resident, in (0, 1]
  --slots-per-layer B     device slots on every layer (instead of --resident)
  --heat F|none           heat file to warmstart from and merge into (default: the model's in the cache folder)
  --prefill-replan        re-plan each layer's residents from the prompt's own prefill routing (also MOETIER_PREFILL_REPLAN=1)
  --replan-max N          swaps per layer at most (default 24; also MOETIER_PREFILL_REPLAN_MAX)
  --replan-guard on|off   the replan guard (default on; also MOETIER_REPLAN_GUARD=0|1): the first decode tokens
                          revert a replanned layer that did worse than its old residents, or (replan off) take
                          a held-back replan where it would do better than the heat file's warm start
  --placement lfru|dlfu   the placement policy: lfru (SPEC's LFRU with replan and its guard; the default but on the
                          disk tier) or dlfu (decayed LFU, every routed miss kept, evicting the lowest decayed count,
                          decided by the tier when a slot is needed; the default on the disk tier, which reads its misses)
  --half-life N           dlfu's half-life in decode tokens (default 16)
  --trace-routes F        write this request's routing as a route trace (JSONL, the policy lab's format)
  --trace-file F          write the spans (request, prefill, decode steps; with a tier layer compute, uploads,
                          rebuilds, calibration) as Chrome/Perfetto trace JSON; OTLP export follows the standard
                          OTEL_* variables (e.g. OTEL_EXPORTER_OTLP_ENDPOINT; see docs/TRACING.md)

simulation (benchmarks only):
  --routes-from TRACE     route every MoE layer by a recorded trace instead of the router (the engine's
                          --trace-routes format, or ../shared/traces/ JSONL): each layer runs the experts
                          the trace names for the row, weighted by the router's softmax over them, so the
                          text printed means nothing; slots, reads, uploads, prefetch, calibration and
                          spans are real and follow the trace. Decode step t runs decode row t (wrapping
                          around past the trace's end); prompt rows run its prefill rows, or its decode
                          rows from row 0 when it has none. A trace of other layers, experts or top-k
                          than the model's is refused (exit 2). The default heat file is the model's and
                          the trace's own; --json adds routesFrom
  with a tier, --json adds decodeHitRate, prefillHitRate, moeMsPerToken, msPerToken, uploads, uploadBytes, decodeUploadBytes, streamedBytes, replanGuard;
  on the disk tier also fileReadBytes (all the engine read from the model file) and processReadBytes (/proc/self/io)`;

/** Short letters and aliases are llama-cli's (-m -p -n -t -c -s, --temp, --n-predict, --ctx-size). */
const flags: FlagSpecs = {
  model: { type: 'string', short: 'm' },
  prompt: { type: 'string', short: 'p' },
  'max-tokens': { type: 'string', short: 'n', aliases: ['n-predict'] },
  json: { type: 'boolean' },
  threads: { type: 'string', short: 't' },
  ctx: { type: 'string', short: 'c', aliases: ['ctx-size'] },
  temperature: { type: 'string', aliases: ['temp'] },
  'top-k': { type: 'string' },
  'top-p': { type: 'string' },
  seed: { type: 'string', short: 's' },
  backend: { type: 'string' },
  resident: { type: 'string' },
  'slots-per-layer': { type: 'string' },
  heat: { type: 'string' },
  'prefill-replan': { type: 'boolean' },
  'replan-max': { type: 'string' },
  'replan-guard': { type: 'string' },
  placement: { type: 'string' },
  'half-life': { type: 'string' },
  'trace-routes': { type: 'string' },
  'trace-file': { type: 'string' },
  'routes-from': { type: 'string' },
  'memory-budget': { type: 'string' },
  prefetch: { type: 'string' },
  'short-prefill-tokens': { type: 'string' },
  verbose: { type: 'boolean' },
};

/** The engine's option names -> this command's flags: an engine error names the flag the user typed. */
const apiFlags: Record<string, string> = {
  model: 'model',
  prompt: 'prompt',
  threads: 'threads',
  contextTokens: 'ctx',
  maxTokens: 'max-tokens',
  temperature: 'temperature',
  topK: 'top-k',
  topP: 'top-p',
  seed: 'seed',
  backend: 'backend',
  resident: 'resident',
  slotsPerLayer: 'slots-per-layer',
  heat: 'heat',
  'prefillReplan.maxSwapsPerLayer': 'replan-max',
  'prefillReplan.guard': 'replan-guard',
  placementPolicy: 'placement',
  'dlfu.halfLifeTokens': 'half-life',
  dlfu: 'half-life',
  traceRoutes: 'trace-routes',
  memoryBudgetBytes: 'memory-budget',
  'prefetch.mode': 'prefetch',
  shortPrefillTokens: 'short-prefill-tokens',
  routesFrom: 'routes-from',
};

export const runCommand: Command = {
  name: 'run',
  summary: 'stream a completion from a GGUF model and print its timings',
  usage,
  async run(argv) {
    const a = parseFlags(argv, flags, 'run');
    checkOutputs(a); // before the telemetry, which writes the trace file when it shuts down
    const telemetry = await loadTelemetry({ traceFile: a.string('trace-file') });
    for (const warning of telemetry.warnings) console.error(`moetier: ${warning}`);
    const interrupt = catchInterrupt();
    try {
      return await a.renamingErrors(apiFlags, () => runWith(a, interrupt.signal));
    } catch (error) {
      if (!(interrupt.signal.aborted && error instanceof RequestAbortedError)) throw error;
      console.error('\nmoetier: interrupted');
      return exitCodeInterrupted;
    } finally {
      await endTelemetry(telemetry); // still listening: a Ctrl-C while the trace file is written does not cut it short
      interrupt.dispose();
    }
  },
};

/** Writes the trace file and flushes the exporters (bounded); says once on stderr what failed. */
async function endTelemetry(telemetry: Telemetry): Promise<void> {
  const report = await telemetry.shutdown();
  if (report.traceFile) console.error(`trace file: ${report.traceFile.file} (${report.traceFile.spans} spans)`);
  const problem = exportProblem(report);
  if (problem) console.error(`moetier: ${problem}`);
}

async function runWith(a: Args, signal: AbortSignal): Promise<number> {
  // Every flag is read before the model is opened: a bad command line fails at once.
  const prompt = a.requireString('prompt');
  const generate = {
    maxTokens: a.int('max-tokens', limits.maxTokensDefault, 1, limits.maxTokensMax),
    temperature: a.number('temperature', 0),
    topK: a.int('top-k', 0, 0),
    topP: a.number('top-p', 1),
    seed: a.int('seed', 0, 0, SEED_MAX),
    traceRoutes: a.string('trace-routes'),
    signal,
  };
  const engine = await openEngine({
    model: a.requireString('model'),
    threads: a.int('threads', 2, 1, limits.threadsMax),
    contextTokens: a.int('ctx', limits.contextTokensDefault, 2, limits.contextTokensMax),
    ...tierOptions(a),
    ...memoryOptions(a),
    ...(a.has('routes-from') ? { routesFrom: a.string('routes-from') } : {}),
  });
  try {
    const json = a.bool('json');
    if (engine.routesFrom !== undefined)
      console.error(
        `moetier: simulation: routing from ${engine.routesFrom}, not the router: the text means nothing; the tier's figures follow the trace`,
      );
    if (a.bool('verbose')) console.error(formatConfig(engine.config));
    if (a.bool('verbose') && engine.memoryPlan) console.error(formatPlan(engine.memoryPlan));
    const report = await streamCompletion(engine, prompt, generate, json ? undefined : process.stdout);
    const full = {
      ...report,
      ...tierReport(engine),
      config: configSummary(engine.config),
      ...(engine.memoryPlan ? { memoryPlan: engine.memoryPlan } : {}),
      ...(engine.routesFrom !== undefined ? { routesFrom: engine.routesFrom } : {}),
    };
    if (json) console.log(JSON.stringify(full));
    else printStats(`${formatStats(report)}${formatTier(full)}`);
    const heatFileError = engine.lastStats?.heatFileError;
    if (heatFileError)
      console.error(
        `moetier: warning: heat file not saved (${heatFileError}); set MOETIER_CACHE_DIR or --heat F to a writable place, or --heat none`,
      );
    return 0;
  } finally {
    await engine.close();
  }
}

export function memoryOptions(a: Args): Partial<EngineOptions> {
  const text = a.string('memory-budget');
  if (text === undefined) return {};
  // auto: of the memory available to this process (a cgroup's limit counts).
  return {
    memoryBudgetBytes:
      text === 'auto' ? autoBudget(availableMemoryBytes()) : parseByteSize(a.flag('memory-budget'), text),
  };
}

/** The plan, one part a line (--verbose). */
function formatPlan(p: MemoryPlan): string {
  const lines = Object.entries(p.parts).map(([k, v]) => `  ${k.padEnd(11)} ${formatBytes(v)}`);
  const where = p.slotsOnDevice ? ' on the device (outside the budget)' : '';
  const slots =
    p.holdsEveryExpert && !p.slotsOnDevice
      ? 'every expert fits: no disk tier'
      : `${p.slotsPerLayer} expert slots per layer${where}; the rest read from the file when routed`;
  return `memory plan: budget ${formatBytes(p.budgetBytes)} (Node's own heap is outside it)\n${lines.join('\n')}\n  ${slots}`;
}

export function tierOptions(a: Args): Partial<EngineOptions> {
  const o: Partial<EngineOptions> = {};
  const backend = a.string('backend');
  if (backend !== undefined) {
    if (!isTierBackendKind(backend))
      throw new InvalidOptionError(a.flag('backend'), `one of ${TIER_BACKEND_EXPECTED}`, backend);
    o.backend = backend;
  }
  if (a.has('resident') && a.has('slots-per-layer')) {
    throw new InvalidOptionError(
      a.flag('resident'),
      `either ${a.flag('resident')} or ${a.flag('slots-per-layer')}, not both`,
      a.string('resident'),
    );
  }
  if (a.has('resident')) o.resident = a.number('resident', 1);
  if (a.has('slots-per-layer')) o.slotsPerLayer = a.int('slots-per-layer', 1, 1);
  const heat = a.string('heat');
  if (heat !== undefined) o.heat = heat === 'none' ? false : heat;
  // The variables apply where a tier is asked for (they configure it); a flag beside one wins.
  const fromEnv =
    a.has('resident') || a.has('slots-per-layer') || a.has('memory-budget') ? replanFromEnv(process.env) : {};
  if (a.bool('prefill-replan') || a.has('replan-max') || a.has('replan-guard') || Object.keys(fromEnv).length > 0) {
    o.prefillReplan = { ...fromEnv };
    if (a.bool('prefill-replan')) o.prefillReplan.enabled = true;
    if (a.has('replan-max')) o.prefillReplan.maxSwapsPerLayer = a.int('replan-max', 24, 1);
    const guard = a.string('replan-guard');
    if (guard !== undefined) {
      if (guard !== 'on' && guard !== 'off')
        throw new InvalidOptionError(a.flag('replan-guard'), '"on" or "off"', guard);
      o.prefillReplan.guard = guard === 'on';
    }
  }
  const placement = a.string('placement');
  if (placement !== undefined) {
    if (placement !== 'lfru' && placement !== 'dlfu')
      throw new InvalidOptionError(a.flag('placement'), '"lfru" or "dlfu"', placement);
    o.placementPolicy = placement;
  }
  if (a.has('half-life')) o.dlfu = { halfLifeTokens: a.number('half-life', 1) };
  const shortPrefill = a.string('short-prefill-tokens');
  if (shortPrefill !== undefined) {
    if (shortPrefill !== 'auto' && !/^\d+$/.test(shortPrefill))
      throw new InvalidOptionError(a.flag('short-prefill-tokens'), "an integer >= 0 or 'auto'", shortPrefill);
    if (!a.has('memory-budget') && a.string('backend') !== 'disk') {
      throw new InvalidOptionError(
        a.flag('short-prefill-tokens'),
        `${a.flag('memory-budget')} or ${a.flag('backend')} disk beside it (the disk tier)`,
        shortPrefill,
      );
    }
    o.shortPrefillTokens = shortPrefill === 'auto' ? 'auto' : Number(shortPrefill);
  }
  const prefetch = a.string('prefetch');
  if (prefetch !== undefined) {
    if (prefetch !== 'off' && prefetch !== 'observe' && prefetch !== 'enforce')
      throw new InvalidOptionError(a.flag('prefetch'), '"off", "observe" or "enforce"', prefetch);
    if (!a.has('memory-budget') && !a.has('resident') && !a.has('slots-per-layer')) {
      throw new InvalidOptionError(
        a.flag('prefetch'),
        `${a.flag('memory-budget')}, ${a.flag('resident')} or ${a.flag('slots-per-layer')} beside it (an expert tier)`,
        prefetch,
      );
    }
    o.prefetch = { mode: prefetch };
  }
  // Flags that only mean something with a tier were ignored without one: say so instead.
  if (!a.has('resident') && !a.has('slots-per-layer')) {
    // (--heat none asks for nothing, so scripts that always pass it keep working.)
    const needsTier = [
      'backend',
      'heat',
      'prefill-replan',
      'replan-max',
      'replan-guard',
      'placement',
      'half-life',
    ].find((f) => a.has(f) && !(f === 'heat' && heat === 'none'));
    if (needsTier !== undefined) {
      throw new InvalidOptionError(
        a.flag(needsTier),
        `${a.flag('resident')} or ${a.flag('slots-per-layer')} beside it (it configures the expert tier)`,
        needsTier === 'prefill-replan' ? true : a.string(needsTier),
      );
    }
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
  decodeUploadBytes?: number;
  streamedBytes?: number;
  /** The disk tier: the prefill's path (on-demand | whole-layer: --short-prefill-tokens). */
  prefillPath?: 'on-demand' | 'whole-layer';
  /** The disk tier: routed misses the prefill read, and those reads per distinct expert read (1.0 at best). */
  prefillExpertReads?: number;
  prefillReadsPerDistinctExpert?: number | null;
  /** The disk tier: routed misses the decode read by their own call (admitted or streamed; tierStats().expertReads from the prefill's stats mark). */
  decodeExpertReads?: number;
  /** The disk tier: ms per decode token the forward pass waited for reads with nothing else to run (tierStats().stallNs). */
  stallMsPerToken?: number | null;
  /** The disk tier: every byte the engine read from the model file since it opened (its read engines' counts), and the process's own storage reads (/proc/self/io read_bytes) to check it by. */
  fileReadBytes?: number;
  processReadBytes?: number | null;
  /** With --prefetch observe|enforce: the decode's prefetch accounting (src/engine/tier/prefetch-report.ts). */
  prefetch?: ReturnType<Engine['prefetchReport']>;
  /** The replan guard's layers for this request (--replan-guard; absent when off). */
  replanGuard?: GenerationStats['replanGuard'];
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
    decodeUploadBytes: s.decodeUploadBytes,
    // The disk tier's misses read from the file for their call (0 on the other backends).
    streamedBytes: engine.tierStats()?.streamedBytes ?? 0,
    ...(s.prefillPath ? { prefillPath: s.prefillPath } : {}),
    prefillExpertReads: s.prefillExpertReads ?? 0,
    prefillReadsPerDistinctExpert: s.prefillDistinctExpertsRead
      ? finite(s.prefillExpertReads! / s.prefillDistinctExpertsRead, 4)
      : null,
    decodeExpertReads: engine.tierStats()?.expertReads ?? 0,
    stallMsPerToken:
      s.generatedTokens > 1 ? finite((engine.tierStats()?.stallNs ?? 0) / 1e6 / (s.generatedTokens - 1), 3) : null,
    ...fileReadReport(engine),
    ...(engine.prefetchMode !== 'off' ? { prefetch: engine.prefetchReport() } : {}),
    ...(s.replanGuard ? { replanGuard: s.replanGuard } : {}),
  };
}

/** The disk tier's file reads, beside what the kernel counted for the process (Linux; null where /proc/self/io cannot be read). */
function fileReadReport(engine: Engine): Pick<TierReport, 'fileReadBytes' | 'processReadBytes'> {
  const reads = engine.fileReads();
  if (!reads) return {};
  let processReadBytes: number | null = null;
  try {
    const m = /^read_bytes:\s*(\d+)$/m.exec(readFileSync('/proc/self/io', 'utf8'));
    if (m) processReadBytes = Number(m[1]);
  } catch {
    // not Linux, or /proc not mounted: the engine's own count stands alone
  }
  return { fileReadBytes: reads.totalBytes, processReadBytes };
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

/** Trace outputs are never a device, a folder, the model, the heat file or the route trace read (checked before any work). */
function checkOutputs(a: Args): void {
  const inputs = [a.string('model'), a.string('heat'), a.string('routes-from')].filter(
    (f): f is string => f !== undefined && f !== 'none',
  );
  for (const flag of ['trace-file', 'trace-routes']) {
    const file = a.string(flag);
    if (file !== undefined) checkOutputPath(file, a.flag(flag), inputs);
  }
}
