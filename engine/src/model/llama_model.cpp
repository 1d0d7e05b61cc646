#include "model/llama_model.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "common/error.h"
#include "cpu/f16_row.h"
#include "cpu/ops.h"
#include "gguf/gguf_file.h"
#include "gguf/tensor_stack.h"
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
  if (opt.n_seq < 1) throw Error("load: n_seq " + std::to_string(opt.n_seq) + " (must be >= 1)");
  m->kv_.init(m->hp_.n_layer, m->hp_.kv_dim(), m->n_ctx_, opt.n_seq, std::vector<bool>(size_t(m->hp_.n_layer), true));
  m->history_.assign(size_t(opt.n_seq), {});
  m->prefix_cache_limit_ = uint64_t(std::max(0, opt.prefix_cache_mb)) << 20;
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

Experts LlamaModel::expert_tensor(const std::string& p, const std::string& kind, int64_t n_in, int64_t n_out) {
  Experts ex;
  const std::string name = p + kind + "_exps.weight";
  const gguf::TensorInfo* t = file_->tensor(name);
  const int64_t NE = hp_.n_expert;
  if (!t && file_->tensor(gguf::expert_tensor_name(p, kind, 0))) {
    // An older file: expert e as its own 2-D tensor p + kind + ".e.weight".
    std::vector<const gguf::TensorInfo*> parts;
    for (int64_t e = 0; e < NE; ++e) {
      const std::string pn = gguf::expert_tensor_name(p, kind, e);
      const gguf::TensorInfo* pt = file_->tensor(pn);
      if (!pt)
        throw Error(file_->path() + ": tensor '" + pn + "' is missing (expert " + std::to_string(e) + " of " +
                    std::to_string(NE) + ", the file stores each expert as its own tensor)");
      if (pt->n_dims != 2 || pt->ne[0] != n_in || pt->ne[1] != n_out)
        throw Error(file_->path() + ": tensor '" + pn + "' has shape " + pt->shape_str() + ", expected [" +
                    std::to_string(n_in) + ", " + std::to_string(n_out) + "] (n_in, n_out)");
      if (!parts.empty() && pt->type != parts[0]->type)
        throw Error(file_->path() + ": tensor '" + pn + "' is " + ggml_type_name(pt->type) + " but expert 0's is " +
                    ggml_type_name(parts[0]->type) + " (the experts of one kind must share a type)");
      parts.push_back(pt);
    }
    if (file_->tensor(gguf::expert_tensor_name(p, kind, NE)))
      throw Error(file_->path() + ": tensor '" + gguf::expert_tensor_name(p, kind, NE) + "' is an expert past expert_count " +
                  std::to_string(NE));
    // Contiguous: one stack over the file's bytes; else the model's own
    // description with no bytes (data null) and the parts.
    std::optional<gguf::TensorInfo> view = gguf::stack_view(parts, name);
    if (!view) {
      view = gguf::TensorInfo{};
      view->name = name;
      view->type = parts[0]->type;
      view->n_dims = 3;
      view->ne[0] = n_in;
      view->ne[1] = n_out;
      view->ne[2] = NE;
      view->offset = parts[0]->offset;
      view->nbytes = parts[0]->nbytes * uint64_t(NE);
      ex.parts = parts;
    }
    ex.tensor = &expert_stacks_.emplace_back(std::move(*view));
    ex.cpu.resize(size_t(NE));
    for (int64_t e = 0; e < NE; ++e)
      ex.cpu[size_t(e)] = WeightView{parts[size_t(e)]->type, parts[size_t(e)]->data, n_in, n_out,
                                     parts[size_t(e)]->nbytes / uint64_t(n_out)};
    n_params_ += n_in * n_out * NE;
    return ex;
  }
  if (!t)
    throw Error(file_->path() + ": tensor '" + name + "' is missing (an MoE layer's stacked experts; nor is there '" +
                gguf::expert_tensor_name(p, kind, 0) + "', expert 0 as its own tensor)");
  if (t->n_dims != 3 || t->ne[0] != n_in || t->ne[1] != n_out || t->ne[2] != NE)
    throw Error(file_->path() + ": tensor '" + name + "' has shape " + t->shape_str() + ", expected [" +
                std::to_string(n_in) + ", " + std::to_string(n_out) + ", " + std::to_string(NE) +
                "] (n_in, n_out, expert_count)");
  if (!can_dequantize(t->type))
    throw Error(file_->path() + ": tensor '" + name + "' has unsupported type " + ggml_type_name(t->type));
  ex.tensor = t;
  const uint64_t per_expert = t->nbytes / uint64_t(NE);
  ex.cpu.resize(size_t(NE));
  for (int64_t e = 0; e < NE; ++e)
    ex.cpu[size_t(e)] = WeightView{t->type, t->data + uint64_t(e) * per_expert, n_in, n_out, per_expert / uint64_t(n_out)};
  n_params_ += n_in * n_out * NE;
  return ex;
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
    if (h.moe()) {
      L.router = matrix_tensor(p + "ffn_gate_inp.weight", h.n_embd, h.n_expert, true);
      L.gate_exps = expert_tensor(p, "ffn_gate", h.n_embd, h.n_ff_expert);
      L.up_exps = expert_tensor(p, "ffn_up", h.n_embd, h.n_ff_expert);
      L.down_exps = expert_tensor(p, "ffn_down", h.n_ff_expert, h.n_embd);
      if (h.n_ff_shexp > 0) {
        L.gate_shexp = matrix_tensor(p + "ffn_gate_shexp.weight", h.n_embd, h.n_ff_shexp, true);
        L.up_shexp = matrix_tensor(p + "ffn_up_shexp.weight", h.n_embd, h.n_ff_shexp, true);
        L.down_shexp = matrix_tensor(p + "ffn_down_shexp.weight", h.n_ff_shexp, h.n_embd, true);
        L.shexp_gate = vector_tensor(p + "ffn_gate_inp_shexp.weight", h.n_embd, true);
      }
    } else {
      L.gate = matrix_tensor(p + "ffn_gate.weight", h.n_embd, h.n_ff, true);
      L.up = matrix_tensor(p + "ffn_up.weight", h.n_embd, h.n_ff, true);
      L.down = matrix_tensor(p + "ffn_down.weight", h.n_ff, h.n_embd, true);
    }
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
    if (w.gpu_be->matmul(w.gpu, x, n, y)) return;
    fall_back_to_cpu("matmul");
  }
  matmul(*pool_, w.cpu, x, n, y);
}

void LlamaModel::linear_group(const Linear* const* ws, int32_t n_w, const float* x, int32_t n, float* const* ys) {
  if (ws[0]->gpu) {
    BackendWeight* gw[4];
    bool all = true;
    for (int32_t i = 0; i < n_w; ++i) all = all && (gw[i] = ws[i]->gpu) != nullptr && ws[i]->gpu_be == ws[0]->gpu_be;
    if (all) {
      ++stats_.gpu_submits;
      if (ws[0]->gpu_be->matmul_group(gw, n_w, x, n, ys)) return;
      fall_back_to_cpu("matmul_group");
    }
  }
  WeightView wv[4];
  for (int32_t i = 0; i < n_w; ++i) wv[i] = ws[i]->cpu;
  matmul_group(*pool_, wv, n_w, x, n, ys);
}

void LlamaModel::cpu_layer(int32_t l, float* x, const Rows& r) {
  const int32_t n = r.n;
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

  // Per token: biases, q/k norm, RoPE, then the KV store (f16) at its
  // sequence's position (the pages were prepared by eval_chunk). A row's RoPE
  // angles depend on its position alone: the forward's first CPU layer fills
  // rope_cs_ [n, n_rot] and the later ones read it (sin/cos once per row, not
  // once per row and layer).
  const bool fill_rope = !rope_cs_filled_;
  pool_->parallel_for(n, 1, [&](int64_t b, int64_t e, int) {
    for (int64_t t = b; t < e; ++t) {
      float* cs = rope_cs_.data() + t * h.n_rot;
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
      if (fill_rope) rope_angles(r.pos[t], h.n_rot, h.rope_freq_base, h.rope_freq_scale, rope_freqs_, cs);
      rope_apply(qt, h.n_head, h.head_dim, h.n_rot, h.rope_type, cs);
      rope_apply(kt, h.n_head_kv, h.head_dim, h.n_rot, h.rope_type, cs);
      fp32_to_fp16_row(kt, kv_.k_at(l, r.seq[t], r.pos[t]), KD);
      fp32_to_fp16_row(vt, kv_.v_at(l, r.seq[t], r.pos[t]), KD);
    }
  });
  rope_cs_filled_ = true;

  // Each row attends over its own sequence's pages, up to its position.
  att_rows_.resize(size_t(n));
  for (int32_t t = 0; t < n; ++t) {
    AttentionRow& ar = att_rows_[size_t(t)];
    if (t > 0 && r.seq[t] == r.seq[t - 1]) {
      ar = att_rows_[size_t(t - 1)];
    } else {
      ar.k_pages = kv_.k_pages(l, r.seq[t]);
      ar.v_pages = kv_.v_pages(l, r.seq[t]);
    }
    ar.pos = r.pos[t];
  }
  AttentionArgs a;
  a.q = q;
  a.n_tok = n;
  a.rows = att_rows_.data();
  a.page_shift = KvCache::kPageShift;
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
  if (h.moe()) {
    moe_ffn(l, xn, x, n);
    return;
  }
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

bool LlamaModel::eval_chunk(const Rows& r, const uint8_t* want, float* logits_out, bool may_view, int32_t layer_end) {
  const Hparams& h = hp_;
  const int64_t E = h.n_embd;
  const int32_t n = r.n;
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
  const int64_t ff = h.moe() ? h.n_ff_shexp : h.n_ff;  // the experts have buffers of their own (moe_)
  grow(g_, int64_t(n) * ff);
  grow(u_, int64_t(n) * ff);
  grow(rope_cs_, int64_t(n) * h.n_rot);
  rope_cs_filled_ = false;  // these rows' angles: filled by the first CPU layer (cpu_layer)

  // KV pages for every row's position (copies of pages shared with another
  // sequence), before any layer writes: per sequence, its rows' range.
  int32_t max_pos = 0;
  seq_lo_.assign(size_t(kv_.n_seq()), -1);
  seq_hi_.assign(size_t(kv_.n_seq()), -1);
  for (int32_t t = 0; t < n; ++t) {
    const size_t s = size_t(r.seq[t]);
    if (seq_lo_[s] < 0 || r.pos[t] < seq_lo_[s]) seq_lo_[s] = r.pos[t];
    seq_hi_[s] = std::max(seq_hi_[s], r.pos[t]);
    max_pos = std::max(max_pos, r.pos[t]);
  }
  for (int32_t s = 0; s < kv_.n_seq(); ++s)
    if (seq_lo_[size_t(s)] >= 0) kv_.prepare(s, seq_lo_[size_t(s)], seq_hi_[size_t(s)] + 1);

  float* x = x_.data();
  embed(r.tok, n, x);
  // The layers in order: on the CPU (or per matmul), then each device's span
  // (x [n, n_embd] f32 goes in and comes back through host memory between
  // them); the last span may end with the head. A replay stops at layer_end.
  const bool replay = layer_end >= 0 && layer_end < h.n_layer;
  if (!replay) layer_end = h.n_layer;
  failed_part_ = -1;
  int32_t l = 0;
  for (size_t k = 0; k < parts_.size() && l < layer_end; ++k) {
    DevicePart& d = parts_[k];
    if (!d.span) continue;
    if (d.span_first >= layer_end) break;
    for (; l < d.span_first; ++l) cpu_layer(l, x, r);
    failed_part_ = int32_t(k);
    if (span_fail_at_ >= 0 && max_pos + 1 > span_fail_at_ &&
        (span_fail_dev_ < 0 || span_fail_dev_ == d.slot)) {  // test-only knob: FISH_TEST_SPAN_FAIL_AT
      span_fail_reason_ = "simulated by FISH_TEST_SPAN_FAIL_AT=" + std::to_string(span_fail_at_);
      if (span_fail_dev_ >= 0) span_fail_reason_ += '@' + std::to_string(span_fail_dev_);
      return false;
    }
    if (!grow_span_kv(d, max_pos + 1)) {
      span_fail_reason_ = "span_kv_reserve(" + std::to_string(max_pos + 1) + "): " + d.be->last_error();
      return false;
    }
    const bool last = d.end == h.n_layer && !replay;
    const SpanOut out = run_span(d, last, x, r, last ? want : nullptr, last ? logits_out : nullptr, may_view);
    if (out == SpanOut::Failed) return false;  // x is untouched; eval() falls back and replays
    failed_part_ = -1;
    l = d.end;
    if (out == SpanOut::Logits) return true;
  }
  for (; l < layer_end; ++l) cpu_layer(l, x, r);
  if (replay) return true;

  // Final norm and LM head for the rows whose logits are wanted (none for a
  // chunk of a longer prompt whose logits nobody reads).
  if (!logits_out || !want) return true;
  if (hidden_mode_) {  // embeddings: the normed stream is the output, no LM head
    int32_t nh = 0;
    for (int32_t t = 0; t < n; ++t)
      if (want[t]) rmsnorm(x + int64_t(t) * E, output_norm_, logits_out + int64_t(nh++) * E, E, h.rms_eps);
    return true;
  }
  float* xn = xn_.data();
  int32_t nl = 0;
  for (int32_t t = 0; t < n; ++t)
    if (want[t]) rmsnorm(x + int64_t(t) * E, output_norm_, xn + int64_t(nl++) * E, E, h.rms_eps);
  if (nl > 0) linear(output_, xn, nl, logits_out);
  return true;
}

LlamaModel::SpanOut LlamaModel::run_span(DevicePart& d, bool last, float* x, const Rows& r, const uint8_t* want,
                                         float* logits_out, bool may_view) {
  const int32_t n = r.n;
  ComputeBackend* be = d.be;
  int32_t n_want = 0;
  for (int32_t t = 0; t < n && want; ++t) n_want += want[t] ? 1 : 0;
  const bool last_only = n_want == 1 && want[n - 1];
  SpanBatch b;
  b.n_tok = n;
  b.x = x;
  b.seq = kv_.n_seq() > 1 ? r.seq : nullptr;
  b.pos = r.pos;
  // The head in the span's own forward when it is attached and the plugin
  // gives these rows' logits; x comes back only when the head runs here.
  const bool head =
      last && span_head_ && !hidden_mode_ && logits_out && n_want > 0 && (last_only || span_head_all_rows_);
  if (head) {
    b.logits_rows = want;
    b.logits_view = span_view_ && may_view;
    b.logits = logits_out;
  } else {
    b.x_out = !last || (logits_out != nullptr && n_want > 0);  // the next span or the head takes x
  }
  ++stats_.gpu_submits;
  if (be->span_forward(d.span, b)) {
    if (b.logits_view) logits_view_ = b.view;
    return head ? SpanOut::Logits : SpanOut::Stream;
  }
  if (head && be->last_status() == ComputeBackend::kUnsupported) {
    // The plugin cannot give these rows' logits (a refusal changes nothing):
    // from now on it gives only what it can, and x comes back for the head here.
    if (!last_only) span_head_all_rows_ = false;
    else span_head_ = false;
    if (gpu_verbose_)
      std::fprintf(stderr, "fish: the span gives no logits for %s (%s): x back, the head as its own step\n",
                   span_head_ ? "several rows" : "its rows", be->last_error().c_str());
    SpanBatch again;
    again.n_tok = n;
    again.x = x;
    again.seq = b.seq;
    again.pos = r.pos;
    again.x_out = true;
    ++stats_.gpu_submits;
    if (be->span_forward(d.span, again)) return SpanOut::Stream;
  }
  span_fail_reason_ = be->last_error();
  return SpanOut::Failed;
}

void LlamaModel::eval(const int32_t* tokens, int32_t n, int32_t pos, bool all_logits) {
  if (n <= 0) throw Error("eval: no tokens");
  pos_buf_.resize(size_t(n));
  for (int32_t i = 0; i < n; ++i) pos_buf_[size_t(i)] = pos + i;
  want_buf_.assign(size_t(n), all_logits ? 1 : 0);
  want_buf_[size_t(n - 1)] = 1;
  eval_batch(tokens, nullptr, pos_buf_.data(), want_buf_.data(), n);
}

void LlamaModel::eval_batch(const int32_t* tokens, const int32_t* seq, const int32_t* pos, const uint8_t* want,
                            int32_t n) {
  if (vocab_only_) throw Error("eval: the model was loaded with vocab_only (tokenizer only)");
  if (n <= 0) throw Error("eval: no tokens");
  if (!seq) {
    if (int32_t(seq_zero_.size()) < n) seq_zero_.assign(size_t(n), 0);
    seq = seq_zero_.data();
  }
  const int32_t S = kv_.n_seq();
  std::vector<int32_t> first(size_t(S), -1), next(size_t(S), -1);
  for (int32_t i = 0; i < n; ++i) {
    const int32_t s = seq[i], p = pos[i];
    if (s < 0 || s >= S)
      throw Error("eval: row " + std::to_string(i) + " is sequence " + std::to_string(s) + ", outside 0.." +
                  std::to_string(S - 1) + " (the model was loaded for " + std::to_string(S) + " sequence(s))");
    if (tokens[i] < 0 || tokens[i] >= hp_.n_vocab)
      throw Error("eval: token id " + std::to_string(tokens[i]) + " is out of range (vocabulary of " +
                  std::to_string(hp_.n_vocab) + ")");
    if (next[size_t(s)] < 0) {
      if (p < 0 || p > kv_.len(s))
        throw Error("eval: position " + std::to_string(p) + " leaves a gap after the " + std::to_string(kv_.len(s)) +
                    " cached positions" + (S > 1 ? " of sequence " + std::to_string(s) : std::string()));
      first[size_t(s)] = p;
    } else if (p != next[size_t(s)]) {
      throw Error("eval: row " + std::to_string(i) + " of sequence " + std::to_string(s) + " is at position " +
                  std::to_string(p) + ", not " + std::to_string(next[size_t(s)]) +
                  " (a sequence's rows are consecutive positions)");
    }
    if (int64_t(p) + 1 > n_ctx_)
      throw Error("eval: positions up to " + std::to_string(int64_t(p) + 1) + " exceed the context length " +
                  std::to_string(n_ctx_) + " (use a larger -c)");
    next[size_t(s)] = p + 1;
  }
  logits_view_ = nullptr;  // the previous eval's logits are no longer readable
  for (int32_t s = 0; s < S; ++s)
    if (first[size_t(s)] >= 0 && first[size_t(s)] < kv_.len(s)) seq_truncate(s, first[size_t(s)]);

  // Rows' outputs: logits [n_vocab], or the normed stream [n_embd] (eval_batch_hidden).
  const int64_t V = hidden_mode_ ? hp_.n_embd : hp_.n_vocab;
  std::vector<float>& outs = hidden_mode_ ? hidden_ : logits_;
  n_hidden_ = 0;
  row_logit_.assign(size_t(n), -1);
  n_logits_ = 0;
  int32_t first_kept = -1, last_kept = -1;
  for (int32_t i = 0; i < n; ++i)
    if (want ? want[i] != 0 : i == n - 1) {
      row_logit_[size_t(i)] = n_logits_++;
      if (first_kept < 0) first_kept = i;
      last_kept = i;
    }
  if (int64_t(outs.size()) < n_logits_ * V) outs.resize(size_t(n_logits_ * V));
  if (!want) {
    want_buf_.assign(size_t(n), 0);
    want_buf_[size_t(n - 1)] = 1;
    want = want_buf_.data();
  }
  for (int32_t done = 0; done < n;) {
    const int32_t c = std::min(kMaxChunk, n - done);
    const Rows r{tokens + done, seq + done, pos + done, c};
    // This chunk's kept rows go to their slots; a view lasts until the next
    // forward, so only when every kept row is in this one chunk.
    int32_t slot = -1;
    for (int32_t i = done; i < done + c && slot < 0; ++i) slot = row_logit_[size_t(i)];
    float* out = slot >= 0 ? outs.data() + int64_t(slot) * V : nullptr;
    const bool may_view = !hidden_mode_ && first_kept >= done && last_kept < done + c;
    if (kv_replay_end_ > 0) replay_history(kv_replay_end_);
    // A span that fails (x untouched) moves its device's layers to the CPU,
    // whose KV for them lacks the cached positions: replay_history rebuilds
    // it (through the layers before them, the other devices' spans included),
    // then this chunk runs again. Each device falls back at most once.
    const size_t n_parts = parts_.size();
    for (size_t attempt = 0; !eval_chunk(r, out ? want + done : nullptr, out, may_view); ++attempt) {
      if (failed_part_ < 0 || attempt >= n_parts)
        throw Error("eval: the backend failed again after falling back to the CPU");
      fall_back_part(size_t(failed_part_), "the span", span_fail_reason_);  // the reason names the call
      replay_history(kv_replay_end_);
    }
    for (int32_t i = done; i < done + c; ++i) {
      std::vector<int32_t>& hist = history_[size_t(seq[i])];
      hist.resize(size_t(pos[i]));
      hist.push_back(tokens[i]);
      kv_.set_len(seq[i], pos[i] + 1);
    }
    done += c;
  }
}

void LlamaModel::eval_batch_hidden(const int32_t* tokens, const int32_t* seq, const int32_t* pos,
                                   const uint8_t* want, int32_t n) {
  struct Mode {
    bool& on;
    explicit Mode(bool& b) : on(b) { on = true; }
    ~Mode() { on = false; }
  } mode(hidden_mode_);
  try {
    eval_batch(tokens, seq, pos, want, n);
  } catch (...) {
    n_logits_ = 0;
    row_logit_.clear();
    throw;
  }
  n_hidden_ = n_logits_;
  n_logits_ = 0;  // the logits buffer holds nothing of this eval
}

const float* LlamaModel::hidden_row(int32_t row) const {
  if (row < 0 || row >= int32_t(row_logit_.size()) || row_logit_[size_t(row)] < 0) return nullptr;
  const int32_t i = row_logit_[size_t(row)];
  if (i >= n_hidden_) return nullptr;
  return hidden_.data() + int64_t(i) * hp_.n_embd;
}

bool LlamaModel::grow_span_kv(DevicePart& d, int32_t n) {
  if (n <= d.kv_cap) return true;
  // Grow geometrically (at least 1024 more positions), never past n_ctx.
  const int32_t want = std::min(n_ctx_, std::max(n, std::max(d.kv_cap * 2, d.kv_cap + 1024)));
  if (d.be->span_kv_reserve(d.span, want)) {
    d.kv_cap = want;
    return true;
  }
  if (want > n && d.be->span_kv_reserve(d.span, n)) {  // the doubled size did not fit: exactly enough
    d.kv_cap = n;
    return true;
  }
  return false;
}

void LlamaModel::replay_history(int32_t layer_end) {
  // Layers that ran in a span have no CPU KV: evaluate each sequence's history
  // again through layers < layer_end (CPU layers recompute identical values;
  // the spans before them rewrite their KV at the same positions) so no
  // position is missing.
  kv_replay_end_ = 0;
  for (int32_t s = 0; s < kv_.n_seq(); ++s) {
    const int32_t p = kv_.len(s);
    if (p == 0) continue;
    const std::vector<int32_t> hist(history_[size_t(s)].begin(), history_[size_t(s)].begin() + p);
    std::vector<int32_t> sq(static_cast<size_t>(kMaxChunk), s), ps(static_cast<size_t>(kMaxChunk));
    for (int32_t r = 0; r < p; r += kMaxChunk) {
      const int32_t c = std::min(kMaxChunk, p - r);
      for (int32_t i = 0; i < c; ++i) ps[size_t(i)] = r + i;
      if (!eval_chunk(Rows{hist.data() + r, sq.data(), ps.data(), c}, nullptr, nullptr, false, layer_end)) {
        // Another device's span failed during the replay: it falls back too,
        // and the replay starts over through its layers as well.
        if (failed_part_ < 0) throw Error("eval: the backend failed again after falling back to the CPU");
        fall_back_part(size_t(failed_part_), "the span", span_fail_reason_);
        return replay_history(std::max(layer_end, kv_replay_end_));
      }
    }
  }
}

const float* LlamaModel::logits(int32_t i) const {
  if (i < 0) i = n_logits_ - 1;
  if (i < 0 || i >= n_logits_) return nullptr;
  const float* base = logits_view_ ? logits_view_ : logits_.data();
  return base + int64_t(i) * hp_.n_vocab;
}

const float* LlamaModel::logits_row(int32_t row) const {
  if (row < 0 || row >= int32_t(row_logit_.size()) || row_logit_[size_t(row)] < 0) return nullptr;
  return logits(row_logit_[size_t(row)]);
}

void LlamaModel::own_logits() {
  if (!logits_view_) return;
  std::memcpy(logits_.data(), logits_view_, size_t(n_logits_) * size_t(hp_.n_vocab) * sizeof(float));
  logits_view_ = nullptr;
}

}  // namespace fish
