/**
 * The results tables in bench/README.md, each rewritten between its two markers
 * (<!-- NAME-results:begin --> ... <!-- NAME-results:end -->) after a run.
 */
import { readFileSync, writeFileSync } from 'node:fs';

export function decodeTable(results) {
  const f = (v, digits = 1) => (typeof v === 'number' ? v.toFixed(digits) : 'n/a');
  const rows = results.cases.map((c) =>
    [
      `${c.preset} ${c.quant}`,
      `${f(c.moetierDecodeTokPerS)} (${c.moetierDecodeThreads}T)`,
      `${f(c.llamaCppDecodeTokPerS)} (${c.llamaCppDecodeThreads}T)`,
      f(c.decodeRatio, 2),
      f(c.moetierPrefillTokPerS),
      f(c.llamaCppPrefillTokPerS),
      f(c.prefillRatio, 2),
      `${f(c.medians.moetier[1].decodeTokPerS)} / ${f(c.medians.moetier[2].decodeTokPerS)}`,
      `${f(c.medians.llamaCpp[1].decodeTokPerS)} / ${f(c.medians.llamaCpp[2].decodeTokPerS)}`,
      f(c.weightBytesPerToken / 1e6),
      `${f(c.readBandwidthGBPerS[1])} / ${f(c.readBandwidthGBPerS[2])}`,
      f(c.bandwidthBoundTokPerS),
      `${f(c.moetierBoundFraction, 2)} / ${f(c.llamaCppBoundFraction, 2)}`,
    ].join(' | '),
  );
  const { rounds, promptTokens, maxTokens } = results.config;
  const load = (l) => (l ? l.map((v) => v.toFixed(1)).join(' ') : 'n/a');
  const { machine = {} } = results;
  return [
    `Measured ${results.date.slice(0, 10)} on ${machine.cpus ?? '?'} cores (${machine.cpuModel ?? 'unknown CPU'}); ` +
      `medians of ${rounds} alternating rounds, prompt ${promptTokens} tokens, ${maxTokens} generated; ` +
      `load average at start ${load(machine.loadAverageAtStart)}, at end ${load(machine.loadAverageAtEnd)}.`,
    '',
    '| model | moetier decode tok/s (best) | llama.cpp decode tok/s (best) | decode ratio | moetier prefill tok/s | llama.cpp prefill tok/s | prefill ratio | moetier decode 1T / 2T | llama.cpp decode 1T / 2T | MB read / token | read GB/s 1T / 2T | bandwidth bound tok/s | fraction of bound moetier / llama.cpp |',
    '|---|---|---|---|---|---|---|---|---|---|---|---|---|',
    ...rows.map((r) => `| ${r} |`),
    '',
    `Bandwidth source: ${results.cases[0]?.bandwidthSource ?? 'n/a'}.`,
    ...contentionWarning(machine),
  ].join('\n');
}

/** A run that shared its cores with other work (1-minute load above half the cores) says so. */
function contentionWarning(machine) {
  const loads = [machine.loadAverageAtStart?.[0], machine.loadAverageAtEnd?.[0]].filter((v) => typeof v === 'number');
  if (!machine.cpus || loads.length === 0 || Math.max(...loads) <= machine.cpus / 2) return [];
  return [
    '',
    `**Contended run**: other work shared the ${machine.cpus} cores (1-minute load average up to ` +
      `${Math.max(...loads).toFixed(1)}), so these figures are low and noisy, two-thread ones most; rerun on a quiet machine.`,
  ];
}

/** One row per model: its prompts' verdicts folded together. */
export function parityTable(summary) {
  const byModel = new Map();
  for (const c of summary.cases) {
    const key = `${c.preset} ${c.arch} ${c.quant}`;
    byModel.set(key, [...(byModel.get(key) ?? []), c]);
  }
  const worst = (cases, field, pick) => {
    const values = cases.map((c) => c[field]).filter((v) => typeof v === 'number');
    return values.length ? pick(...values) : null;
  };
  const rows = [...byModel].map(([model, cases]) => {
    const maxDiff = worst(cases, 'maxAbsLogitDiff', Math.max);
    const minMargin = worst(cases, 'minStepMargin', Math.min);
    return [
      model,
      `${cases.filter((c) => c.identical).length} / ${cases.length}`,
      maxDiff === null ? 'n/a' : maxDiff.toFixed(3),
      minMargin === null ? 'n/a' : minMargin.toFixed(2),
      cases.every((c) => c.tokenizationIdentical) ? 'yes' : 'no',
      cases.every((c) => c.detokenizationIdentical === undefined)
        ? 'n/a'
        : cases.every((c) => c.detokenizationIdentical)
          ? 'yes'
          : 'no',
    ].join(' | ');
  });
  return [
    `allTokensIdentical: **${summary.allTokensIdentical}** (greedy ${summary.maxTokens} tokens, ${summary.threads} thread(s), seed ${summary.seed}).`,
    '',
    '| model | prompts identical | max abs first-step logit diff | min top-1 margin over all steps (llama.cpp) | tokenization identical | detokenization identical |',
    '|---|---|---|---|---|---|',
    ...rows.map((r) => `| ${r} |`),
  ].join('\n');
}

export function writeReadmeTable(readmeUrl, results) {
  writeReadmeSection(readmeUrl, 'decode', decodeTable(results));
}

export function writeReadmeSection(readmeUrl, name, body) {
  const begin = `<!-- ${name}-results:begin -->`;
  const end = `<!-- ${name}-results:end -->`;
  const text = readFileSync(readmeUrl, 'utf8');
  const from = text.indexOf(begin);
  const to = text.indexOf(end);
  if (from < 0 || to < from) throw new RangeError(`${readmeUrl.pathname}: expected the markers ${begin} ... ${end}`);
  writeFileSync(readmeUrl, `${text.slice(0, from + begin.length)}\n${body}\n${text.slice(to)}`);
}
