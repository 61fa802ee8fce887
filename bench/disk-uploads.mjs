#!/usr/bin/env node
/**
 * node bench/disk-uploads.mjs [--uploads 200 --rounds 5 --baseline-addon PATH --update-results]
 *
 * How fast the disk backend (native/disk, kind disk) fills slots from a cold model file: the
 * experts a swap burst or a warm-up uploads back to back, each as its gate, up and down pieces.
 *   - the medium preset at Q8_0 (a 2.0 GB file, experts of 3 x 208,896 bytes), or --model
 *   - `uploads` distinct (layer, expert) pairs drawn with the project's PRNG, in one backend with a
 *     slot each; every upload issued at once, then every event waited for
 *   - page cache dropped before each measurement (echo 3 > /proc/sys/vm/drop_caches as root, else
 *     the model file's own pages: dropFileCache), so every byte comes from the disk
 *   - uploads/s and GB/s over the wall time from the first upload to the last event settled; the
 *     events' own span (first start to last end); the backend's read stats where it has them
 *   - each slot checked against the file's bytes after the timing
 *   - --baseline-addon: the same measurement with another build of the addon (an older commit's
 *     native/build/Release/moetier.node) in the same run, rounds alternating which goes first, so
 *     the figures compare like for like on a disk whose speed drifts
 * Each measurement runs in a child process (MOETIER_ADDON picks its addon). Prints one JSON line;
 * saves results/local/disk-uploads.json, or with --update-results results/disk-uploads.json and
 * the README's disk-uploads table.
 */
import { spawnSync } from 'node:child_process';
import { closeSync, openSync, readSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { importDist, presetModel } from './lib/moetier.mjs';
import { parseBenchArgs, positiveInt, runBenchMain } from './lib/options.mjs';
import { resultsTarget, updateReadme, writeResults } from './lib/output.mjs';
import { median } from './lib/stats.mjs';

const usage =
  'usage: node bench/disk-uploads.mjs [--uploads N --rounds R --baseline-addon PATH --model PATH --update-results]';
const options = {
  uploads: { type: 'string', default: '200', help: 'experts uploaded back to back per measurement' },
  rounds: { type: 'string', default: '5', help: 'measurements per addon (GB/s: the median)' },
  'baseline-addon': { type: 'string', help: 'a .node file of another build, measured beside this one in the same run' },
  model: { type: 'string', help: 'a GGUF file (default: the medium qwen3moe preset at Q8_0)' },
  seed: { type: 'string', default: '1', help: 'which experts (the PRNG seed)' },
};
const self = fileURLToPath(import.meta.url);

export async function main(argv) {
  if (argv[0] === '--child') return child(JSON.parse(argv[1]));
  const values = parseBenchArgs(argv, { usage, options });
  if (!values) return;
  const uploads = positiveInt('uploads', values.uploads, 4096);
  const rounds = positiveInt('rounds', values.rounds, 50);
  const seed = positiveInt('seed', values.seed, 2 ** 31);
  const model = values.model ?? (await presetModel({ preset: 'medium', arch: 'qwen3moe', quant: 'q8_0' }));
  const addons = [{ name: 'this build', addon: '' }];
  if (values['baseline-addon']) addons.unshift({ name: 'baseline', addon: path.resolve(values['baseline-addon']) });
  const loadStart = os.loadavg();
  const runs = Object.fromEntries(addons.map((a) => [a.name, []]));
  for (let round = 0; round < rounds; round++) {
    const order = round % 2 === 0 ? addons : [...addons].reverse();
    for (const a of order) {
      const r = measure(a.addon, { model, uploads, seed });
      process.stderr.write(
        `disk-uploads: round ${round + 1}/${rounds} ${a.name}: ${r.uploadsPerS.toFixed(0)} uploads/s, ${r.gbPerS.toFixed(2)} GB/s\n`,
      );
      runs[a.name].push(r);
    }
  }
  const summary = {
    bench: 'disk-uploads',
    command: `node bench/disk-uploads.mjs ${argv.join(' ')}`.trim(),
    date: new Date().toISOString(),
    machine: {
      cpus: os.cpus().length,
      cpuModel: os.cpus()[0]?.model,
      kernel: os.release(),
      loadAverage: loadStart,
      loadAverageEnd: os.loadavg(),
    },
    model: path.basename(model),
    uploads,
    rounds,
    pageCache: canDropCaches()
      ? 'dropped before each measurement (/proc/sys/vm/drop_caches)'
      : "the model file's pages dropped before each measurement (dropFileCache; not root)",
    results: addons.map((a) => summarise(a, runs[a.name])),
  };
  process.stdout.write(JSON.stringify(summary) + '\n');
  const target = resultsTarget(values['update-results']);
  writeResults(target, 'disk-uploads', JSON.stringify(summary, null, 2) + '\n');
  const table = uploadsTable(summary);
  updateReadme(target, 'disk-uploads', table);
  if (!target.readme) process.stderr.write(`${table}\n`);
}

function measure(addon, job) {
  const env = { ...process.env, MOETIER_ADDON: addon };
  const r = spawnSync(process.execPath, [self, '--child', JSON.stringify(job)], {
    env,
    encoding: 'utf8',
    maxBuffer: 1 << 24,
  });
  if (r.status !== 0) throw new Error(`disk-uploads: the measurement (${addon || 'this build'}) failed: ${r.stderr}`);
  return JSON.parse(r.stdout.trim().split('\n').pop());
}

function summarise(a, runs) {
  const pick = (key) => runs.map((r) => r[key]);
  return {
    addon: a.name,
    path: a.addon || 'native/build/Release/moetier.node',
    uploadsPerS: median(pick('uploadsPerS')),
    gbPerS: median(pick('gbPerS')),
    gbPerSRange: [Math.min(...pick('gbPerS')), Math.max(...pick('gbPerS'))],
    eventSpanMs: median(pick('eventSpanMs')),
    disk: runs[runs.length - 1].disk,
    runs,
  };
}

function uploadsTable(s) {
  const m = s.machine;
  const lines = [
    `Measured ${s.date.slice(0, 10)} on ${m.cpuModel} (${m.cpus} cores, Linux ${m.kernel}); ${s.model}, ${s.uploads} distinct experts (gate | up | down) uploaded back to back into a disk backend, ${s.rounds} rounds per build, alternating; page cache ${s.pageCache.startsWith('dropped') ? 'dropped' : 'of the model file dropped'} before each; load average ${m.loadAverage.map((x) => x.toFixed(1)).join(' ')} at start.`,
    '',
    '| build | uploads/s | GB/s (median; min-max) | events first start to last end (ms) | engine | direct | reads in flight (peak) |',
    '|---|---|---|---|---|---|---|',
  ];
  for (const r of s.results) {
    const d = r.disk;
    lines.push(
      `| ${r.addon === 'baseline' ? `baseline (${path.basename(r.path)})` : r.addon} | ${r.uploadsPerS.toFixed(0)} | ${r.gbPerS.toFixed(2)} (${r.gbPerSRange.map((x) => x.toFixed(2)).join('-')}) | ${r.eventSpanMs.toFixed(1)} | ${d ? d.engine : 'pread'} | ${d ? d.direct : 'no (fadvise)'} | ${d ? `${d.readsInFlightPeak} of ${d.queueDepth}` : 1} |`,
    );
  }
  return lines.join('\n');
}

function canDropCaches() {
  try {
    writeFileSync('/proc/sys/vm/drop_caches', '3');
    return true;
  } catch {
    return false;
  }
}

/** The model's experts as file ranges: for each layer, the gate, up and down tensors split by expert. */
function expertRanges(gguf) {
  const layers = new Map();
  for (const t of gguf.tensors.values()) {
    const m = /^blk\.(\d+)\.ffn_(gate|up|down)_exps\.weight$/.exec(t.name);
    if (!m) continue;
    const experts = t.dims[t.dims.length - 1];
    const layer = layers.get(m[1]) ?? {};
    layer[m[2]] = { offset: t.offset, bytes: t.byteLength / experts, experts };
    layers.set(m[1], layer);
  }
  return [...layers.values()].filter((l) => l.gate && l.up && l.down);
}

/** In the child: one cold burst of uploads with this process's addon. */
async function child({ model, uploads, seed }) {
  const { loadNative } = await importDist('src/native/binding.js');
  const { Backend } = await importDist('src/native/backend.js');
  const { parseGguf } = await importDist('src/model/gguf/reader.js');
  const { mulberry32 } = await importDist('src/core/prng.js');
  const native = loadNative();
  const mapped = native.mapFile(model, { access: 'random' });
  const bytes = new Uint8Array(mapped.buffer);
  const layers = expertRanges(parseGguf(bytes, model));
  const pairs = pickExperts(layers, uploads, mulberry32(seed));
  const slotBytes = pairs[0].pieces.reduce((n, p) => n + p.bytes, 0);
  const b = Backend.create('disk', { budgetBytes: uploads * (Math.ceil(slotBytes / 64) * 64), file: mapped.handle });
  try {
    const first = b.reserve(uploads, slotBytes);
    if (!canDropCaches()) native.dropFileCache(model);
    const t0 = process.hrtime.bigint();
    const events = pairs.map((p, i) =>
      b.upload(
        first + i,
        p.pieces.map((r) => bytes.subarray(r.offset, r.offset + r.bytes)),
        { keepAlive: mapped.handle },
      ),
    );
    const done = await Promise.all(events.map((e) => b.waitUploaded(e)));
    const wallNs = Number(process.hrtime.bigint() - t0);
    const spanNs = Number(
      done.reduce((m, e) => (e.endNs > m ? e.endNs : m), 0n) -
        done.reduce((m, e) => (e.startNs < m ? e.startNs : m), done[0].startNs),
    );
    checkSlots(b, first, pairs, model, slotBytes);
    const total = uploads * slotBytes;
    const disk = b.stats().disk;
    process.stdout.write(
      JSON.stringify({
        uploadsPerS: uploads / (wallNs / 1e9),
        gbPerS: total / wallNs,
        wallMs: wallNs / 1e6,
        eventSpanMs: spanNs / 1e6,
        bytes: total,
        disk,
      }) + '\n',
    );
  } finally {
    b.destroy();
    native.unmapFile(mapped.handle);
  }
}

function pickExperts(layers, n, rng) {
  const all = layers.flatMap((l, li) => Array.from({ length: l.gate.experts }, (_, e) => ({ li, e })));
  if (n > all.length) throw new Error(`disk-uploads: --uploads ${n}: the model has ${all.length} experts`);
  for (let i = all.length - 1; i > 0; i--) {
    const j = Math.floor(rng() * (i + 1));
    [all[i], all[j]] = [all[j], all[i]];
  }
  return all.slice(0, n).map(({ li, e }) => ({
    pieces: ['gate', 'up', 'down'].map((k) => ({
      offset: layers[li][k].offset + e * layers[li][k].bytes,
      bytes: layers[li][k].bytes,
    })),
  }));
}

/** Each slot holds the file's bytes (read with plain preads, after the timing). */
function checkSlots(b, first, pairs, model, slotBytes) {
  const fd = openSync(model, 'r');
  try {
    const want = Buffer.alloc(slotBytes),
      got = new Uint8Array(slotBytes);
    pairs.forEach((p, i) => {
      let at = 0;
      for (const r of p.pieces) at += readSync(fd, want, at, r.bytes, r.offset);
      b.read(first + i, got);
      if (!want.equals(got)) throw new Error(`disk-uploads: slot ${first + i} differs from the file's bytes`);
    });
  } finally {
    closeSync(fd);
  }
}

if (process.argv[1] === self) runBenchMain('disk-uploads', main);
