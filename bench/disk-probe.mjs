#!/usr/bin/env node
/**
 * node bench/disk-probe.mjs [--file-mib 1024 --read-mib 192 --rounds 3 --update-results]
 *
 * What the disk gives the read engine (native/include/mt_io.h) at expert size, so the disk tier
 * (issue 12) knows its bound and its queue depth:
 *   - a file of random bytes in the temp folder (created here, deleted after), bigger than any
 *     cache the measurement could hit once the page cache is dropped
 *   - random reads of a medium-preset Q8_0 matrix (768 x 256 weights: 208,896 bytes) and of a
 *     whole expert (gate | up | down: 626,688 bytes), at 32-byte-aligned offsets as GGUF places
 *     tensors, so direct reads bounce; each cell reads distinct ranges (no read repeats one)
 *   - queue depths 1..32, both engines (uring, threads), direct and buffered; the page cache is
 *     dropped before each cell (echo 1 > /proc/sys/vm/drop_caches, as root; elsewhere the bench
 *     says so and measures direct only, which never reads the page cache)
 *   - the engine's own read loop (ioProbe: no JavaScript between a read landing and the next
 *     starting); GB/s = bytes / wall time, latency = end - issued per read
 *   - the best depth per size (most GB/s) and the chosen one (the smallest within 5 % of the
 *     best: a deeper queue adds latency for nothing); mt_io.h's default cites the matrix-sized
 *     direct reads (the disk tier reads an expert as its three matrices)
 *   - the bounce cost: the same block-aligned ranges into aligned memory (no bounce) and into
 *     memory 32 bytes off (bounced and copied), alternated; the engine's own count of the time
 *     its copies took (stats.bounceCopyNs), and a plain in-process copy's rate beside it
 * Prints one JSON line; saves results/local/disk-probe.json, or with --update-results
 * results/disk-probe.json and the README's disk-probe table.
 */
import { randomFillSync } from 'node:crypto';
import { closeSync, fsyncSync, mkdtempSync, openSync, rmSync, writeFileSync, writeSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { importDist } from './lib/moetier.mjs';
import { oneOf, parseBenchArgs, positiveInt, runBenchMain } from './lib/options.mjs';
import { resultsTarget, updateReadme, writeResults } from './lib/output.mjs';
import { median, quantile } from './lib/stats.mjs';

const usage =
  'usage: node bench/disk-probe.mjs [--file-mib N --read-mib N --rounds R --depths 1,2,4 --engines uring,threads --dir D --update-results]';
const options = {
  'file-mib': { type: 'string', default: '1024', help: 'size of the probe file (MiB)' },
  'read-mib': { type: 'string', default: '96', help: 'bytes read per cell and round (MiB)' },
  rounds: {
    type: 'string',
    default: '5',
    help: 'rounds over every cell, each in its own shuffled order (GB/s: the median round; latency: all rounds pooled)',
  },
  depths: { type: 'string', default: '1,2,4,8,16,32', help: 'queue depths' },
  engines: { type: 'string', default: 'uring,threads', help: 'engines (uring, threads)' },
  dir: { type: 'string', default: os.tmpdir(), help: 'where the probe file goes (a folder on the disk to measure)' },
};

/** The medium preset (src/synth/presets.ts: nEmbd 768, nFfExp 256) at Q8_0: 34 bytes per 32 weights. */
const matrixBytes = (768 * 256 * 34) / 32;
const sizes = [
  { bytes: matrixBytes, label: '208.9 KB (Q8_0 matrix)' },
  { bytes: 3 * matrixBytes, label: '626.7 KB (Q8_0 expert)' },
];
/** The chosen depth: the smallest within this share of the best GB/s. */
const withinBest = 0.95;

async function main(argv) {
  const values = parseBenchArgs(argv, { usage, options });
  if (!values) return;
  const fileBytes = positiveInt('file-mib', values['file-mib'], 1 << 16) * 2 ** 20;
  const readBytes = positiveInt('read-mib', values['read-mib'], 1 << 14) * 2 ** 20;
  const rounds = positiveInt('rounds', values.rounds, 50);
  const depths = values.depths.split(',').map((d) => positiveInt('depths', d, 64));
  const engines = values.engines.split(',').map((e) => oneOf('engines', e, ['uring', 'threads']));
  const { loadNative } = await importDist('src/native/binding.js');
  const native = loadNative();

  const machine = {
    cpus: os.cpus().length,
    cpuModel: os.cpus()[0]?.model,
    kernel: os.release(),
    loadAverage: os.loadavg(),
  };
  const dropCaches = canDropCaches();
  const modes = dropCaches ? ['direct', 'buffered'] : ['direct'];
  if (!dropCaches)
    process.stderr.write(
      'disk-probe: cannot drop the page cache (not root): buffered reads are not measured, O_DIRECT only\n',
    );
  const dir = mkdtempSync(path.join(values.dir, 'moetier-disk-probe-'));
  const file = path.join(dir, 'probe.bin');
  try {
    process.stderr.write(`disk-probe: writing ${fileBytes / 2 ** 20} MiB of random bytes to ${file}\n`);
    writeRandomFile(file, fileBytes);
    const probe = new Probe(native, file, fileBytes, dropCaches);
    const cells = await measureCells(probe, { sizes, engines, modes, depths, rounds, readBytes });
    const best = bestDepths(cells);
    // The disk tier reads an expert as its three matrices (gate, up and down are three tensors of the
    // file), so the matrix-sized direct reads on the first engine are the figure its depth rests on.
    const chosen = best.find((b) => b.bytes === matrixBytes && b.engine === engines[0] && b.mode === 'direct');
    const bounce = await measureBounce(probe, {
      engines,
      depths: [...new Set([1, native.ioLimits.queueDepthDefault])],
      rounds,
      readBytes,
    });
    machine.loadAverageAtEnd = os.loadavg();
    const summary = {
      date: new Date().toISOString(),
      machine,
      config: {
        fileBytes,
        readBytesPerCell: readBytes,
        rounds,
        depths,
        engines,
        modes,
        offsetAlignBytes: 32,
        withinBest,
      },
      pageCache: dropCaches
        ? 'dropped before each cell (/proc/sys/vm/drop_caches)'
        : 'not dropped (not root): direct reads only',
      alignment: probe.alignment,
      cells,
      best,
      defaultDepth: {
        header: native.ioLimits.queueDepthDefault,
        measured: chosen?.chosenDepth,
        basis: chosen ? `${chosen.engine} ${chosen.mode} ${chosen.bytes} B` : 'n/a',
      },
      bounce,
    };
    process.stdout.write(JSON.stringify(summary) + '\n');
    const target = resultsTarget(values['update-results']);
    writeResults(target, 'disk-probe', JSON.stringify(summary, null, 2) + '\n');
    const table = probeTable(summary);
    updateReadme(target, 'disk-probe', table);
    if (!target.readme) process.stderr.write(`${table}\n`);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

function canDropCaches() {
  try {
    writeFileSync('/proc/sys/vm/drop_caches', '1');
    return true;
  } catch {
    return false;
  }
}

function writeRandomFile(file, bytes) {
  const fd = openSync(file, 'w');
  try {
    const chunk = Buffer.alloc(16 * 2 ** 20);
    for (let at = 0; at < bytes; at += chunk.length)
      writeSync(fd, randomFillSync(chunk), 0, Math.min(chunk.length, bytes - at));
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

/** A seeded generator of integers in [0, n) (the project's one PRNG, src/core/prng.ts). */
const { mulberry32 } = await importDist('src/core/prng.js');
function randomInts(seed) {
  const rng = mulberry32(seed);
  return (n) => Math.floor(rng() * n);
}

/**
 * n distinct ranges of `bytes`: the file cut into strides (bytes rounded up to 4 KiB, plus a
 * block of play), taken in a random order, each shifted by a random multiple of `shiftAlign`
 * inside its stride (32: as GGUF aligns; 0: block-aligned, for the bounce comparison).
 */
function offsets(fileBytes, bytes, n, seed, shiftAlign) {
  const stride = Math.ceil(bytes / 4096) * 4096 + 4096;
  const slots = Math.floor(fileBytes / stride);
  if (n > slots) throw new RangeError(`disk-probe: ${n} reads of ${bytes} B need a bigger file (--file-mib)`);
  const r = randomInts(seed);
  const order = Array.from({ length: slots }, (_, i) => i);
  for (let i = slots - 1; i > 0; i--) {
    const j = r(i + 1);
    [order[i], order[j]] = [order[j], order[i]];
  }
  return Float64Array.from(
    order.slice(0, n),
    (slot) => slot * stride + (shiftAlign ? r(4096 / shiftAlign) * shiftAlign : 0),
  );
}

class Probe {
  constructor(native, file, fileBytes, dropCaches) {
    this.native = native;
    this.file = file;
    this.fileBytes = fileBytes;
    this.dropCaches = dropCaches;
    this.alignment = undefined;
  }

  /** One run: a fresh engine (bounce buffers grown by a warm-up), the page cache dropped, then the reads. */
  async run({ engine, mode, depth, bytes, list, misalign = 32 }) {
    const n = this.native;
    const io = n.createIo(this.file, { engine, direct: mode === 'direct', queueDepth: depth });
    try {
      const stats = n.ioStats(io);
      if (stats.engine !== engine) throw new Error(`disk-probe: asked for ${engine}, got ${stats.engine}`);
      if (mode === 'direct') this.alignment ??= { bytes: stats.alignmentBytes, source: stats.alignmentSource };
      await n.ioProbe(io, list.subarray(list.length - depth), bytes, { dstMisalignBytes: misalign });
      if (this.dropCaches) writeFileSync('/proc/sys/vm/drop_caches', '1');
      const before = n.ioStats(io);
      const p = await n.ioProbe(io, list.subarray(0, list.length - depth), bytes, { dstMisalignBytes: misalign });
      if (p.failed > 0) throw new Error(`disk-probe: ${p.failed} reads failed: ${p.firstFailure}`);
      const after = n.ioStats(io);
      const bounced = after.readsBounced - before.readsBounced;
      return {
        gbPerS: ((list.length - depth) * bytes) / p.wallNs,
        latencyUs: [...p.latencyNs].map((ns) => ns / 1e3),
        bounced: bounced > 0,
        copyUsPerRead: bounced > 0 ? (after.bounceCopyNs - before.bounceCopyNs) / bounced / 1e3 : 0,
      };
    } finally {
      n.destroyIo(io);
    }
  }
}

/**
 * Every cell once per round, each round in its own shuffled order: the disk of a VM can swing
 * from one run to the next by a factor of two (a host's cache and neighbours), so a fixed order
 * would hand a bias to whichever cells come at a good moment; shuffled, it is noise the medians take.
 */
async function measureCells(probe, { sizes, engines, modes, depths, rounds, readBytes }) {
  const plan = sizes.flatMap(({ bytes, label }) =>
    engines.flatMap((engine) =>
      modes.flatMap((mode) => depths.map((depth) => ({ bytes, label, engine, mode, depth }))),
    ),
  );
  const cells = new Map();
  const shuffle = randomInts(7);
  let seed = 1;
  for (let round = 0; round < rounds; round++) {
    const order = [...plan];
    for (let i = order.length - 1; i > 0; i--) {
      const j = shuffle(i + 1);
      [order[i], order[j]] = [order[j], order[i]];
    }
    for (const { bytes, label, engine, mode, depth } of order) {
      const n = Math.floor(readBytes / bytes);
      const list = offsets(probe.fileBytes, bytes, n + depth, seed++, 32);
      const r = await probe.run({ engine, mode, depth, bytes, list });
      const key = `${bytes} ${engine} ${mode} ${depth}`;
      const cell = cells.get(key) ?? { bytes, label, engine, mode, depth, reads: n, gbPerSRounds: [], latency: [] };
      cell.gbPerSRounds.push(r.gbPerS);
      cell.latency.push(...r.latencyUs);
      cells.set(key, cell);
      process.stderr.write(
        `  round ${round + 1}/${rounds} ${label} ${engine} ${mode} QD ${depth}: ${r.gbPerS.toFixed(2)} GB/s\n`,
      );
    }
  }
  return plan
    .map(({ bytes, engine, mode, depth }) => cells.get(`${bytes} ${engine} ${mode} ${depth}`))
    .map(({ latency, ...c }) => ({
      ...c,
      gbPerS: median(c.gbPerSRounds),
      spread: (Math.max(...c.gbPerSRounds) - Math.min(...c.gbPerSRounds)) / median(c.gbPerSRounds),
      latencyUs: { median: median(latency), p90: quantile(latency, 0.9) },
    }));
}

/** Per size, engine and mode: the depth with the most GB/s, and the smallest within withinBest of it. */
function bestDepths(cells) {
  const groups = new Map();
  for (const c of cells)
    groups.set(`${c.bytes} ${c.engine} ${c.mode}`, [...(groups.get(`${c.bytes} ${c.engine} ${c.mode}`) ?? []), c]);
  return [...groups.values()].map((g) => {
    const top = g.reduce((a, b) => (b.gbPerS > a.gbPerS ? b : a));
    const chosen = g.filter((c) => c.gbPerS >= withinBest * top.gbPerS).reduce((a, b) => (b.depth < a.depth ? b : a));
    return {
      bytes: top.bytes,
      engine: top.engine,
      mode: top.mode,
      bestDepth: top.depth,
      bestGbPerS: top.gbPerS,
      chosenDepth: chosen.depth,
      chosenGbPerS: chosen.gbPerS,
    };
  });
}

/**
 * Direct whole-expert reads at block-aligned offsets into aligned memory (straight into dst) and
 * into memory 32 bytes off (through a bounce buffer, then copied): short runs in alternating
 * pairs, so that the disk's swings fall on both kinds alike, over disjoint ranges (none read
 * twice, so neither finds the other's in a cache below the guest). The throughput ratio is taken
 * per pair; beside it the engine's own count of the time its copies took (stats.bounceCopyNs).
 */
async function measureBounce(probe, { engines, depths, rounds, readBytes }) {
  const bytes = 3 * matrixBytes;
  const pairs = 4 * rounds;
  const n = Math.max(16, Math.floor(readBytes / 2 / bytes));
  const rows = [];
  let seed = 1000;
  for (const engine of engines) {
    for (const depth of depths) {
      const runs = { aligned: [], bounced: [] };
      const ratios = [];
      for (let pair = 0; pair < pairs; pair++) {
        const both = offsets(probe.fileBytes, bytes, 2 * (n + depth), seed++, 0);
        const lists = { aligned: both.filter((_, i) => i % 2 === 0), bounced: both.filter((_, i) => i % 2 === 1) };
        const got = {};
        for (const kind of pair % 2 === 0 ? ['aligned', 'bounced'] : ['bounced', 'aligned']) {
          const r = await probe.run({
            engine,
            mode: 'direct',
            depth,
            bytes,
            list: lists[kind],
            misalign: kind === 'aligned' ? 0 : 32,
          });
          if (r.bounced !== (kind === 'bounced'))
            throw new Error(`disk-probe: the ${kind} run ${r.bounced ? 'bounced' : 'did not bounce'}`);
          runs[kind].push(r);
          got[kind] = r;
        }
        ratios.push(got.bounced.gbPerS / got.aligned.gbPerS);
      }
      const sum = (kind) => ({
        gbPerS: median(runs[kind].map((r) => r.gbPerS)),
        latencyMedianUs: median(runs[kind].flatMap((r) => r.latencyUs)),
      });
      const aligned = sum('aligned'),
        bounced = sum('bounced');
      const copyUsPerRead = median(runs.bounced.map((r) => r.copyUsPerRead));
      rows.push({
        engine,
        depth,
        bytes,
        pairs,
        readsPerRun: n,
        aligned,
        bounced,
        gbPerSRatio: median(ratios),
        gbPerSRatioRange: [Math.min(...ratios), Math.max(...ratios)],
        latencyDeltaUs: bounced.latencyMedianUs - aligned.latencyMedianUs,
        copyUsPerRead,
        copyShareOfRead: copyUsPerRead / aligned.latencyMedianUs,
      });
      process.stderr.write(
        `  bounce ${engine} QD ${depth}: aligned ${aligned.gbPerS.toFixed(3)} GB/s, bounced ${bounced.gbPerS.toFixed(3)} GB/s, ratio ${median(ratios).toFixed(3)}, copy ${copyUsPerRead.toFixed(1)} us\n`,
      );
    }
  }
  return { rows, copy: copyRate(bytes) };
}

/** A plain copy of `bytes` between two buffers, repeated: GB/s and us per copy (the bounce's own work). */
function copyRate(bytes) {
  const src = randomFillSync(Buffer.alloc(bytes)),
    dst = Buffer.alloc(bytes + 32);
  const times = [];
  for (let rep = 0; rep < 5; rep++) {
    const t0 = process.hrtime.bigint();
    for (let i = 0; i < 200; i++) src.copy(dst, 32);
    times.push(Number(process.hrtime.bigint() - t0) / 200);
  }
  const ns = median(times);
  return {
    bytes,
    usPerCopy: ns / 1e3,
    gbPerS: bytes / ns,
    note: 'Buffer.copy in process, warm caches (a bounce copies from a buffer the disk just wrote, so it misses the CPU caches: a floor)',
  };
}

function probeTable(s) {
  const f = (x, d = 2) => (Number.isFinite(x) ? x.toFixed(d) : 'n/a');
  const depths = s.config.depths;
  const groups = new Map();
  for (const c of s.cells)
    groups.set(`${c.bytes} ${c.engine} ${c.mode}`, [...(groups.get(`${c.bytes} ${c.engine} ${c.mode}`) ?? []), c]);
  const rows = [...groups.values()].map((g) => {
    const b = s.best.find((x) => x.bytes === g[0].bytes && x.engine === g[0].engine && x.mode === g[0].mode);
    const byDepth = depths
      .map((d) => g.find((c) => c.depth === d))
      .map((c) => (c ? `${f(c.gbPerS)} (${f(c.latencyUs.median, 0)} / ${f(c.latencyUs.p90, 0)})` : 'n/a'));
    return `| ${g[0].label} | ${g[0].engine} | ${g[0].mode} | ${byDepth.join(' | ')} | ${b.bestDepth} | ${b.chosenDepth} |`;
  });
  const bounceRows = s.bounce.rows.map(
    (r) =>
      `| ${r.engine} | ${r.depth} | ${f(r.aligned.gbPerS, 3)} | ${f(r.bounced.gbPerS, 3)} | ` +
      `${f(100 * (r.gbPerSRatio - 1), 1)} % (pairs ${f(100 * (r.gbPerSRatioRange[0] - 1), 0)} .. ${f(100 * (r.gbPerSRatioRange[1] - 1), 0)} %) | ` +
      `${f(r.aligned.latencyMedianUs, 0)} / ${f(r.bounced.latencyMedianUs, 0)} | ${f(r.copyUsPerRead, 1)} (${f(100 * r.copyShareOfRead, 1)} %) |`,
  );
  const spreads = s.cells.map((c) => c.spread).sort((a, b) => a - b);
  const m = s.machine;
  return [
    `Measured ${s.date.slice(0, 10)} on ${m.cpuModel} (${m.cpus} cores, Linux ${m.kernel}), a ${f(s.config.fileBytes / 2 ** 30, 1)} GiB file of random bytes; ` +
      `${s.config.readBytesPerCell / 2 ** 20} MiB of distinct random ranges per cell and round (32-byte-aligned offsets, as GGUF), ${s.config.rounds} rounds; ` +
      `page cache ${s.pageCache}; direct I/O alignment ${s.alignment?.bytes ?? 'n/a'} B (${s.alignment?.source ?? 'n/a'}); load average ${m.loadAverage.map((x) => x.toFixed(1)).join(' ')} at start (${m.loadAverageAtEnd.map((x) => x.toFixed(1)).join(' ')} at end, raised by the bench's own threads waiting on the disk).`,
    '',
    'GB/s (1e9 B/s, median round) and per-read latency in us (median / p90, issue to landed) by queue depth; "chosen": the smallest depth within 5 % of the best.',
    `Rounds of one cell differed by ${f(100 * spreads[spreads.length >> 1], 0)} % of its median (max - min; the median over cells; largest ${f(100 * spreads[spreads.length - 1], 0)} %).`,
    '',
    `| read | engine | mode | ${depths.map((d) => `QD ${d}`).join(' | ')} | best QD | chosen QD |`,
    `|---|---|---|${depths.map(() => '---|').join('')}---|---|`,
    ...rows,
    '',
    `Default queue depth in mt_io.h: ${s.defaultDepth.header} (this run's choice for ${s.defaultDepth.basis}: ${s.defaultDepth.measured ?? 'n/a'}).`,
    '',
    `Bounce cost, direct whole-expert reads (${s.bounce.rows[0]?.bytes ?? 'n/a'} B) at block-aligned offsets: into aligned memory (straight into dst) against memory 32 bytes off (read into a bounce buffer, then copied), ${s.bounce.rows[0]?.pairs ?? 'n/a'} alternating pairs of runs over disjoint ranges:`,
    '',
    '| engine | QD | aligned GB/s | bounced GB/s | bounced vs aligned (median of pairs) | latency us, median: aligned / bounced | bounce copy per read, us (share of an aligned read) |',
    '|---|---|---|---|---|---|---|',
    ...bounceRows,
    '',
    `The copy column is the engine's own count (stats.bounceCopyNs: the memcpy on the completion side, out of a buffer the disk just wrote); ` +
      `a plain copy of ${s.bounce.copy.bytes} B in process with warm caches takes ${f(s.bounce.copy.usPerCopy, 1)} us (${f(s.bounce.copy.gbPerS, 1)} GB/s).`,
    ...contention(m),
  ].join('\n');
}

/**
 * A run that started beside other work (1-minute load above half the cores) says so. Only the load
 * at the start counts: the bench's own threads waiting on the disk (up to 32 in pread) raise the
 * load average while it runs.
 */
function contention(m) {
  if (m.loadAverage[0] <= m.cpus / 2) return [];
  return [
    '',
    `**Contended run**: other work shared the ${m.cpus} cores (1-minute load average ${m.loadAverage[0].toFixed(1)} at the start); the figures are low and noisy, rerun on a quiet machine.`,
  ];
}

runBenchMain('disk-probe', main);
