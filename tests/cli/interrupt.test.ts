/**
 * Ctrl-C during `moetier run`: the real CLI in a child process gets SIGINT while it streams; it
 * ends the request as an abort, writes the trace file and the heat file, and exits with 130.
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SpanNames } from '../../otel/semconv.js';
import { tempDir, tinyModel } from '../engine/tier-helpers.js';
import { cleanOtelEnv, spawnCli } from './helpers.js';

const { dir, cleanup } = tempDir('moetier-interrupt-');
let model: string;

beforeAll(async () => {
  model = await tinyModel(dir, 'q8_0', 9);
});
afterAll(() => cleanup());

describe('Ctrl-C during moetier run', () => {
  it('exits 130 with the trace file written and the heat file intact', async () => {
    const traceFile = path.join(dir, 'trace.json');
    const heat = path.join(dir, 'heat.json');
    let sent = false;
    // 30000 tokens would take ~15 s here: the SIGINT comes once the first 200 characters have streamed.
    const args = [
      'run',
      '--model',
      model,
      '--prompt',
      'red green blue',
      '-n',
      '30000',
      '--ctx',
      '32768',
      '--threads',
      '1',
      '--resident',
      '0.5',
      '--heat',
      heat,
      '--trace-file',
      traceFile,
    ];
    const r = await spawnCli(args, cleanOtelEnv({}), (out, child) => {
      if (!sent && out.length > 200) {
        sent = true;
        child.kill('SIGINT');
      }
    });
    expect(sent).toBe(true);
    expect(r.signal).toBe(null); // it exited by itself, not killed by the signal
    expect(r.status).toBe(130);
    expect(r.wallMs).toBeLessThan(10_000);
    expect(r.stderr).toMatch(/moetier: interrupted/);

    const events = JSON.parse(readFileSync(traceFile, 'utf8')).traceEvents as {
      name: string;
      ph: string;
      args?: Record<string, unknown>;
    }[];
    const request = events.filter((e) => e.ph === 'X' && e.name === SpanNames.request);
    expect(request).toHaveLength(1);
    expect(request[0].args!['gen_ai.response.finish_reasons']).toEqual(['aborted']);
    expect(request[0].args!['error.type']).toBe('RequestAbortedError');
    const steps = events.filter((e) => e.ph === 'X' && e.name === SpanNames.decodeStep).length;
    expect(steps).toBeGreaterThan(10);
    expect(steps).toBeLessThan(29_999); // cut short
    expect(r.stderr).toMatch(/trace file: .*trace\.json \(\d+ spans\)/);

    expect(existsSync(heat)).toBe(true);
    const heatFile = JSON.parse(readFileSync(heat, 'utf8')) as { counts: number[][]; routedPairs: number };
    expect(heatFile.routedPairs).toBeGreaterThan(0); // the interrupted request's routing was merged
    expect(heatFile.counts.length).toBe(4);
    expect(readdirSync(dir).filter((f) => f.endsWith('.tmp'))).toEqual([]);
  });
});
