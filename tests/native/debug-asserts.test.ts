/**
 * The native invariants (native/include/mt_assert.h) are checked in the debug build and compiled
 * out of the release build. This file runs in both vitest projects: 'tests' on the release addon,
 * 'debug-asserts' on native/build-debug (MOETIER_ADDON, with MOETIER_EXPECT_DEBUG_ASSERTS=1), so
 * each checks that it really has the build it means to test.
 *
 * In the debug build a broken invariant ends the process loudly (abort, with file:line, the
 * condition and what it protects on stderr): shown in a child on an upload completed twice,
 * which only the debug build has a verb to cause. And a C++ exception in the eval worker, thrown
 * there on purpose under MOETIER_DEBUG_EVAL_THROW, rejects the eval with MT_INTERNAL instead of
 * ending the process.
 */
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { NativeError } from '../../src/core/errors.js';
import { typedEvalError } from '../../src/native/eval-errors.js';
import { native, tinyModel } from './tier-helpers.js';

const expectAsserts = process.env.MOETIER_EXPECT_DEBUG_ASSERTS === '1';
// MOETIER_ADDON pointing elsewhere without the expectation: a build this file knows nothing about.
const known = expectAsserts || process.env.MOETIER_ADDON === undefined;
const binding = path.resolve(import.meta.dirname, '../../dist/src/native/binding.js');

describe.runIf(known)('native debug asserts', () => {
  it(expectAsserts ? 'are live in the debug build' : 'are compiled out of the release build', () => {
    expect(native.debugAssertsEnabled()).toBe(expectAsserts);
    expect(typeof native.debugBackendRecomplete).toBe(expectAsserts ? 'function' : 'undefined');
  });

  it.runIf(expectAsserts)('abort the process on a broken backend invariant, naming it and where it broke', () => {
    const script = `
      const { loadNative } = await import(${JSON.stringify(binding)});
      const n = loadNative();
      const b = n.createBackend('fake', { ...n.backendPreset('consumer-8gb'), budgetBytes: 1 << 20 });
      n.slotsReserve(b, 1, 4096);
      const event = n.upload(b, 0, [new Uint8Array(4096)], false, 7);
      console.log('upload', (await n.eventWait(b, event)).state);
      n.debugBackendRecomplete(b, event);
      console.log('survived a second completion');`;
    const r = spawnSync(process.execPath, ['--input-type=module', '-e', script], {
      encoding: 'utf8',
      timeout: 30_000,
      env: process.env,
    });
    expect(r.stdout).toContain('upload done');
    expect(r.stdout).not.toContain('survived');
    expect(r.signal).toBe('SIGABRT');
    expect(r.stderr).toMatch(
      /backend\.cc:\d+: assertion failed: slots\[size_t\(job\.slot\)\]\.state == MT_SLOT_UPLOADING: a completed upload's slot was uploading/,
    );
  });

  it.runIf(expectAsserts)(
    'turn a C++ exception in the eval worker into a rejection with code MT_INTERNAL',
    async () => {
      const m = tinyModel('Q8_0');
      const ctx = native.createContext(m.handle, { nCtx: 16, threads: 1 });
      const logits = new Float32Array(m.model.hparams.nVocab);
      try {
        process.env.MOETIER_DEBUG_EVAL_THROW = '1';
        let err: unknown;
        try {
          await native.evalAsync(ctx, Int32Array.of(1, 2), 0, logits);
        } catch (e) {
          err = e;
        } finally {
          delete process.env.MOETIER_DEBUG_EVAL_THROW;
        }
        expect(err).toBeInstanceOf(Error);
        expect(err).toMatchObject({
          code: 'MT_INTERNAL',
          message: 'eval: internal error: thrown on purpose (MOETIER_DEBUG_EVAL_THROW)',
        });
        expect(typedEvalError(err, 0)).toBeInstanceOf(NativeError);
        // The context was released: the next eval runs.
        await native.evalAsync(ctx, Int32Array.of(1, 2), 0, logits);
        expect(logits.some((x) => x !== 0)).toBe(true);
      } finally {
        native.freeContext(ctx);
        m.close();
      }
    },
  );
});
