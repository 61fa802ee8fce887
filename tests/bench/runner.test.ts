import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { describe, expect, it } from 'vitest';
// @ts-expect-error plain .mjs bench module without declarations
import { runLlamaCpp } from '../../bench/llamacpp/runner.mjs';
// @ts-expect-error plain .mjs bench module without declarations
import { writeReadmeTable } from '../../bench/lib/readme.mjs';

describe('llama.cpp child runner', () => {
  const request = (modelPath: string) => ({
    modelPath,
    threads: 1,
    maxTokens: 1,
    logitsMode: 'none',
    runs: [{ promptTokens: [1] }],
  });

  it('turns a failing child into a PeerRunError that names the model', async () => {
    const missing = path.join(tmpdir(), 'moetier-bench-no-such-model.gguf');
    await expect(runLlamaCpp(request(missing))).rejects.toMatchObject({
      name: 'PeerRunError',
      code: 'E_PEER_RUN',
      modelPath: missing,
    });
  });

  it('kills a child that does not answer in time', async () => {
    await expect(runLlamaCpp(request('/dev/null'), { timeoutMs: 1 })).rejects.toThrow(
      /no reply within 1 ms; the child was killed/,
    );
  });
});

describe('README results table', () => {
  const medians = { 1: { decodeTokPerS: 60, prefillTokPerS: 200 }, 2: { decodeTokPerS: 40, prefillTokPerS: 270 } };
  const results = {
    date: '2025-01-02T00:00:00.000Z',
    config: { rounds: 3, promptTokens: 128, maxTokens: 64 },
    cases: [
      {
        preset: 'medium',
        quant: 'q8_0',
        moetierDecodeTokPerS: 80,
        moetierDecodeThreads: 2,
        llamaCppDecodeTokPerS: 60,
        llamaCppDecodeThreads: 1,
        decodeRatio: 80 / 60,
        moetierPrefillTokPerS: 300,
        llamaCppPrefillTokPerS: 270,
        prefillRatio: 300 / 270,
        medians: { moetier: medians, llamaCpp: medians },
        weightBytesPerToken: 189e6,
        readBandwidthGBPerS: { 1: 30, 2: 48 },
        bandwidthBoundTokPerS: 48e9 / 189e6,
        bandwidthSource: 'native measureReadBandwidth',
      },
    ],
  };

  it('rewrites only the text between its markers', () => {
    const file = path.join(mkdtempSync(path.join(tmpdir(), 'moetier-bench-')), 'README.md');
    writeFileSync(file, 'intro\n<!-- decode-results:begin -->\nold table\n<!-- decode-results:end -->\noutro\n');
    writeReadmeTable(pathToFileURL(file), results);
    const text = readFileSync(file, 'utf8');
    expect(text.startsWith('intro\n<!-- decode-results:begin -->\n')).toBe(true);
    expect(text.endsWith('<!-- decode-results:end -->\noutro\n')).toBe(true);
    expect(text).not.toContain('old table');
    expect(text).toContain(
      '| medium q8_0 | 80.0 (2T) | 60.0 (1T) | 1.33 | 300.0 | 270.0 | 1.11 | 60.0 / 40.0 | 60.0 / 40.0 | 189.0 | 30.0 / 48.0 | 254.0 |',
    );
  });

  it('refuses a README without the markers', () => {
    const file = path.join(mkdtempSync(path.join(tmpdir(), 'moetier-bench-')), 'README.md');
    writeFileSync(file, 'no markers\n');
    expect(() => writeReadmeTable(pathToFileURL(file), results)).toThrow(/markers/);
  });
});

describe('README parity table', () => {
  it('folds the prompts of a model into one row with the worst figures', async () => {
    // @ts-expect-error plain .mjs bench module without declarations
    const { parityTable } = await import('../../bench/lib/readme.mjs');
    const base = { preset: 'tiny', arch: 'olmoe', quant: 'q8_0', tokenizationIdentical: true };
    const table = parityTable({
      allTokensIdentical: false,
      maxTokens: 64,
      threads: 1,
      seed: 1,
      cases: [
        { ...base, identical: true, maxAbsLogitDiff: 0.02, minStepMargin: 7.5 },
        { ...base, identical: false, maxAbsLogitDiff: 0.09, minStepMargin: 6.25 },
      ],
    });
    expect(table).toContain('allTokensIdentical: **false**');
    expect(table).toContain('| tiny olmoe q8_0 | 1 / 2 | 0.090 | 6.25 | yes | n/a |'); // runs before detokenization was compared
    const detok = parityTable({
      allTokensIdentical: true,
      maxTokens: 64,
      threads: 1,
      seed: 1,
      cases: [
        { ...base, identical: true, maxAbsLogitDiff: 0.02, minStepMargin: 7.5, detokenizationIdentical: true },
        { ...base, identical: true, maxAbsLogitDiff: 0.02, minStepMargin: 7.5, detokenizationIdentical: false },
      ],
    });
    expect(detok).toContain('| tiny olmoe q8_0 | 2 / 2 | 0.020 | 7.50 | yes | no |');
  });
});

describe('README decode table on a busy machine', () => {
  it('warns when the load average exceeded half the cores', async () => {
    // @ts-expect-error plain .mjs bench module without declarations
    const { decodeTable } = await import('../../bench/lib/readme.mjs');
    const base = { date: '2025-01-02T00:00:00.000Z', config: { rounds: 1, promptTokens: 8, maxTokens: 8 }, cases: [] };
    expect(
      decodeTable({ ...base, machine: { cpus: 2, loadAverageAtStart: [0.4], loadAverageAtEnd: [0.9] } }),
    ).not.toContain('Contended');
    expect(
      decodeTable({ ...base, machine: { cpus: 2, loadAverageAtStart: [7.3], loadAverageAtEnd: [5.9] } }),
    ).toContain('load average up to 7.3');
  });

  it("gives each engine's fraction of the bandwidth bound in the last column", async () => {
    // @ts-expect-error plain .mjs bench module without declarations
    const { decodeTable } = await import('../../bench/lib/readme.mjs');
    const perThreads = { 1: { decodeTokPerS: 40 }, 2: { decodeTokPerS: 50 } };
    const c = {
      preset: 'medium',
      quant: 'q4_k_m',
      moetierDecodeTokPerS: 50,
      moetierDecodeThreads: 2,
      llamaCppDecodeTokPerS: 25,
      llamaCppDecodeThreads: 2,
      decodeRatio: 2,
      moetierPrefillTokPerS: 100,
      llamaCppPrefillTokPerS: 80,
      prefillRatio: 1.25,
      medians: { moetier: perThreads, llamaCpp: perThreads },
      weightBytesPerToken: 1e7,
      readBandwidthGBPerS: { 1: 1, 2: 1 },
      bandwidthBoundTokPerS: 100,
      moetierBoundFraction: 0.5,
      llamaCppBoundFraction: 0.25,
    };
    const table = decodeTable({
      date: '2025-01-02T00:00:00.000Z',
      config: { rounds: 1, promptTokens: 8, maxTokens: 8 },
      machine: {},
      cases: [c],
    });
    expect(table).toContain('| fraction of bound moetier / llama.cpp |');
    expect(table).toMatch(/\| medium q4_k_m \| 50\.0 \(2T\) \|.*\| 100\.0 \| 0\.50 \/ 0\.25 \|$/m);
  });
});
