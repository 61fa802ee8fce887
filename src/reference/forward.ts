/**
 * The reference forward pass: plain f32 TypeScript, read top to bottom. This file is the spec
 * (docs/FORWARD.md summarises it); the native pass is tested against it.
 *
 * One session = one sequence with its KV cache. eval() appends tokens at the next positions and
 * returns every row's logits and routed experts.
 */
import { InvalidOptionError, LimitExceededError } from '../core/errors.js';
import { firstMoeLayer, type HParams } from '../model/types.js';
import { matVec, rmsNorm, rotateHead, sigmoid, silu, softmax, swigluOai } from './math.js';
import { ropeTable } from '../model/rope.js';
import { route } from './routing.js';
import { WeightCache, type ReferenceWeights } from './weights.js';

export type { ReferenceWeights } from './weights.js';

export interface ReferenceEval {
  /** logits[row] [nVocab] */
  logits: Float32Array[];
  /** routes[row][moeLayer] = expert ids in router rank order (the MoE layers only: moeLayers in types.ts) */
  routes: number[][][];
}

export interface ReferenceSession {
  readonly position: number;
  /**
   * forcedRoutes[row][moeLayer]: the experts each row runs instead of the router's top-k (a trace's routing,
   * EngineOptions.routesFrom), weighted by the router's probabilities renormalised over them (routing.ts).
   */
  eval(tokens: number[], forcedRoutes?: readonly (readonly (readonly number[])[])[]): ReferenceEval;
}

export function createReferenceSession(weights: ReferenceWeights, nCtx: number): ReferenceSession {
  const hp = weights.hparams;
  const w = new WeightCache(weights);
  const kvDim = hp.nHeadKv * hp.headDim;
  const rotation = ropeTable(hp);
  // KV cache per layer: [nCtx, kvDim]
  const keys = Array.from({ length: hp.nLayer }, () => new Float32Array(nCtx * kvDim));
  const values = Array.from({ length: hp.nLayer }, () => new Float32Array(nCtx * kvDim));
  let position = 0;

  function evalRow(
    token: number,
    pos: number,
    forced?: readonly (readonly number[])[],
  ): { logits: Float32Array; routes: number[][] } {
    if (!Number.isInteger(token) || token < 0 || token >= hp.nVocab) {
      throw new InvalidOptionError('token', `an id in [0, ${hp.nVocab})`, token);
    }
    // x [nEmbd] = row `token` of token_embd [nEmbd, nVocab]
    const x = w.get('token_embd.weight').slice(token * hp.nEmbd, (token + 1) * hp.nEmbd);
    const routes: number[][] = [];
    const dense = firstMoeLayer(hp);
    for (let layer = 0; layer < hp.nLayer; layer++) {
      attention(x, layer, pos);
      if (layer < dense) denseFfn(x, layer);
      else routes.push(moe(x, layer, forced?.[layer - dense]));
    }
    const h = rmsNorm(x, w.get('output_norm.weight'), hp.rmsEps);
    const head = hp.tiedOutput ? 'token_embd.weight' : 'output.weight';
    return { logits: matVec(w.get(head), hp.nVocab, hp.nEmbd, h), routes };
  }

  /** x += Wo attention(rmsnorm(x)) with this row's k, v appended to the cache at pos. */
  function attention(x: Float32Array, layer: number, pos: number): void {
    if (hp.mla) return latentAttention(x, layer, pos);
    const p = `blk.${layer}.`;
    const qDim = hp.nHead * hp.headDim;
    const h = rmsNorm(x, w.get(p + 'attn_norm.weight'), hp.rmsEps);
    const q = matVec(w.get(p + 'attn_q.weight'), qDim, hp.nEmbd, h);
    const k = matVec(w.get(p + 'attn_k.weight'), kvDim, hp.nEmbd, h);
    const v = matVec(w.get(p + 'attn_v.weight'), kvDim, hp.nEmbd, h);
    if (hp.attnBias) {
      addInPlace(q, w.get(p + 'attn_q.bias'));
      addInPlace(k, w.get(p + 'attn_k.bias'));
      addInPlace(v, w.get(p + 'attn_v.bias'));
    }
    if (hp.qkNorm === 'full') {
      rmsNorm(q, w.get(p + 'attn_q_norm.weight'), hp.rmsEps, q);
      rmsNorm(k, w.get(p + 'attn_k_norm.weight'), hp.rmsEps, k);
    } else if (hp.qkNorm === 'head') {
      normEachHead(q, hp.nHead, w.get(p + 'attn_q_norm.weight'));
      normEachHead(k, hp.nHeadKv, w.get(p + 'attn_k_norm.weight'));
    }
    for (let head = 0; head < hp.nHead; head++) rotateHead(q, head * hp.headDim, rotation, pos, hp.ropeType);
    for (let head = 0; head < hp.nHeadKv; head++) rotateHead(k, head * hp.headDim, rotation, pos, hp.ropeType);
    keys[layer].set(k, pos * kvDim);
    values[layer].set(v, pos * kvDim);

    const out = new Float32Array(qDim);
    const groupSize = hp.nHead / hp.nHeadKv;
    const scale = 1 / Math.sqrt(hp.headDim);
    // Keys [first, pos]: all of them, or the last `window` on a sliding-window layer.
    const first = windowed(layer) ? Math.max(0, pos + 1 - hp.slidingWindow!.window) : 0;
    const sinks = hp.attnSinks ? w.get(p + 'attn_sinks.weight') : undefined;
    // scores [keys (+ the head's sink logit, which takes probability and gives no value)]
    const scores = new Float32Array(pos + 1 - first + (sinks ? 1 : 0));
    for (let head = 0; head < hp.nHead; head++) {
      const kvOffset = Math.floor(head / groupSize) * hp.headDim;
      const qOffset = head * hp.headDim;
      for (let j = first; j <= pos; j++) {
        let dot = 0;
        for (let d = 0; d < hp.headDim; d++) dot += q[qOffset + d] * keys[layer][j * kvDim + kvOffset + d];
        scores[j - first] = dot * scale;
      }
      if (sinks) scores[pos + 1 - first] = sinks[head]; // not scaled (llama.cpp's soft_max with sinks)
      softmax(scores);
      for (let j = first; j <= pos; j++) {
        const s = scores[j - first];
        for (let d = 0; d < hp.headDim; d++) out[qOffset + d] += s * values[layer][j * kvDim + kvOffset + d];
      }
    }
    const y = matVec(w.get(p + 'attn_output.weight'), hp.nEmbd, qDim, out);
    if (hp.attnOutBias) addInPlace(y, w.get(p + 'attn_output.bias'));
    addInPlace(x, y);
  }

  /**
   * Multi-head latent attention (deepseek2), written out as the multi-head attention it equals: the cache
   * keeps [c | k_pe] per position (c = rmsnorm(the latent), k_pe roped, shared by every head); head h's
   * key is [K_b[h]^T c | k_pe] and its value V_b[h] c, its query [q_nope | roped q_pe] from Wq h or
   * Wq_b rmsnorm(Wq_a h). (The native pass multiplies K_b into the query instead: the same sums, reordered.)
   */
  function latentAttention(x: Float32Array, layer: number, pos: number): void {
    const p = `blk.${layer}.`;
    const { qLora, kvLora, nope, vHead } = hp.mla!;
    const rope = rotation.dims;
    const kMla = nope + rope;
    const h = rmsNorm(x, w.get(p + 'attn_norm.weight'), hp.rmsEps);
    const q =
      qLora > 0
        ? matVec(
            w.get(p + 'attn_q_b.weight'),
            hp.nHead * kMla,
            qLora,
            rmsNorm(
              matVec(w.get(p + 'attn_q_a.weight'), qLora, hp.nEmbd, h),
              w.get(p + 'attn_q_a_norm.weight'),
              hp.rmsEps,
            ),
          )
        : matVec(w.get(p + 'attn_q.weight'), hp.nHead * kMla, hp.nEmbd, h);
    const ckr = matVec(w.get(p + 'attn_kv_a_mqa.weight'), kvLora + rope, hp.nEmbd, h);
    const row = new Float32Array(kvLora + rope);
    row.set(rmsNorm(ckr.subarray(0, kvLora), w.get(p + 'attn_kv_a_norm.weight'), hp.rmsEps));
    row.set(ckr.subarray(kvLora), kvLora);
    rotateHead(row, kvLora, rotation, pos, hp.ropeType);
    for (let head = 0; head < hp.nHead; head++) rotateHead(q, head * kMla + nope, rotation, pos, hp.ropeType);
    keys[layer].set(row, pos * kvDim);
    const kB = w.get(p + 'attn_k_b.weight'); // [nHead][kvLora][nope]
    const vB = w.get(p + 'attn_v_b.weight'); // [nHead][vHead][kvLora]
    const scale = hp.attnScale ?? 1 / Math.sqrt(kMla);
    const out = new Float32Array(hp.nHead * vHead);
    const scores = new Float32Array(pos + 1);
    for (let head = 0; head < hp.nHead; head++) {
      const qh = q.subarray(head * kMla, (head + 1) * kMla);
      for (let j = 0; j <= pos; j++) {
        const c = keys[layer].subarray(j * kvDim, j * kvDim + kvLora);
        let dot = 0;
        for (let d = 0; d < nope; d++) {
          let kd = 0; // (K_b[h]^T c)[d]
          for (let i = 0; i < kvLora; i++) kd += kB[(head * kvLora + i) * nope + d] * c[i];
          dot += qh[d] * kd;
        }
        for (let d = 0; d < rope; d++) dot += qh[nope + d] * keys[layer][j * kvDim + kvLora + d];
        scores[j] = dot * scale;
      }
      softmax(scores);
      for (let j = 0; j <= pos; j++) {
        const c = keys[layer].subarray(j * kvDim, j * kvDim + kvLora);
        for (let e = 0; e < vHead; e++) {
          let v = 0; // (V_b[h] c)[e]
          for (let i = 0; i < kvLora; i++) v += vB[(head * vHead + e) * kvLora + i] * c[i];
          out[head * vHead + e] += scores[j] * v;
        }
      }
    }
    addInPlace(x, matVec(w.get(p + 'attn_output.weight'), hp.nEmbd, hp.nHead * vHead, out));
  }

  /** llama.cpp's set_swa_pattern(period): layer l is windowed iff period is 0 or l % period < period - 1. */
  function windowed(layer: number): boolean {
    const swa = hp.slidingWindow;
    return swa !== undefined && (swa.period === 0 || layer % swa.period < swa.period - 1);
  }

  function normEachHead(v: Float32Array, heads: number, weight: Float32Array): void {
    for (let head = 0; head < heads; head++) {
      const slice = v.subarray(head * hp.headDim, (head + 1) * hp.headDim);
      rmsNorm(slice, weight, hp.rmsEps, slice);
    }
  }

  /**
   * x += sum over the routed experts of w_e * expert_e(rmsnorm(x)) (+ the shared expert). Returns the route.
   * forced: run these experts instead of the top-k, weighted by the arch's rule renormalised over them (routing.ts).
   */
  function moe(x: Float32Array, layer: number, forced?: readonly number[]): number[] {
    const p = `blk.${layer}.`;
    const h = rmsNorm(x, w.get(p + `${hp.ffnNorm ?? 'ffn_norm'}.weight`), hp.rmsEps);
    const logits = matVec(w.get(p + 'ffn_gate_inp.weight'), hp.nExpert, hp.nEmbd, h);
    if (hp.routerBias) addInPlace(logits, w.get(p + 'ffn_gate_inp.bias'));
    const bias = hp.expertBias ? w.get(p + 'exp_probs_b.bias') : undefined;
    const { ids: chosen, weights } = route(hp, logits, bias, forced);
    const sum = new Float32Array(hp.nEmbd);
    chosen.forEach((expert, rank) => {
      const y = expertFfn(
        h,
        p + 'ffn_gate_exps.weight',
        p + 'ffn_up_exps.weight',
        p + 'ffn_down_exps.weight',
        hp.nFfExp,
        expert,
      );
      const weight = weights[rank];
      for (let i = 0; i < hp.nEmbd; i++) sum[i] += weight * y[i];
    });
    if (hp.sharedExpert) {
      const y = expertFfn(
        h,
        p + 'ffn_gate_shexp.weight',
        p + 'ffn_up_shexp.weight',
        p + 'ffn_down_shexp.weight',
        hp.nFfShexp,
        0,
      );
      // qwen2moe scales it by its sigmoid gate; glm4moe's has none (sharedExpertGate false).
      let g = 1;
      if (hp.sharedExpertGate !== false) {
        const gateWeights = w.get(p + 'ffn_gate_inp_shexp.weight');
        let gate = 0;
        for (let i = 0; i < hp.nEmbd; i++) gate += gateWeights[i] * h[i];
        g = sigmoid(gate);
      }
      for (let i = 0; i < hp.nEmbd; i++) sum[i] += g * y[i];
    }
    addInPlace(x, sum);
    return chosen;
  }

  /** A leading dense layer: x += Down (silu(Gate h) * (Up h)), h = rmsnorm(x), the FFN of nFf. */
  function denseFfn(x: Float32Array, layer: number): void {
    const p = `blk.${layer}.`;
    const h = rmsNorm(x, w.get(p + `${hp.ffnNorm ?? 'ffn_norm'}.weight`), hp.rmsEps);
    const y = expertFfn(h, p + 'ffn_gate.weight', p + 'ffn_up.weight', p + 'ffn_down.weight', hp.denseLayers!.nFf, 0);
    addInPlace(x, y);
  }

  /** Down [nEmbd, nFf] @ (silu(Gate [nFf, nEmbd] @ h) * (Up [nFf, nEmbd] @ h)); expert e's rows start at e * nFf. */
  function expertFfn(
    h: Float32Array,
    gate: string,
    up: string,
    down: string,
    nFf: number,
    expert: number,
  ): Float32Array {
    const g = matVec(w.get(gate), nFf, hp.nEmbd, h, expert * nFf);
    const u = matVec(w.get(up), nFf, hp.nEmbd, h, expert * nFf);
    // gpt-oss: each expert's biases, rows `expert` of [nFf, nExpert] / [nEmbd, nExpert] (the shared expert has none).
    const biased = hp.expertFfnBias === true && down.endsWith('_exps.weight');
    if (biased) {
      addInPlace(g, w.get(gate.replace('.weight', '.bias')).subarray(expert * nFf, (expert + 1) * nFf));
      addInPlace(u, w.get(up.replace('.weight', '.bias')).subarray(expert * nFf, (expert + 1) * nFf));
    }
    const act = new Float32Array(nFf);
    if (hp.expertAct === 'swiglu_oai') for (let i = 0; i < nFf; i++) act[i] = swigluOai(g[i], u[i]);
    else for (let i = 0; i < nFf; i++) act[i] = silu(g[i]) * u[i];
    const y = matVec(w.get(down), hp.nEmbd, nFf, act, expert * hp.nEmbd);
    if (biased)
      addInPlace(y, w.get(down.replace('.weight', '.bias')).subarray(expert * hp.nEmbd, (expert + 1) * hp.nEmbd));
    return y;
  }

  return {
    get position() {
      return position;
    },
    eval(tokens: number[], forcedRoutes?: readonly (readonly (readonly number[])[])[]): ReferenceEval {
      if (position + tokens.length > nCtx)
        throw new LimitExceededError('contextTokens', position + tokens.length, nCtx);
      const result: ReferenceEval = { logits: [], routes: [] };
      for (const [i, token] of tokens.entries()) {
        const row = evalRow(token, position++, forcedRoutes?.[i]);
        result.logits.push(row.logits);
        result.routes.push(row.routes);
      }
      return result;
    },
  };
}

function addInPlace(a: Float32Array, b: Float32Array): void {
  for (let i = 0; i < a.length; i++) a[i] += b[i];
}

export type { HParams };
