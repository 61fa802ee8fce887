// deepseek2's multi-head latent attention (MLA), the absorbed form llama.cpp computes for a file with
// attn_k_b / attn_v_b (docs/ARCHS-NEXT.md 2.3; src/reference/forward.ts latentAttention is the spec,
// written as the multi-head attention it equals). For a chunk of n rows:
//
//   [x += the previous layer's MoE]; h = rmsnorm(x, attn_norm)                 [rows]
//   q = Wq h (or qa = Wq_a h), ckr = Wkv_a h                                    [pool]
//   q-LoRA: q = Wq_b rmsnorm(qa, attn_q_a_norm)                                 [rows], [pool]
//   c = rmsnorm(ckr[:kvLora]); k_pe = rope(ckr[kvLora:]); cache row = [c | k_pe];
//   each head's Q[h][kvLora:] = rope(q_pe[h])                                   [rows]
//   Q[h][:kvLora] = K_b[h] q_nope[h]          (a head's query in latent space)  [pool: rows x heads]
//   attn[h] = softmax(scale Q[h] . rows) rows (one cached row per position,
//             shared by every head; the value is its latent part)              [pool]
//   o[h] = V_b[h] attn[h][:kvLora]                                              [pool: rows x heads]
//   proj = Wo o                                                                 [pool]
//
// The cache row is kvLora + rope floats per token and layer (head_dim, with n_head_kv 1), against
// n_head * (nope + rope + vHead) for the decompressed heads. c.q holds the heads' Q [nHead][head_dim].
#include <cstring>
#include "forward.h"
#include "ops_elementwise.h"

namespace mt {
namespace {

Pass& pass_of(void* arg) { return *static_cast<Pass*>(arg); }

int64_t query_dim(const mt_hparams& hp) { return hp.mla_nope + hp.rope_dims; }

// q (or q-LoRA's qa) and ckr = W h. [pool]
void mla_proj_phase(void* arg, int piece, int nth) {
  Pass& p = pass_of(arg);
  mt_context& c = *p.c;
  const Matrix* w[2] = {&p.L->q, &p.L->k};
  float* y[2] = {p.m->hp.mla_q_lora > 0 ? c.mla_qa : c.mla_q, c.k};
  Segment segs[2];
  for (int s = 0; s < 2; s++) segs[s] = Segment{w[s]->rows, w[s]->cols * (p.n + 2)};
  for_piece_rows(segs, 2, piece, nth, [&](int s, int64_t r0, int64_t r1) {
    project(*w[s], c.act_h[w[s]->type], p.n, y[s], w[s]->rows, r0, r1);
  });
}

// q-LoRA: qa normed and prepared for Wq_b. [rows]
void mla_qa_norm_phase(void* arg, int ith, int nth) {
  Pass& p = pass_of(arg);
  mt_context& c = *p.c;
  const mt_hparams& hp = p.m->hp;
  const Matrix& w = p.L->q_b;
  const size_t stride = mt_act_row_bytes(w.type, w.cols);
  int64_t b, e;
  share(p.n, ith, nth, &b, &e);
  for (int64_t r = b; r < e; r++) {
    float* qa = c.mla_qa + r * hp.mla_q_lora;
    rms_norm(qa, p.L->q_a_norm, hp.mla_q_lora, hp.rms_eps, qa);
    mt_act_prepare(w.type, qa, w.cols, c.mla_act_qa + size_t(r) * stride);
  }
}

// q = Wq_b (normed qa). [pool]
void mla_qb_phase(void* arg, int piece, int nth) {
  Pass& p = pass_of(arg);
  const Matrix& w = p.L->q_b;
  const Segment seg{w.rows, w.cols * (p.n + 2)};
  for_piece_rows(&seg, 1, piece, nth,
                 [&](int, int64_t r0, int64_t r1) { project(w, p.c->mla_act_qa, p.n, p.c->mla_q, w.rows, r0, r1); });
}

// The cache row [rmsnorm(latent) | roped k_pe] at the row's position; each head's roped q_pe
// into the rope part of its Q. [rows]
void mla_post_phase(void* arg, int ith, int nth) {
  Pass& p = pass_of(arg);
  mt_context& c = *p.c;
  const mt_hparams& hp = p.m->hp;
  const int64_t kvl = hp.mla_kv_lora, rope = hp.rope_dims, hd = hp.head_dim, qd = query_dim(hp);
  const int64_t half = hd / 2;
  int64_t b, e;
  share(p.n, ith, nth, &b, &e);
  for (int64_t r = b; r < e; r++) {
    const float *cos = c.rope_cos + r * half, *sin = c.rope_sin + r * half;
    float* row = c.k_cache + (layer_cache_row(c, p.layer) + size_t(p.kv_at[r]) + size_t(p.pos[r])) * size_t(hd);
    const float* ckr = c.k + r * hd;
    rms_norm(ckr, p.L->kv_a_norm, kvl, hp.rms_eps, row);
    std::memcpy(row + kvl, ckr + kvl, size_t(rope) * sizeof(float));
    rope_apply(row + kvl, 1, int32_t(rope), int32_t(rope), cos, sin, hp.rope_neox != 0);
    for (int64_t h = 0; h < hp.n_head; h++) {
      float* q_pe = c.q + (r * hp.n_head + h) * hd + kvl;
      std::memcpy(q_pe, c.mla_q + r * hp.n_head * qd + h * qd + hp.mla_nope, size_t(rope) * sizeof(float));
      rope_apply(q_pe, 1, int32_t(rope), int32_t(rope), cos, sin, hp.rope_neox != 0);
    }
  }
}

// Visits the (row, head) pairs [b, e) of this thread's contiguous share.
template <class Visit>
void for_row_heads(const Pass& p, int ith, int nth, Visit&& visit) {
  int64_t b, e;
  share(int64_t(p.n) * p.m->hp.n_head, ith, nth, &b, &e);
  for (int64_t i = b; i < e; i++) visit(i / p.m->hp.n_head, i % p.m->hp.n_head, i);
}

// out [m.rows] = one head's matrix (head h of heads) times x [m.cols], x prepared into act first.
void head_matvec(const Experts& heads, int64_t h, const float* x, uint8_t* act, float* out) {
  const Matrix m = heads.of(int32_t(h));
  mt_act_prepare(m.type, x, m.cols, act);
  mt_matvec_rows(m.type, m.data, m.cols, act, out, 0, m.rows);
}

// Q[h][:kvLora] = K_b[h] q_nope[h]: the head's query absorbed into latent space. [pool]
void mla_absorb_phase(void* arg, int ith, int nth) {
  Pass& p = pass_of(arg);
  mt_context& c = *p.c;
  const mt_hparams& hp = p.m->hp;
  const int64_t qd = query_dim(hp);
  for_row_heads(p, ith, nth, [&](int64_t r, int64_t h, int64_t i) {
    head_matvec(p.L->k_b, h, c.mla_q + (r * hp.n_head + h) * qd, c.mla_act_head + size_t(i) * c.mla_act_head_bytes,
                c.q + (r * hp.n_head + h) * hp.head_dim);
  });
}

// o[h] = V_b[h] (the head's softmax-weighted latents). [pool]
void mla_values_phase(void* arg, int ith, int nth) {
  Pass& p = pass_of(arg);
  mt_context& c = *p.c;
  const mt_hparams& hp = p.m->hp;
  for_row_heads(p, ith, nth, [&](int64_t r, int64_t h, int64_t i) {
    head_matvec(p.L->v_b, h, c.attn + (r * hp.n_head + h) * hp.head_dim,
                c.mla_act_head + size_t(i) * c.mla_act_head_bytes, c.mla_o + (r * hp.n_head + h) * hp.mla_v_head);
  });
}

}  // namespace

void mla_attention_layer(Pass& p) {
  const bool rows_parallel = p.n > 1;
  const bool heads_parallel = int64_t(p.n) * p.m->hp.n_head > 1;
  run_phase(p, attn_norm_phase, rows_parallel);
  run_phase(p, mla_proj_phase, true);
  if (p.m->hp.mla_q_lora > 0) {
    run_phase(p, mla_qa_norm_phase, rows_parallel);
    run_phase(p, mla_qb_phase, true);
  }
  run_phase(p, mla_post_phase, rows_parallel);
  run_phase(p, mla_absorb_phase, heads_parallel);
  run_phase(p, attention_phase, true, Pieces::kOnePerThread);  // its scores scratch is one row per thread
  run_phase(p, mla_values_phase, heads_parallel);
  run_phase(p, attn_prep_phase, rows_parallel);
  run_phase(p, attn_out_phase, true);
}

}  // namespace mt
