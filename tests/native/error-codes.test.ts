/**
 * Every error the addon throws or rejects with carries a string `code` (native/addon/errors.h,
 * NativeErrorCode in src/native/binding.ts) and keeps its class: representative sites of each
 * code, and a source check that the addon's throw sites go through the one helper.
 */
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { DeviceUnavailableError, NativeError } from '../../src/core/errors.js';
import { Backend, BackendError } from '../../src/native/backend.js';
import type { NativeErrorCode } from '../../src/native/binding.js';
import { typedEvalError } from '../../src/native/eval-errors.js';
import { native, tinyModel } from './tier-helpers.js';

function thrown(fn: () => unknown): unknown {
  try {
    fn();
  } catch (err) {
    return err;
  }
  throw new Error('expected a throw');
}

function expectCode(
  err: unknown,
  cls: ErrorConstructor | TypeErrorConstructor | RangeErrorConstructor,
  code: NativeErrorCode,
): void {
  expect(err).toBeInstanceOf(cls);
  expect((err as { code?: unknown }).code).toBe(code);
}

const m = tinyModel('Q8_0');
afterAll(() => m.close());

describe('native error codes', () => {
  it('a handle of another kind is refused, not read as a pool or a mapping', () => {
    const b = native.createBackend('cpu', { budgetBytes: 1 << 16 });
    try {
      expectCode(
        thrown(() => native.poolCheck(b as never, 1)),
        TypeError,
        'MT_BAD_ARGUMENT',
      );
      expectCode(
        thrown(() => native.freePool(b as never)),
        TypeError,
        'MT_BAD_ARGUMENT',
      );
      expectCode(
        thrown(() => native.unmapFile(b as never)),
        TypeError,
        'MT_BAD_ARGUMENT',
      );
    } finally {
      native.destroyBackend(b);
    }
  });

  it('model and context verbs: MT_BAD_ARGUMENT, MT_BUSY, MT_FREED', () => {
    expectCode(
      thrown(() => native.createContext(m.handle, { nCtx: 0, threads: 1 })),
      Error,
      'MT_BAD_ARGUMENT',
    );
    expectCode(
      thrown(() => native.createContext(1 as never, { nCtx: 8, threads: 1 })),
      TypeError,
      'MT_BAD_ARGUMENT',
    );
    const ctx = native.createContext(m.handle, { nCtx: 8, threads: 1 });
    expectCode(
      thrown(() => native.freeModel(m.handle)),
      Error,
      'MT_BUSY',
    ); // a context still uses it
    native.freeContext(ctx);
    expectCode(
      thrown(() => native.freeContext(ctx)),
      Error,
      'MT_FREED',
    );
  });

  it('a bad argument: MT_BAD_ARGUMENT, as a TypeError or a RangeError', () => {
    expectCode(
      thrown(() => native.createBackend('gpu' as never, { budgetBytes: 1 })),
      TypeError,
      'MT_BAD_ARGUMENT',
    );
    expectCode(
      thrown(() => native.createPool(0)),
      RangeError,
      'MT_BAD_ARGUMENT',
    );
    expectCode(
      thrown(() => native.forwardOps.softmax(1 as never)),
      TypeError,
      'MT_BAD_ARGUMENT',
    );
    expectCode(
      thrown(() => native.mapFile(1 as never)),
      TypeError,
      'MT_BAD_ARGUMENT',
    );
    const b = native.createBackend('cpu', { budgetBytes: 1 << 16 });
    try {
      expectCode(
        thrown(() => native.slotsReserve(b, -1, 64)),
        RangeError,
        'MT_BAD_ARGUMENT',
      );
      // An unknown slot is the C layer's MT_BACKEND_INVALID: an argument error too, not a refusal.
      expectCode(
        thrown(() => native.slotState(b, 5)),
        RangeError,
        'MT_BAD_ARGUMENT',
      );
    } finally {
      native.destroyBackend(b);
    }
  });

  it('a backend refusal: MT_BACKEND_<status>, with backendStatus; the wrapper keeps it as the cause', async () => {
    const b = native.createBackend('fake', {
      ...native.backendPreset('consumer-8gb'),
      budgetBytes: 1 << 16,
      overwriteSupported: false,
    });
    try {
      const budget = thrown(() => native.slotsReserve(b, 2, 1 << 16));
      expectCode(budget, Error, 'MT_BACKEND_BUDGET');
      expect(budget).toMatchObject({ backendStatus: 'budget' });
      const slot = native.slotsReserve(b, 1, 4096);
      await native.eventWait(b, native.upload(b, slot, [new Uint8Array(4096)], false, 0));
      expectCode(
        thrown(() => native.upload(b, slot, [new Uint8Array(4096)], true, 0)),
        Error,
        'MT_BACKEND_NO_OVERWRITE',
      );
      const lease = native.lease(b, slot);
      expectCode(
        thrown(() => native.freeSlot(b, slot)),
        Error,
        'MT_BACKEND_BUSY',
      );
      native.release(b, lease);
      expectCode(await native.eventWait(b, 999).catch((e: unknown) => e), RangeError, 'MT_BAD_ARGUMENT');
    } finally {
      native.destroyBackend(b);
    }
    const wrapped = thrown(() => Backend.create('cpu', { budgetBytes: 4096 }).reserve(2, 4096));
    expect(wrapped).toBeInstanceOf(BackendError);
    expect(wrapped).toMatchObject({ code: 'E_BACKEND_BUDGET', cause: { code: 'MT_BACKEND_BUDGET' } });
  });

  it('no usable device: MT_DEVICE_UNAVAILABLE, with deviceUnavailable; the wrapper makes it a DeviceUnavailableError', () => {
    const err = thrown(() => native.createBackend('cuda-sim', { budgetBytes: 1 << 16, simNoDevice: true }));
    expectCode(err, Error, 'MT_DEVICE_UNAVAILABLE');
    expect(err).toMatchObject({ deviceUnavailable: 'no-device' });
    const wrapped = thrown(() => Backend.create('cuda-sim', { budgetBytes: 1 << 16, simNoDevice: true }));
    expect(wrapped).toBeInstanceOf(DeviceUnavailableError);
    expect(wrapped).toMatchObject({
      code: 'E_DEVICE_UNAVAILABLE',
      reason: 'no-device',
      cause: { code: 'MT_DEVICE_UNAVAILABLE' },
    });
  });

  it('an eval that fails: MT_EVAL_FAILED, typed by the engine as NativeError', async () => {
    const ctx = native.createContext(m.handle, { nCtx: 16, threads: 1 });
    try {
      const err = await native
        .evalAsync(ctx, Int32Array.of(m.model.hparams.nVocab), 0, new Float32Array(m.model.hparams.nVocab))
        .catch((e: unknown) => e);
      expectCode(err, Error, 'MT_EVAL_FAILED');
      expect((err as Error).message).toMatch(/^eval: tokens\[0\]: expected a token id/);
      expect(typedEvalError(err, 0)).toBeInstanceOf(NativeError);
    } finally {
      native.freeContext(ctx);
    }
  });

  it('a freed handle, an object in use, a file that cannot be opened, a tier refusal', async () => {
    const b = native.createBackend('cpu', { budgetBytes: 1 << 16 });
    native.destroyBackend(b);
    expectCode(
      thrown(() => native.backendStats(b)),
      Error,
      'MT_FREED',
    );
    const pool = native.createPool(1);
    native.freePool(pool);
    expectCode(
      thrown(() => native.poolCheck(pool, 1)),
      TypeError,
      'MT_FREED',
    );
    expectCode(
      thrown(() => native.unmapFile(m.file)),
      Error,
      'MT_BUSY',
    );
    expectCode(
      thrown(() => native.mapFile('/nonexistent/moetier-model.gguf')),
      Error,
      'MT_IO',
    );

    const ctx = native.createContext(m.handle, { nCtx: 16, threads: 1 });
    const backend = native.createBackend('cpu', { budgetBytes: 1 << 24 });
    const tier = native.createTier(ctx, backend, { slotsPerLayer: Array(m.model.hparams.nLayer).fill(2) });
    try {
      expectCode(
        thrown(() => native.createTier(ctx, backend, { slotsPerLayer: Array(m.model.hparams.nLayer).fill(2) })),
        Error,
        'MT_BUSY',
      );
      expectCode(
        thrown(() => native.tierStats(ctx as never)),
        TypeError,
        'MT_BAD_ARGUMENT',
      );
      expectCode(
        await native.tierWarmstart(tier, 99, Int32Array.of(0)).catch((e: unknown) => e),
        RangeError,
        'MT_BAD_ARGUMENT',
      );
    } finally {
      native.freeTier(tier);
      native.freeContext(ctx);
      native.destroyBackend(backend);
    }
    expectCode(
      thrown(() => native.tierStats(tier)),
      Error,
      'MT_FREED',
    );
  });
});

describe('native throw sites', () => {
  const uncoded = new Set<string>();

  it('create every error through native/addon/errors.h', () => {
    const dir = path.resolve(import.meta.dirname, '../../native/addon');
    const raw = readdirSync(dir)
      .filter((f) => f.endsWith('.cc') && !uncoded.has(f))
      .flatMap((f) =>
        readFileSync(path.join(dir, f), 'utf8')
          .split('\n')
          .map((line, i) => ({ at: `${f}:${i + 1}`, line }))
          .filter(({ line }) => /Napi::(Type|Range)?Error::New\(/.test(line)),
      );
    expect(raw.map((r) => `${r.at}: ${r.line.trim()}`)).toEqual([]);
  });
});
