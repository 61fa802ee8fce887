#!/usr/bin/env node
/**
 * node bench/overlap.mjs [--rounds R --tokens N --update-results]
 *
 * Swaps on the wall clock (issue 11), on the cpu backend: for the small and medium presets
 * (Q8_0, a third of the experts resident, prefill replan on, --heat none) runs `moetier run
 * --trace-file` and reads the trace (otel/trace-overlap.ts):
 *   - the median gap between one layer's end and the next layer's start, at swap boundaries
 *     and elsewhere (the compute's cost of issuing a swap)
 *   - the uploads whose copy overlapped layer L + 1's compute, and any layer's compute
 *   - the compute time lost while copies ran: each layer span a copy overlapped, less the
 *     median of that layer's spans without one (ms per decode token)
 * On two cores a copy cannot truly run beside two compute threads: it takes a core from one of
 * them for its length, and the lost-compute figure is that cost.
 * Prints one JSON line; saves results/local/overlap.json, or with --update-results
 * results/overlap.json and the README's overlap table.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { importDist, presetModel, repoRoot } from './lib/moetier.mjs';
import { parseBenchArgs, positiveInt, runBenchMain } from './lib/options.mjs';
import { resultsTarget, updateReadme, writeResults } from './lib/output.mjs';

const usage = 'node bench/overlap.mjs [--rounds R --tokens N --update-results]';
const options = {
  rounds: { type: 'string', default: '3', help: 'runs per preset (the medians over them are reported)' },
  tokens: { type: 'string', default: '64', help: 'tokens generated per run' },
};

async function main(argv) {
  const values = parseBenchArgs(argv, { usage, options });
  if (!values) return;
  const loadAverageAtStart = os.loadavg();
  const rounds = positiveInt('rounds', values.rounds, 50),
    tokens = positiveInt('tokens', values.tokens, 4096);
  const t = await importDist('otel/trace-overlap.js');
  const dir = mkdtempSync(path.join(os.tmpdir(), 'moetier-overlap-'));
  const presets = [];
  try {
    for (const preset of ['small', 'medium']) {
      const model = await presetModel({ preset, arch: 'qwen3moe', quant: 'q8_0' });
      const runs = [];
      for (let round = 0; round < rounds; round++) {
        const trace = path.join(dir, `${preset}-${round}.json`);
        const out = execFileSync(
          process.execPath,
          [
            path.join(repoRoot, 'dist/src/cli/main.js'),
            'run',
            '-m',
            model,
            '-p',
            'one two three four five six seven eight nine ten',
            '-n',
            String(tokens),
            '--resident',
            '0.37',
            '--heat',
            'none',
            '--prefill-replan',
            '--trace-file',
            trace,
            '--json',
          ],
          { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] },
        );
        const json = JSON.parse(out);
        const spans = t.traceSpans(JSON.parse(readFileSync(trace, 'utf8')));
        const gaps = t.boundaryGaps(spans),
          overlap = t.uploadOverlap(spans),
          lost = t.lostCompute(spans);
        runs.push({
          swapGapMedianUs: t.median(gaps.swap),
          plainGapMedianUs: t.median(gaps.plain),
          swapBoundaries: gaps.swap.length,
          uploads: overlap.uploads,
          overlapNextLayer: overlap.overlapNextLayer,
          overlapCompute: overlap.overlapCompute,
          lostMsPerDecodeToken: lost.decodeLostMsPerToken,
          lostUsTotal: lost.lostUs,
          msPerToken: json.msPerToken,
        });
      }
      const med = (k) => t.median(runs.map((r) => r[k]));
      presets.push({
        preset,
        quant: 'q8_0',
        resident: 0.37,
        rounds,
        tokens,
        runs,
        swapGapMedianUs: med('swapGapMedianUs'),
        plainGapMedianUs: med('plainGapMedianUs'),
        uploads: med('uploads'),
        overlapNextLayer: med('overlapNextLayer'),
        overlapCompute: med('overlapCompute'),
        lostMsPerDecodeToken: med('lostMsPerDecodeToken'),
        msPerToken: med('msPerToken'),
      });
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  const summary = {
    date: new Date().toISOString(),
    cpus: os.cpus().length,
    cpuModel: os.cpus()[0]?.model,
    command: `node ${path.relative(repoRoot, process.argv[1])} ${argv.join(' ')}`,
    loadAverageAtStart,
    loadAverageAtEnd: os.loadavg(),
    presets,
  };
  process.stdout.write(JSON.stringify(summary) + '\n');
  const target = resultsTarget(values['update-results']);
  writeResults(target, 'overlap', JSON.stringify(summary, null, 2) + '\n');
  updateReadme(target, 'overlap', overlapTable(summary));
}

function overlapTable(s) {
  const f = (x, d = 1) => (Number.isFinite(x) ? x.toFixed(d) : 'n/a');
  const rows = s.presets.map(
    (p) =>
      `| ${p.preset} ${p.quant} | ${f(p.swapGapMedianUs)} | ${f(p.plainGapMedianUs, 2)} | ${f(p.uploads, 0)} | ${f(p.overlapNextLayer, 0)} | ${f(p.overlapCompute, 0)} | ${f(p.lostMsPerDecodeToken, 3)} | ${f(p.msPerToken, 2)} |`,
  );
  return [
    `Measured ${s.date.slice(0, 10)} on ${s.cpuModel} (${s.cpus} cores), load ${s.loadAverageAtStart?.[0]?.toFixed(1)} -> ${s.loadAverageAtEnd?.[0]?.toFixed(1)}; medians of ${s.presets[0]?.rounds} runs, ${s.presets[0]?.tokens} tokens each.`,
    '',
    '| preset | gap at swap boundaries (us) | gap elsewhere (us) | uploads | beside layer L+1 | beside any compute | compute lost (ms / decode token) | ms / token |',
    '|---|---|---|---|---|---|---|---|',
    ...rows,
  ].join('\n');
}

runBenchMain('overlap', main);
