/**
 * The results table in bench/README.md, rewritten between its two markers after each bench run.
 */
import { readFileSync, writeFileSync } from 'node:fs';

const begin = '<!-- decode-results:begin -->';
const end = '<!-- decode-results:end -->';

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
    '| model | moetier decode tok/s (best) | llama.cpp decode tok/s (best) | decode ratio | moetier prefill tok/s | llama.cpp prefill tok/s | prefill ratio | moetier decode 1T / 2T | llama.cpp decode 1T / 2T | MB read / token | read GB/s 1T / 2T | bandwidth bound tok/s |',
    '|---|---|---|---|---|---|---|---|---|---|---|---|',
    ...rows.map((r) => `| ${r} |`),
    '',
    `Bandwidth source: ${results.cases[0]?.bandwidthSource ?? 'n/a'}.`,
  ].join('\n');
}

export function writeReadmeTable(readmeUrl, results) {
  const text = readFileSync(readmeUrl, 'utf8');
  const from = text.indexOf(begin);
  const to = text.indexOf(end);
  if (from < 0 || to < from) throw new RangeError(`${readmeUrl.pathname}: expected the markers ${begin} ... ${end}`);
  writeFileSync(readmeUrl, `${text.slice(0, from + begin.length)}\n${decodeTable(results)}\n${text.slice(to)}`);
}
