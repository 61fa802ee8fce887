// The attention half of a layer, for a chunk of n rows (forward_eval.cc runs it before the MoE half):
//
//   [x += the previous layer's MoE]; h = rmsnorm(x, attn_norm)      [rows]
//   q, k, v = W h                                                   [pool]
//   biases, q/k norms, RoPE; k, v into the row's sequence's cache    [rows]
//   attn = softmax(q K / sqrt(hd) [, sink]) V                        [pool]
//   proj = Wo attn (added to x by the MoE half's norm phase)         [pool]
//
// deepseek2's latent attention (MLA) replaces the middle phases: forward_mla.cc.
#include <algorithm>
#include <cmath>
#include <cstring>
#include "forward.h"
#include "ops_elementwise.h"

namespace mt {
namespace {

Pass& pass_of(void* arg) { return *static_cast<Pass*>(arg); }

// Layer `target`'s router on the residual stream now (one row: the stream entering p.layer):
// rmsnorm with target's ffn_norm, the router's scores, their top k into ids. Scratch of its own:
// nothing the layer's compute reads is touched.
void predict_layer(Pass& p, int32_t target, int32_t k, int32_t* ids) {
  mt_context& c = *p.c;
  const LayerWeights& L = p.m->layers[size_t(target)];
  const int64_t E = p.m->hp.n_embd;
  const Matrix& w = L.router;
  rms_norm(p.x, L.ffn_norm, E, p.m->hp.rms_eps, c.pred_h.data());
  mt_act_prepare(w.type, c.pred_h.data(), E, c.pred_act.data());
  mt_matvec_rows(w.type, w.data, w.cols, c.pred_act.data(), c.pred_scores.data(), 0, w.rows);
  if (L.router_bias != nullptr)
    for (int64_t i = 0; i < w.rows; i++) c.pred_scores[size_t(i)] += L.router_bias[i];
  // The experts the routing would choose: softmax and sigmoid keep the logits' order, a selection
  // bias or expert groups do not (route_phase's rule, forward_moe.cc).
  const mt_hparams& hp = p.m->hp;
  const float* scores = c.pred_scores.data();
  if (L.exp_probs_b != nullptr || hp.expert_groups > 1) {
    expert_probabilities(hp, c.pred_scores.data());
    scores = selection_scores(hp, L, c.pred_scores.data(), c.pred_sel.data());
  }
  top_k(scores, int32_t(w.rows), k, ids);
}

// At a layer's start in a one-token eval: the eval's predictions (mt_eval_args.predicted) and the
// expert source's one-layer-ahead guess (mt_expert_source.predicted, for its prefetch).
// MoE layers only (a dense layer makes none, and has no router to predict); indexes are MoE layers'.
void predict_routes(Pass& p) {
  const int32_t n_moe = mt_moe_layers(&p.m->hp), dense = p.m->hp.n_layer_dense_lead;
  if (p.moe < 0) return;
  if (p.predicted != nullptr) {
    const int32_t from = p.moe == 0 ? 0 : p.moe + p.predict_ahead, to = p.moe + p.predict_ahead;
    for (int32_t t = from; t <= to && t < n_moe; t++)
      predict_layer(p, dense + t, p.predict_k, p.predicted + size_t(t) * size_t(p.predict_k));
  }
  const mt_expert_source* s = p.experts;
  if (s != nullptr && s->predicted != nullptr && s->predict_k > 0 && p.moe + 1 < n_moe) {
    const int32_t k = s->predict_k < p.m->hp.n_expert ? s->predict_k : p.m->hp.n_expert;
    predict_layer(p, dense + p.moe + 1, k, p.c->pred_ids.data());
    s->predicted(s->self, p.moe + 1, p.c->pred_ids.data(), k);
  }
}

}  // namespace

// [x += moe of the previous layer]; [the layer's routes predicted]; h = rmsnorm(x, attn_norm),
// prepared for q, k, v. [rows]
void attn_norm_phase(void* arg, int ith, int nth) {
  Pass& p = pass_of(arg);
  mt_context& c = *p.c;
  const int64_t E = p.m->hp.n_embd;
  int64_t b, e;
  share(p.n, ith, nth, &b, &e);
  for (int64_t r = b; r < e; r++) {
    if (p.combine_pending) combine_row(p, int32_t(r));
    if (p.n == 1) predict_routes(p);  // a one-token eval: r = 0, on the caller
    rms_norm(p.x + r * E, p.L->attn_norm, E, p.m->hp.rms_eps, c.h + r * E);
    for (const Matrix* w : {&p.L->q, &p.L->k, &p.L->v}) {
      if (w->data == nullptr) continue;                      // MLA has no attn_v
      if (w != &p.L->q && w->type == p.L->q.type) continue;  // prepared already
      const size_t stride = mt_act_row_bytes(w->type, E);
      mt_act_prepare(w->type, c.h + r * E, E, c.act_h[w->type] + size_t(r) * stride);
    }
  }
}

// q [n, qDim], k, v [n, kvDim] = W h. [pool]
void qkv_phase(void* arg, int piece, int nth) {
  Pass& p = pass_of(arg);
  mt_context& c = *p.c;
  const Matrix* w[3] = {&p.L->q, &p.L->k, &p.L->v};
  float* y[3] = {c.q, c.k, c.v};
  Segment segs[3];
  for (int s = 0; s < 3; s++) segs[s] = Segment{w[s]->rows, w[s]->cols * (p.n + 2)};
  for_piece_rows(segs, 3, piece, nth, [&](int s, int64_t r0, int64_t r1) {
    project(*w[s], c.act_h[w[s]->type], p.n, y[s], w[s]->rows, r0, r1);
  });
}

// The first cache row of `layer`: each layer holds n_seq * n_ctx rows.
size_t layer_cache_row(const mt_context& c, int32_t layer) { return size_t(layer) * size_t(c.n_seq) * size_t(c.n_ctx); }

void add(float* y, const float* b, int64_t n) {
  for (int64_t i = 0; i < n; i++) y[i] += b[i];
}

// Biases, q/k norms, RoPE; k and v of row r into its sequence's cache at its position. [rows]
void qk_post_phase(void* arg, int ith, int nth) {
  Pass& p = pass_of(arg);
  mt_context& c = *p.c;
  const mt_hparams& hp = p.m->hp;
  const LayerWeights& L = *p.L;
  const int64_t hd = hp.head_dim, Q = hp.n_head * hd, KV = hp.n_head_kv * hd, half = hd / 2;
  int64_t b, e;
  share(p.n, ith, nth, &b, &e);
  for (int64_t r = b; r < e; r++) {
    float *q = c.q + r * Q, *k = c.k + r * KV, *v = c.v + r * KV;
    if (hp.attn_bias) {
      add(q, L.q_bias, Q);
      add(k, L.k_bias, KV);
      add(v, L.v_bias, KV);
    }
    if (hp.qk_norm == MT_QK_NORM_FULL) {
      rms_norm(q, L.q_norm, Q, hp.rms_eps, q);
      rms_norm(k, L.k_norm, KV, hp.rms_eps, k);
    } else if (hp.qk_norm == MT_QK_NORM_HEAD) {
      for (int64_t h = 0; h < hp.n_head; h++) rms_norm(q + h * hd, L.q_norm, hd, hp.rms_eps, q + h * hd);
      for (int64_t h = 0; h < hp.n_head_kv; h++) rms_norm(k + h * hd, L.k_norm, hd, hp.rms_eps, k + h * hd);
    }
    rope_apply(q, hp.n_head, int32_t(hd), hp.rope_dims, c.rope_cos + r * half, c.rope_sin + r * half,
               hp.rope_neox != 0);
    rope_apply(k, hp.n_head_kv, int32_t(hd), hp.rope_dims, c.rope_cos + r * half, c.rope_sin + r * half,
               hp.rope_neox != 0);
    const size_t at = (layer_cache_row(c, p.layer) + size_t(p.kv_at[r]) + size_t(p.pos[r])) * size_t(KV);
    std::memcpy(c.k_cache + at, k, size_t(KV) * sizeof(float));
    std::memcpy(c.v_cache + at, v, size_t(KV) * sizeof(float));
  }
}

// attn [r, head] = softmax(q . K / sqrt(hd) [, sink]) V over row r's sequence's positions <= its own
// (and within the window on a sliding-window layer). [pool]
// Prefill: rows interleaved over threads (causal cost grows with r); decode: heads split
// contiguously, so the query heads of one KV head mostly stay on one thread.
void attention_phase(void* arg, int ith, int nth) {
  Pass& p = pass_of(arg);
  mt_context& c = *p.c;
  const mt_hparams& hp = p.m->hp;
  const int64_t Q = int64_t(hp.n_head) * hp.head_dim, KV = int64_t(hp.n_head_kv) * hp.head_dim;
  const size_t layer_at = layer_cache_row(c, p.layer);
  float* scores = c.scores + size_t(ith) * size_t(c.n_ctx);  // one piece per thread: ith < n_threads
  auto heads = [&](int64_t r, int64_t h0, int64_t h1) {
    // Keys [first, pos]: all, or on a sliding-window layer the last sliding_window of them.
    const int32_t first = p.L->windowed ? std::max(0, p.pos[r] + 1 - hp.sliding_window) : 0;
    const size_t at = (layer_at + size_t(p.kv_at[r]) + size_t(first)) * size_t(KV);
    attention_heads(c.q + r * Q, c.k_cache + at, c.v_cache + at, hp.n_head, hp.n_head_kv, hp.head_dim,
                    p.pos[r] + 1 - first, int32_t(h0), int32_t(h1), float(hp.attn_scale), scores, c.attn + r * Q,
                    p.L->sinks);
  };
  if (p.n >= nth) {
    for (int64_t r = ith; r < p.n; r += nth) heads(r, 0, hp.n_head);
    return;
  }
  int64_t b, e;
  share(int64_t(p.n) * hp.n_head, ith, nth, &b, &e);
  for (int64_t i = b; i < e;) {
    const int64_t r = i / hp.n_head, h1 = std::min<int64_t>(e - r * hp.n_head, hp.n_head);
    heads(r, i % hp.n_head, h1);
    i = r * hp.n_head + h1;
  }
}

// attn rows prepared for attn_output. [rows]
void attn_prep_phase(void* arg, int ith, int nth) {
  Pass& p = pass_of(arg);
  const Matrix& o = p.L->o;
  const size_t stride = mt_act_row_bytes(o.type, o.cols);
  const float* in = p.c->mla_o != nullptr ? p.c->mla_o : p.c->attn;  // MLA: the heads' V_b outputs
  int64_t b, e;
  share(p.n, ith, nth, &b, &e);
  for (int64_t r = b; r < e; r++) mt_act_prepare(o.type, in + r * o.cols, o.cols, p.c->act_attn + size_t(r) * stride);
}

// proj [n, nEmbd] = Wo attn; added to x by the MoE half's first phase. [pool]
void attn_out_phase(void* arg, int piece, int nth) {
  Pass& p = pass_of(arg);
  const Matrix& o = p.L->o;
  const Segment seg{o.rows, o.cols * (p.n + 2)};
  for_piece_rows(&seg, 1, piece, nth,
                 [&](int, int64_t r0, int64_t r1) { project(o, p.c->act_attn, p.n, p.c->proj, o.rows, r0, r1); });
}

void attention_layer(Pass& p) {
  if (p.m->hp.mla_kv_lora > 0) return mla_attention_layer(p);
  const bool rows_parallel = p.n > 1;
  run_phase(p, attn_norm_phase, rows_parallel);
  run_phase(p, qkv_phase, true);
  run_phase(p, qk_post_phase, rows_parallel);
  run_phase(p, attention_phase, true, Pieces::kOnePerThread);  // its scores scratch is one row per thread
  run_phase(p, attn_prep_phase, rows_parallel);
  run_phase(p, attn_out_phase, true);
}

}  // namespace mt
