// mt_model_create: checks every tensor the architecture needs (name, dims, type, extent
// inside the mapping) and builds the per-layer views. A bad desc is an error message,
// never a read outside the mapping.
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <string>
#include <unordered_map>
#include "forward.h"

void mt::UnmapDeleter::operator()(uint8_t* p) const {
  if (p != nullptr) munmap(p, bytes);
}

namespace {

using mt::Experts;
using mt::Matrix;

bool is_float_type(int32_t t) { return t == MT_F32 || t == MT_F16 || t == MT_BF16; }
bool is_block_type(int32_t t) {
  return t == MT_Q8_0 || t == MT_Q4_0 || t == MT_Q5_0 || t == MT_Q5_1 || t == MT_IQ4_NL || t == MT_MXFP4 ||
         (t >= MT_Q2_K && t <= MT_Q6_K) || t == MT_IQ4_XS;
}
int64_t block_elements(int32_t t) { return (t >= MT_Q2_K && t <= MT_Q6_K) || t == MT_IQ4_XS ? 256 : 32; }

std::string dims_text(const int64_t* dims, int n) {
  std::string s = "[";
  for (int i = 0; i < n; i++) s += (i ? ", " : "") + std::to_string(dims[i]);
  return s + "]";
}

class Builder {
 public:
  // dense_fd >= 0: dense tensors (everything but the routed experts) are read from that file
  // descriptor into the model's own memory, so their pages of the mapping are never touched.
  Builder(mt_model* m, const mt_tensor_desc* tensors, int32_t n_tensors, int dense_fd) : m_(m), dense_fd_(dense_fd) {
    for (int32_t i = 0; i < n_tensors; i++)
      if (tensors[i].name != nullptr) by_name_[tensors[i].name] = &tensors[i];
  }
  std::string error;

  // W [rows, cols] stored as ggml dims [cols, rows].
  bool matrix(const std::string& name, int64_t cols, int64_t rows, Matrix* out) {
    const int64_t want[2] = {cols, rows};
    const mt_tensor_desc* d = find(name, want, 2);
    if (d == nullptr || !check_type(name, d->type, cols)) return false;
    *out = Matrix{nullptr, d->type, rows, cols, mt_row_bytes(d->type, cols)};
    out->data = dense(name, extent(name, d, out->row_bytes, rows), out->row_bytes * size_t(rows));
    return out->data != nullptr;
  }

  // nExpert matrices [rows, cols] stored as ggml dims [cols, rows, nExpert].
  bool experts(const std::string& name, int64_t cols, int64_t rows, int64_t n_expert, Experts* out) {
    const int64_t want[3] = {cols, rows, n_expert};
    const mt_tensor_desc* d = find(name, want, 3);
    if (d == nullptr || !check_type(name, d->type, cols)) return false;
    out->first = Matrix{nullptr, d->type, rows, cols, mt_row_bytes(d->type, cols)};
    out->expert_bytes = out->first.row_bytes * size_t(rows);
    out->first.data = extent(name, d, out->first.row_bytes, rows * n_expert);
    return out->first.data != nullptr;
  }

  // n matrices [rows, cols] of the dense weights (MLA's per-head K_b / V_b), ggml dims [cols, rows, n]:
  // owned like any dense matrix (not the tier's, as experts are).
  bool heads(const std::string& name, int64_t cols, int64_t rows, int64_t n, Experts* out) {
    const int64_t want[3] = {cols, rows, n};
    const mt_tensor_desc* d = find(name, want, 3);
    if (d == nullptr || !check_type(name, d->type, cols)) return false;
    out->first = Matrix{nullptr, d->type, rows, cols, mt_row_bytes(d->type, cols)};
    out->expert_bytes = out->first.row_bytes * size_t(rows);
    const size_t bytes = out->expert_bytes * size_t(n);
    out->first.data = dense(name, extent(name, d, out->first.row_bytes, rows * n), bytes);
    return out->first.data != nullptr;
  }

  // A 1-D tensor [len] of F32 / F16 / BF16, copied to an owned f32 array.
  bool vector(const std::string& name, int64_t len, const float** out) { return vectors(name, len, 1, out); }

  // count vectors [len] (ggml dims [len, count]: gpt-oss's per-expert biases) of F32 / F16 / BF16,
  // copied to one owned f32 array [count][len].
  bool vectors(const std::string& name, int64_t len, int64_t count, const float** out) {
    const int64_t want[2] = {len, count};
    const mt_tensor_desc* d = find(name, want, count == 1 ? 1 : 2);
    if (d == nullptr) return false;
    if (!is_float_type(d->type))
      return fail(name, "type F32, F16 or BF16 (got type id " + std::to_string(d->type) + ")");
    const size_t row_bytes = mt_row_bytes(d->type, len);
    const uint8_t* data = dense(name, extent(name, d, row_bytes, count), row_bytes * size_t(count));
    if (data == nullptr) return false;
    m_->owned.emplace_back(new float[size_t(len * count)]);
    for (int64_t i = 0; i < count; i++)
      mt_dequant_row(d->type, data + size_t(i) * row_bytes, len, m_->owned.back().get() + i * len);
    *out = m_->owned.back().get();
    return true;
  }

  bool fail(const std::string& where, const std::string& expected) {
    error = where + ": expected " + expected;
    return false;
  }

 private:
  mt_model* m_;
  const int dense_fd_;
  bool advised_ = false;
  std::unordered_map<std::string, const mt_tensor_desc*> by_name_;

  // A dense tensor's bytes: where they are mapped, or (dense_fd_ >= 0) an owned, 64-byte aligned
  // copy read with pread. null with the error set.
  const uint8_t* dense(const std::string& name, const uint8_t* mapped, size_t bytes) {
    if (mapped == nullptr || dense_fd_ < 0) return mapped;
    const size_t mapped_bytes = bytes < 64 ? 64 : bytes;
    void* p = mmap(nullptr, mapped_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);  // page-aligned
    if (p == MAP_FAILED) return fail(name, "memory for its owned copy (" + std::to_string(bytes) + " bytes)"), nullptr;
    m_->owned_dense.emplace_back(static_cast<uint8_t*>(p), mt::UnmapDeleter{mapped_bytes});
    const off_t offset = off_t(mapped - m_->base);
    // No readahead on these reads: it would bring the experts after a tensor into the page cache.
    if (!advised_) posix_fadvise(dense_fd_, 0, 0, POSIX_FADV_RANDOM), advised_ = true;
    for (size_t done = 0; done < bytes;) {
      const ssize_t n = pread(dense_fd_, static_cast<uint8_t*>(p) + done, bytes - done, offset + off_t(done));
      if (n <= 0) {
        const std::string why = n == 0 ? "end of file" : std::strerror(errno);
        return fail(name, "its " + std::to_string(bytes) + " bytes at offset " + std::to_string(offset) +
                              " read whole (pread: " + why + " after " + std::to_string(done) + ")"),
               nullptr;
      }
      done += size_t(n);
    }
    // The copy is ours now: its pages leave the page cache, which would otherwise hold the
    // dense weights a second time (a memory cgroup counts both); rounded out to whole pages, so
    // a page a small tensor shares with a neighbour goes too (harmless: it is read again if needed).
    const off_t page = off_t(sysconf(_SC_PAGESIZE));
    const off_t from = offset / page * page, to = (offset + off_t(bytes) + page - 1) / page * page;
    posix_fadvise(dense_fd_, from, to - from, POSIX_FADV_DONTNEED);
    m_->owned_dense_bytes += bytes;
    return static_cast<const uint8_t*>(p);
  }

  // Dims compare after dropping trailing 1s (GGUF writers differ on them).
  const mt_tensor_desc* find(const std::string& name, const int64_t* want, int n_want) {
    auto it = by_name_.find(name);
    if (it == by_name_.end()) {
      fail(name, "a tensor of dims " + dims_text(want, n_want) + " (missing)");
      return nullptr;
    }
    const mt_tensor_desc* d = it->second;
    int n = d->n_dims < 0 ? 0 : d->n_dims > 4 ? 4 : d->n_dims;
    while (n > 1 && d->dims[n - 1] == 1) n--;
    while (n_want > 1 && want[n_want - 1] == 1) n_want--;
    bool same = n == n_want && d->n_dims >= 1 && d->n_dims <= 4;
    for (int i = 0; same && i < n; i++) same = d->dims[i] == want[i];
    if (!same) {
      fail(name, "dims " + dims_text(want, n_want) + " (got " +
                     dims_text(d->dims, d->n_dims < 0 || d->n_dims > 4 ? 0 : d->n_dims) + ")");
      return nullptr;
    }
    return d;
  }

  bool check_type(const std::string& name, int32_t type, int64_t cols) {
    if (!(is_float_type(type) || is_block_type(type)) || !mt_type_supported(type))
      return fail(name, "type F32, F16, BF16, Q8_0, Q4_0 or Q2_K..Q6_K (got type id " + std::to_string(type) + ")");
    if (is_block_type(type) && cols % block_elements(type) != 0)
      return fail(name, "a row length divisible by " + std::to_string(block_elements(type)) + " for a block type");
    return true;
  }

  // The tensor's first byte, if offset + row_bytes * rows lies inside the mapping.
  const uint8_t* extent(const std::string& name, const mt_tensor_desc* d, size_t row_bytes, int64_t rows) {
    const unsigned __int128 bytes = (unsigned __int128)row_bytes * (unsigned __int128)rows;
    const unsigned __int128 end = bytes + d->offset;
    if (end > m_->length) {
      fail(name, "offset + bytes inside the file's " + std::to_string(m_->length) + " bytes (offset " +
                     std::to_string(d->offset) + ", " + std::to_string((unsigned long long)bytes) + " bytes)");
      return nullptr;
    }
    return m_->base + d->offset;
  }
};

bool check_hparams(const mt_hparams& hp, Builder& b) {
  const int32_t big = 1 << 20;
  auto in = [](int64_t v, int64_t lo, int64_t hi) { return v >= lo && v <= hi; };
  if (!in(hp.n_layer, 1, 4096)) return b.fail("hparams.nLayer", "1..4096");
  if (!in(hp.n_embd, 1, big)) return b.fail("hparams.nEmbd", "1..2^20");
  if (!in(hp.n_head, 1, 4096) || !in(hp.n_head_kv, 1, hp.n_head) || hp.n_head % hp.n_head_kv != 0)
    return b.fail("hparams.nHead/nHeadKv", "nHead a multiple of nHeadKv, both >= 1");
  if (!in(hp.head_dim, 2, 4096) || hp.head_dim % 2 != 0) return b.fail("hparams.headDim", "an even number 2..4096");
  if (!in(hp.n_vocab, 1, 1 << 24)) return b.fail("hparams.nVocab", "1..2^24");
  if (!in(hp.n_expert, 1, 4096)) return b.fail("hparams.nExpert", "1..4096");
  if (!in(hp.n_expert_used, 1, hp.n_expert) || hp.n_expert_used > 64)
    return b.fail("hparams.nExpertUsed", "1..min(nExpert, 64)");
  if (!in(hp.n_ff_exp, 1, big)) return b.fail("hparams.nFfExp", "1..2^20");
  if (hp.shared_expert && !in(hp.n_ff_shexp, 1, big)) return b.fail("hparams.nFfShexp", "1..2^20 with a shared expert");
  if (!in(hp.n_layer_dense_lead, 0, hp.n_layer - 1))
    return b.fail("hparams.nLayerDenseLead", "0..nLayer - 1 (at least one layer with experts)");
  if (hp.n_layer_dense_lead > 0 && !in(hp.n_ff, 1, big)) return b.fail("hparams.nFf", "1..2^20 with dense layers");
  if (hp.mla_kv_lora != 0 && (!in(hp.mla_kv_lora, 1, big) || !in(hp.mla_nope, 1, big) || !in(hp.mla_v_head, 1, big) ||
                              !in(hp.mla_q_lora, 0, big) || hp.n_head_kv != 1 || hp.rope_dims < 2 ||
                              hp.head_dim != hp.mla_kv_lora + hp.rope_dims))
    return b.fail("hparams.mla", "kvLora, nope, vHead >= 1, qLora >= 0, nHeadKv 1 and headDim = kvLora + ropeDims");
  if (!(hp.attn_scale >= 0 && std::isfinite(hp.attn_scale))) return b.fail("hparams.attnScale", "a finite number >= 0");
  if (!(hp.rms_eps >= 0 && std::isfinite(hp.rms_eps))) return b.fail("hparams.rmsEps", "a finite number >= 0");
  if (!(hp.rope_base > 0 && std::isfinite(hp.rope_base))) return b.fail("hparams.ropeBase", "a finite number > 0");
  if (!in(hp.qk_norm, MT_QK_NORM_NONE, MT_QK_NORM_FULL)) return b.fail("hparams.qkNorm", "none, head or full");
  if (!in(hp.gating, MT_GATING_SOFTMAX, MT_GATING_SOFTMAX_WEIGHT))
    return b.fail("hparams.gating", "softmax, sigmoid or softmax_weight");
  if (!in(hp.expert_act, MT_EXPERT_ACT_SILU, MT_EXPERT_ACT_SWIGLU_OAI))
    return b.fail("hparams.expertAct", "silu or swiglu_oai");
  if (hp.sliding_window < 0 || hp.swa_period < 0)
    return b.fail("hparams.slidingWindow", "a window >= 1 and a period >= 0");
  if (hp.expert_groups > mt::kExpertGroupsMax) return b.fail("hparams.expertGroups", "at most 64 groups");
  if (hp.expert_groups > 1 && (hp.n_expert % hp.expert_groups != 0 || !in(hp.expert_groups_used, 1, hp.expert_groups) ||
                               hp.n_expert_used > hp.expert_groups_used * (hp.n_expert / hp.expert_groups)))
    return b.fail("hparams.expertGroups", "count dividing nExpert, used in 1..count with room for nExpertUsed");
  if (!std::isfinite(hp.expert_weights_scale)) return b.fail("hparams.expertWeightsScale", "a finite number");
  if (hp.rope_dims != 0 && (!in(hp.rope_dims, 2, hp.head_dim) || hp.rope_dims % 2 != 0))
    return b.fail("rope.dims", "an even number 2..headDim");
  if (!(hp.rope_magnitude >= 0 && std::isfinite(hp.rope_magnitude)))
    return b.fail("rope.magnitude", "a finite number > 0");
  const int32_t rope_half = (hp.rope_dims != 0 ? hp.rope_dims : hp.head_dim) / 2;
  for (int32_t i = 0; hp.rope_inv_freq != nullptr && i < rope_half; i++)
    if (!(hp.rope_inv_freq[i] > 0 && std::isfinite(hp.rope_inv_freq[i])))
      return b.fail("rope.invFreq", "finite numbers > 0");
  return true;
}

// A leading dense layer's FFN: computed as an ungated shared expert with no routed ones beside it.
bool build_dense_ffn(const mt_hparams& hp, const std::string& p, Builder& b, mt::LayerWeights* L) {
  L->dense = true;
  if (!(b.matrix(p + "ffn_gate.weight", hp.n_embd, hp.n_ff, &L->shexp_gate) &&
        b.matrix(p + "ffn_up.weight", hp.n_embd, hp.n_ff, &L->shexp_up) &&
        b.matrix(p + "ffn_down.weight", hp.n_ff, hp.n_embd, &L->shexp_down)))
    return false;
  if (L->shexp_up.type != L->shexp_gate.type) return b.fail(p + "ffn_up.weight", "the type of ffn_gate");
  return true;
}

// deepseek2's attention (MLA): the query (attn_q, or attn_q_a, its norm and attn_q_b), the latent and
// shared key (attn_kv_a_mqa, the latent's norm), per head K_b and V_b, attn_output.
bool build_mla(const mt_hparams& hp, const std::string& p, Builder& b, mt::LayerWeights* L) {
  const int64_t q_dim = int64_t(hp.n_head) * (hp.mla_nope + hp.rope_dims);
  const bool query = hp.mla_q_lora > 0 ? b.matrix(p + "attn_q_a.weight", hp.n_embd, hp.mla_q_lora, &L->q) &&
                                             b.vector(p + "attn_q_a_norm.weight", hp.mla_q_lora, &L->q_a_norm) &&
                                             b.matrix(p + "attn_q_b.weight", hp.mla_q_lora, q_dim, &L->q_b)
                                       : b.matrix(p + "attn_q.weight", hp.n_embd, q_dim, &L->q);
  return query && b.matrix(p + "attn_kv_a_mqa.weight", hp.n_embd, hp.head_dim, &L->k) &&
         b.vector(p + "attn_kv_a_norm.weight", hp.mla_kv_lora, &L->kv_a_norm) &&
         b.heads(p + "attn_k_b.weight", hp.mla_nope, hp.mla_kv_lora, hp.n_head, &L->k_b) &&
         b.heads(p + "attn_v_b.weight", hp.mla_kv_lora, hp.mla_v_head, hp.n_head, &L->v_b) &&
         b.matrix(p + "attn_output.weight", int64_t(hp.n_head) * hp.mla_v_head, hp.n_embd, &L->o);
}

bool build_layer(const mt_hparams& hp, int32_t l, Builder& b, mt::LayerWeights* L) {
  const std::string p = "blk." + std::to_string(l) + ".";
  const int64_t q_dim = int64_t(hp.n_head) * hp.head_dim, kv_dim = int64_t(hp.n_head_kv) * hp.head_dim;
  bool ok = b.vector(p + "attn_norm.weight", hp.n_embd, &L->attn_norm);
  if (ok && hp.mla_kv_lora > 0)
    ok = build_mla(hp, p, b, L);
  else
    ok = ok && b.matrix(p + "attn_q.weight", hp.n_embd, q_dim, &L->q) &&
         b.matrix(p + "attn_k.weight", hp.n_embd, kv_dim, &L->k) &&
         b.matrix(p + "attn_v.weight", hp.n_embd, kv_dim, &L->v) &&
         b.matrix(p + "attn_output.weight", q_dim, hp.n_embd, &L->o);
  if (ok && hp.attn_bias)
    ok = b.vector(p + "attn_q.bias", q_dim, &L->q_bias) && b.vector(p + "attn_k.bias", kv_dim, &L->k_bias) &&
         b.vector(p + "attn_v.bias", kv_dim, &L->v_bias);
  if (ok && hp.attn_out_bias) ok = b.vector(p + "attn_output.bias", hp.n_embd, &L->o_bias);
  if (ok && hp.attn_sinks) ok = b.vector(p + "attn_sinks.weight", hp.n_head, &L->sinks);
  L->windowed = hp.sliding_window > 0 && (hp.swa_period == 0 || l % hp.swa_period < hp.swa_period - 1);
  if (ok && hp.qk_norm != MT_QK_NORM_NONE) {
    const bool head = hp.qk_norm == MT_QK_NORM_HEAD;
    ok = b.vector(p + "attn_q_norm.weight", head ? hp.head_dim : q_dim, &L->q_norm) &&
         b.vector(p + "attn_k_norm.weight", head ? hp.head_dim : kv_dim, &L->k_norm);
  }
  const char* ffn_norm = hp.ffn_norm_post_attention ? "post_attention_norm.weight" : "ffn_norm.weight";
  ok = ok && b.vector(p + ffn_norm, hp.n_embd, &L->ffn_norm);
  if (l < hp.n_layer_dense_lead) return ok && build_dense_ffn(hp, p, b, L);
  ok = ok && b.matrix(p + "ffn_gate_inp.weight", hp.n_embd, hp.n_expert, &L->router) &&
       (!hp.router_bias || b.vector(p + "ffn_gate_inp.bias", hp.n_expert, &L->router_bias)) &&
       (!hp.expert_bias || b.vector(p + "exp_probs_b.bias", hp.n_expert, &L->exp_probs_b)) &&
       b.experts(p + "ffn_gate_exps.weight", hp.n_embd, hp.n_ff_exp, hp.n_expert, &L->gate) &&
       b.experts(p + "ffn_up_exps.weight", hp.n_embd, hp.n_ff_exp, hp.n_expert, &L->up) &&
       b.experts(p + "ffn_down_exps.weight", hp.n_ff_exp, hp.n_embd, hp.n_expert, &L->down);
  if (ok && hp.expert_ffn_bias)
    ok = b.vectors(p + "ffn_gate_exps.bias", hp.n_ff_exp, hp.n_expert, &L->gate_bias) &&
         b.vectors(p + "ffn_up_exps.bias", hp.n_ff_exp, hp.n_expert, &L->up_bias) &&
         b.vectors(p + "ffn_down_exps.bias", hp.n_embd, hp.n_expert, &L->down_bias);
  // Gate and up read the same prepared activations, so they must share a type.
  if (ok && L->up.first.type != L->gate.first.type)
    return b.fail(p + "ffn_up_exps.weight", "the type of ffn_gate_exps");
  if (ok && hp.shared_expert) {
    ok = (hp.shared_expert_ungated || b.vector(p + "ffn_gate_inp_shexp.weight", hp.n_embd, &L->shexp_gate_inp)) &&
         b.matrix(p + "ffn_gate_shexp.weight", hp.n_embd, hp.n_ff_shexp, &L->shexp_gate) &&
         b.matrix(p + "ffn_up_shexp.weight", hp.n_embd, hp.n_ff_shexp, &L->shexp_up) &&
         b.matrix(p + "ffn_down_shexp.weight", hp.n_ff_shexp, hp.n_embd, &L->shexp_down);
    if (ok && L->shexp_up.type != L->shexp_gate.type)
      return b.fail(p + "ffn_up_shexp.weight", "the type of ffn_gate_shexp");
  }
  return ok;
}

}  // namespace

extern "C" mt_model* mt_model_create(const mt_hparams* hp, const mt_tensor_desc* tensors, int32_t n_tensors,
                                     const uint8_t* base, size_t length, char* err, size_t err_bytes) {
  return mt_model_create_owned(hp, tensors, n_tensors, base, length, -1, err, err_bytes);
}

extern "C" mt_model* mt_model_create_owned(const mt_hparams* hp, const mt_tensor_desc* tensors, int32_t n_tensors,
                                           const uint8_t* base, size_t length, int dense_fd, char* err,
                                           size_t err_bytes) {
  std::unique_ptr<mt_model> m(new mt_model());
  m->hp = *hp;
  m->base = base;
  m->length = length;
  Builder b(m.get(), tensors, n_tensors, dense_fd);
  bool ok = check_hparams(*hp, b) && b.matrix("token_embd.weight", hp->n_embd, hp->n_vocab, &m->token_embd);
  m->layers.resize(ok ? size_t(hp->n_layer) : 0);
  for (int32_t l = 0; ok && l < hp->n_layer; l++) ok = build_layer(*hp, l, b, &m->layers[size_t(l)]);
  ok = ok && b.vector("output_norm.weight", hp->n_embd, &m->output_norm);
  if (ok && hp->tied_output)
    m->output = m->token_embd;
  else if (ok)
    ok = b.matrix("output.weight", hp->n_embd, hp->n_vocab, &m->output);
  if (!ok) {
    std::snprintf(err, err_bytes, "%s", b.error.c_str());
    return nullptr;
  }
  // The rotation (mt_hparams: zeros keep the plain one); the caller's table is copied, not kept.
  const int32_t rope_dims = hp->rope_dims != 0 ? hp->rope_dims : hp->head_dim;
  for (int32_t i = 0; i < rope_dims / 2; i++)
    m->inv_freq.push_back(hp->rope_inv_freq != nullptr ? hp->rope_inv_freq[i]
                                                       : std::pow(hp->rope_base, -2.0 * i / rope_dims));
  m->hp.rope_dims = rope_dims;
  m->hp.rope_magnitude = hp->rope_magnitude != 0 ? hp->rope_magnitude : 1.0;
  m->hp.rope_inv_freq = nullptr;
  return m.release();
}

extern "C" void mt_model_free(mt_model* model) { delete model; }

extern "C" const mt_hparams* mt_model_hparams(const mt_model* model) { return &model->hp; }

extern "C" uint64_t mt_model_owned_dense_bytes(const mt_model* model) { return model->owned_dense_bytes; }

namespace {
mt_matrix_desc desc_of(const mt::Matrix& m) { return mt_matrix_desc{m.data, m.type, m.rows, m.cols, m.row_bytes}; }
}  // namespace

extern "C" int mt_model_layer_experts(const mt_model* model, int32_t layer, mt_layer_experts* out) {
  if (layer < 0 || layer >= mt_moe_layers(&model->hp)) return -1;
  const mt::LayerWeights& L = model->layers[size_t(model->hp.n_layer_dense_lead + layer)];
  *out = mt_layer_experts{desc_of(L.gate.first), desc_of(L.up.first), desc_of(L.down.first),
                          L.gate.expert_bytes,   L.up.expert_bytes,   L.down.expert_bytes};
  return 0;
}
