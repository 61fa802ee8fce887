import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { RouteLog } from '../../src/engine/tier/route-log.js';
import { parseTraceJsonl } from '../../src/routes/jsonl.js';

const hp = { nLayer: 2, nExpert: 8, nExpertUsed: 2 };

describe('RouteLog', () => {
  it('keeps each step as it was when added, though the eval reuses its buffers', () => {
    const log = new RouteLog(hp);
    const buffer = Int32Array.of(0, 1, 2, 3, 4, 5, 6, 7); // 2 prefill rows x 2 layers x k 2
    const tokens = Int32Array.of(10, 11);
    log.add('prefill', buffer, tokens);
    buffer.set([7, 6, 5, 4]); // the eval writes the next step's routes into the same buffer
    tokens[0] = 12;
    log.add('decode', buffer.subarray(0, 4), tokens.subarray(0, 1));
    buffer.fill(-1);
    expect(log.rows()).toEqual([
      [
        [0, 1],
        [2, 3],
      ],
      [
        [4, 5],
        [6, 7],
      ],
      [
        [7, 6],
        [5, 4],
      ],
    ]);
    expect(log.steps('decode')).toEqual([
      {
        step: 0,
        token: 12,
        layers: [
          [7, 6],
          [5, 4],
        ],
      },
    ]);
    expect(log.steps('prefill').map((s) => [s.step, s.token])).toEqual([
      [0, 10],
      [1, 11],
    ]);
  });

  it('numbers decode steps across adds and writes them in the policy lab format', () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'moetier-route-log-'));
    try {
      const log = new RouteLog(hp);
      log.add('prefill', Int32Array.of(1, 2, 3, 4), Int32Array.of(5));
      for (let t = 0; t < 3; t++)
        log.add('decode', Int32Array.of(t, t + 1, t + 2, t + 3, 99, 99), Int32Array.of(100 + t)); // a longer buffer: only nLayer x k read
      const file = path.join(dir, 'r.jsonl');
      log.write(file, '/models/m.gguf', 'hi');
      const [trace] = parseTraceJsonl(readFileSync(file, 'utf8'), file);
      expect(trace.header).toMatchObject({
        model: 'm.gguf',
        layers: 2,
        experts: 8,
        topK: 2,
        rankOrder: true,
        prompt: 'hi',
      });
      expect(trace.prefill.map((s) => s.layers)).toEqual([
        [
          [1, 2],
          [3, 4],
        ],
      ]);
      expect(trace.decode.map((s) => [s.step, s.token, s.layers])).toEqual([
        [
          0,
          100,
          [
            [0, 1],
            [2, 3],
          ],
        ],
        [
          1,
          101,
          [
            [1, 2],
            [3, 4],
          ],
        ],
        [
          2,
          102,
          [
            [2, 3],
            [4, 5],
          ],
        ],
      ]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
