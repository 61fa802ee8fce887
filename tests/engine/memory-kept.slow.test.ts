/**
 * The engine keeps to its memory budget (issue 12, item 8). A budget well below the model file
 * runs the disk tier; while a request of a few dozen tokens runs, sampled every few ms (a timer:
 * the eval runs off the event loop) and at every token:
 *
 *   engine RSS   = the process's RSS growth over a baseline taken just before openEngine
 *                  (/proc/self/smaps_rollup: anonymous + file-backed), less the growth of V8's heap
 *                  (Node's, outside the budget)                      <= budget + rssAllowanceBytes
 *   model mapped = the model file's pages mapped into the process    <= the header + fault-around
 *   page cache   = the model file's pages in the page cache (mincore over a mapping of our own,
 *                  never read: fincore)                               <= the header + lingerMax(file)
 *                  of which inside the expert tensors                 <= lingerMax(expert pages)
 *
 * The same model opened without a budget (every expert computed from the mapping) is measured the
 * same way and must break every bound: the contrast that makes these bounds mean something.
 *
 * Figures seen on the development machine (2 cores, ext4 on a virtual disk; the small preset at
 * Q8_0: 117.7 MiB file, 102.0 MiB of experts; budget 47.1 MiB = dense 15.4 + KV 2.0 + scratch 4.4
 * + one layer's working set 12.8 + 3 slots per layer (of 32) 9.6 MiB; 32 tokens, 922 misses read
 * from the file; bounds 55.1 MiB of engine RSS, 6.2 MiB of page cache):
 *   budget:    engine RSS peak 40.2-42.8 MiB (anonymous +43-46, V8 heap +3.5-6, file-backed +1.6-1.9:
 *              the model's header 0.3, the rest code run for the first time), page cache peak
 *              0.4 MiB (the header; inside the experts 0.1-0.3: the read in flight)
 *   no budget: engine RSS peak 103-106 MiB (model mapped 111.9), page cache 117.7 (experts 101.9)
 *   (by hand, not kept: a tier on the cpu backend, slotsPerLayer 3, computing its misses from the
 *   mapping, broke them too: engine RSS 114 MiB, page cache 117.7 MiB)
 *
 * The budget runs first in this file's own process (vitest's forks run each file in a fresh one):
 * see the known bug at the end for what an allocator that has seen a large free does to it.
 */
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, realpathSync, rmSync, statfsSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import v8 from 'node:v8';
import { runInNewContext } from 'node:vm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openEngine } from '../../src/engine/engine.js';
import { modelBytes, type MemoryPlan } from '../../src/engine/memory-plan.js';
import type { TierStats } from '../../src/engine/tier/port.js';
import { parseGguf } from '../../src/model/gguf/reader.js';
import { type MappedFileHandle } from '../../src/native/binding.js';
import { loadDiagnostics } from '../../src/native/diagnostics.js';
import { PRESETS } from '../../src/synth/presets.js';
import { cleanOtelEnv, repoRoot, runCli } from '../cli/helpers.js';

// Loaded before any baseline: the addon's code is outside the budget.
const native = loadDiagnostics();
// A collection before each baseline, so the garbage of earlier steps does not come and go during the run.
v8.setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

// tmpfs keeps every page in memory (the page cache IS the file, DONTNEED drops nothing): use the checkout's folder then.
const tmpfsMagic = 0x01021994;
const base = statfsSync(tmpdir()).type === tmpfsMagic ? path.resolve(import.meta.dirname, '../../.ci') : tmpdir();
mkdirSync(base, { recursive: true });
const dir = mkdtempSync(path.join(base, 'moetier-memory-kept-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const MiB = 2 ** 20;
const mib = (bytes: number): string => `${(bytes / MiB).toFixed(1)} MiB`;

/**
 * The budget, as a share of the file: well below it, above the plan's fixed parts (about 40 % of
 * this file since the whole-layer prefill's second layer buffer, 13.1 MiB, joined them; the
 * figures above were seen at 0.4, before it).
 */
const budgetShareOfFile = 0.5;
/**
 * What the process may hold beyond the budget while the engine runs (V8's heap is measured and
 * left out): code run for the first time (node, libc, the addon: file-backed, 1.5-2 MiB seen), the
 * stacks of the compute pool, the tier's issuer and the backend's upload threads (tens to hundreds
 * of KiB each once touched), glibc's per-thread arenas and their fragmentation, the tier's tables,
 * the request's buffers outside V8's heap (logits: 32 KiB), the model's header pages (0.3 MiB).
 * The engine's own memory stayed below its plan's parts here (the KV cache and the scratch are only
 * partly touched by 40 tokens), so most of this is headroom for other machines.
 */
const rssAllowanceBytes = 8 * MiB;
/** The kernel maps up to this many cached pages around a faulting one (fault_around_bytes, 64 KiB by default). */
const faultAroundPages = 16;
/**
 * Pages of the file the page cache may keep beyond the header: posix_fadvise DONTNEED cannot drop
 * a page that still sits in another CPU's LRU batch (the reader moved between cores after its
 * pread), which a loaded machine shows now and then; a sample may also see the read in flight.
 * tests/engine/disk-backend.test.ts allows the same.
 */
const lingerMax = (pages: number): number => Math.max(4, Math.ceil(pages * 0.05));
const maxTokens = 32;
const promptText = 'one two three four five six seven eight';

/** The model file and what the bounds are made of. */
interface ModelFacts {
  path: string;
  /** How /proc/self/smaps names its mappings. */
  realPath: string;
  fileBytes: number;
  headerBytes: number;
  expertBytes: number;
  pageBytes: number;
  /** Whole pages inside each routed expert tensor: [from, to) in the file. */
  expertPageRanges: Array<[number, number]>;
  expertPages: number;
}
let model: ModelFacts;

beforeAll(() => {
  // In a child process: generating in this one would leave its freed buffers in this process's allocator.
  const file = path.join(dir, 'small-q8_0.gguf');
  const r = runCli(['gen-model', '--preset', 'small', '--quant', 'q8_0', '--out', file], {
    env: cleanOtelEnv(),
    timeout: 120_000,
  });
  expect(r.status, r.stderr).toBe(0);
  const mapped = native.mapFile(file);
  try {
    const tensors = [...parseGguf(new Uint8Array(mapped.buffer), file).tensors.values()];
    const pageBytes = native.mappedResidency(mapped.handle, 0, 0).pageBytes;
    const expertPageRanges = tensors
      .filter((t) => /\.ffn_(gate|up|down)_exps\.weight$/.test(t.name))
      .map((t): [number, number] => [
        Math.ceil(t.offset / pageBytes) * pageBytes,
        Math.floor((t.offset + t.byteLength) / pageBytes) * pageBytes,
      ])
      .filter(([from, to]) => to > from);
    model = {
      path: file,
      realPath: realpathSync(file),
      fileBytes: statSync(file).size,
      headerBytes: Math.min(...tensors.map((t) => t.offset)),
      expertBytes: modelBytes(tensors).expertTensorBytes,
      pageBytes,
      expertPageRanges,
      expertPages: expertPageRanges.reduce((n, [from, to]) => n + (to - from) / pageBytes, 0),
    };
  } finally {
    native.unmapFile(mapped.handle); // its header pages must not stay mapped: dropFileCache cannot drop a mapped page
  }
}, 180_000);

const budgetBytes = (): number => Math.floor(model.fileBytes * budgetShareOfFile);
const headerPageBytes = (): number => Math.ceil(model.headerBytes / model.pageBytes) * model.pageBytes;
const bounds = () => ({
  engineRssBytes: budgetBytes() + rssAllowanceBytes,
  modelMappedBytes: headerPageBytes() + faultAroundPages * model.pageBytes,
  pageCacheBytes: headerPageBytes() + lingerMax(model.fileBytes / model.pageBytes) * model.pageBytes,
  expertPageCacheBytes: lingerMax(model.expertPages) * model.pageBytes,
});

interface Sample {
  rssBytes: number;
  /** Anonymous pages: the engine's allocations, and Node's heap and buffers. */
  anonBytes: number;
  /** V8's heap, resident. */
  heapBytes: number;
}

/** /proc/self/smaps_rollup (about 1 KB: read every few ms, it leaves little garbage) and V8's heap. */
function sampleProcess(): Sample {
  const kB = smapsFields(readFileSync('/proc/self/smaps_rollup', 'utf8'));
  return {
    rssBytes: kB.Rss * 1024,
    anonBytes: kB.Anonymous * 1024,
    heapBytes: v8.getHeapStatistics().total_physical_size,
  };
}

function smapsFields(text: string): Record<string, number> {
  const kB: Record<string, number> = {};
  for (const line of text.split('\n')) {
    const m = /^(\w+):\s+(\d+) kB$/.exec(line);
    if (m) kB[m[1]] = Number(m[2]);
  }
  return kB;
}

/** Resident pages of the process's mappings of the model file (/proc/self/smaps: large, read once at the end). */
function modelMappedBytes(): number {
  let bytes = 0;
  for (const vma of readFileSync('/proc/self/smaps', 'utf8').split(/\n(?=[0-9a-f]+-[0-9a-f]+ )/)) {
    const name = /^\S+ \S+ \S+ \S+ \d+\s*(.*)$/m.exec(vma)?.[1];
    if (name === model.realPath) bytes += smapsFields(vma).Rss * 1024;
  }
  return bytes;
}

/** Pages of the model file in the page cache: all of them, and those inside the expert tensors. */
function pageCachePages(probe: MappedFileHandle): { all: number; experts: number } {
  let experts = 0;
  for (const [from, to] of model.expertPageRanges) experts += native.mappedResidency(probe, from, to - from).resident;
  return { all: native.mappedResidency(probe).resident, experts };
}

interface RunFigures {
  /** Peaks over the run, as growth over the baseline; engineRss = RSS growth less V8's heap growth. */
  engineRssBytes: number;
  anonBytes: number;
  fileBackedBytes: number;
  heapBytes: number;
  /** At the end of the run (mapped pages only come until close). */
  modelMappedBytes: number;
  /** Peaks (absolute: the file's cache is dropped before the baseline). */
  pageCacheBytes: number;
  expertPageCacheBytes: number;
  samples: number;
  tokens: number;
  plan: MemoryPlan | undefined;
  stats: TierStats | undefined;
}

/** Opens the model (with this budget, or none), runs one request while sampling, closes: the peaks. */
async function measuredRun(memoryBudgetBytes: number | undefined): Promise<RunFigures> {
  native.dropFileCache(model.path); // earlier runs and tests must not count
  const probe = native.mapFile(model.path, { access: 'random' });
  try {
    gc();
    const baseline = sampleProcess();
    const peak = {
      engineRssBytes: 0,
      anonBytes: 0,
      fileBackedBytes: 0,
      heapBytes: 0,
      pageCacheBytes: 0,
      expertPageCacheBytes: 0,
    };
    let samples = 0;
    const sample = (): void => {
      const s = sampleProcess();
      const rss = s.rssBytes - baseline.rssBytes,
        anon = s.anonBytes - baseline.anonBytes,
        heap = s.heapBytes - baseline.heapBytes;
      const cached = pageCachePages(probe.handle);
      peak.engineRssBytes = Math.max(peak.engineRssBytes, rss - heap);
      peak.anonBytes = Math.max(peak.anonBytes, anon);
      peak.fileBackedBytes = Math.max(peak.fileBackedBytes, rss - anon);
      peak.heapBytes = Math.max(peak.heapBytes, heap);
      peak.pageCacheBytes = Math.max(peak.pageCacheBytes, cached.all * model.pageBytes);
      peak.expertPageCacheBytes = Math.max(peak.expertPageCacheBytes, cached.experts * model.pageBytes);
      samples++;
    };
    const budget = memoryBudgetBytes === undefined ? {} : { memoryBudgetBytes };
    const engine = await openEngine({ model: model.path, threads: 1, contextTokens: 128, heat: false, ...budget });
    const timer = setInterval(sample, 2);
    let tokens = 0;
    try {
      sample(); // opened: the dense weights read, the slots filled
      for await (const _ of engine.generate(promptText, { maxTokens, stopAtEos: false })) {
        tokens++;
        sample();
      }
      sample();
      return {
        ...peak,
        modelMappedBytes: modelMappedBytes(),
        samples,
        tokens,
        plan: engine.memoryPlan,
        stats: engine.tierStats(),
      };
    } finally {
      clearInterval(timer);
      await engine.close();
    }
  } finally {
    native.unmapFile(probe.handle);
  }
}

function describeRun(f: RunFigures): string {
  return (
    `engine RSS peak ${mib(f.engineRssBytes)} (peaks: anonymous ${mib(f.anonBytes)}, file-backed ${mib(f.fileBackedBytes)}, V8 heap ${mib(f.heapBytes)}), ` +
    `model mapped ${mib(f.modelMappedBytes)}, page cache peak ${mib(f.pageCacheBytes)} (experts ${mib(f.expertPageCacheBytes)}); ${f.samples} samples over ${f.tokens} tokens`
  );
}

describe('memory kept within the budget', () => {
  it('the model is one a budget matters for: the experts are most of the file', () => {
    expect(model.expertBytes / model.fileBytes).toBeGreaterThan(0.8);
  });

  let budgeted: RunFigures | undefined;

  it('a budget well below the file: the process grows by at most the budget, and the experts stay out of the mapping and the page cache', async () => {
    const f = (budgeted = await measuredRun(budgetBytes()));
    const b = bounds();
    const figures = `budget ${mib(budgetBytes())} (bounds: engine RSS ${mib(b.engineRssBytes)}, page cache ${mib(b.pageCacheBytes)}), file ${mib(model.fileBytes)}: ${describeRun(f)}`;
    console.log(figures); // for the record, in the test output
    // The plan put most experts on the disk tier, and the run read its misses from the file, never from the mapping.
    expect(f.plan!.holdsEveryExpert, figures).toBe(false);
    expect(f.plan!.slotsPerLayer, figures).toBeLessThanOrEqual(PRESETS.small.nExpert / 4);
    expect(f.tokens).toBe(maxTokens);
    expect(f.samples).toBeGreaterThan(maxTokens);
    expect(f.stats!.streamedReads! + f.stats!.admittedReads!, figures).toBeGreaterThan(0);
    expect(f.stats!.streamFailures).toBe(0);
    expect(f.stats!.lazyMisses, figures).toBe(0);
    expect(f.engineRssBytes, figures).toBeLessThanOrEqual(b.engineRssBytes);
    expect(f.modelMappedBytes, figures).toBeLessThanOrEqual(b.modelMappedBytes);
    expect(f.pageCacheBytes, figures).toBeLessThanOrEqual(b.pageCacheBytes);
    expect(f.expertPageCacheBytes, figures).toBeLessThanOrEqual(b.expertPageCacheBytes);
  }, 120_000);

  it('the same model without a budget breaks every bound (each expert it routes comes through the mapping)', async () => {
    const f = await measuredRun(undefined);
    const b = bounds();
    const figures = `no budget: ${describeRun(f)}; with budget ${mib(budgetBytes())}: ${budgeted ? describeRun(budgeted) : 'not run'}`;
    console.log(figures);
    expect(f.plan, figures).toBeUndefined();
    expect(f.engineRssBytes, figures).toBeGreaterThan(b.engineRssBytes);
    expect(f.modelMappedBytes, figures).toBeGreaterThan(b.modelMappedBytes);
    expect(f.pageCacheBytes, figures).toBeGreaterThan(b.pageCacheBytes);
    expect(f.expertPageCacheBytes, figures).toBeGreaterThan(0.9 * model.expertBytes); // what it routed, and the readahead around it
  }, 120_000);

  /**
   * KNOWN BUG, not fixed here (native/tier/tier_stream.cc): the streamed misses' scratch is grown
   * to a call's routed count whenever a call routes more experts than any call before it (this
   * prefill: 27, 29, 31, then 32 experts: 11.3 + 12.1 + 13.0 + 13.4 MB), the old buffer freed after
   * the new one is allocated. In a fresh process glibc gives blocks that large their own mmap and
   * unmaps them on free, so the run above stays within its plan. Once the process has freed a
   * larger block (glibc then raises its mmap threshold to that size, up to 32 MiB: a Node Buffer, or
   * a closed engine's own scratch), they come from glibc's heap, where a freed one stays resident:
   * the peak holds the sum of the grown buffers, not the one scratch the plan counts. Seen: engine
   * RSS peak 72.6-73.0 MiB against the budget's 47.1 (bound 55.1); the same run with glibc's
   * dynamic threshold off (MALLOC_MMAP_THRESHOLD_=131072) 40.7 MiB; 61-62 MiB in this file's
   * process after the runs above (it reuses some of their freed memory), hence a fresh one. The fix is
   * native: size the scratch once for the plan's working set (min(nExpert, EVAL_CHUNK_ROWS x
   * nExpertUsed) experts, what memoryPlanOf reserves), or free the old one before growing. Once
   * fixed, this test fails: make it a plain `it` then.
   */
  const onGlibc =
    (process.report.getReport() as { header?: { glibcVersionRuntime?: string } }).header?.glibcVersionRuntime !==
      undefined && !Object.keys(process.env).some((k) => k.startsWith('MALLOC_')); // glibc's tunables would change the threshold
  let afterLargeFree: { peak: number; tokens: number; streamedReads: number } | undefined;
  it.runIf(onGlibc)(
    'a budget in a fresh process whose allocator has seen a large free: measured (the bound is checked below)',
    () => {
      const dist = (file: string): string => JSON.stringify(path.join(repoRoot, 'dist/src', file));
      // The same measure as measuredRun (RSS growth less V8's heap growth), in a fresh node (the built package).
      const script = `
import { readFileSync } from 'node:fs';
import v8 from 'node:v8';
import { openEngine } from ${dist('engine/engine.js')};
import { loadNative } from ${dist('native/binding.js')};
const native = loadNative();
const engineRss = () => Number(/^Rss:\\s+(\\d+) kB$/m.exec(readFileSync('/proc/self/smaps_rollup', 'utf8'))[1]) * 1024 - v8.getHeapStatistics().total_physical_size;
let block = Buffer.allocUnsafeSlow(${16 * MiB}); // freed: glibc's mmap threshold rises to 16 MiB
block = undefined;
gc();
await new Promise((resolve) => setTimeout(resolve, 50)); // the array buffer sweeper frees the backing store
native.dropFileCache(${JSON.stringify(model.path)});
gc();
const baseline = engineRss();
let peak = 0;
const sample = () => void (peak = Math.max(peak, engineRss() - baseline));
const engine = await openEngine({ model: ${JSON.stringify(model.path)}, threads: 1, contextTokens: 128, heat: false, memoryBudgetBytes: ${budgetBytes()} });
const timer = setInterval(sample, 2);
let tokens = 0;
for await (const _ of engine.generate(${JSON.stringify(promptText)}, { maxTokens: ${maxTokens}, stopAtEos: false })) {
  tokens++;
  sample();
}
clearInterval(timer);
const streamedReads = engine.tierStats().streamedReads + engine.tierStats().admittedReads;
await engine.close();
console.log(JSON.stringify({ peak, tokens, streamedReads }));`;
      const r = spawnSync(process.execPath, ['--expose-gc', '--input-type=module', '-e', script], {
        encoding: 'utf8',
        timeout: 120_000,
        env: cleanOtelEnv(),
      });
      expect(r.status, r.stderr).toBe(0);
      const run = JSON.parse(r.stdout) as { peak: number; tokens: number; streamedReads: number };
      console.log(
        `after a large free: engine RSS peak ${mib(run.peak)} against the budget ${mib(budgetBytes())} (bound ${mib(bounds().engineRssBytes)}), ${run.streamedReads} misses read`,
      );
      expect(run.tokens).toBe(maxTokens);
      expect(run.streamedReads).toBeGreaterThan(0);
      afterLargeFree = run;
    },
    120_000,
  );

  // Apart from the run above, so that only the bound can make this one fail (a failed run fails the test above).
  // It failed while the stream scratch grew step by step through malloc (glibc kept each freed size resident).
  it.runIf(onGlibc)('and stays within the budget', () => {
    expect(afterLargeFree!.peak).toBeLessThanOrEqual(bounds().engineRssBytes);
  });
});
