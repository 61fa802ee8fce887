/** The text report of `moetier replay`: assumptions first, then one table per trace. */
import type { ReplayRow } from './rows.js';

const fmt = (n: number, digits: number): string => n.toFixed(digits);

export function assumptionLines(r: ReplayRow): string[] {
  const c = r.costModel;
  return [
    `geometry ${r.geometry}: expert ${fmt(r.expertBytes / 1e6, 2)} MB on device, ${fmt(r.hostExpertBytes / 1e6, 2)} MB int8 host copy`,
    `cost model: h2d ${c.h2dGBps} GB/s + ${c.transferFixedUs} us/transfer, device ${c.deviceMemGBps} GB/s + ${c.deviceCallFixedUs} us/call, ` +
      `host ${c.hostMemGBps} GB/s + ${c.hostCallFixedUs} us/call`,
    `  => upload ${fmt(c.transferUs, 0)} us, resident call ${fmt(c.deviceUs, 1)} us, host call ${fmt(c.hostUs, 0)} us per expert; ` +
      'memory-bound calls, no overlap (serial estimate)',
  ];
}

export function formatTable(rows: readonly ReplayRow[]): string {
  if (rows.length === 0) return '';
  const r0 = rows[0];
  const out = [
    `trace ${r0.trace} (${r0.model}): ${r0.tokens} decode tokens replayed` +
      (r0.skippedTokens > 0 ? ` after a ${r0.skippedTokens}-token prefix` : '') +
      (r0.scoreFrom > 0 ? `, scored from token ${r0.scoreFrom} (a warm-up before it)` : ''),
    `offload ${r0.offload}, budget per ${r0.scope === 'layer' ? 'layer' : 'model (global, shown per layer)'}, start ${r0.start}`,
    ...assumptionLines(r0),
    '',
  ];
  const hostless = r0.offload === 'hostless';
  // Host-less, every upload is a read of the model file: the upload columns are the read columns.
  const guarded = rows.some((r) => r.guardKept !== null);
  const head = [
    'policy',
    'budget',
    'hit rate',
    '/Belady',
    hostless ? 'reads/tok' : 'uploads/tok',
    hostless ? 'MB read/tok' : 'MB/tok',
    ...(hostless ? ['Belady misses/tok', 'reads/Belady'] : []),
    'MoE ms/tok',
    'TTFT ms',
    'setup uploads',
    ...(guarded ? ['guard kept/switched'] : []),
  ];
  const body = rows.map((r) => [
    r.policy + (r.offline ? '*' : '') + (r.default ? ' (default)' : ''),
    String(r.budget),
    fmt(r.hitRate, 3),
    r.hitRateOverBelady === null ? '-' : fmt(r.hitRateOverBelady, 3),
    fmt(r.readsPerToken ?? r.uploadsPerToken, 2),
    fmt((r.readBytesPerToken ?? r.bytesPerToken) / 1e6, 2),
    ...(hostless
      ? [fmt(r.beladyMissesPerToken!, 2), r.readsOverBelady === null ? '-' : fmt(r.readsOverBelady, 2)]
      : []),
    fmt(r.msPerTokenEstimate, 2),
    r.ttftMsEstimate === null ? '-' : fmt(r.ttftMsEstimate, 1),
    String(r.setupUploads),
    ...(guarded ? [r.guardKept === null ? '-' : `${r.guardKept}/${r.guardSwitched}`] : []),
  ]);
  const widths = head.map((h, i) => Math.max(h.length, ...body.map((b) => b[i].length)));
  const line = (cells: string[]): string =>
    cells.map((c, i) => (i === 0 ? c.padEnd(widths[i]) : c.padStart(widths[i]))).join('  ');
  out.push(
    line(head),
    ...body.map(line),
    "* offline bound: reads the future routing; (default): the engine's policy for this offload; /Belady: hit rate over Belady MIN's on the same tokens and budget",
  );
  if (hostless) {
    out.push(
      'reads: experts read from the model file per decode token, each miss for its call plus each upload ahead of use',
      'Belady misses: MIN on the same tokens and budget, the fewest reads of a demand policy',
    );
  }
  return out.join('\n');
}
