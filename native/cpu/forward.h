// Internal structures of the native forward pass (the C ABI is include/mt_forward.h).
//
//   mt_model    hparams + per-layer views into the mapping (Matrix / Experts) + owned f32
//               copies of the small vectors (norms, biases, shared-expert gate).
//   mt_context  KV cache of n_seq sequences + scratch for one chunk of up to rows_max rows + thread pool.
//   Pass        what one chunk's phases share (the pool's void* arg).
#pragma once
#include <cstddef>
#include <cstdint>
#include <atomic>
#include <cstdlib>
#include <memory>
#include <vector>
#include "mt_forward.h"
#include "mt_kernels.h"
#include "mt_pool.h"

namespace mt {

// Rows per prefill chunk: scratch is sized for this many rows; longer evals run in chunks.
constexpr int32_t kChunkRowsMax = MT_EVAL_CHUNK_ROWS;
// With an expert source, the chunks of a prompt run layer by layer in groups of this many rows
// (forward_eval.cc): each layer's experts are read once per group, not once per chunk.
// 2048: a 1024-token turn after a conversation's pending token (1025 rows) is one group.
constexpr int32_t kGroupRowsMax = 8 * MT_EVAL_CHUNK_ROWS;
// Expert groups a routing may have (mt_hparams.expert_groups; DeepSeek-V3 has 8).
constexpr int32_t kExpertGroupsMax = 64;
// Type ids index small tables (MXFP4 = 39 is the largest we support).
constexpr int kTypeIds = MT_MXFP4 + 1;

// A weight matrix W [rows, cols] in the mapping: rows of row_bytes bytes each.
struct Matrix {
  const uint8_t* data = nullptr;
  int32_t type = -1;
  int64_t rows = 0, cols = 0;
  size_t row_bytes = 0;
};

// nExpert matrices of one geometry back to back: expert e starts at e * expert_bytes.
struct Experts {
  Matrix first;
  size_t expert_bytes = 0;
  Matrix of(int32_t e) const {
    Matrix m = first;
    m.data = first.data + size_t(e) * expert_bytes;
    return m;
  }
};

struct LayerWeights {
  const float* attn_norm = nullptr;
  Matrix q, k, v, o;
  const float *q_bias = nullptr, *k_bias = nullptr, *v_bias = nullptr;
  const float *q_norm = nullptr, *k_norm = nullptr;
  const float* ffn_norm = nullptr;
  Matrix router;
  const float* exp_probs_b = nullptr;  // [nExpert] added to the probabilities to choose (hp.expert_bias)
  Experts gate, up, down;
  const float* shexp_gate_inp = nullptr;  // [nEmbd]: sigmoid(. h) scales the shared expert (null: ungated)
  Matrix shexp_gate, shexp_up, shexp_down;
  // gpt-oss (null elsewhere): attention output bias [nEmbd], sink logits [nHead], router bias [nExpert],
  // the experts' biases [nExpert][nFfExp] (gate, up) and [nExpert][nEmbd] (down), kept here, not in the tier.
  const float *o_bias = nullptr, *sinks = nullptr, *router_bias = nullptr;
  const float *gate_bias = nullptr, *up_bias = nullptr, *down_bias = nullptr;
  bool windowed = false;  // sliding-window attention on this layer (hp.sliding_window)
  bool dense = false;     // a leading dense layer: shexp_* hold its FFN, no router or experts
  // MLA (hp.mla_kv_lora > 0): q is attn_q or attn_q_a, k is attn_kv_a_mqa, v unused.
  const float *q_a_norm = nullptr, *kv_a_norm = nullptr;
  Matrix q_b;
  Experts k_b, v_b;  // one matrix per head: K_b [kv_lora x nope], V_b [v_head x kv_lora]
};

// One expert's work in a layer: its slots [first, first + count) are token rows routed to it.
struct ExpertRun {
  int32_t expert = 0;  // -1: the shared expert
  int32_t first = 0, count = 0;
  Matrix gate, up, down;
  const uint8_t* acts = nullptr;  // count prepared rows of h for gate/up
  uint8_t* acts_down = nullptr;   // count prepared rows of silu(g) * u for down
  size_t act_down_stride = 0;
  const float *gate_bias = nullptr, *up_bias = nullptr, *down_bias = nullptr;  // gpt-oss: this expert's rows, or null
};

// A matrix's rows with their cost (cols * (token rows + 2)); a pool phase splits the total cost
// of its segments evenly, so threads get equal work and each weight row is streamed once.
struct Segment {
  int64_t rows = 0, cost_per_row = 0;
};

// Buffers from calloc.
struct FreeDeleter {
  void operator()(void* p) const { std::free(p); }
};

// Anonymous mappings of `bytes` (their size travels with the pointer).
struct UnmapDeleter {
  size_t bytes = 0;
  void operator()(uint8_t* p) const;
};

}  // namespace mt

struct mt_model {
  mt_hparams hp{};
  const uint8_t* base = nullptr;
  size_t length = 0;
  mt::Matrix token_embd, output;
  const float* output_norm = nullptr;
  std::vector<mt::LayerWeights> layers;
  std::vector<std::unique_ptr<float[]>> owned;  // the f32 copies the pointers above use
  // With a dense fd (mt_model_create_owned): the dense matrices' own copies, read with pread, each
  // its own anonymous mapping (not malloc: glibc raises its mmap threshold past a freed large block,
  // so a model opened and freed again left its dense copies in the heap, ~4 MB an open).
  std::vector<std::unique_ptr<uint8_t, mt::UnmapDeleter>> owned_dense;
  uint64_t owned_dense_bytes = 0;
  std::vector<double> inv_freq;  // RoPE: ropeBase^(-2i/headDim), [headDim/2]
};

struct mt_context {
  const mt_model* model = nullptr;
  int32_t n_ctx = 0, rows_max = 0, n_threads = 1;
  int32_t n_seq = 1;           // sequences in the cache: sequence s holds cache rows [s * n_ctx, (s + 1) * n_ctx)
  int32_t group_rows_max = 0;  // rows of x: a group of chunks run layer by layer (kGroupRowsMax)
  mt_pool* pool = nullptr;
  std::unique_ptr<void, mt::FreeDeleter> arena;  // every buffer below, one calloc
  float *k_cache = nullptr, *v_cache = nullptr;  // [nLayer][nSeq * nCtx][nHeadKv * headDim], f32
  // Per row of a group [group_rows_max]: its position in its sequence, the cache row of its
  // sequence's position 0, and (chunk by chunk) the rows that get logits, chunk-local.
  int32_t *row_pos = nullptr, *row_kv = nullptr, *logit_local = nullptr;
  // Per chunk row [rows_max][...]:
  float *x = nullptr, *h = nullptr, *proj = nullptr;  // [nEmbd]
  float *q = nullptr, *attn = nullptr;                // [nHead * headDim]
  float *k = nullptr, *v = nullptr;                   // [nHeadKv * headDim]
  float *rope_cos = nullptr, *rope_sin = nullptr;     // [headDim / 2]
  uint8_t* act_h[mt::kTypeIds] = {};                  // h prepared for each weight type that reads it
  uint8_t* act_attn = nullptr;                        // attention output prepared for attn_output
  float *router = nullptr, *shexp_weight = nullptr;   // [nExpert], [1]: the shared expert's weight
  float* router_sel = nullptr;                        // [nExpert]: the scores experts are chosen by (bias, groups)
  int32_t* route_ids = nullptr;                       // [nExpertUsed]
  float* route_w = nullptr;                           // [nExpertUsed]
  int32_t* row_slot = nullptr;                        // [nExpertUsed]: slot of (row, rank)
  // Per slot: rows_max * nExpertUsed routed slots grouped by expert, then rows_max shared ones.
  int32_t* slot_row = nullptr;
  int32_t* expert_count = nullptr;          // [nExpert]
  std::vector<mt::ExpertRun> runs;          // active experts of the current layer, then the shared one
  std::vector<mt_expert_binding> bindings;  // [nExpert]: the routed runs as an expert source binds them
  std::vector<int32_t> run_binding;         // [runs]: the binding of runs[i] after the ready-first reorder, -1: shared
  std::vector<mt_remote_run> remote_runs;   // [nExpert]: the runs the source computes (device residents)
  // Route prediction of a one-token eval (forward_attention.cc predict_routes): h, its prepared row, router scores.
  std::vector<float> pred_h, pred_scores, pred_sel;
  std::vector<uint8_t> pred_act;
  std::vector<int32_t> pred_ids;                     // [nExpert]: the source's one-layer-ahead guess
  std::vector<mt::Segment> gate_up_segs, down_segs;  // their pool splits
  uint8_t* slot_act = nullptr;                       // gathered h rows, per routed slot
  float *slot_gate = nullptr, *slot_up = nullptr;    // [slots][nFfMax]
  uint8_t* slot_act_down = nullptr;                  // routed slots, prepared for ffn_down_exps
  uint8_t* shexp_act_down = nullptr;                 // shared slots, prepared for ffn_down_shexp
  float* slot_down = nullptr;                        // [slots][nEmbd]
  float* scores = nullptr;                           // [n_threads][nCtx] attention scratch
  // MLA (hp.mla_kv_lora > 0; null otherwise), per chunk row:
  float* mla_q = nullptr;           // [nHead * (nope + rope)]: the query as projected
  float* mla_qa = nullptr;          // [qLora]: attn_q_a h, then normed (q-LoRA files)
  uint8_t* mla_act_qa = nullptr;    // the normed qa prepared for attn_q_b
  uint8_t* mla_act_head = nullptr;  // [nHead] prepared q_nope (for K_b) or latent output (for V_b), per head
  size_t mla_act_head_bytes = 0;    // one head's prepared row
  float* mla_o = nullptr;           // [nHead * vHead]: the heads' outputs, attn_output's input
  int64_t n_ff_max = 0;
};

namespace mt {

// What the phases of one chunk share. Rows r of the chunk sit at positions pos0 + r.
struct Pass {
  mt_context* c = nullptr;
  const mt_model* m = nullptr;
  const LayerWeights* L = nullptr;
  int32_t layer = 0, n = 0;
  int32_t moe = -1;            // the layer's index among the MoE layers (routes, stats, the source), -1: dense
  bool combine_dense = false;  // the outputs waiting in slot_down are a dense FFN's (one per row)
  const int32_t* tokens = nullptr;
  const int32_t* pos = nullptr;    // [n]: row r's position in its sequence
  const int32_t* kv_at = nullptr;  // [n]: the cache row of row r's sequence's position 0
  float* x = nullptr;              // the chunk's residual stream rows [n][nEmbd] (in c->x)
  bool combine_pending = false;    // the previous layer's expert outputs wait in slot_down
  int32_t n_runs = 0;              // c->runs [0, n_runs) of the current layer
  int32_t n_bound = 0;             // routed runs the source bound (c->bindings [0, n_bound))
  int32_t n_local = 0;             // c->runs [0, n_local) are computed here; [n_local, n_runs) by the source (remote)
  bool remote_started = false;     // remote_start returned 0: remote_wait is owed before the layer ends
  int32_t* predicted = nullptr;    // [nLayer][predict_k] for a one-token eval, or null (mt_eval_args.predicted)
  int32_t predict_k = 0, predict_ahead = 0;
  int32_t wave_begin = 0, wave_end = 0;    // the runs the matrix phases compute now: all of them, or
                                           // those whose weights are in memory (the rest are being read)
  int32_t* routes = nullptr;               // [n][nMoeLayer][nExpertUsed] for this chunk, or null
  const int32_t* forced_routes = nullptr;  // [n][nMoeLayer][nExpertUsed]: run these instead of the top-k, or null
  int32_t* logit_rows = nullptr;           // [n_logit]: the chunk's rows that get logits, increasing
  int32_t n_logit = 0;
  float* logits = nullptr;  // [n_logit][nVocab]
  // The phase run_phase runs now: pieces [0, phase_pieces) of phase_fn, claimed by the pool's threads.
  void (*phase_fn)(void*, int, int) = nullptr;
  int phase_pieces = 1;
  // Where routed experts come from and step timing (forward_steps.cc); both null: the plain path.
  const mt_expert_source* experts = nullptr;
  double* layer_stats = nullptr;  // [nMoeLayer][MT_LAYER_STATS_FIELDS] for the whole eval
  bool first_chunk = true;
  int64_t layer_start_ns = 0, moe_start_ns = 0;
  int64_t device_ns[2] = {0, 0};  // this chunk's remote runs on the device (remote_wait); 0: none
  int64_t layer_hits = 0, layer_misses = 0;
};

// The contiguous share [begin, end) of count items that thread ith of nth owns.
inline void share(int64_t count, int ith, int nth, int64_t* begin, int64_t* end) {
  *begin = count * ith / nth;
  *end = count * (ith + 1) / nth;
}

// W rows [r0, r1) times n prepared rows: matvec for one row (decode), else one streamed pass.
inline void project(const Matrix& w, const uint8_t* acts, int32_t n, float* y, int64_t ldy, int64_t r0, int64_t r1) {
  if (n == 1)
    mt_matvec_rows(w.type, w.data, w.cols, acts, y, r0, r1);
  else
    mt_matmul_rows(w.type, w.data, w.cols, acts, n, y, ldy, r0, r1);
}

// Piece `piece` of `pieces` of the segments' total cost, visited as row ranges (segment, r0, r1).
// Boundaries fall on multiples of kRowGrain rows; both neighbours compute the same boundary,
// so the pieces cover every row exactly once.
constexpr int64_t kRowGrain = 8;

template <class Visit>
void for_piece_rows(const Segment* segs, int n_segs, int piece, int pieces, Visit&& visit) {
  int64_t total = 0;
  for (int s = 0; s < n_segs; s++) total += segs[s].rows * segs[s].cost_per_row;
  const int64_t lo = total * piece / pieces, hi = total * (piece + 1) / pieces;
  int64_t start = 0;
  for (int s = 0; s < n_segs; s++) {
    const Segment& g = segs[s];
    const int64_t end = start + g.rows * g.cost_per_row;
    auto row_at = [&](int64_t cost) -> int64_t {
      if (cost <= start) return 0;
      if (cost >= end) return g.rows;
      int64_t r = (cost - start + g.cost_per_row - 1) / g.cost_per_row;
      r = (r + kRowGrain - 1) / kRowGrain * kRowGrain;
      return r < g.rows ? r : g.rows;
    };
    const int64_t r0 = row_at(lo), r1 = row_at(hi);
    if (r0 < r1) visit(s, r0, r1);
    start = end;
  }
}

// A phase is fn(arg = the Pass, piece, pieces): it computes piece `piece` of `pieces` (a share of
// rows, heads or matrix cost), whichever thread runs it; a row's result does not depend on who
// computes it, so outputs stay identical. On the pool the pieces are claimed in turn
// (mt_pool_for): a thread that starts late or is preempted (two shared cores) leaves its pieces
// to the others, and the caller waits for the pieces, never for a thread that has not started.
// kPiecesPerThread pieces per thread balance the tail; a phase with scratch per piece (attention's
// scores, one row per thread) takes one piece per thread, so at most n_threads pieces exist.
constexpr int kPiecesPerThread = 4;
enum class Pieces { kPerThreadFour, kOnePerThread };

inline void run_phase_piece(void* arg, int64_t piece, int) {
  Pass& p = *static_cast<Pass*>(arg);
  p.phase_fn(arg, int(piece), p.phase_pieces);
}

// Runs a phase over the pool, or on the caller when it is one row of cheap work.
inline void run_phase(Pass& p, void (*fn)(void*, int, int), bool parallel, Pieces split = Pieces::kPerThreadFour) {
  const int threads = p.c->n_threads;
  if (!parallel || threads == 1) return fn(&p, 0, 1);
  p.phase_fn = fn;
  p.phase_pieces = split == Pieces::kOnePerThread ? threads : threads * kPiecesPerThread;
  mt_pool_for(p.c->pool, p.phase_pieces, run_phase_piece, &p);  // publishes phase_fn / phase_pieces
}

// forward_moe.cc: the MoE half of a layer, and the deferred x += moe of a row. false: an
// operating error of the tier (message in err), its leases released.
bool moe_layer(Pass& p, char* err, size_t err_bytes);
// A row of router logits [nExpert] into the experts' probabilities, in place (softmax or sigmoid).
void expert_probabilities(const mt_hparams& hp, float* probs);
// The scores the top-k chooses by: probs itself, or (selection bias, expert groups) sel [nExpert]
// filled with probs + bias and -inf for the experts of every group but the best used ones.
const float* selection_scores(const mt_hparams& hp, const LayerWeights& L, const float* probs, float* sel);

// forward_steps.cc: the per-layer steps around the phases when an expert source or step timing
// is attached (the order is mt_expert_source's, include/mt_forward.h).
void step_layer_begin(Pass& p);
void step_moe_begin(Pass& p);
// After group_slots: each routed run bound through the source, the runs reordered ready first;
// *n_ready: runs [0, n_ready) can be computed now (the shared one among them). false: its error.
bool step_bind_runs(Pass& p, int32_t* n_ready, char* err, size_t err_bytes);
// Runs [from, n_local) are being read: blocks until some land, moves them to [from, *to). false: a failed read.
bool step_await_runs(Pass& p, int32_t from, int32_t* to, char* err, size_t err_bytes);
// Runs [n_local, n_runs) (bound remote) to the source's remote_start; nothing when there are none.
bool step_remote_start(Pass& p, char* err, size_t err_bytes);
// After the host's runs: the source's remote_wait, once per remote_start that succeeded.
bool step_remote_wait(Pass& p, char* err, size_t err_bytes);
void step_layer_end(Pass& p);
void combine_row(const Pass& p, int32_t r);

// forward_attention.cc: the attention half of a layer, and the phases MLA shares with it.
void attention_layer(Pass& p);
size_t layer_cache_row(const mt_context& c, int32_t layer);  // the layer's first cache row
void attn_norm_phase(void* arg, int ith, int nth);
void attention_phase(void* arg, int ith, int nth);
void attn_prep_phase(void* arg, int ith, int nth);
void attn_out_phase(void* arg, int ith, int nth);
// forward_mla.cc: deepseek2's multi-head latent attention in place of the middle phases.
void mla_attention_layer(Pass& p);

}  // namespace mt
