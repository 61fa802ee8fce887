/**
 * npm run bench -- prefetch [--quant q8_0 --share 0.5 --tokens 48 --rounds 3 --llama-tokens 12
 *                            --fake-resident 0.5 --update-results]
 *
 * What overlap-aware prefetch (issue 13; docs/SPEC.md section 4) buys or costs, on the wall clock:
 *   - the disk tier: the medium preset in a memory cgroup at `share` of its file, the file's pages
 *     dropped before every run; moetier `run --memory-budget` with --prefetch off, observe and
 *     enforce, interleaved over `rounds` (the machine is shared: medians of the rounds, each mode
 *     against off in the same round); decode tok/s, stall ms per token (the forward pass waiting
 *     for reads with nothing else to run), MiB read per token, and the prefetch's coverage, late
 *     and wasted bytes; tokens against a run without a limit; llama.cpp (2 threads) under the
 *     same limit as the peer
 *   - the fake card (an "8 GB card on PCIe 4.0": 25 GB/s, 330 us per transfer), `fake-resident`
 *     of the experts in slots, the same three modes: its transfers are simulated, its compute is
 *     the CPU's, so what prefetch changes there is the decode hit rate (experts run from the
 *     card instead of the host) and the bytes moved, not the wall clock
 * Needs root for the cgroups; writes results/local/prefetch.json, or with --update-results
 * results/prefetch.json and the README table.
 */
import { statSync } from 'node:fs';
import os from 'node:os';
import { memoryCgroupSupport } from './lib/cgroup.mjs';
import { ensureBenchDeps } from './lib/deps.mjs';
import { importDist, presetModel } from './lib/moetier.mjs';
import { oneOf, parseBenchArgs, positiveInt } from './lib/options.mjs';
import { resultsTarget, updateReadme, writeResults } from './lib/output.mjs';
import { inCgroup, inCgroupAsync, llamaRun, moetierRun, promptIds } from './lib/runs.mjs';
import { median } from './lib/stats.mjs';

const usage =
  'npm run bench -- prefetch [--quant q8_0 --share 0.5 --tokens 48 --rounds 3 --llama-tokens 12 --fake-resident 0.5 --update-results]';
const options = {
  quant: { type: 'string', default: 'q8_0', help: 'quant of the medium preset (q8_0 | q4_0)' },
  share: { type: 'string', default: '0.5', help: "the disk run's memory limit as a share of the file" },
  tokens: { type: 'string', default: '48', help: 'tokens moetier generates per run' },
  rounds: { type: 'string', default: '3', help: 'rounds of off / observe / enforce, interleaved' },
  'llama-tokens': { type: 'string', default: '12', help: 'tokens llama.cpp generates under the limit (it thrashes)' },
  'fake-resident': { type: 'string', default: '0.5', help: "share of the experts in the fake card's slots" },
};
const modes = ['off', 'observe', 'enforce'];
/** Node's own heap and code, outside the engine's budget (as bench/disk.mjs). */
const nodeAllowanceBytes = 96 * 2 ** 20;
const MiB = 2 ** 20;

export async function main(argv) {
  const values = parseBenchArgs(argv, { usage, options });
  if (!values) return;
  const loadAverageAtStart = os.loadavg();
  const why = memoryCgroupSupport();
  if (why) throw Object.assign(new Error(`bench prefetch needs memory cgroups: ${why}`), { code: 'E_CGROUP' });
  const quant = oneOf('quant', values.quant, ['q8_0', 'q4_0']);
  const tokens = positiveInt('tokens', values.tokens, 4096),
    rounds = positiveInt('rounds', values.rounds, 50),
    llamaTokens = positiveInt('llama-tokens', values['llama-tokens'], 4096);
  const share = shareOf('share', values.share),
    resident = shareOf('fake-resident', values['fake-resident']);
  await ensureBenchDeps();
  const native = (await importDist('src/native/binding.js')).loadNative();
  const model = await presetModel({ preset: 'medium', arch: 'qwen3moe', quant });
  const fileBytes = statSync(model).size;
  const promptTokens = await promptIds(model);
  const ctx = ['-c', String(promptTokens.length + tokens + 8)];
  const ref = moetierRun(model, tokens, ctx);
  const limitBytes = Math.round(fileBytes * share);
  const budget = ['--memory-budget', String(limitBytes - nodeAllowanceBytes)];

  const disk = Object.fromEntries(modes.map((m) => [m, []]));
  const fake = Object.fromEntries(modes.map((m) => [m, []]));
  for (let round = 0; round < rounds; round++) {
    for (const mode of modes) {
      native.dropFileCache(model);
      const run = inCgroup(`moetier-prefetch-${mode}`, limitBytes, (g) =>
        moetierRun(model, tokens, [...ctx, ...budget, '--prefetch', mode], g),
      );
      disk[mode].push(diskFigures(run, ref));
      fake[mode].push(
        fakeFigures(
          moetierRun(model, tokens, [...ctx, '--backend', 'fake', '--resident', String(resident), '--prefetch', mode]),
          ref,
        ),
      );
      process.stderr.write(
        `prefetch round ${round + 1}/${rounds} ${mode}: disk ${disk[mode].at(-1).decodeTokPerS?.toFixed(1) ?? 'failed'} tok/s, fake hit rate ${fake[mode].at(-1).decodeHitRate}\n`,
      );
    }
  }
  native.dropFileCache(model);
  const llama = await inCgroupAsync('llama-prefetch', limitBytes, (g) =>
    llamaRun(model, promptTokens, 2, llamaTokens, g),
  );
  const summary = {
    date: new Date().toISOString(),
    cpus: os.cpus().length,
    cpuModel: os.cpus()[0]?.model,
    command: `npm run bench -- prefetch ${argv.join(' ')}`.trim(),
    loadAverageAtStart,
    routing: 'realistic synthetic',
    loadAverageAtEnd: os.loadavg(),
    quant,
    fileBytes,
    share,
    limitBytes,
    nodeAllowanceBytes,
    tokens,
    rounds,
    fakeResident: resident,
    computeBoundTokPerS: ref.decodeTokPerS,
    disk: summarize(disk),
    fake: summarize(fake),
    llamaCpp: {
      threads: 2,
      tokens: llamaTokens,
      ...(llama.result ?? { failed: llama.failure }),
      peakBytes: llama.peakBytes,
    },
    runs: { disk, fake },
  };
  process.stdout.write(JSON.stringify(summary) + '\n');
  const target = resultsTarget(values['update-results']);
  writeResults(target, 'prefetch', JSON.stringify(summary, null, 2) + '\n');
  updateReadme(target, 'prefetch', prefetchTable(summary));
}

function shareOf(name, text) {
  const x = Number(text);
  if (!(x > 0 && x <= 1))
    throw Object.assign(new Error(`--${name}: expected a share in (0, 1], got ${JSON.stringify(text)}`), {
      code: 'E_OPTION',
    });
  return x;
}

/** One disk run's figures (the decode's: the tier's counters count from the prefill's mark). */
function diskFigures(run, ref) {
  const r = run.result;
  if (!r) return { failed: run.failure, peakBytes: run.peakBytes };
  const decodeTokens = Math.max(1, r.tokens.length - 1);
  return {
    decodeTokPerS: r.decodeTokPerS,
    stallMsPerToken: r.stallMsPerToken,
    decodeHitRate: r.decodeHitRate,
    readMiBPerToken: (r.streamedBytes + r.decodeUploadBytes) / decodeTokens / MiB,
    sameTokens: JSON.stringify(r.tokens) === JSON.stringify(ref.tokens),
    peakBytes: run.peakBytes,
    prefetch: prefetchFigures(r.prefetch, decodeTokens),
  };
}

function fakeFigures(r, ref) {
  const decodeTokens = Math.max(1, r.tokens.length - 1);
  return {
    decodeTokPerS: r.decodeTokPerS,
    decodeHitRate: r.decodeHitRate,
    uploadMiBPerToken: r.decodeUploadBytes / decodeTokens / MiB,
    sameTokens: JSON.stringify(r.tokens) === JSON.stringify(ref.tokens),
    prefetch: prefetchFigures(r.prefetch, decodeTokens),
  };
}

function prefetchFigures(p, decodeTokens) {
  if (!p) return undefined;
  const perToken = (bytes) => bytes / decodeTokens / MiB;
  return {
    coverage: p.coverage,
    precision: p.precision,
    issued: p.issued,
    covered: p.covered,
    late: p.late,
    wasted: p.wasted,
    uncovered: p.uncovered,
    cancelled: p.cancelled,
    lateMsPerToken: p.lateMs / decodeTokens,
    coveredMiBPerToken: perToken(p.coveredBytes),
    lateMiBPerToken: perToken(p.lateBytes),
    wastedMiBPerToken: perToken(p.wastedBytes),
    wouldIssue: p.wouldIssue,
    wouldCover: p.wouldCover,
  };
}

/** Per mode: the medians over the rounds, and each round's ratio to off's run in the same round. */
function summarize(byMode) {
  const out = {};
  for (const mode of modes) {
    const runs = byMode[mode].filter((r) => !r.failed);
    const med = (get) => {
      const xs = runs.map(get).filter((x) => typeof x === 'number' && Number.isFinite(x));
      return xs.length ? median(xs) : undefined;
    };
    const ratios = byMode[mode].map((r, i) => r.decodeTokPerS / byMode.off[i].decodeTokPerS).filter(Number.isFinite);
    out[mode] = {
      failed: byMode[mode].length - runs.length,
      sameTokens: runs.every((r) => r.sameTokens),
      decodeTokPerS: med((r) => r.decodeTokPerS),
      vsOff: ratios.length ? median(ratios) : undefined,
      stallMsPerToken: med((r) => r.stallMsPerToken),
      decodeHitRate: med((r) => r.decodeHitRate),
      readMiBPerToken: med((r) => r.readMiBPerToken),
      uploadMiBPerToken: med((r) => r.uploadMiBPerToken),
      peakBytes: med((r) => r.peakBytes),
      coverage: med((r) => r.prefetch?.coverage),
      precision: med((r) => r.prefetch?.precision),
      lateMsPerToken: med((r) => r.prefetch?.lateMsPerToken),
      wastedMiBPerToken: med((r) => r.prefetch?.wastedMiBPerToken),
      lateMiBPerToken: med((r) => r.prefetch?.lateMiBPerToken),
      wouldCoverShare: med((r) => (r.prefetch?.wouldIssue ? r.prefetch.wouldCover / r.prefetch.wouldIssue : undefined)),
    };
  }
  return out;
}

function prefetchTable(s) {
  const f = (x, d = 2) => (typeof x === 'number' && Number.isFinite(x) ? x.toFixed(d) : 'n/a');
  const llama = s.llamaCpp.decodeTokPerS
    ? `${f(s.llamaCpp.decodeTokPerS)}`
    : /SIGKILL/.test(s.llamaCpp.failed ?? '')
      ? 'killed'
      : 'failed';
  const row = (where, mode, m) =>
    `| ${where} | ${mode} | ${f(m.decodeTokPerS, 1)} | ${mode === 'off' ? '1.00' : f(m.vsOff)} | ${f(m.stallMsPerToken)} | ${f(m.decodeHitRate, 3)} | ${f(m.readMiBPerToken ?? m.uploadMiBPerToken, 1)} | ${f(m.coverage)} | ${f(m.precision)} | ${f(m.lateMsPerToken)} | ${f(m.lateMiBPerToken, 1)} | ${f(m.wastedMiBPerToken, 1)} | ${m.failed ? `${m.failed} failed` : m.sameTokens ? 'yes' : 'no'} |`;
  return [
    `Measured ${s.date.slice(0, 10)} on ${s.cpuModel} (${s.cpus} cores), load ${s.loadAverageAtStart?.[0]?.toFixed(1)} -> ${s.loadAverageAtEnd?.[0]?.toFixed(1)}; medium ${s.quant}, ${s.tokens} tokens at 2 threads, medians of ${s.rounds} interleaved rounds (vs off: the median of each round's ratio). Routing: ${s.routing ?? 'planted'} (hit rates, coverage and MiB per token are what it gives).`,
    `Disk tier: a ${(s.share * 100).toFixed(0)} % limit (${(s.limitBytes / MiB).toFixed(0)} MiB, budget = limit - ${s.nodeAllowanceBytes / MiB} MiB for Node); llama.cpp under the same limit (2 threads, ${s.llamaCpp.tokens} tokens): ${llama} tok/s; compute bound (no limit) ${f(s.computeBoundTokPerS, 1)} tok/s.`,
    `Fake card: ${(s.fakeResident * 100).toFixed(0)} % of the experts in slots; its transfers are simulated and its compute is the CPU's, so its tok/s is the CPU's and the hit rate is what prefetch changes. MiB / token: read from the file (disk) or uploaded (fake).`,
    '',
    '| tier | prefetch | decode tok/s | vs off | stall ms / token | hit rate | MiB / token | coverage | precision | late ms / token | late MiB / token | wasted MiB / token | same tokens |',
    '|---|---|---|---|---|---|---|---|---|---|---|---|---|',
    ...modes.map((m) => row('disk', m, s.disk[m])),
    ...modes.map((m) => row('fake card', m, s.fake[m])),
  ].join('\n');
}
