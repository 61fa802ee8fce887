// mt_eval: one chunk of rows at a time through every layer, then the LM head.
//
//   tokens -> embed -> [ attention half | MoE half (forward_moe.cc) ] x nLayer -> norm -> logits
//
// Each half is a short sequence of phases. Matrix phases always run on the pool (rows split
// by cost, each weight row streamed once for the whole chunk); per-row phases run on the
// pool for prefill chunks and on the caller for decode (one row is cheaper than a wake-up).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>
#include "forward.h"
#include "mt_assert.h"
#include "ops_elementwise.h"

namespace mt {
namespace {

Pass& pass_of(void* arg) { return *static_cast<Pass*>(arg); }

// x [r] = token_embd row of tokens[r]; RoPE tables of row r's position. [rows]
void embed_phase(void* arg, int ith, int nth) {
  Pass& p = pass_of(arg);
  const mt_model& m = *p.m;
  const int64_t E = m.hp.n_embd, half = m.hp.head_dim / 2;
  int64_t b, e;
  share(p.n, ith, nth, &b, &e);
  for (int64_t r = b; r < e; r++) {
    const uint8_t* row = m.token_embd.data + size_t(p.tokens[r]) * m.token_embd.row_bytes;
    mt_dequant_row(m.token_embd.type, row, E, p.x + r * E);
    rope_table(m.inv_freq.data(), int32_t(m.inv_freq.size()), p.pos[r], m.hp.rope_magnitude, p.c->rope_cos + r * half,
               p.c->rope_sin + r * half);
  }
}

// [x += moe]; the logit rows normed and prepared for the LM head, in their order. [rows]
void output_norm_phase(void* arg, int ith, int nth) {
  Pass& p = pass_of(arg);
  const mt_model& m = *p.m;
  const int64_t E = m.hp.n_embd;
  const size_t stride = mt_act_row_bytes(m.output.type, E);
  int64_t b, e;
  share(p.n_logit, ith, nth, &b, &e);
  for (int64_t j = b; j < e; j++) {
    const int32_t r = p.logit_rows[j];
    if (p.combine_pending) combine_row(p, r);  // a group combined each layer already
    rms_norm(p.x + r * E, m.output_norm, E, m.hp.rms_eps, p.c->h + r * E);
    mt_act_prepare(m.output.type, p.c->h + r * E, E, p.c->act_h[m.output.type] + size_t(j) * stride);
  }
}

// logits [n_logit, nVocab] = Wout h. [pool]
void output_phase(void* arg, int piece, int nth) {
  Pass& p = pass_of(arg);
  const Matrix& w = p.m->output;
  const int32_t rows = p.n_logit;
  const Segment seg{w.rows, w.cols * (rows + 2)};
  for_piece_rows(&seg, 1, piece, nth,
                 [&](int, int64_t r0, int64_t r1) { project(w, p.c->act_h[w.type], rows, p.logits, w.rows, r0, r1); });
}

// A NaN or inf logit means the weights or the activations overflowed: sampling from it would give
// token 0 for ever (argmax of NaNs), so the eval fails and names where. One pass over the logits
// (~5 us for 32k floats).
bool check_logits_finite(const float* logits, int32_t rows, int32_t n_vocab, int32_t pos_first, char* err,
                         size_t err_bytes) {
  for (int32_t r = 0; r < rows; r++)
    for (int32_t i = 0; i < n_vocab; i++) {
      const float v = logits[size_t(r) * size_t(n_vocab) + size_t(i)];
      if (!std::isfinite(v))
        return std::snprintf(
                   err, err_bytes,
                   "logits: a non-finite value (%s) at token position %d, vocabulary id %d: the model's weights or "
                   "activations overflowed (moetier inspect --check-weights finds NaN or inf weights)",
                   std::isnan(v) ? "NaN" : "inf", pos_first + r, i),
               false;
    }
  return true;
}

// forced_routes: room for every row, and n_expert_used distinct ids in [0, n_expert) per (row, layer):
// a bad id would index past the expert tables, so it is refused before anything runs.
bool check_forced_routes(const mt_hparams& hp, const mt_eval_args& a, char* err, size_t err_bytes) {
  const int32_t K = hp.n_expert_used;
  const size_t n_moe = size_t(mt_moe_layers(&hp));
  const size_t need = size_t(a.n_tokens) * n_moe * size_t(K);
  if (a.forced_routes_len < need)
    return std::snprintf(err, err_bytes, "forcedRoutes: expected %zu ids (tokens x MoE layers x nExpertUsed, got %zu)",
                         need, a.forced_routes_len),
           false;
  for (size_t at = 0; at < need; at += size_t(K)) {
    const int32_t* ids = a.forced_routes + at;
    for (int32_t k = 0; k < K; k++) {
      bool repeated = false;
      for (int32_t j = 0; j < k; j++) repeated = repeated || ids[j] == ids[k];
      if (ids[k] < 0 || ids[k] >= hp.n_expert || repeated) {
        const size_t row = at / size_t(K) / n_moe, layer = at / size_t(K) % n_moe;
        return std::snprintf(
                   err, err_bytes,
                   "forcedRoutes: row %zu layer %zu: expected %d distinct expert ids in [0, %d) (got %d at rank %d)",
                   row, layer, K, hp.n_expert, ids[k], k),
               false;
      }
    }
  }
  return true;
}

// seq_ids / positions: each row in a sequence of the context and inside its n_ctx, each sequence's
// rows at increasing positions (its K/V are written before any of its later rows attend to them).
bool check_sequences(const mt_context& c, const mt_eval_args& a, char* err, size_t err_bytes) {
  if (a.seq_ids == nullptr || a.positions == nullptr || a.seq_len < size_t(a.n_tokens) || a.pos != 0)
    return std::snprintf(err, err_bytes,
                         "seqIds, positions: expected both, one entry per token (%d), with pos 0 (got %zu entries, "
                         "pos %d)",
                         a.n_tokens, a.seq_len, a.pos),
           false;
  std::vector<int32_t> last(size_t(c.n_seq), -1);
  for (int32_t i = 0; i < a.n_tokens; i++) {
    const int32_t s = a.seq_ids[i], at = a.positions[i];
    if (s < 0 || s >= c.n_seq)
      return std::snprintf(err, err_bytes, "seqIds[%d]: expected a sequence in [0, %d) (got %d)", i, c.n_seq, s), false;
    if (at < 0 || at >= c.n_ctx || at <= last[size_t(s)])
      return std::snprintf(err, err_bytes,
                           "positions[%d]: expected a position in [0, %d) after sequence %d's earlier rows (got %d "
                           "after %d)",
                           i, c.n_ctx, s, at, last[size_t(s)]),
             false;
    last[size_t(s)] = at;
  }
  return true;
}

bool check_logit_rows(const mt_eval_args& a, char* err, size_t err_bytes) {
  if (a.n_logit_rows < 0 || a.n_logit_rows > a.n_tokens)
    return std::snprintf(err, err_bytes, "logitRows: expected 0..%d rows (got %d)", a.n_tokens, a.n_logit_rows), false;
  for (int32_t j = 0; j < a.n_logit_rows; j++) {
    const int32_t r = a.logit_rows[j];
    if (r < 0 || r >= a.n_tokens || (j > 0 && r <= a.logit_rows[j - 1]))
      return std::snprintf(err, err_bytes, "logitRows[%d]: expected increasing rows in [0, %d) (got %d)", j, a.n_tokens,
                           r),
             false;
  }
  return true;
}

bool check_args(const mt_context& c, const mt_eval_args& a, char* err, size_t err_bytes) {
  const mt_hparams& hp = c.model->hp;
  if (a.n_tokens < 1) return std::snprintf(err, err_bytes, "tokens: expected at least one token"), false;
  const bool batched = a.seq_ids != nullptr || a.positions != nullptr;
  if (batched && !check_sequences(c, a, err, err_bytes)) return false;
  if (a.logit_rows != nullptr && !check_logit_rows(a, err, err_bytes)) return false;
  if (!batched && (a.pos < 0 || int64_t(a.pos) + a.n_tokens > c.n_ctx))
    return std::snprintf(err, err_bytes, "pos + tokens.length: expected <= nCtx %d (got pos %d + %d tokens)", c.n_ctx,
                         a.pos, a.n_tokens),
           false;
  for (int32_t i = 0; i < a.n_tokens; i++)
    if (a.tokens[i] < 0 || a.tokens[i] >= hp.n_vocab)
      return std::snprintf(err, err_bytes, "tokens[%d]: expected a token id in [0, %d) (got %d)", i, hp.n_vocab,
                           a.tokens[i]),
             false;
  const size_t logit_rows = a.logit_rows != nullptr ? size_t(a.n_logit_rows) : a.all_logits ? size_t(a.n_tokens) : 1;
  const size_t logits_need = logit_rows * size_t(hp.n_vocab);
  if ((a.logits == nullptr && logits_need > 0) || a.logits_len < logits_need)
    return std::snprintf(err, err_bytes, "logits: expected room for %zu floats (got %zu)", logits_need, a.logits_len),
           false;
  const size_t n_moe = size_t(mt_moe_layers(&hp));
  const size_t routes_need = size_t(a.n_tokens) * n_moe * size_t(hp.n_expert_used);
  if (a.routes != nullptr && a.routes_len < routes_need)
    return std::snprintf(err, err_bytes,
                         "routes: expected room for %zu ids (tokens x MoE layers x nExpertUsed, got %zu)", routes_need,
                         a.routes_len),
           false;
  const size_t stats_need = n_moe * MT_LAYER_STATS_FIELDS;
  if (a.layer_stats != nullptr && a.layer_stats_len < stats_need)
    return std::snprintf(err, err_bytes, "layerStats: expected room for %zu numbers (MoE layers x %d, got %zu)",
                         stats_need, MT_LAYER_STATS_FIELDS, a.layer_stats_len),
           false;
  if (a.predicted != nullptr &&
      (a.n_tokens != 1 || a.predict_k < 1 || a.predict_k > hp.n_expert || a.predict_ahead < 0 || a.predict_ahead > 1))
    return std::snprintf(err, err_bytes,
                         "predicted: expected a one-token eval, predictK in [1, %d] and predictAhead 0 or 1 (got %d "
                         "tokens, predictK %d, ahead %d)",
                         hp.n_expert, a.n_tokens, a.predict_k, a.predict_ahead),
           false;
  if (a.predicted != nullptr && a.predicted_len < n_moe * size_t(a.predict_k))
    return std::snprintf(err, err_bytes, "predicted: expected room for %zu ids (MoE layers x predictK, got %zu)",
                         n_moe * size_t(a.predict_k), a.predicted_len),
           false;
  if (a.forced_routes != nullptr && !check_forced_routes(hp, a, err, err_bytes)) return false;
  if (a.experts != nullptr && a.experts->model != c.model)
    return std::snprintf(err, err_bytes, "tier: it was created for another model than this context's"), false;
  return true;
}

// Rows [row0, row0 + rows) of the eval (a group's, or a chunk's): each one's position and the cache
// row of its sequence's position 0, at [0, rows) of row_pos / row_kv.
void place_rows(mt_context* ctx, const mt_eval_args* a, int32_t row0, int32_t rows) {
  for (int32_t i = 0; i < rows; i++) {
    const int32_t r = row0 + i;
    ctx->row_pos[i] = a->positions != nullptr ? a->positions[r] : a->pos + r;
    ctx->row_kv[i] = a->seq_ids != nullptr ? a->seq_ids[r] * ctx->n_ctx : 0;
  }
}

// One chunk's pass: rows [row0, row0 + n) of the eval, residual rows at x; its rows' places at
// [local0, local0 + n) of the group's (place_rows).
void init_pass(Pass& p, mt_context* ctx, const mt_eval_args* args, int32_t row0, int32_t local0, float* x) {
  const mt_hparams& hp = ctx->model->hp;
  p.experts = args->experts;
  p.layer_stats = args->layer_stats;
  p.first_chunk = row0 == 0;
  p.c = ctx;
  p.m = ctx->model;
  p.n = args->n_tokens - row0 < ctx->rows_max ? args->n_tokens - row0 : ctx->rows_max;
  p.pos = ctx->row_pos + local0;
  p.kv_at = ctx->row_kv + local0;
  p.logit_rows = ctx->logit_local + local0;
  p.tokens = args->tokens + row0;
  p.x = x;
  const size_t row_ids = size_t(row0) * size_t(mt_moe_layers(&hp)) * size_t(hp.n_expert_used);
  p.routes = args->routes ? args->routes + row_ids : nullptr;
  p.forced_routes = args->forced_routes ? args->forced_routes + row_ids : nullptr;
  p.predicted = args->predicted, p.predict_k = args->predict_k, p.predict_ahead = args->predict_ahead;
}

bool run_layer(Pass& p, int32_t l, char* err, size_t err_bytes) {
  p.layer = l;
  p.L = &p.m->layers[size_t(l)];
  p.moe = p.L->dense ? -1 : l - p.m->hp.n_layer_dense_lead;
  // A dense layer is no step of the expert source's and has no stats row: its time falls before
  // the first MoE layer's start.
  const bool stepped = (p.experts != nullptr || p.layer_stats != nullptr) && p.moe >= 0;
  if (stepped) step_layer_begin(p);
  attention_layer(p);
  if (stepped) step_moe_begin(p);
  if (!moe_layer(p, err, err_bytes)) return false;
  if (stepped) step_layer_end(p);
  return true;
}

// x += the layer's expert outputs now (the chunk's next layer, in a group, runs after the other
// chunks' MoE reused the slot buffers): the same sums the next layer's norm phase would add.
void combine_phase(void* arg, int ith, int nth) {
  Pass& p = pass_of(arg);
  int64_t b, e;
  share(p.n, ith, nth, &b, &e);
  for (int64_t r = b; r < e; r++) combine_row(p, int32_t(r));
}

// The chunk's rows [row0, row0 + n) that get logits (mt_eval_args.logit_rows, all_logits, or the
// eval's last row), chunk-local into `local`; *first: the index of the first one's logits.
int32_t chunk_logit_rows(const mt_eval_args* a, int32_t row0, int32_t n, int32_t* local, size_t* first) {
  int32_t count = 0;
  if (a->logit_rows != nullptr) {
    const int32_t* begin = a->logit_rows;
    const int32_t* it = std::lower_bound(begin, begin + a->n_logit_rows, row0);
    *first = size_t(it - begin);
    for (; it != begin + a->n_logit_rows && *it < row0 + n; ++it) local[count++] = *it - row0;
  } else if (a->all_logits) {
    for (; count < n; count++) local[count] = count;
    *first = size_t(row0);
  } else if (row0 + n == a->n_tokens) {
    local[count++] = n - 1;
    *first = 0;
  }
  return count;
}

// The chunk's logit rows through the output norm and the LM head (nothing when it has none).
bool logits_of(Pass& p, const mt_eval_args* args, int32_t row0, char* err, size_t err_bytes) {
  const mt_hparams& hp = p.m->hp;
  size_t first = 0;
  p.n_logit = chunk_logit_rows(args, row0, p.n, p.logit_rows, &first);
  if (p.n_logit == 0) return true;
  p.logits = args->logits + first * size_t(hp.n_vocab);
  run_phase(p, output_norm_phase, p.n_logit > 1);
  run_phase(p, output_phase, true);
  return check_logits_finite(p.logits, p.n_logit, hp.n_vocab, p.pos[p.logit_rows[0]], err, err_bytes);
}

// A group of chunks (rows [row0, row0 + rows)) layer by layer: every chunk through layer l, then
// every chunk through l + 1, so an expert source reads each layer's experts once for the group
// (its calls for one layer come back to back). The same arithmetic per row as chunk by chunk: a
// chunk's attention at layer l reads the KV cache of the rows before it, written by the earlier
// chunks' layer l.
bool run_group(mt_context* ctx, const mt_eval_args* args, int32_t row0, int32_t rows, char* err, size_t err_bytes) {
  const mt_hparams& hp = ctx->model->hp;
  const int32_t n_chunks = (rows + ctx->rows_max - 1) / ctx->rows_max;
  constexpr int32_t kChunksMax = kGroupRowsMax / kChunkRowsMax;
  MT_ASSERT(n_chunks >= 1 && n_chunks <= kChunksMax, "a group holds at most kGroupRowsMax rows in chunks of rows_max");
  Pass passes[kChunksMax];
  place_rows(ctx, args, row0, rows);
  for (int32_t i = 0; i < n_chunks; i++) {
    Pass& p = passes[size_t(i)];
    init_pass(p, ctx, args, row0 + i * ctx->rows_max, i * ctx->rows_max,
              ctx->x + size_t(i) * size_t(ctx->rows_max) * size_t(hp.n_embd));
    p.first_chunk = row0 == 0 && i == 0;
    run_phase(p, embed_phase, p.n > 1);
  }
  for (int32_t l = 0; l < hp.n_layer; l++) {
    for (int32_t i = 0; i < n_chunks; i++) {
      Pass& p = passes[size_t(i)];
      if (!run_layer(p, l, err, err_bytes)) return false;
      if (n_chunks == 1) continue;  // one chunk: its next layer's norm phase adds them, as chunk by chunk
      run_phase(p, combine_phase, p.n > 1);
      p.combine_pending = false;
    }
  }
  for (int32_t i = 0; i < n_chunks; i++)
    if (!logits_of(passes[size_t(i)], args, row0 + i * ctx->rows_max, err, err_bytes)) return false;
  return true;
}

}  // namespace

}  // namespace mt

extern "C" int mt_eval(mt_context* ctx, const mt_eval_args* args, char* err, size_t err_bytes) {
  using namespace mt;
  if (!check_args(*ctx, *args, err, err_bytes)) return -1;
  const mt_hparams& hp = ctx->model->hp;
  if (args->layer_stats != nullptr)
    std::memset(args->layer_stats, 0, size_t(mt_moe_layers(&hp)) * MT_LAYER_STATS_FIELDS * sizeof(double));
  // With an expert source a prompt longer than a chunk runs in groups, layer by layer.
  const int32_t step = args->experts != nullptr ? ctx->group_rows_max : ctx->rows_max;
  for (int32_t row0 = 0; row0 < args->n_tokens; row0 += step) {
    if (args->experts != nullptr) {
      if (!run_group(ctx, args, row0, std::min(step, args->n_tokens - row0), err, err_bytes)) return -1;
      continue;
    }
    Pass p;
    place_rows(ctx, args, row0, std::min(step, args->n_tokens - row0));
    init_pass(p, ctx, args, row0, 0, ctx->x);
    run_phase(p, embed_phase, p.n > 1);
    for (int32_t l = 0; l < hp.n_layer; l++)
      if (!run_layer(p, l, err, err_bytes)) return -1;
    if (!logits_of(p, args, row0, err, err_bytes)) return -1;
  }
  return 0;
}
