/** The int8-rebuild actor on real piscina workers: each maps the file and opens its own model handle. */
import { copyFileSync, renameSync, statSync, truncateSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ModelFileChangedError } from '../../src/core/errors.js';
import { Int8RebuildActor } from '../../src/actors/int8-rebuild/actor.js';
import { loadModel, type LoadedModel } from '../../src/model/load.js';
import { loadNative } from '../../src/native/binding.js';
import { tempDir, tinyModel } from '../engine/tier-helpers.js';

const { dir, cleanup } = tempDir('moetier-rebuild-');
let file: string;
let model: LoadedModel;
const native = loadNative();
const copyBytes = ((3 * 64 * 32) / 32) * 34; // tiny: nEmbd 64, nFfExp 32

beforeAll(async () => {
  file = await tinyModel(dir, 'q4_0', 5);
  model = loadModel(native, file);
});
afterAll(() => {
  native.freeModel(model.nativeModel);
  native.unmapFile(model.mapping);
  cleanup();
});

describe.runIf(typeof native.requantizeExpertToQ8 === 'function')('int8-rebuild actor (workers)', () => {
  it('writes the same Q8_0 copies as the main thread, publishes their offsets, frees residents', async () => {
    const actor = new Int8RebuildActor(model.pin, 4, 8, 6, copyBytes, { inflightMax: 2 });
    try {
      const experts = [
        { layer: 0, expert: 1 },
        { layer: 2, expert: 5 },
        { layer: 3, expert: 7 },
      ];
      actor.send({ kind: 'evicted', experts });
      await actor.whenIdle();
      expect(actor.counts.built).toBe(3);
      for (const { layer, expert } of experts) {
        const offset = Atomics.load(actor.offsets, layer * 8 + expert);
        expect(offset).toBeGreaterThanOrEqual(0);
        const expected = new Uint8Array(copyBytes);
        native.requantizeExpertToQ8!(model.nativeModel, layer, expert, expected, 0);
        expect(actor.arena.subarray(offset, offset + copyBytes)).toEqual(expected);
      }
      actor.send({ kind: 'resident', experts: [experts[0]] });
      expect(Atomics.load(actor.offsets, 1)).toBe(-1);
      await expect(actor.settled()).resolves.toBeUndefined();
    } finally {
      await actor.close();
    }
  });

  it('a worker failure rejects settled() once with a typed error, even when it ended before anyone awaited it', async () => {
    const actor = new Int8RebuildActor({ ...model.pin, readerPath: `${file}.missing` }, 4, 8, 2, copyBytes, {
      inflightMax: 1,
    });
    try {
      actor.send({ kind: 'evicted', experts: [{ layer: 0, expert: 0 }] });
      await actor.whenIdle(); // ended, unawaited: no unhandled rejection, and not idle for a step
      expect(actor.idle).toBe(false);
      const failure = await actor.settled().then(
        () => undefined,
        (e: unknown) => e as Error,
      );
      expect(failure).toMatchObject({ code: 'E_NATIVE' });
      expect(failure!.message).toContain('int8-rebuild worker failed on expert 0/0');
      expect(actor.idle).toBe(true);
      await expect(actor.settled()).resolves.toBeUndefined();
      expect(actor.counts.failed).toBe(1);
    } finally {
      await actor.close();
    }
  });

  it('reads the pinned file, never the path: a model renamed over the path changes no copy; a truncated one is a typed error', async () => {
    // The engine's file at `path`; another model of the same geometry is then renamed over it.
    const path = `${dir}/pinned.gguf`;
    copyFileSync(file, path);
    const pinned = loadModel(native, path);
    const other = await tinyModel(dir, 'q4_0', 99);
    const expected = new Uint8Array(copyBytes);
    native.requantizeExpertToQ8!(pinned.nativeModel, 1, 3, expected, 0);
    renameSync(other, path);
    const actor = new Int8RebuildActor(pinned.pin, 4, 8, 2, copyBytes, { inflightMax: 1 });
    try {
      actor.send({ kind: 'evicted', experts: [{ layer: 1, expert: 3 }] });
      await actor.settled();
      const offset = Atomics.load(actor.offsets, 1 * 8 + 3);
      expect(actor.arena.subarray(offset, offset + copyBytes)).toEqual(expected); // the engine's model, not the new file
    } finally {
      await actor.close();
    }
    // Truncated in place: the worker refuses before it reads (a read past the end would SIGBUS).
    const cut = `${dir}/cut.gguf`;
    copyFileSync(file, cut);
    const victim = loadModel(native, cut);
    const size = statSync(cut).size;
    truncateSync(cut, Math.floor(size / 2));
    const second = new Int8RebuildActor(victim.pin, 4, 8, 2, copyBytes, { inflightMax: 1 });
    try {
      second.send({ kind: 'evicted', experts: [{ layer: 3, expert: 7 }] });
      const failure = await second.settled().then(
        () => undefined,
        (e: unknown) => e as Error,
      );
      expect(failure).toBeInstanceOf(ModelFileChangedError);
      expect(failure!.message).toContain(`its size went from ${size} to ${Math.floor(size / 2)} bytes`);
    } finally {
      await second.close();
      for (const m of [pinned, victim]) {
        native.freeModel(m.nativeModel);
        native.unmapFile(m.mapping);
      }
    }
  });
});
