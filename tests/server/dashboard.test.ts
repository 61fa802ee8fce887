/**
 * The live dashboard in a real browser: Debian's Chromium, headless, driven by puppeteer-core
 * (which downloads no browser). The page connects to /events; requests then run on a tier whose
 * few slots swap; the page must have drawn the steps' layer windows and transfers on its timeline,
 * and its token counter must move. Skipped where no Chromium is installed (apt-get install chromium).
 */
import { existsSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openEngine, type Engine } from '../../src/engine/engine.js';
import { createServer, type MoetierServer } from '../../src/server/app.js';
import { tempDir, tinyModel } from '../engine/tier-helpers.js';

const chromium = [process.env.CHROMIUM_PATH, '/usr/bin/chromium', '/usr/bin/chromium-browser'].find(
  (p) => p !== undefined && existsSync(p),
);
const { dir, cleanup } = tempDir('moetier-dashboard-');
let engine: Engine;
let server: MoetierServer;
let base: string;

beforeAll(async () => {
  if (!chromium) return;
  const model = await tinyModel(dir, 'q8_0', 14);
  engine = await openEngine({
    model,
    threads: 1,
    contextTokens: 128,
    slotsPerLayer: 2,
    heat: false,
    lfru: { tickTokens: 2 },
    parallel: 2,
  });
  server = createServer(engine, { countersIntervalMs: 100 });
  base = await server.app.listen({ host: '127.0.0.1', port: 0 });
}, 120_000);
afterAll(async () => {
  await server?.shutdown(1000);
  await engine?.close();
  cleanup();
});

const complete = (prompt: string, maxTokens = 24) =>
  fetch(`${base}/v1/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ prompt, max_tokens: maxTokens }),
  }).then((r) => r.json());

describe.runIf(chromium !== undefined)('the live dashboard in headless Chromium', () => {
  it('draws the steps and transfers, and its counters move', async () => {
    const { launch } = await import('puppeteer-core');
    const browser = await launch({ executablePath: chromium, headless: true, args: ['--no-sandbox', '--disable-gpu'] });
    try {
      const page = await browser.newPage();
      await page.goto(`${base}/dashboard`);
      await page.waitForFunction(() => document.getElementById('model')!.textContent !== '', { timeout: 10_000 });
      type Seen = { steps: number; bars: number; tokens: number; transfers: number };
      const seen = (): Promise<Seen> => page.evaluate(() => (window as unknown as { dashboard: Seen }).dashboard);
      await complete('the ship will sail across the sea');
      await complete('we compile the function to debug the program');
      await page.waitForFunction(
        () => {
          const d = (window as unknown as { dashboard: Seen }).dashboard;
          return d.steps > 0 && d.bars > 0 && d.tokens > 0;
        },
        { timeout: 10_000 },
      );
      const first = await seen();
      expect(first.bars).toBeGreaterThan(first.steps); // a bar per layer and step at least
      expect(first.transfers).toBeGreaterThan(0); // two slots a layer: swaps moved bytes
      expect(Number(await page.$eval('#steps', (e) => e.textContent))).toBe(first.steps);
      await complete('the rocket will launch into orbit around the moon');
      await page.waitForFunction(
        (before: number) => (window as unknown as { dashboard: Seen }).dashboard.tokens > before,
        { timeout: 10_000 },
        first.tokens,
      );
      expect((await seen()).steps).toBeGreaterThan(first.steps);
      // Two streams batched at once: the page counts both sequences and gives each its share of tok/s.
      const shown = page.waitForFunction(
        () =>
          document.getElementById('active')!.textContent === '2' &&
          Number(document.getElementById('perStream')!.textContent) > 0,
        { timeout: 15_000 },
      );
      let done = false;
      void shown.finally(() => (done = true)).catch(() => undefined);
      while (!done) await Promise.all([complete('the ship sails', 100), complete('a bird sings', 100)]);
      await shown;
    } finally {
      await browser.close();
    }
  }, 60_000);
});
