/**
 * Route prediction (issue 13, item 1; mt_eval_args.predicted): in a one-token eval each layer's
 * router is applied to the residual stream entering the layer, and its top predictK are written
 * out. The eval's logits and routes do not change; with the attention's output zeroed (so the
 * stream entering a layer is the one its router sees) the prediction is exactly the routing.
 */
import { describe, expect, it } from 'vitest';
import { tinyHParams } from '../fixtures/random-model.js';
import { mapModel, native } from './forward-helpers.js';

const hp = tinyHParams('qwen3moe', { nLayer: 3 });
const K = hp.nExpertUsed;

function decodeStep(m: ReturnType<typeof mapModel>, withPrediction: boolean, predictK = 2 * K) {
  const ctx = native.createContext(m.handle, { nCtx: 32, threads: 2 });
  try {
    const logits = new Float32Array(hp.nVocab);
    native.evalSync(ctx, Int32Array.from([5, 17, 3, 90]), 0, logits);
    const routes = new Int32Array(hp.nLayer * K);
    const predicted = new Int32Array(hp.nLayer * predictK).fill(-1);
    native.evalSync(ctx, Int32Array.of(42), 4, logits, withPrediction ? { routes, predicted, predictK } : { routes });
    return { logits: new Uint32Array(logits.buffer), routes, predicted };
  } finally {
    native.freeContext(ctx);
  }
}

describe('route prediction from the residual stream', () => {
  it('leaves the logits and routes bit for bit, and names predictK distinct experts per layer', () => {
    const m = mapModel(hp, { type: 'Q8_0', seed: 4, routerScale: 8 });
    try {
      const plain = decodeStep(m, false);
      const predicted = decodeStep(m, true);
      expect(predicted.logits).toEqual(plain.logits);
      expect(predicted.routes).toEqual(plain.routes);
      for (let l = 0; l < hp.nLayer; l++) {
        const ids = Array.from(predicted.predicted.subarray(l * 2 * K, (l + 1) * 2 * K));
        expect(new Set(ids).size).toBe(2 * K);
        for (const id of ids) expect(id >= 0 && id < hp.nExpert).toBe(true);
      }
    } finally {
      m.close();
    }
  });

  it('is the routing itself when the attention adds nothing to the stream', () => {
    const m = mapModel(hp, { type: 'F32', seed: 6, routerScale: 8 }, (model) => {
      for (let l = 0; l < hp.nLayer; l++) {
        const t = model.tensors.get(`blk.${l}.attn_output.weight`)!;
        model.bytes.fill(0, t.offset, t.offset + t.byteLength);
      }
    });
    try {
      const { routes, predicted } = decodeStep(m, true, K);
      expect(Array.from(predicted)).toEqual(Array.from(routes)); // both in rank order
    } finally {
      m.close();
    }
  });

  it('is refused on a prompt of several tokens and with a predictK out of range', () => {
    const m = mapModel(hp, { type: 'F32', seed: 6 });
    const ctx = native.createContext(m.handle, { nCtx: 32, threads: 1 });
    try {
      const logits = new Float32Array(hp.nVocab);
      const predicted = new Int32Array(hp.nLayer * hp.nExpert);
      expect(() => native.evalSync(ctx, Int32Array.of(1, 2), 0, logits, { predicted, predictK: 2 })).toThrow(
        /one-token eval/,
      );
      expect(() => native.evalSync(ctx, Int32Array.of(1), 0, logits, { predicted, predictK: hp.nExpert + 1 })).toThrow(
        /predictK in \[1, /,
      );
      expect(() =>
        native.evalSync(ctx, Int32Array.of(1), 0, logits, { predicted: new Int32Array(1), predictK: 2 }),
      ).toThrow(/room for/);
    } finally {
      native.freeContext(ctx);
      m.close();
    }
  });
});
