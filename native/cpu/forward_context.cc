// mt_context_create: one zeroed allocation holds the f32 KV cache and every scratch buffer
// (sized for a chunk of rows_max rows), so eval never allocates.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <new>
#include "forward.h"

namespace {

// Lays buffers out 64-byte aligned: first with base == nullptr to measure, then for real.
struct Carver {
  uint8_t* base = nullptr;
  size_t offset = 0;
  template <class T>
  T* take(size_t count) {
    offset = (offset + 63) / 64 * 64;
    T* p = base != nullptr ? reinterpret_cast<T*>(base + offset) : nullptr;
    offset += count * sizeof(T);
    return p;
  }
};

// Bytes of one prepared row of cols for the widest of the given matrices' types.
template <class Pick>
size_t act_row_max(const mt_model& m, int64_t cols, Pick pick) {
  size_t most = 0;
  for (const mt::LayerWeights& L : m.layers) {
    const mt::Matrix& w = pick(L);
    if (w.data != nullptr) most = std::max(most, mt_act_row_bytes(w.type, cols));
  }
  return most;
}

// MLA's per-row buffers (forward.h): the projected query, q-LoRA's rank, each head's prepared input
// of K_b (q_nope) or V_b (its latent output), the heads' outputs.
void layout_mla(mt_context* c, Carver& a) {
  const mt_model& m = *c->model;
  const mt_hparams& hp = m.hp;
  const size_t R = size_t(c->rows_max), H = size_t(hp.n_head);
  c->mla_q = a.take<float>(R * H * size_t(hp.mla_nope + hp.rope_dims));
  if (hp.mla_q_lora > 0) {
    c->mla_qa = a.take<float>(R * size_t(hp.mla_q_lora));
    c->mla_act_qa = a.take<uint8_t>(
        R * act_row_max(m, hp.mla_q_lora, [](const mt::LayerWeights& L) -> const mt::Matrix& { return L.q_b; }));
  }
  c->mla_act_head_bytes = std::max(
      act_row_max(m, hp.mla_nope, [](const mt::LayerWeights& L) -> const mt::Matrix& { return L.k_b.first; }),
      act_row_max(m, hp.mla_kv_lora, [](const mt::LayerWeights& L) -> const mt::Matrix& { return L.v_b.first; }));
  c->mla_act_head_bytes = (c->mla_act_head_bytes + 63) / 64 * 64;
  c->mla_act_head = a.take<uint8_t>(R * H * c->mla_act_head_bytes);
  c->mla_o = a.take<float>(R * H * size_t(hp.mla_v_head));
}

void layout(mt_context* c, Carver& a) {
  const mt_model& m = *c->model;
  const mt_hparams& hp = m.hp;
  const size_t R = size_t(c->rows_max), E = size_t(hp.n_embd), K = size_t(hp.n_expert_used);
  const size_t Q = size_t(hp.n_head) * size_t(hp.head_dim), KV = size_t(hp.n_head_kv) * size_t(hp.head_dim);
  const size_t routed = R * K, slots = routed + (hp.shared_expert || hp.n_layer_dense_lead > 0 ? R : 0);
  const size_t cache_rows = size_t(c->n_seq) * size_t(c->n_ctx);
  c->k_cache = a.take<float>(size_t(hp.n_layer) * cache_rows * KV);
  // MLA: the value is a view of the cached row (its latent): no V cache.
  c->v_cache = hp.mla_kv_lora > 0 ? c->k_cache : a.take<float>(size_t(hp.n_layer) * cache_rows * KV);
  c->row_pos = a.take<int32_t>(size_t(c->group_rows_max));
  c->row_kv = a.take<int32_t>(size_t(c->group_rows_max));
  c->logit_local = a.take<int32_t>(size_t(c->group_rows_max));
  c->x = a.take<float>(size_t(c->group_rows_max) * E);  // a group of chunks' residual rows (forward_eval.cc)
  c->h = a.take<float>(R * E);
  c->proj = a.take<float>(R * E);
  c->q = a.take<float>(R * Q);
  c->attn = a.take<float>(R * Q);
  c->k = a.take<float>(R * KV);
  c->v = a.take<float>(R * KV);
  c->rope_cos = a.take<float>(R * size_t(hp.head_dim / 2));
  c->rope_sin = a.take<float>(R * size_t(hp.head_dim / 2));
  // h is prepared once per weight type that reads it: q, k, v, router, gate/up, output.
  bool reads_h[mt::kTypeIds] = {};
  reads_h[m.output.type] = true;
  for (const mt::LayerWeights& L : m.layers) {
    for (const mt::Matrix* w : {&L.q, &L.k, &L.v, &L.router, &L.gate.first, &L.shexp_gate})
      if (w->data != nullptr) reads_h[w->type] = true;
  }
  if (hp.mla_kv_lora > 0) layout_mla(c, a);
  for (int t = 0; t < mt::kTypeIds; t++)
    c->act_h[t] = reads_h[t] ? a.take<uint8_t>(R * mt_act_row_bytes(t, hp.n_embd)) : nullptr;
  c->act_attn = a.take<uint8_t>(
      R * act_row_max(m, int64_t(Q), [](const mt::LayerWeights& L) -> const mt::Matrix& { return L.o; }));
  c->router = a.take<float>(R * size_t(hp.n_expert));
  c->shexp_weight = a.take<float>(R);
  c->router_sel = a.take<float>(R * size_t(hp.n_expert));
  c->route_ids = a.take<int32_t>(routed);
  c->route_w = a.take<float>(routed);
  c->row_slot = a.take<int32_t>(routed);
  c->slot_row = a.take<int32_t>(slots);
  c->expert_count = a.take<int32_t>(size_t(hp.n_expert));
  c->n_ff_max =
      std::max<int64_t>({hp.n_ff_exp, hp.shared_expert ? hp.n_ff_shexp : 0, hp.n_layer_dense_lead > 0 ? hp.n_ff : 0});
  c->slot_act = a.take<uint8_t>(
      routed * act_row_max(m, hp.n_embd, [](const mt::LayerWeights& L) -> const mt::Matrix& { return L.gate.first; }));
  c->slot_gate = a.take<float>(slots * size_t(c->n_ff_max));
  c->slot_up = a.take<float>(slots * size_t(c->n_ff_max));
  c->slot_act_down =
      a.take<uint8_t>(routed * act_row_max(m, hp.n_ff_exp, [](const mt::LayerWeights& L) -> const mt::Matrix& {
                        return L.down.first;
                      }));
  // The shared expert's, or a dense layer's (its FFN is one more such run).
  c->shexp_act_down = a.take<uint8_t>(
      R * act_row_max(m, c->n_ff_max, [](const mt::LayerWeights& L) -> const mt::Matrix& { return L.shexp_down; }));
  c->slot_down = a.take<float>(slots * E);
  c->scores = a.take<float>(size_t(c->n_threads) * size_t(c->n_ctx));
}

}  // namespace

namespace {

// The arguments' bounds (mt_forward.h), or false with a message naming the first one out of them.
bool check_context_args(int32_t n_ctx, int32_t n_seq, int32_t n_threads, char* err, size_t err_bytes) {
  if (n_ctx < 1 || n_ctx > MT_CONTEXT_TOKENS_MAX)
    return std::snprintf(err, err_bytes, "nCtx: expected 1..%d (got %d)", MT_CONTEXT_TOKENS_MAX, n_ctx), false;
  if (n_seq < 1 || n_seq > MT_CONTEXT_SEQS_MAX || int64_t(n_ctx) * n_seq > MT_CONTEXT_TOKENS_MAX)
    return std::snprintf(err, err_bytes, "nSeq: expected 1..%d with nCtx x nSeq <= %d (got %d x %d)",
                         MT_CONTEXT_SEQS_MAX, MT_CONTEXT_TOKENS_MAX, n_seq, n_ctx),
           false;
  if (n_threads < 1 || n_threads > MT_CONTEXT_THREADS_MAX)
    return std::snprintf(err, err_bytes, "threads: expected 1..%d (got %d)", MT_CONTEXT_THREADS_MAX, n_threads), false;
  return true;
}

}  // namespace

extern "C" int mt_context_bytes(const mt_model* model, int32_t n_ctx, int32_t n_seq, int32_t n_threads,
                                size_t* kv_bytes, size_t* scratch_bytes) {
  char unused[160];
  if (!check_context_args(n_ctx, n_seq, n_threads, unused, sizeof unused)) return -1;
  mt_context c;  // measured only: the layout with no base writes null pointers
  c.model = model;
  c.n_ctx = n_ctx;
  c.n_seq = n_seq;
  c.n_threads = n_threads;
  c.rows_max = std::min(n_ctx, mt::kChunkRowsMax);
  c.group_rows_max = std::min(n_ctx, mt::kGroupRowsMax);
  Carver measure;
  layout(&c, measure);
  const mt_hparams& hp = model->hp;
  const size_t caches = hp.mla_kv_lora > 0 ? 1 : 2;  // MLA keeps no V cache
  *kv_bytes = caches * size_t(hp.n_layer) * size_t(n_seq) * size_t(n_ctx) * size_t(hp.n_head_kv) * size_t(hp.head_dim) *
              sizeof(float);
  *scratch_bytes = measure.offset + 64 - *kv_bytes;
  return 0;
}

extern "C" mt_context* mt_context_create(const mt_model* model, int32_t n_ctx, int32_t n_seq, int32_t n_threads,
                                         char* err, size_t err_bytes) {
  if (!check_context_args(n_ctx, n_seq, n_threads, err, err_bytes)) return nullptr;
  std::unique_ptr<mt_context> c(new (std::nothrow) mt_context());
  if (!c) return nullptr;
  c->model = model;
  c->n_ctx = n_ctx;
  c->n_seq = n_seq;
  c->n_threads = n_threads;
  c->rows_max = std::min(n_ctx, mt::kChunkRowsMax);
  c->group_rows_max = std::min(n_ctx, mt::kGroupRowsMax);
  c->runs.resize(size_t(model->hp.n_expert) + 1);
  c->bindings.resize(size_t(model->hp.n_expert));
  c->run_binding.resize(c->runs.size());
  c->remote_runs.resize(size_t(model->hp.n_expert));
  c->pred_h.resize(size_t(model->hp.n_embd));
  c->pred_scores.resize(size_t(model->hp.n_expert));
  c->pred_sel.resize(size_t(model->hp.n_expert));
  c->pred_ids.resize(size_t(model->hp.n_expert));
  size_t act_max = 0;  // the routers' prepared row: the largest any layer's router type needs
  for (const mt::LayerWeights& L : model->layers)
    act_max = std::max(act_max, mt_act_row_bytes(L.router.type, model->hp.n_embd));
  c->pred_act.resize(act_max);
  c->gate_up_segs.resize(c->runs.size());
  c->down_segs.resize(c->runs.size());
  Carver measure;
  layout(c.get(), measure);
  // calloc: the KV cache pages stay untouched until used, and unread rows read as 0.
  c->arena.reset(std::calloc(1, measure.offset + 64));
  if (!c->arena) {
    std::snprintf(err, err_bytes, "context of %d x %d tokens: out of memory allocating %zu bytes", n_seq, n_ctx,
                  measure.offset);
    return nullptr;
  }
  Carver carve;
  carve.base = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(c->arena.get()) + 63) / 64 * 64);
  layout(c.get(), carve);
  // Every eval writes the scratch after the caches: faulting its pages in now keeps those faults
  // (about 4,100 pages on the medium preset) out of the first prompt's time. The caches stay
  // untouched until their positions are used.
  uint8_t* scratch = reinterpret_cast<uint8_t*>(c->row_pos);
  std::memset(scratch, 0, size_t(carve.base + carve.offset - scratch));
  c->pool = mt_pool_create(n_threads);
  if (c->pool == nullptr) {
    std::snprintf(err, err_bytes, "threads: could not start a pool of %d threads", n_threads);
    return nullptr;
  }
  return c.release();
}

extern "C" void mt_context_free(mt_context* ctx) {
  if (ctx == nullptr) return;
  if (ctx->pool != nullptr) mt_pool_destroy(ctx->pool);
  delete ctx;
}

extern "C" int32_t mt_context_n_ctx(const mt_context* ctx) { return ctx->n_ctx; }
