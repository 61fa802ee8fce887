/**
 * routesFrom (`moetier run --routes-from TRACE`): the engine driven by a recorded route trace.
 * On the tiny preset (4 layers x 8 experts, top-2), with synthetic traces of that shape:
 * - the routes the engine records (traceRoutes) are the trace's: decode step t runs decode row
 *   t mod D, prompt rows the prefill rows (i mod P), or the decode rows from row 0 without them;
 * - a file of several prompts gives each request the next one;
 * - under a tier whose residents stay put (slots 0..3 on every layer, no swaps) every hit and miss
 *   is the trace's: a routed id < 4 hits, any other misses; on the disk backend each miss is one
 *   read of one expert from the file;
 * - a trace of another shape is refused with RouteTraceMismatchError when the engine opens.
 */
import { existsSync, readdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { InvalidOptionError, RouteTraceMismatchError } from '../../src/core/errors.js';
import { openEngine, type EngineOptions } from '../../src/engine/engine.js';
import { formatTraceJsonl } from '../../src/routes/jsonl.js';
import { readTraces } from '../../src/routes/load.js';
import type { RouteStep, Trace } from '../../src/routes/types.js';
import { collect, tempDir, tinyModel } from './tier-helpers.js';

const { dir, cleanup } = tempDir('moetier-routes-from-');
afterAll(cleanup);
let model: string;
beforeAll(async () => {
  model = await tinyModel(dir, 'q8_0', 1);
});

const shape = { layers: 4, experts: 8, topK: 2 };
type Rows = number[][][];

/** Deterministic rows [row][layer][2 distinct ids in 0..7], not what the router would pick. */
function rows(n: number, seed: number): Rows {
  let s = seed;
  const next = (): number => ((s = (s * 1103515245 + 12345) % 2147483648) >>> 16) % 8; // the LCG's high bits: its low ones cycle
  return Array.from({ length: n }, () =>
    Array.from({ length: shape.layers }, () => {
      const a = next();
      let b = next();
      while (b === a) b = next();
      return [a, b];
    }),
  );
}

/** The shared traces' format (../shared/traces/): no header, no prefill, ids sorted. */
function writeShared(name: string, decode: Rows): string {
  const file = path.join(dir, name);
  writeFileSync(
    file,
    decode
      .map((layers, i) => JSON.stringify({ tok: i + 1, layers: layers.map((ids) => [...ids].sort((x, y) => x - y)) }))
      .join('\n') + '\n',
  );
  return file;
}

const stepsOf = (r: Rows): RouteStep[] => r.map((layers, step) => ({ step, layers }));

/** The engine's own format: one prompt per entry. */
function writeOurs(
  name: string,
  prompts: Array<{ prefill: Rows; decode: Rows }>,
  header: Partial<Trace['header']> = {},
): string {
  const file = path.join(dir, name);
  const traces: Trace[] = prompts.map((p, i) => ({
    source: file,
    header: { model: 'tiny', ...shape, rankOrder: true, promptId: `p${i}`, ...header },
    prefill: stepsOf(p.prefill),
    decode: stepsOf(p.decode),
  }));
  writeFileSync(file, formatTraceJsonl(traces));
  return file;
}

/** The routes a request recorded (traceRoutes): [row][layer][k] per phase. */
function recorded(file: string): { prefill: Rows; decode: Rows } {
  const [t] = readTraces(file, { expertsOf: () => undefined });
  return { prefill: t.prefill.map((s) => s.layers), decode: t.decode.map((s) => s.layers) };
}

/** Rows [0, n) of `from`, wrapping around. */
const cycled = (from: Rows, n: number): Rows => Array.from({ length: n }, (_, i) => from[i % from.length]);

const prompt = 'one two three four five six seven eight nine';
const maxTokens = 12; // 11 decode evals

describe('routesFrom', () => {
  it("records the trace's routes: decode row t (wrapping at the end), prompt rows from the decode rows without prefill rows", async () => {
    const decode = rows(5, 11);
    const trace = writeShared('five.decode.jsonl', decode);
    const out = path.join(dir, 'five.routes.jsonl');
    const engine = await openEngine({ model, threads: 1, contextTokens: 64, routesFrom: trace });
    try {
      expect(engine.routesFrom).toBe(trace);
      const ids = engine.tokenize(prompt);
      const tokens = await collect(engine, ids, { maxTokens, stopAtEos: false, traceRoutes: out });
      expect(tokens).toHaveLength(maxTokens);
      const sorted = (r: Rows) => r.map((layers) => layers.map((l) => [...l].sort((x, y) => x - y)));
      const got = recorded(out);
      expect(got.decode).toEqual(sorted(cycled(decode, maxTokens - 1)));
      expect(got.prefill).toEqual(sorted(cycled(decode, ids.length)));
    } finally {
      await engine.close();
    }
  });

  it("runs a prompt on the trace's prefill rows (wrapping), and gives each request the file's next prompt", async () => {
    const p0 = { prefill: rows(3, 21), decode: rows(4, 22) };
    const p1 = { prefill: rows(2, 31), decode: rows(20, 32) };
    const trace = writeOurs('two.jsonl', [p0, p1]);
    const engine = await openEngine({ model, threads: 1, contextTokens: 64, routesFrom: trace });
    try {
      const ids = engine.tokenize(prompt);
      for (const [i, p] of [p0, p1, p0].entries()) {
        const out = path.join(dir, `two.${i}.routes.jsonl`);
        await collect(engine, ids, { maxTokens, stopAtEos: false, traceRoutes: out });
        const got = recorded(out);
        expect(got.prefill).toEqual(cycled(p.prefill, ids.length));
        expect(got.decode).toEqual(cycled(p.decode, maxTokens - 1));
      }
    } finally {
      await engine.close();
    }
  });

  /** Slots 0..3 on every layer (no heat: the first ids), no LFRU tick, no replan guard, no miss admitted (disk): residency never moves. */
  const fixedTier: Partial<EngineOptions> = {
    slotsPerLayer: 4,
    heat: false,
    lfru: { tickTokens: 1_000_000 },
    prefillReplan: { guard: false },
    disk: { admitMisses: false },
  };
  const hitsOf = (r: Rows) => r.flat(2).filter((e) => e < 4).length;

  for (const backend of ['cpu', 'disk'] as const) {
    it(`${backend} tier: the hits and misses are the trace's (an id < 4 is resident)${backend === 'disk' ? ', each miss one read of one expert' : ''}`, async () => {
      // A trace that stays on the residents, and one that mostly leaves them: the hit rates must follow.
      for (const [name, decode] of [
        ['warm', rows(16, 41).map((layers) => layers.map(([a, b]) => [a % 4, a % 4 === b % 4 ? (b + 1) % 4 : b % 4]))],
        ['mixed', rows(16, 42)],
      ] as const) {
        const trace = writeShared(`${backend}-${name}.decode.jsonl`, decode);
        const out = path.join(dir, `${backend}-${name}.routes.jsonl`);
        // The disk tier's prompt reads its routed misses on demand (a longer prompt would read whole layers, whatever it routes to).
        const onDemand = backend === 'disk' ? { shortPrefillTokens: 64 } : {};
        const engine = await openEngine({
          model,
          threads: 1,
          contextTokens: 64,
          routesFrom: trace,
          backend,
          ...fixedTier,
          ...onDemand,
        });
        try {
          const ids = engine.tokenize(prompt);
          await collect(engine, ids, { maxTokens, stopAtEos: false, traceRoutes: out });
          const s = engine.lastStats!;
          const decodeRows = cycled(decode, maxTokens - 1);
          const prefillRows = cycled(decode, ids.length);
          expect(recorded(out).decode.flat(2).sort()).toEqual(decodeRows.flat(2).sort());
          const pairs = (maxTokens - 1) * shape.layers * shape.topK;
          expect(s.decodeHitRate).toBeCloseTo(hitsOf(decodeRows) / pairs, 10);
          expect(s.prefillHitRate).toBeCloseTo(hitsOf(prefillRows) / (ids.length * shape.layers * shape.topK), 10);
          if (name === 'warm') expect(s.decodeHitRate).toBe(1);
          else expect(s.decodeHitRate).toBeLessThan(0.75);
          expect(s.uploads).toBe(0);
          if (backend === 'disk') {
            // The prompt reads each layer's distinct routed misses once (on demand), each decode miss is one read.
            const expertBytes = (engine as unknown as { tier: { port: { expertBytes: { container: number } } } }).tier
              .port.expertBytes.container;
            const prefillMisses = prefillRows[0]
              .map((_, l) => new Set(prefillRows.flatMap((r) => r[l]).filter((e) => e >= 4)).size)
              .reduce((x, y) => x + y, 0);
            const decodeMisses = decodeRows.flat(2).filter((e) => e >= 4).length;
            // The decode's reads since the request's stats mark; the file reads since the engine opened (the prompt's too).
            expect(engine.tierStats()!.streamedReads).toBe(decodeMisses);
            expect(engine.fileReads()!.streamedBytes).toBe((prefillMisses + decodeMisses) * expertBytes);
          }
        } finally {
          await engine.close();
        }
      }
    });
  }

  it("refuses a trace of another shape than the model's when the engine opens, before anything runs", async () => {
    const heat = path.join(dir, 'refused.heat.json');
    const cases: Array<[string, string, RegExp]> = [
      [
        writeShared(
          'three-layers.decode.jsonl',
          rows(4, 51).map((l) => l.slice(0, 3)),
        ),
        'layers',
        /3 layers x expert ids up to \d, top-2/,
      ],
      [
        writeShared(
          'top3.decode.jsonl',
          rows(4, 52).map((ls) => ls.map(([a, b]) => [a, b, [0, 1, 2].find((x) => x !== a && x !== b)!])),
        ),
        'topK',
        /4 layers x expert ids up to \d, top-3/,
      ],
      [
        writeShared(
          'big.decode.jsonl',
          rows(4, 53).map((ls) => ls.map(([a]) => [a, 12])),
        ),
        'experts',
        /expert ids up to 12/,
      ],
      [
        writeOurs('sixteen.jsonl', [{ prefill: [], decode: rows(4, 54) }], { experts: 16 }),
        'experts',
        /4 layers x 16 experts, top-2/,
      ],
      ['/work/shared/traces/olmoe-1b-7b.decode.jsonl', 'layers', /16 layers x expert ids up to 63, top-8/],
    ];
    for (const [trace, what, message] of cases) {
      if (!existsSync(trace)) continue; // the shared folder is outside the repository
      const err = await openEngine({
        model,
        threads: 1,
        contextTokens: 64,
        routesFrom: trace,
        slotsPerLayer: 4,
        heat,
      }).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(err, `${trace} (${what})`).toBeInstanceOf(RouteTraceMismatchError);
      expect(err).toBeInstanceOf(InvalidOptionError);
      const e = err as RouteTraceMismatchError;
      expect(e.option).toBe('routesFrom');
      expect(e.model).toEqual(shape);
      expect(e.message).toMatch(/4 layers x 8 experts, top-2/);
      expect(e.message).toMatch(message);
    }
    expect(existsSync(heat)).toBe(false); // no request ran, nothing was merged
    const missing = await openEngine({ model, routesFrom: path.join(dir, 'absent.jsonl') }).catch((e: unknown) => e);
    expect(missing).toBeInstanceOf(InvalidOptionError);
    expect((missing as InvalidOptionError).option).toBe('routesFrom');
  });

  it("merges into a heat file of its own (the model and the trace), not the model's", async () => {
    const previous = process.env.MOETIER_CACHE_DIR;
    process.env.MOETIER_CACHE_DIR = path.join(dir, 'cache');
    try {
      const trace = writeShared('heat.decode.jsonl', rows(6, 71));
      for (const routesFrom of [trace, undefined]) {
        const engine = await openEngine({
          model,
          threads: 1,
          contextTokens: 64,
          slotsPerLayer: 4,
          ...(routesFrom ? { routesFrom } : {}),
        });
        try {
          await collect(engine, prompt, { maxTokens: 3 });
        } finally {
          await engine.close();
        }
      }
      const files = readdirSync(path.join(dir, 'cache', 'heat'))
        .filter((f) => f.endsWith('.heat.json'))
        .sort();
      expect(files).toHaveLength(2);
      const [own, traced] = files; // '<identity>.heat.json' sorts before '<identity>.routes-<digest>.heat.json'
      expect(traced).toMatch(new RegExp(`^${own.replace(/\.heat\.json$/, '')}\\.routes-[0-9a-f]{16}\\.heat\\.json$`));
    } finally {
      if (previous === undefined) delete process.env.MOETIER_CACHE_DIR;
      else process.env.MOETIER_CACHE_DIR = previous;
    }
  });

  it("a trace of the model's shape and the same prompt give the same tokens run after run (the tier does not change them)", async () => {
    const trace = writeShared('same.decode.jsonl', rows(7, 61));
    const runs: number[][] = [];
    for (const tier of [{}, fixedTier, { slotsPerLayer: 2, heat: false }] as Partial<EngineOptions>[]) {
      const engine = await openEngine({ model, threads: 1, contextTokens: 64, routesFrom: trace, ...tier });
      try {
        runs.push(await collect(engine, prompt, { maxTokens, stopAtEos: false }));
      } finally {
        await engine.close();
      }
    }
    expect(runs[1]).toEqual(runs[0]);
    expect(runs[2]).toEqual(runs[0]);
  });
});
