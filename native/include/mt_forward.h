/*
 * moetier forward pass: the C ABI between the addon and the native MoE forward.
 *
 *   mt_model    read-only view of a mapped model file (weights stay in the mapping,
 *               in their container type); validated once at creation.
 *   mt_context  KV cache (f32, [nLayer][nSeq * nCtx][nHeadKv * headDim] for K and for V: nSeq
 *               sequences of nCtx positions each), scratch sized for one prefill chunk, and a
 *               thread pool.
 *   mt_eval     rows at positions [pos, pos + n): writes logits, optionally routes.
 *
 * The math is docs/FORWARD.md; src/reference/forward.ts is the spec it is tested against.
 * Every verb returns NULL / -1 on an operating error and writes a message naming
 * the tensor, option or value and what was expected into err (err_bytes bytes).
 */
#ifndef MT_FORWARD_H
#define MT_FORWARD_H
#include <stddef.h>
#include <stdint.h>
#ifdef __cplusplus
extern "C" {
#endif

enum mt_qk_norm { MT_QK_NORM_NONE = 0, MT_QK_NORM_HEAD = 1, MT_QK_NORM_FULL = 2 };

/* The switches of docs/FORWARD.md (HParams in src/model/types.ts). */
typedef struct mt_hparams {
  int32_t n_layer, n_embd, n_head, n_head_kv, head_dim, n_vocab;
  int32_t n_expert, n_expert_used, n_ff_exp, n_ff_shexp;
  double rms_eps, rope_base;
  int32_t rope_neox; /* 0: rotate (x[2i], x[2i+1]); 1: rotate (x[i], x[i + headDim/2]) */
  int32_t qk_norm;   /* enum mt_qk_norm */
  int32_t norm_top_k, attn_bias, shared_expert, tied_output;
  /* RoPE's rotation (src/model/rope.ts computes it: partial rotary, linear or YaRN scaling). Zero
   * values keep the plain one: every dim of the head, rope_base^(-2i / rope_dims), magnitude 1. */
  int32_t rope_dims;           /* rotated dims of each head (even, 2..head_dim); the rest pass through */
  double rope_magnitude;       /* cos and sin are multiplied by it (YaRN's attention factor) */
  const double* rope_inv_freq; /* [rope_dims / 2]: theta_i = pos * rope_inv_freq[i]; read by mt_model_create only */
  /* Routing (src/reference/routing.ts is the rule; zeros keep softmax, top-k, no bias, no groups, no scale). */
  int32_t gating;              /* enum mt_gating */
  int32_t expert_bias;         /* 1: blk.l.exp_probs_b.bias [n_expert] is added to choose, not to weight */
  int32_t expert_groups;       /* > 1: experts in this many groups of consecutive ids ... */
  int32_t expert_groups_used;  /* ... of which the best this many (by their top-2 sum) may be chosen */
  double expert_weights_scale; /* the routed weights are multiplied by it (0 or 1: not) */
  /* Tensor naming and the shared expert of glm4moe (zeros: the other archs'). */
  int32_t ffn_norm_post_attention; /* 1: the MoE's norm is blk.l.post_attention_norm.weight (glm4moe), not ffn_norm */
  int32_t shared_expert_ungated;   /* 1: the shared expert is added as it is (glm4moe): no ffn_gate_inp_shexp */
  /* gpt-oss's layer (zeros: the other archs'). */
  int32_t attn_out_bias;   /* 1: blk.l.attn_output.bias [n_embd] is added to the attention's projection */
  int32_t attn_sinks;      /* 1: blk.l.attn_sinks.weight [n_head]: each head's sink logit joins its softmax, unscaled */
  int32_t sliding_window;  /* > 0: on windowed layers a row at position p sees keys j with p - j < sliding_window */
  int32_t swa_period;      /* layer l is windowed iff swa_period == 0 or l % swa_period < swa_period - 1 */
  int32_t router_bias;     /* 1: blk.l.ffn_gate_inp.bias [n_expert] is added to the router's logits */
  int32_t expert_ffn_bias; /* 1: ffn_{gate,up}_exps.bias [n_ff_exp, n_expert], ffn_down_exps.bias [n_embd, n_expert] */
  int32_t expert_act;      /* enum mt_expert_act */
  /* Leading dense layers (glm4moe, deepseek2; zeros: every layer MoE). Layers l < n_layer_dense_lead
   * have a plain FFN (blk.l.ffn_gate / ffn_up [n_ff, n_embd], ffn_down [n_embd, n_ff], SiLU-gated) and
   * no router or experts. Everything indexed by layer for the experts (routes, forced routes,
   * predictions, layer stats, the expert source's calls, mt_model_layer_experts) counts the MoE
   * layers only: MoE layer m is layer n_layer_dense_lead + m. */
  int32_t n_layer_dense_lead;
  int32_t n_ff; /* the dense layers' FFN width */
  /* Multi-head latent attention (deepseek2; mla_kv_lora 0: none). head_dim is the cached row,
   * mla_kv_lora + rope_dims (the normed latent c and the shared roped key k_pe), n_head_kv 1, no V
   * cache. A head's query: q (mla_nope + rope_dims) from attn_q, or attn_q_b rmsnorm(attn_q_a h) when
   * mla_q_lora > 0; scored as [K_b q_nope | roped q_pe] against the cached rows; its output
   * V_b (the softmax-weighted latents), mla_v_head wide, into attn_output. */
  int32_t mla_q_lora, mla_kv_lora, mla_nope, mla_v_head;
  double attn_scale; /* the scores' scale; 0: 1 / sqrt(head_dim) */
} mt_hparams;

/* SOFTMAX_WEIGHT (gpt-oss): the top k of the raw logits, weighted by the softmax over those k. */
enum mt_gating { MT_GATING_SOFTMAX = 0, MT_GATING_SIGMOID = 1, MT_GATING_SOFTMAX_WEIGHT = 2 };
/* SWIGLU_OAI (gpt-oss): g' = min(g, 7), u' = clamp(u, -7, 7), a = g' sigmoid(1.702 g') (u' + 1). */
enum mt_expert_act { MT_EXPERT_ACT_SILU = 0, MT_EXPERT_ACT_SWIGLU_OAI = 1 };

/* One tensor of the file: GGUF name, GGML type id, ggml-order dims, absolute offset. */
typedef struct mt_tensor_desc {
  const char* name;
  int32_t type;
  int32_t n_dims;
  int64_t dims[4];
  uint64_t offset;
} mt_tensor_desc;

typedef struct mt_model mt_model;
typedef struct mt_context mt_context;

/* A weight matrix W [rows, cols] as stored: rows of row_bytes bytes each. */
typedef struct mt_matrix_desc {
  const uint8_t* data;
  int32_t type;
  int64_t rows, cols;
  size_t row_bytes;
} mt_matrix_desc;

/* One layer's routed experts in the container: gate, up and down of expert 0; expert e's
 * matrix starts e * *_bytes after it (nExpert matrices of one geometry back to back). */
typedef struct mt_layer_experts {
  mt_matrix_desc gate, up, down;
  size_t gate_bytes, up_bytes, down_bytes;
} mt_layer_experts;

/* Where the forward pass takes a layer's routed experts from, when not all from the container
 * (the expert tier, include/mt_tier.h, is one). The forward pass owns this interface: it calls
 * it on the eval thread only, once per layer and chunk, in this order:
 *
 *   stamp(layer, 0)           layer start (its clock: monotonic ns, or a backend's virtual one)
 *   layer_begin(layer)        before anything of the layer is read
 *   stamp(layer, attn bytes)  MoE start; work_bytes: weight bytes streamed since the last stamp
 *   bind(layer, runs, n)      after routing: each run's weights, or NULL (the container's)
 *   [remote_start]            the runs the source computes itself (device residents), if any
 *   [await ...]               the pending runs, as their reads land
 *   [remote_wait]             the remote runs' outputs written
 *   stamp(layer, moe bytes)   layer end
 *   layer_end(layer)          whatever bind held is released (the weights are no longer read)
 *
 * bind returns 0, or -1 with a message in err having released what it held; the eval then
 * fails and calls nothing more for that layer. */
typedef struct mt_expert_binding {
  int32_t expert;      /* in: the routed expert id */
  int32_t rows;        /* in: the chunk's token rows routed to it */
  const uint8_t* gate; /* out: gate | up | down of the layer's geometry, or NULL: the container's */
  const uint8_t* up;
  const uint8_t* down;
  int32_t type;    /* out: their type when gate != NULL (the container's, or an exact copy's) */
  int32_t fast;    /* out: 1 when computed from a fast (resident) copy: a hit */
  int32_t pending; /* out: 1 when its weights are still being read: gate/up/down are set by a
                           later await that names it, and it is computed only then */
  int32_t remote;  /* out: 1 when the source computes it itself (a resident in device memory,
                           which the host cannot read): gate/up/down stay NULL, and the forward pass
                           hands the run's rows to remote_start instead of computing them */
} mt_expert_binding;

/* One remote run for remote_start: its rows of the chunk's ffn-normed hidden state h (row j of
 * the run is h + row_of[j] * n_embd) and where its output rows go (y [rows][n_embd], row j for
 * row_of[j]); y is the forward pass's own expert-output buffer, combined in rank order after
 * remote_wait, so the sum's order does not depend on where an expert ran. */
typedef struct mt_remote_run {
  int32_t binding; /* index into the bind's runs */
  int32_t rows;
  const int32_t* row_of;
  float* y;
} mt_remote_run;

typedef struct mt_expert_source {
  void* self;
  const mt_model* model; /* the model the source was made for (mt_eval checks it) */
  int64_t (*stamp)(void* self, int32_t layer, uint64_t work_bytes);
  void (*layer_begin)(void* self, int32_t layer);
  int (*bind)(void* self, int32_t layer, mt_expert_binding* runs, int32_t n_runs, char* err, size_t err_bytes);
  /* After a bind that left runs pending (NULL when a source never does): blocks until at least
   * one of them has landed, sets the landed runs' gate/up/down/type and writes their indices into
   * ready (*n_ready of them; each pending run is named once). The forward pass computes the ready
   * runs while the others are still being read. -1 on a failed read (message in err): every read
   * into the source's scratch has ended by then and the layer's leases are released. */
  int (*await)(void* self, int32_t layer, mt_expert_binding* runs, int32_t n_runs, int32_t* ready, int32_t* n_ready,
               char* err, size_t err_bytes);
  void (*layer_end)(void* self, int32_t layer);
  /* Optional (NULL, or predict_k 0: none): in a one-token eval, at the start of layer l the forward
   * pass applies layer l + 1's router to the residual stream entering l and hands its top
   * predict_k (ids, best first) to the source: a prefetch's guess, one layer ahead. */
  void (*predicted)(void* self, int32_t layer, const int32_t* ids, int32_t n);
  int32_t predict_k;
  /* Optional (NULL when bind never marks a run remote). remote_start: right after bind, before
   * the host computes anything of the layer, the remote runs' rows (h [n rows][n_embd], f32);
   * it may return before their y is written, so the device computes while the host computes the
   * other runs. remote_wait: after the host's runs, before the outputs are combined and before
   * layer_end; blocks until every y of the layer is written. Both return 0, or -1 with a message
   * in err having released what the layer held, as bind does (the eval then fails; remote_wait
   * is still called once after a remote_start that returned 0, so nothing writes y after the eval
   * has returned). remote_wait also says where the device spent the layer's runs on the
   * stamps' clock (device_ns[0] start, device_ns[1] end, from the device's own timing events;
   * both 0 when it did not time them): the forward pass keeps it in layer_stats. */
  int (*remote_start)(void* self, int32_t layer, const float* h, const mt_remote_run* runs, int32_t n_runs, char* err,
                      size_t err_bytes);
  int (*remote_wait)(void* self, int32_t layer, int64_t device_ns[2], char* err, size_t err_bytes);
} mt_expert_source;

/* base/length: the mapping. The model keeps pointers into it: it must outlive the model. */
mt_model* mt_model_create(const mt_hparams* hp, const mt_tensor_desc* tensors, int32_t n_tensors, const uint8_t* base,
                          size_t length, char* err, size_t err_bytes);
/* The same, with dense_fd >= 0 (an open descriptor of the mapped file): every tensor but the
 * routed experts (attention, router, norms, embeddings, head, shared expert) is read with pread
 * into the model's own memory and computed from there, so the mapping's pages of those tensors
 * are never touched (the mapping still holds the experts). The fd is only read during the call. */
mt_model* mt_model_create_owned(const mt_hparams* hp, const mt_tensor_desc* tensors, int32_t n_tensors,
                                const uint8_t* base, size_t length, int dense_fd, char* err, size_t err_bytes);
void mt_model_free(mt_model* model);
/* Bytes of the dense tensors the model holds in its own memory (0 without a dense fd). */
uint64_t mt_model_owned_dense_bytes(const mt_model* model);
const mt_hparams* mt_model_hparams(const mt_model* model);
/* The layers with experts: n_layer - n_layer_dense_lead (routes, layer stats and the tier count these). */
static inline int32_t mt_moe_layers(const mt_hparams* hp) { return hp->n_layer - hp->n_layer_dense_lead; }
/* MoE layer `layer`'s routed experts as mapped (model layer n_layer_dense_lead + layer): 0, or -1
 * when layer is out of range. */
int mt_model_layer_experts(const mt_model* model, int32_t layer, mt_layer_experts* out);

/* Bounds of mt_context_create's arguments (checked there and by mt_context_bytes). */
#define MT_CONTEXT_TOKENS_MAX (1 << 20)
#define MT_CONTEXT_SEQS_MAX 256
#define MT_CONTEXT_THREADS_MAX 64

/* n_seq sequences of n_ctx positions each (a KV cache of n_seq * n_ctx rows; an eval's rows name
 * their sequence, mt_eval_args.seq_ids) and n_threads compute threads (the caller of mt_eval is
 * one of them). n_ctx * n_seq must not pass MT_CONTEXT_TOKENS_MAX. */
mt_context* mt_context_create(const mt_model* model, int32_t n_ctx, int32_t n_seq, int32_t n_threads, char* err,
                              size_t err_bytes);
void mt_context_free(mt_context* ctx);
/* What mt_context_create(model, n_ctx, n_seq, n_threads) allocates, without allocating it: the f32
 * KV cache and everything else (scratch for one chunk, alignment). 0, or -1 for a bad argument. */
int mt_context_bytes(const mt_model* model, int32_t n_ctx, int32_t n_seq, int32_t n_threads, size_t* kv_bytes,
                     size_t* scratch_bytes);
int32_t mt_context_n_ctx(const mt_context* ctx);

/* Rows per chunk of an eval: a longer prompt runs in chunks of this many rows (scratch is sized for one). */
#define MT_EVAL_CHUNK_ROWS 256

/* Numbers per layer in mt_eval_args.layer_stats (the addon exports it; TypeScript reads it):
 * [startNs, endNs, moeStartNs, moeEndNs, hits, misses, deviceStartNs, deviceEndNs]. The device
 * pair is the layer's remote runs on the device (remote_wait), 0 when none ran there; over
 * several chunks (prefill), as the MoE pair: the last end, and end - start = the time summed
 * over the chunks (for one chunk, the span itself). */
#define MT_LAYER_STATS_FIELDS 8

typedef struct mt_eval_args {
  const int32_t* tokens;
  int32_t n_tokens;
  int32_t pos;       /* first position; [pos, pos + n) must lie inside n_ctx */
  float* logits;     /* n_vocab floats, or n_tokens * n_vocab with all_logits */
  size_t logits_len; /* floats available at logits */
  int32_t all_logits;
  int32_t* routes; /* NULL, or n_tokens * mt_moe_layers * n_expert_used ids [row][MoE layer][rank] */
  size_t routes_len;
  const mt_expert_source* experts; /* NULL (every expert from the container), or where they come from */
  double* layer_stats;             /* NULL, or n_layer * MT_LAYER_STATS_FIELDS (above) */
  size_t layer_stats_len;
  /* NULL, or (a one-token eval only) n_layer * predict_k expert ids: for each layer l, its router
   * applied to the residual stream entering l (before l's attention: the state the previous layer
   * left; with predict_ahead 1, the stream entering l - 1), its top predict_k by score. The early guess a prefetch can start reads by (docs/SPEC.md section 4);
   * the routing itself, the weights and the experts that run are unchanged. */
  int32_t* predicted;
  size_t predicted_len;
  int32_t predict_k;     /* 1..nExpert when predicted is set */
  int32_t predict_ahead; /* 0 or 1: predicted[l] is made from the stream entering layer l - ahead
                            (layer 0's for l < ahead), with layer l's router */
  /* NULL, or n_tokens * n_layer * n_expert_used ids [row][layer][rank]: the experts each row runs
   * instead of the router's top-k (a simulation driven by a recorded route trace: the engine's
   * routesFrom). Each (row, layer) holds n_expert_used distinct ids in [0, n_expert), checked
   * before anything runs. The router still runs: the given experts are weighted by its
   * probabilities (softmax or sigmoid: mt_hparams.gating) renormalised over them (w_k = p[id_k] /
   * sum_j p[id_j], for every model) and scaled (expert_weights_scale), and routes, when
   * set, receives these ids in this order. Slots, reads and the expert source see them as routes. */
  const int32_t* forced_routes;
  size_t forced_routes_len;
  /* Continuous batching: NULL (every row in sequence 0, row i at pos + i), or both set, n_tokens
   * entries each (seq_len). Row i belongs to sequence seq_ids[i] in [0, n_seq) and sits at
   * positions[i] in [0, n_ctx) of that sequence; it writes its K/V there and attends to its own
   * sequence's positions [0, positions[i]] only, so rows of other sequences never mix. A
   * sequence's rows in one eval come in increasing positions (checked); the positions before its
   * first row are those earlier evals wrote. pos must be 0 with them. */
  const int32_t* seq_ids;
  const int32_t* positions;
  size_t seq_len;
  /* NULL (logits of the last row, or of all rows with all_logits), or n_logit_rows (0 .. n_tokens)
   * increasing row indices in [0, n_tokens): logits holds their rows in that order
   * (n_logit_rows * n_vocab; none: a step whose rows are all mid-prompt). */
  const int32_t* logit_rows;
  int32_t n_logit_rows;
} mt_eval_args;

/* 0 on success, -1 on an operating error (message in err). Not re-entrant per context. */
int mt_eval(mt_context* ctx, const mt_eval_args* args, char* err, size_t err_bytes);

#ifdef __cplusplus
}
#endif
#endif
