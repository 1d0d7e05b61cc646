#include "model/llama_model.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "common/error.h"
#include "common/fp16.h"
#include "cpu/ops.h"
#include "gguf/gguf_file.h"
#include "quant/quant.h"
#include "tokenizer/tokenizer.h"

namespace fish {

std::unique_ptr<LlamaModel> LlamaModel::load(const std::string& path, const ModelOptions& opt) {
  std::unique_ptr<LlamaModel> m(new LlamaModel());
  m->cfg_ = opt.config ? *opt.config : EngineConfig::process();
  m->file_ = gguf::File::open(path);
  if (opt.vocab_only) {  // a tokenizer-only load: any architecture, no tensors needed
    m->vocab_only_ = true;
    m->tokenizer_ = Tokenizer::from_gguf(*m->file_);
    if (auto a = m->file_->get_str("general.architecture")) m->hp_.arch_name = std::string(*a);
    if (auto nm = m->file_->get_str("general.name")) m->hp_.name = std::string(*nm);
    m->hp_.n_vocab = m->tokenizer_->n_vocab();
    m->pool_ = std::make_unique<ThreadPool>(1);
    return m;
  }
  m->progress_ = opt.progress;
  m->report("loading", -1);
  m->hp_ = Hparams::from_gguf(*m->file_);
  m->load_weights();
  m->tokenizer_ = Tokenizer::from_gguf(*m->file_);
  if (m->tokenizer_->n_vocab() != m->hp_.n_vocab)
    throw Error(path + ": tokenizer has " + std::to_string(m->tokenizer_->n_vocab()) + " tokens but token_embd has " +
                std::to_string(m->hp_.n_vocab) + " rows");
  m->n_ctx_ = opt.n_ctx > 0 ? opt.n_ctx : m->hp_.n_ctx_train;
  m->pool_ = std::make_unique<ThreadPool>(opt.n_threads);
  m->kv_.init(m->hp_.n_layer, m->hp_.kv_dim(), m->n_ctx_, std::vector<bool>(size_t(m->hp_.n_layer), true));
  m->place_layers(opt);
  m->prepare_cpu_weights();
  m->progress_ = nullptr;
  return m;
}

LlamaModel::~LlamaModel() { release_backend(); }

const float* LlamaModel::vector_tensor(const std::string& name, int64_t n, bool required) {
  const gguf::TensorInfo* t = file_->tensor(name);
  if (!t) {
    if (required) throw Error(file_->path() + ": tensor '" + name + "' is missing");
    return nullptr;
  }
  if (t->n_elements() != n)
    throw Error(file_->path() + ": tensor '" + name + "' has shape " + t->shape_str() + ", expected [" +
                std::to_string(n) + "]");
  if (!can_dequantize(t->type))
    throw Error(file_->path() + ": tensor '" + name + "' has unsupported type " + ggml_type_name(t->type));
  if (t->type == GgmlType::F32 && reinterpret_cast<uintptr_t>(t->data) % alignof(float) == 0)
    return reinterpret_cast<const float*>(t->data);
  owned_vectors_.emplace_back(size_t(n));
  dequant_row(t->type, t->data, owned_vectors_.back().data(), n);
  return owned_vectors_.back().data();
}

Linear LlamaModel::matrix_tensor(const std::string& name, int64_t n_in, int64_t n_out, bool required) {
  Linear lin;
  const gguf::TensorInfo* t = file_->tensor(name);
  if (!t) {
    if (required) throw Error(file_->path() + ": tensor '" + name + "' is missing");
    return lin;
  }
  if (t->n_dims > 2 || t->ne[0] != n_in || t->ne[1] != n_out)
    throw Error(file_->path() + ": tensor '" + name + "' has shape " + t->shape_str() + ", expected [" +
                std::to_string(n_in) + ", " + std::to_string(n_out) + "]");
  if (!can_dequantize(t->type))
    throw Error(file_->path() + ": tensor '" + name + "' has unsupported type " + ggml_type_name(t->type) +
                " (supported: F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K)");
  lin.tensor = t;
  lin.cpu = WeightView{t->type, t->data, n_in, n_out, t->nbytes / uint64_t(n_out)};
  n_params_ += n_in * n_out;
  return lin;
}

void LlamaModel::load_weights() {
  const Hparams& h = hp_;
  // Refuse any tensor of a type fish cannot compute, naming it (even if unused).
  for (const auto& t : file_->tensors())
    if (!can_dequantize(t.type))
      throw Error(file_->path() + ": tensor '" + t.name + "' has unsupported type " + ggml_type_name(t.type));

  tok_embd_ = file_->tensor("token_embd.weight");
  if (!tok_embd_) throw Error(file_->path() + ": tensor 'token_embd.weight' is missing");
  if (tok_embd_->ne[0] != h.n_embd || tok_embd_->n_dims != 2)
    throw Error(file_->path() + ": tensor 'token_embd.weight' has shape " + tok_embd_->shape_str() +
                ", expected [" + std::to_string(h.n_embd) + ", n_vocab]");
  if (hp_.n_vocab == 0) hp_.n_vocab = int32_t(tok_embd_->ne[1]);
  if (tok_embd_->ne[1] != hp_.n_vocab)
    throw Error(file_->path() + ": tensor 'token_embd.weight' has " + std::to_string(tok_embd_->ne[1]) +
                " rows but the vocabulary has " + std::to_string(hp_.n_vocab) + " tokens");
  n_params_ += tok_embd_->n_elements();

  output_norm_ = vector_tensor("output_norm.weight", h.n_embd, true);
  output_ = matrix_tensor("output.weight", h.n_embd, hp_.n_vocab, false);
  if (!output_.tensor) {  // tied embeddings: the LM head is token_embd
    output_.tensor = tok_embd_;
    output_.cpu = WeightView{tok_embd_->type, tok_embd_->data, h.n_embd, hp_.n_vocab,
                             tok_embd_->nbytes / uint64_t(hp_.n_vocab)};
  }
  rope_freqs_ = vector_tensor("rope_freqs.weight", h.n_rot / 2, false);

  layers_.resize(size_t(h.n_layer));
  for (int32_t l = 0; l < h.n_layer; ++l) {
    Layer& L = layers_[size_t(l)];
    const std::string p = "blk." + std::to_string(l) + ".";
    L.attn_norm = vector_tensor(p + "attn_norm.weight", h.n_embd, true);
    L.ffn_norm = vector_tensor(p + "ffn_norm.weight", h.n_embd, true);
    L.wq = matrix_tensor(p + "attn_q.weight", h.n_embd, h.q_dim(), true);
    L.wk = matrix_tensor(p + "attn_k.weight", h.n_embd, h.kv_dim(), true);
    L.wv = matrix_tensor(p + "attn_v.weight", h.n_embd, h.kv_dim(), true);
    L.wo = matrix_tensor(p + "attn_output.weight", h.q_dim(), h.n_embd, true);
    L.gate = matrix_tensor(p + "ffn_gate.weight", h.n_embd, h.n_ff, true);
    L.up = matrix_tensor(p + "ffn_up.weight", h.n_embd, h.n_ff, true);
    L.down = matrix_tensor(p + "ffn_down.weight", h.n_ff, h.n_embd, true);
    if (h.has_qkv_bias) {
      L.bq = vector_tensor(p + "attn_q.bias", h.q_dim(), true);
      L.bk = vector_tensor(p + "attn_k.bias", h.kv_dim(), true);
      L.bv = vector_tensor(p + "attn_v.bias", h.kv_dim(), true);
    }
    if (h.has_qk_norm) {
      L.q_norm = vector_tensor(p + "attn_q_norm.weight", h.head_dim, true);
      L.k_norm = vector_tensor(p + "attn_k_norm.weight", h.head_dim, true);
    }
  }
}

void LlamaModel::embed(const int32_t* tokens, int32_t n, float* x) {
  const uint64_t row = tok_embd_->nbytes / uint64_t(hp_.n_vocab);
  for (int32_t t = 0; t < n; ++t)
    dequant_row(tok_embd_->type, tok_embd_->data + uint64_t(tokens[t]) * row, x + int64_t(t) * hp_.n_embd,
                hp_.n_embd);
}

void LlamaModel::linear(const Linear& w, const float* x, int32_t n, float* y) {
  if (w.gpu) {
    ++stats_.gpu_submits;
    if (backend_->matmul(w.gpu, x, n, y)) return;
    fall_back_to_cpu("matmul");
  }
  matmul(*pool_, w.cpu, x, n, y);
}

void LlamaModel::linear_group(const Linear* const* ws, int32_t n_w, const float* x, int32_t n, float* const* ys) {
  if (ws[0]->gpu) {
    BackendWeight* gw[4];
    bool all = true;
    for (int32_t i = 0; i < n_w; ++i) all = all && (gw[i] = ws[i]->gpu) != nullptr;
    if (all) {
      ++stats_.gpu_submits;
      if (backend_->matmul_group(gw, n_w, x, n, ys)) return;
      fall_back_to_cpu("matmul_group");
    }
  }
  WeightView wv[4];
  for (int32_t i = 0; i < n_w; ++i) wv[i] = ws[i]->cpu;
  matmul_group(*pool_, wv, n_w, x, n, ys);
}

void LlamaModel::cpu_layer(int32_t l, float* x, int32_t n, int32_t pos) {
  const Hparams& h = hp_;
  const Layer& L = layers_[size_t(l)];
  const int64_t E = h.n_embd, QD = h.q_dim(), KD = h.kv_dim(), F = h.n_ff;
  float* xn = xn_.data();
  float *q = q_.data(), *k = k_.data(), *v = v_.data();

  pool_->parallel_for(n, 1, [&](int64_t b, int64_t e, int) {
    for (int64_t t = b; t < e; ++t) rmsnorm(x + t * E, L.attn_norm, xn + t * E, E, h.rms_eps);
  });
  const Linear* qkv[3] = {&L.wq, &L.wk, &L.wv};
  float* qkv_out[3] = {q, k, v};
  linear_group(qkv, 3, xn, n, qkv_out);

  // Per token: biases, q/k norm, RoPE, then the KV store (f16).
  kv_.reserve(pos + n);
  uint16_t* kc = kv_.k(l);
  uint16_t* vc = kv_.v(l);
  pool_->parallel_for(n, 1, [&](int64_t b, int64_t e, int ith) {
    float* cs = rope_cs_.data() + int64_t(ith) * h.n_rot;
    for (int64_t t = b; t < e; ++t) {
      float *qt = q + t * QD, *kt = k + t * KD, *vt = v + t * KD;
      if (L.bq) {
        add_inplace(qt, L.bq, QD);
        add_inplace(kt, L.bk, KD);
        add_inplace(vt, L.bv, KD);
      }
      if (L.q_norm) {
        for (int32_t hh = 0; hh < h.n_head; ++hh)
          rmsnorm(qt + hh * h.head_dim, L.q_norm, qt + hh * h.head_dim, h.head_dim, h.rms_eps);
        for (int32_t hh = 0; hh < h.n_head_kv; ++hh)
          rmsnorm(kt + hh * h.head_dim, L.k_norm, kt + hh * h.head_dim, h.head_dim, h.rms_eps);
      }
      rope_angles(pos + int32_t(t), h.n_rot, h.rope_freq_base, h.rope_freq_scale, rope_freqs_, cs);
      rope_apply(qt, h.n_head, h.head_dim, h.n_rot, h.rope_type, cs);
      rope_apply(kt, h.n_head_kv, h.head_dim, h.n_rot, h.rope_type, cs);
      uint16_t* kd = kc + (pos + t) * KD;
      uint16_t* vd = vc + (pos + t) * KD;
      for (int64_t i = 0; i < KD; ++i) {
        kd[i] = fp32_to_fp16(kt[i]);
        vd[i] = fp32_to_fp16(vt[i]);
      }
    }
  });

  AttentionArgs a;
  a.q = q;
  a.n_tok = n;
  a.pos0 = pos;
  a.k = kc;
  a.v = vc;
  a.kv_stride = KD;
  a.n_head = h.n_head;
  a.n_head_kv = h.n_head_kv;
  a.head_dim = h.head_dim;
  a.scale = 1.0f / std::sqrt(float(h.head_dim));
  a.out = att_.data();
  attention(*pool_, a, att_scratch_);

  linear(L.wo, att_.data(), n, o_.data());
  pool_->parallel_for(n, 1, [&](int64_t b, int64_t e, int) {
    for (int64_t t = b; t < e; ++t) {
      add_inplace(x + t * E, o_.data() + t * E, E);
      rmsnorm(x + t * E, L.ffn_norm, xn + t * E, E, h.rms_eps);
    }
  });
  const Linear* gu[2] = {&L.gate, &L.up};
  float* gu_out[2] = {g_.data(), u_.data()};
  linear_group(gu, 2, xn, n, gu_out);
  pool_->parallel_for(n * F, 4096, [&](int64_t b, int64_t e, int) {
    silu_mul(g_.data() + b, u_.data() + b, g_.data() + b, e - b);
  });
  linear(L.down, g_.data(), n, o_.data());
  pool_->parallel_for(n, 1, [&](int64_t b, int64_t e, int) {
    for (int64_t t = b; t < e; ++t) add_inplace(x + t * E, o_.data() + t * E, E);
  });
}

bool LlamaModel::eval_chunk(const int32_t* tokens, int32_t n, int32_t pos, bool all_logits, float* logits_out,
                            bool may_view) {
  const Hparams& h = hp_;
  const int64_t E = h.n_embd;
  auto grow = [](std::vector<float>& b, int64_t sz) {
    if (int64_t(b.size()) < sz) b.resize(size_t(sz));
  };
  grow(x_, n * E);
  grow(xn_, n * E);
  grow(q_, int64_t(n) * h.q_dim());
  grow(k_, int64_t(n) * h.kv_dim());
  grow(v_, int64_t(n) * h.kv_dim());
  grow(att_, int64_t(n) * h.q_dim());
  grow(o_, n * E);
  grow(g_, int64_t(n) * h.n_ff);
  grow(u_, int64_t(n) * h.n_ff);
  grow(rope_cs_, int64_t(pool_->size()) * h.n_rot);

  float* x = x_.data();
  embed(tokens, n, x);
  const int32_t n_cpu = span_ ? h.n_layer - n_layer_gpu_ : h.n_layer;
  for (int32_t l = 0; l < n_cpu; ++l) cpu_layer(l, x, n, pos);
  if (span_) {
    // The span runs every remaining layer.
    if (span_fail_at_ >= 0 && pos + n > span_fail_at_) {  // test-only knob: FISH_TEST_SPAN_FAIL_AT
      span_fail_reason_ = "simulated by FISH_TEST_SPAN_FAIL_AT=" + std::to_string(span_fail_at_);
      return false;
    }
    if (!grow_span_kv(pos + n)) {
      span_fail_reason_ = "span_kv_reserve(" + std::to_string(pos + n) + "): " + backend_->last_error();
      return false;
    }
    const SpanOut out = run_span(x, n, pos, all_logits, logits_out, may_view);
    if (out == SpanOut::Failed) return false;  // x is untouched; eval() falls back and replays
    if (out == SpanOut::Logits) return true;
  }

  // Final norm and LM head for the tokens whose logits are wanted (none for a
  // chunk of a longer prompt whose logits nobody reads).
  if (!logits_out) return true;
  const int32_t t0 = all_logits ? 0 : n - 1;
  const int32_t nl = n - t0;
  float* xn = xn_.data();
  for (int32_t t = t0; t < n; ++t)
    rmsnorm(x + int64_t(t) * E, output_norm_, xn + int64_t(t - t0) * E, E, h.rms_eps);
  linear(output_, xn, nl, logits_out);
  return true;
}

LlamaModel::SpanOut LlamaModel::run_span(float* x, int32_t n, int32_t pos, bool all_logits, float* logits_out,
                                         bool may_view) {
  span_pos_.resize(size_t(n));
  for (int32_t t = 0; t < n; ++t) span_pos_[size_t(t)] = pos + t;
  SpanBatch b;
  b.n_tok = n;
  b.x = x;
  b.pos = span_pos_.data();
  // The head in the span's own forward when it is attached and the plugin
  // gives these rows' logits; x comes back only when the head runs here.
  const bool head = span_head_ && logits_out && (!all_logits || span_head_all_rows_);
  if (head) {
    span_rows_.assign(size_t(n), all_logits ? 1 : 0);
    span_rows_[size_t(n - 1)] = 1;
    b.logits_rows = span_rows_.data();
    b.logits_view = span_view_ && may_view;
    b.logits = logits_out;
  } else {
    b.x_out = logits_out != nullptr;
  }
  ++stats_.gpu_submits;
  if (backend_->span_forward(span_, b)) {
    if (b.logits_view) logits_view_ = b.view;
    return head ? SpanOut::Logits : SpanOut::Stream;
  }
  if (head && backend_->last_status() == ComputeBackend::kUnsupported) {
    // The plugin cannot give these rows' logits (a refusal changes nothing):
    // from now on it gives only what it can, and x comes back for the head here.
    if (all_logits && n > 1) span_head_all_rows_ = false;
    else span_head_ = false;
    if (gpu_verbose_)
      std::fprintf(stderr, "fish: the span gives no logits for %s (%s): x back, the head as its own step\n",
                   span_head_ ? "several rows" : "its rows", backend_->last_error().c_str());
    SpanBatch again;
    again.n_tok = n;
    again.x = x;
    again.pos = span_pos_.data();
    again.x_out = true;
    ++stats_.gpu_submits;
    if (backend_->span_forward(span_, again)) return SpanOut::Stream;
  }
  span_fail_reason_ = backend_->last_error();
  return SpanOut::Failed;
}

void LlamaModel::eval(const int32_t* tokens, int32_t n, int32_t pos, bool all_logits) {
  if (vocab_only_) throw Error("eval: the model was loaded with vocab_only (tokenizer only)");
  if (n <= 0) throw Error("eval: no tokens");
  if (pos < 0 || pos > kv_len_)
    throw Error("eval: position " + std::to_string(pos) + " leaves a gap after the " + std::to_string(kv_len_) +
                " cached positions");
  if (int64_t(pos) + n > n_ctx_)
    throw Error("eval: positions up to " + std::to_string(int64_t(pos) + n) + " exceed the context length " +
                std::to_string(n_ctx_) + " (use a larger -c)");
  for (int32_t i = 0; i < n; ++i)
    if (tokens[i] < 0 || tokens[i] >= hp_.n_vocab)
      throw Error("eval: token id " + std::to_string(tokens[i]) + " is out of range (vocabulary of " +
                  std::to_string(hp_.n_vocab) + ")");
  logits_view_ = nullptr;  // the previous eval's logits are no longer readable
  if (pos < kv_len_) kv_truncate(pos);

  const int64_t V = hp_.n_vocab;
  n_logits_ = all_logits ? n : 1;
  if (int64_t(logits_.size()) < n_logits_ * V) logits_.resize(size_t(n_logits_ * V));
  for (int32_t done = 0; done < n;) {
    const int32_t c = std::min(kMaxChunk, n - done);
    // With all_logits each chunk writes its rows; otherwise only the last chunk's last token.
    float* out = all_logits ? logits_.data() + int64_t(done) * V : done + c == n ? logits_.data() : nullptr;
    // A view lasts until the next forward: only for logits that come from one chunk.
    const bool may_view = !all_logits || c == n;
    const int32_t p = pos + done;
    if (kv_replay_needed_) replay_history(p);
    if (!eval_chunk(tokens + done, c, p, all_logits, out, may_view)) {
      // The span failed (x untouched): its layers move to the CPU, whose KV for
      // them lacks positions < p; replay_history rebuilds it, then this chunk
      // runs again.
      fall_back_to_cpu("the span", span_fail_reason_);  // the reason names the call
      replay_history(p);
      if (!eval_chunk(tokens + done, c, p, all_logits, out, may_view))
        throw Error("eval: the backend failed again after falling back to the CPU");
    }
    history_.resize(size_t(p));
    history_.insert(history_.end(), tokens + done, tokens + done + c);
    kv_len_ = p + c;
    kv_.set_len(kv_len_);
    done += c;
  }
}

bool LlamaModel::grow_span_kv(int32_t n) {
  if (n <= span_kv_cap_) return true;
  // Grow geometrically (at least 1024 more positions), never past n_ctx.
  const int32_t want = std::min(n_ctx_, std::max(n, std::max(span_kv_cap_ * 2, span_kv_cap_ + 1024)));
  if (backend_->span_kv_reserve(span_, want)) {
    span_kv_cap_ = want;
    return true;
  }
  if (want > n && backend_->span_kv_reserve(span_, n)) {  // the doubled size did not fit: exactly enough
    span_kv_cap_ = n;
    return true;
  }
  return false;
}

void LlamaModel::replay_history(int32_t p) {
  // Layers that ran in a span have no CPU KV: evaluate the history again on the
  // CPU (CPU layers recompute identical values) so no position is missing.
  kv_replay_needed_ = false;
  if (p == 0) return;
  std::vector<int32_t> hist(history_.begin(), history_.begin() + p);
  for (int32_t r = 0; r < p; r += kMaxChunk)
    if (!eval_chunk(hist.data() + r, std::min(kMaxChunk, p - r), r, false, nullptr, false))
      throw Error("eval: the backend failed again after falling back to the CPU");
}

const float* LlamaModel::logits(int32_t i) const {
  if (i < 0) i = n_logits_ - 1;
  if (i >= n_logits_) return nullptr;
  const float* base = logits_view_ ? logits_view_ : logits_.data();
  return base + int64_t(i) * hp_.n_vocab;
}

void LlamaModel::own_logits() {
  if (!logits_view_) return;
  std::memcpy(logits_.data(), logits_view_, size_t(n_logits_) * size_t(hp_.n_vocab) * sizeof(float));
  logits_view_ = nullptr;
}

void LlamaModel::kv_truncate(int32_t n) {
  n = std::max(0, std::min(n, kv_len_));
  own_logits();  // span_kv_truncate may invalidate a logits view
  if (span_ && !backend_->span_kv_truncate(span_, 0, n)) fall_back_to_cpu("span_kv_truncate");
  kv_len_ = n;
  kv_.set_len(n);
  history_.resize(size_t(n));
}

}  // namespace fish
