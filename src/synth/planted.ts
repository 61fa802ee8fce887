/**
 * The planted geometry of a synthetic model (D = nEmbd, T topics):
 *
 *   c_t  [D]  topic centroids, orthonormal
 *   u_v  [D]  one unit vector per token, orthogonal to every centroid
 *   embedding   e_v = a c_t(v) + b u_v            (tokens without a topic: b u_v)
 *   router      row e at layer l = g * sum { c_t : t prefers e at l } + noise
 *   LM head     row w = k (alpha c_t(w) + beta u_pred(w))   (tokens without a topic: 0)
 *
 * The residual stream stays near e_v (the sublayers are small), so rmsnorm(x) ~ sqrt(D) e_v / |e_v|:
 * router logits favour the token's topic's experts by ~routerBonusLogits, and the LM head's
 * largest logit is the token's successor in its topic's cycle, ahead of every other word by
 * ~ k sqrt(D) / |e| * beta * (1 - max_w u_v . u_pred(w)).
 */
import { PLANT } from './presets.js';
import { Rng } from './prng.js';
import { attentionContextMaps, ContextField, REALISTIC, realisticRouterWeights, type RoutingKind } from './routing.js';
import type { SynthVocab } from './vocab.js';
import type { HParams } from '../model/types.js';

export class PlantedModel {
  readonly centroids: Float32Array[];
  /** preferred[layer][topic] = expert ids that topic routes to at that layer (planted routing). */
  readonly preferred: number[][][];
  /** Realistic routing: the directions that carry each token's context, and the coefficients. */
  readonly contextDirs: Float32Array[];
  readonly context?: ContextField;
  /** |e_v| for a topic token. */
  readonly embedNorm: number;
  private readonly routerParts = new Map<number, ReturnType<typeof realisticRouterWeights>>();
  private readonly attentionMaps = new Map<number, Float32Array[]>();

  constructor(
    readonly hp: HParams,
    readonly vocab: SynthVocab,
    readonly seed: number,
    readonly routing: RoutingKind,
  ) {
    this.centroids = orthonormal(vocab.cycles.length, hp.nEmbd, new Rng(seed, 'centroids'));
    this.preferred = Array.from({ length: hp.nLayer }, (_, l) =>
      preferredSets(hp, vocab.cycles.length, new Rng(seed, `preferred:${l}`)),
    );
    const realistic = routing === 'realistic';
    this.contextDirs = realistic
      ? orthonormal(REALISTIC.contextDims, hp.nEmbd, new Rng(seed, 'context-dirs'), this.centroids)
      : [];
    if (realistic) this.context = new ContextField(hp.nVocab, vocab.cycles, seed);
    this.embedNorm = Math.hypot(PLANT.topicWeight, PLANT.tokenWeight, realistic ? REALISTIC.contextWeight : 0);
  }

  /** u_v: seeded per token, so the embedding and the LM head rebuild it independently. */
  tokenVector(v: number, out: Float32Array = new Float32Array(this.hp.nEmbd)): Float32Array {
    const rng = new Rng(this.seed, `u:${v}`);
    for (let i = 0; i < out.length; i++) out[i] = rng.normal();
    for (const c of this.centroids) axpy(-dot(c, out), c, out);
    for (const c of this.contextDirs) axpy(-dot(c, out), c, out);
    scale(out, 1 / Math.sqrt(dot(out, out)));
    return out;
  }

  /** Row v of token_embd [D]. */
  embeddingRow(v: number, out: Float32Array): void {
    this.tokenVector(v, out);
    scale(out, PLANT.tokenWeight);
    const topic = this.vocab.topicOf[v];
    if (topic >= 0) axpy(PLANT.topicWeight, this.centroids[topic], out);
    if (this.context) {
      // |context part| ~ contextWeight: m unit-variance coefficients over sqrt(m)
      const s = this.context.coefficients[v];
      const w = REALISTIC.contextWeight / Math.sqrt(s.length);
      this.contextDirs.forEach((d, j) => axpy(w * s[j], d, out));
    }
  }

  /** Row w of output [D]; k = 8 / sqrt(D) keeps logits of similar size across presets. */
  headRow(w: number, out: Float32Array): void {
    out.fill(0);
    const topic = this.vocab.topicOf[w];
    if (topic < 0) return;
    this.tokenVector(this.vocab.pred[w], out);
    scale(out, PLANT.headSuccessor);
    axpy(PLANT.headTopic, this.centroids[topic], out);
    scale(out, 8 / Math.sqrt(this.hp.nEmbd));
  }

  /** Row `expert` of blk.layer.ffn_gate_inp [D]: planted direction plus noise from `rng`. */
  routerRow(layer: number, expert: number, rng: Rng, out: Float32Array): void {
    if (this.routing === 'realistic') return this.realisticRouterRow(layer, expert, rng, out);
    const d = this.hp.nEmbd;
    // noise . h ~ N(0, routerNoise^2) for |h| = sqrt(D)
    rng.fillUniform(out, PLANT.routerNoiseLogits / Math.sqrt(d));
    // c_t . h ~ sqrt(D) a / |e|, so g gives the bonus in logits
    const g = (PLANT.routerBonusLogits * this.embedNorm) / (Math.sqrt(d) * PLANT.topicWeight);
    this.preferred[layer].forEach((experts, topic) => {
      if (experts.includes(expert)) axpy(g, this.centroids[topic], out);
    });
  }

  /**
   * Row r of blk.layer.attn_output [qDim]: uniform noise of std `sd` from `rng`; under realistic
   * routing plus the layer's context writes (routing.ts), d_j[r] o_j summed over j.
   */
  attentionOutputRow(layer: number, row: number, sd: number, rng: Rng, out: Float32Array): void {
    rng.fillUniform(out, sd);
    if (this.routing !== 'realistic') return;
    let maps = this.attentionMaps.get(layer);
    if (!maps) {
      maps = attentionContextMaps(this.seed, layer, out.length);
      this.attentionMaps.set(layer, maps);
    }
    this.contextDirs.forEach((d, j) => axpy(d[row], maps[j], out));
  }

  /** routing.ts's three parts; h = rmsnorm(x) ~ sqrt(D) x / |e|, so a direction of weight a in x reads a sqrt(D) / |e|. */
  private realisticRouterRow(layer: number, expert: number, rng: Rng, out: Float32Array): void {
    const d = this.hp.nEmbd;
    // The token part reads only u_v: noise with the topic and context directions projected out (else
    // it would read a c_t too, a per-topic lean as large as the token part, that no sigma controls).
    rng.fillUniform(out, (REALISTIC.sigmaToken * this.embedNorm) / (Math.sqrt(d) * PLANT.tokenWeight));
    for (const c of this.centroids) axpy(-dot(c, out), c, out);
    for (const c of this.contextDirs) axpy(-dot(c, out), c, out);
    let parts = this.routerParts.get(layer);
    if (!parts) {
      parts = realisticRouterWeights(this.seed, layer, this.centroids.length, this.hp.nExpert);
      this.routerParts.set(layer, parts);
    }
    const gTopic = (REALISTIC.sigmaTopic * this.embedNorm) / (Math.sqrt(d) * PLANT.topicWeight);
    this.centroids.forEach((c, t) => axpy(gTopic * parts.topic[t][expert], c, out));
    // sum_j v_j s_j / sqrt(m) has unit variance; its logit reads contextWeight sqrt(D) / |e| of it
    const gContext = (REALISTIC.sigmaContext * this.embedNorm) / (Math.sqrt(d) * REALISTIC.contextWeight);
    this.contextDirs.forEach((c, j) => axpy(gContext * parts.context[j][expert], c, out));
  }
}

/**
 * Balanced preference: topics are dealt in rounds; each round deals one fresh permutation of
 * the experts in runs of 2k, so every expert is preferred about equally often, and which
 * topics share experts changes from round to round and from layer to layer.
 */
function preferredSets(hp: HParams, nTopics: number, rng: Rng): number[][] {
  const size = Math.min(hp.nExpert, PLANT.preferredPerTopk * hp.nExpertUsed);
  const perRound = Math.floor(hp.nExpert / size);
  const sets: number[][] = [];
  let order: number[] = [];
  for (let t = 0; t < nTopics; t++) {
    const slot = t % perRound;
    if (slot === 0) order = rng.permutation(hp.nExpert);
    sets.push(order.slice(slot * size, (slot + 1) * size));
  }
  return sets;
}

/** `count` orthonormal vectors, orthogonal also to `against` (already orthonormal). */
function orthonormal(count: number, dim: number, rng: Rng, against: readonly Float32Array[] = []): Float32Array[] {
  const out: Float32Array[] = [];
  while (out.length < count) {
    const v = new Float32Array(dim);
    for (let i = 0; i < dim; i++) v[i] = rng.normal();
    for (const c of against) axpy(-dot(c, v), c, v);
    for (const c of out) axpy(-dot(c, v), c, v);
    scale(v, 1 / Math.sqrt(dot(v, v)));
    out.push(v);
  }
  return out;
}

export function dot(a: Float32Array, b: Float32Array): number {
  let s = 0;
  for (let i = 0; i < a.length; i++) s += a[i] * b[i];
  return s;
}

/** y += alpha x */
function axpy(alpha: number, x: Float32Array, y: Float32Array): void {
  for (let i = 0; i < y.length; i++) y[i] += alpha * x[i];
}

function scale(v: Float32Array, s: number): void {
  for (let i = 0; i < v.length; i++) v[i] *= s;
}
