// Synthetic span layers and the two plugins' spans of them (see span_synth.h).
#include "span_synth.h"

#include <catch2/catch.hpp>
#include <dlfcn.h>

#include <cmath>
#include <cstring>
#include <random>

#include "backend/host_services.h"
#include "span_abi.h"
#include "test_paths.h"

namespace fish::vktest {

const SynthShape kSynthShapes[4] = {
    {"llama3 F32", 64, 4, 2, 16, 96, 2, 16, FISH_ROPE_NORMAL, 500000.f, true, false, false, GgmlType::F32},
    {"qwen2 Q8_0", 64, 4, 1, 16, 128, 2, 16, FISH_ROPE_NEOX, 1000000.f, false, true, false, GgmlType::Q8_0},
    {"qwen3 F32 head_dim 32 (E/H = 16)", 64, 4, 2, 32, 96, 2, 32, FISH_ROPE_NEOX, 1000000.f, false, false, true,
     GgmlType::F32},
    {"llama Q4_K partial rotary", 256, 4, 2, 64, 512, 1, 32, FISH_ROPE_NORMAL, 10000.f, false, false, false,
     GgmlType::Q4_K},
};

// name, E, H, KVH, D, F (unused), L, n_rot, rope, base, freqs, biases, qk_norm, type, NE, K, FE, FS, renormalised
const SynthShape kSynthMoeShapes[4] = {
    {"qwen3moe 8x2 F32", 64, 4, 2, 16, 0, 2, 16, FISH_ROPE_NEOX, 1000000.f, false, false, true, GgmlType::F32, 8, 2,
     32, 0, true},
    {"qwen2moe 6x3 + shared Q8_0", 64, 4, 1, 16, 0, 2, 16, FISH_ROPE_NEOX, 1000000.f, false, true, false,
     GgmlType::Q8_0, 6, 3, 32, 64, false},
    {"mixtral 8x2 Q4_K", 256, 4, 2, 64, 0, 1, 64, FISH_ROPE_NORMAL, 1000000.f, false, false, false, GgmlType::Q4_K, 8,
     2, 256, 0, true},
    // Qwen3-30B-A3B's routing (128 experts, 8 per token, renormalised) and its
    // head_dim != n_embd / n_head, small.
    {"qwen3moe 128x8 Q8_0", 128, 4, 2, 64, 0, 2, 64, FISH_ROPE_NEOX, 1000000.f, false, false, true, GgmlType::Q8_0,
     128, 8, 64, 0, true},
};

namespace {

constexpr int kVocab = 96;
const uint32_t kMatrixRoles[kSynthSlots] = {
    FISH_ROLE_ATTN_Q,       FISH_ROLE_ATTN_K,       FISH_ROLE_ATTN_V,        FISH_ROLE_ATTN_OUT,
    FISH_ROLE_FFN_GATE,     FISH_ROLE_FFN_UP,       FISH_ROLE_FFN_DOWN,      FISH_ROLE_FFN_ROUTER,
    FISH_ROLE_FFN_GATE_EXPS, FISH_ROLE_FFN_UP_EXPS, FISH_ROLE_FFN_DOWN_EXPS, FISH_ROLE_FFN_GATE_SHEXP,
    FISH_ROLE_FFN_UP_SHEXP, FISH_ROLE_FFN_DOWN_SHEXP};

std::vector<float> randv(size_t n, float lo, float hi, std::mt19937_64& rng) {
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> v(n);
  for (auto& e : v) e = u(rng);
  return v;
}

fish_layer_tensor vector_tensor(uint32_t role, const std::vector<float>& v) {
  fish_layer_tensor t{};
  t.struct_size = sizeof t;
  t.role = role;
  t.data = v.data();
  t.n = int64_t(v.size());
  return t;
}

fish_weight_desc weight_desc(const Matrix& m, int n_mat) {
  fish_weight_desc d{};
  d.struct_size = sizeof d;
  d.type = uint32_t(m.type);
  d.name = m.name.c_str();
  d.n_in = m.n_in;
  d.n_out = m.n_out;
  d.n_mat = n_mat;
  d.data = m.data.data();
  d.nbytes = m.data.size();
  return d;
}

// ---- the reference plugin, through its ABI table ----
const fish_plugin_api& reference_api() {
  static const fish_plugin_api api = [] {
    void* lib = dlopen(test::bin_path("libfish_reference.so").c_str(), RTLD_NOW | RTLD_LOCAL);
    INFO(dlerror());
    REQUIRE(lib);
    void* sym = dlsym(lib, FISH_PLUGIN_ENTRY);
    REQUIRE(sym);
    fish_plugin_query_fn query;
    std::memcpy(&query, &sym, sizeof query);
    fish_plugin_api a{};
    a.struct_size = sizeof a;
    REQUIRE(query(FISH_PLUGIN_ABI_VERSION, backend::host_api(), &a) == FISH_OK);
    return a;
  }();
  return api;
}

class ReferenceSpan : public TestSpan {
 public:
  ReferenceSpan(const Synth& s, int n_ctx, int n_seq) : api_(reference_api()) {
    fish_backend_config cfg{};
    cfg.struct_size = sizeof cfg;
    cfg.device_index = -1;
    REQUIRE(api_.backend_create(&cfg, &be_) == FISH_OK);
    check(api_.open(be_));
    std::vector<LayerWeights> w;
    for (const auto& layer : s.w) {
      LayerWeights lw{};
      for (int k = 0; k < kSynthSlots; ++k) {
        if (layer[size_t(k)].data.empty()) continue;
        const fish_weight_desc d = weight_desc(layer[size_t(k)], n_mat_of(s, k));
        check(api_.upload(be_, &d, &lw[size_t(k)]));
      }
      w.push_back(lw);
    }
    const auto desc = describe_span(s, n_ctx, w, n_seq);
    check(api_.span_create(be_, &desc->desc, &span_));
  }
  ~ReferenceSpan() override {
    api_.span_destroy(be_, span_);
    api_.backend_destroy(be_);
  }
  void forward_rows(float* x, int n_tok, const int32_t* seq, const int32_t* pos, const uint8_t* want,
                    float* logits) override {
    fish_span_batch b{};
    b.struct_size = sizeof b;
    b.flags = FISH_FORWARD_X_OUT;
    b.n_tok = n_tok, b.x = x, b.seq = seq, b.pos = pos, b.logits_rows = want, b.logits = logits;
    check(api_.span_forward(be_, span_, &b));
  }
  void truncate_seq(int seq, int n) override { check(api_.span_kv_truncate(be_, span_, seq, n)); }
  void copy(int src, int dst, int p0, int p1) override { check(api_.span_kv_copy(be_, span_, src, dst, p0, p1)); }
  void reserve(int n) override { check(api_.span_kv_reserve(be_, span_, n)); }
  int kv_len_seq(int seq) override {
    int32_t n = -1;
    check(api_.span_kv_len(be_, span_, seq, &n));
    return n;
  }
  void set_head(const Synth& s) override {
    const fish_weight_desc d = weight_desc(s.head, 1);
    fish_weight* head = nullptr;
    check(api_.upload(be_, &d, &head));
    check(api_.span_set_head(be_, span_, head, s.head_norm.data()));
  }

 private:
  void check(fish_status st) {
    INFO("reference plugin: " << api_.last_error(be_));
    REQUIRE(st == FISH_OK);
  }
  const fish_plugin_api& api_;
  fish_backend* be_ = nullptr;
  fish_span* span_ = nullptr;
};

// ---- fish_vulkan, through VulkanBackend ----
class VulkanSpan : public TestSpan {
 public:
  VulkanSpan(std::unique_ptr<vk::VulkanBackend> be, const Synth& s, int n_ctx, int n_seq) : be_(std::move(be)) {
    std::vector<LayerWeights> w;
    for (const auto& layer : s.w) {
      LayerWeights lw{};
      for (int k = 0; k < kSynthSlots; ++k) {
        if (layer[size_t(k)].data.empty()) continue;
        vk::WeightUpload u = upload_desc(layer[size_t(k)]);
        u.n_mat = n_mat_of(s, k);
        vk::Weight* up = be_->upload(u);
        check(up != nullptr);
        lw[size_t(k)] = reinterpret_cast<fish_weight*>(up);
      }
      w.push_back(lw);
    }
    const auto desc = describe_span(s, n_ctx, w, n_seq);
    span_ = be_->span_create(vk::span_in_from_abi(&desc->desc, true));
    check(span_ != nullptr);
  }
  void forward_rows(float* x, int n_tok, const int32_t* seq, const int32_t* pos, const uint8_t* want,
                    float* logits) override {
    vk::Span::Forward f;
    f.x = x, f.n_tok = n_tok, f.seq = seq, f.pos = pos, f.x_out = x, f.logits_rows = want;
    const float* l = nullptr;
    check(be_->span_forward(span_, f, &l));
    if (l && logits) std::memcpy(logits, l, size_t(span_->logits_count()) * size_t(span_->head_rows()) * sizeof(float));
  }
  void truncate_seq(int seq, int n) override { check(be_->span_kv_truncate(span_, seq, n)); }
  void copy(int src, int dst, int p0, int p1) override { check(be_->span_kv_copy(span_, src, dst, p0, p1)); }
  void reserve(int n) override { check(be_->span_kv_reserve(span_, n)); }
  int kv_len_seq(int seq) override {
    int n = -1;
    check(be_->span_kv_len(span_, seq, &n));
    return n;
  }
  void set_head(const Synth& s) override {
    vk::Weight* head = be_->upload(upload_desc(s.head));
    check(head && be_->span_set_head(span_, head, s.head_norm.data()));
  }
  vk::VulkanBackend& backend() { return *be_; }
  vk::Span& span() { return *span_; }

 private:
  void check(bool ok) {
    INFO("fish_vulkan: " << be_->error());
    REQUIRE(ok);
  }
  std::unique_ptr<vk::VulkanBackend> be_;
  vk::Span* span_ = nullptr;
};

}  // namespace

void TestSpan::forward(float* x, int n_tok, int pos0, float* logits) {
  std::vector<int32_t> seq(static_cast<size_t>(n_tok), 0), pos(static_cast<size_t>(n_tok));
  for (int t = 0; t < n_tok; ++t) pos[size_t(t)] = pos0 + t;
  std::vector<uint8_t> want(static_cast<size_t>(n_tok), 0);
  want.back() = logits != nullptr;
  forward_rows(x, n_tok, seq.data(), pos.data(), want.data(), logits);
}

Synth make_synth(const SynthShape& v, uint64_t seed) {
  Synth s;
  s.v = v;
  std::mt19937_64 rng(seed);
  const int QD = v.H * v.D, KD = v.KVH * v.D;
  const bool moe = v.n_expert > 0;
  const int64_t shapes[kSynthSlots][2] = {{QD, v.E},   {KD, v.E},   {KD, v.E},   {v.E, QD},   {v.F, v.E},
                                          {v.F, v.E},  {v.E, v.F},  {0, 0},      {v.FE, v.E}, {v.FE, v.E},
                                          {v.E, v.FE}, {v.FS, v.E}, {v.FS, v.E}, {v.E, v.FS}};
  for (int l = 0; l < v.L; ++l) {
    std::array<Matrix, kSynthSlots> ws;
    for (int k = 0; k < kSynthSlots; ++k) {
      const uint64_t sd = seed + 100 * uint64_t(l) + uint64_t(k);
      if (k == kSlotRouter) {
        // f32 as GGUF MoE files keep it; one scale for all experts, so that
        // every expert is chosen now and then (logits ~ N(0, 2²) at |n_i| ~ 10).
        if (!moe) continue;
        Matrix& r = ws[size_t(k)];
        r.type = GgmlType::F32, r.n_in = v.E, r.n_out = v.n_expert, r.row_bytes = uint64_t(v.E) * 4;
        r.name = "router";
        // Uniform ±0.35 (σ 0.2) / sqrt(E): logits of σ ≈ 2 over inputs of rms ~10.
        std::vector<float> scaled = randv(size_t(v.n_expert) * size_t(v.E), -0.35f, 0.35f, rng);
        for (auto& e : scaled) e /= std::sqrt(float(v.E));
        r.data.resize(scaled.size() * 4);
        std::memcpy(r.data.data(), scaled.data(), r.data.size());
        continue;
      }
      const bool dense_ffn = k >= kSlotGate && k <= kSlotDown, exps = k >= kSlotGateExps && k <= kSlotDownExps;
      if (moe ? dense_ffn || (k >= kSlotGateSh && v.FS == 0) : k > kSlotDown) continue;
      Matrix& m = ws[size_t(k)];
      m = random_matrix(v.type, shapes[k][1], shapes[k][0], sd);
      for (int e = 1; exps && e < v.n_expert; ++e) {  // the stack: n_expert matrices one after another
        const Matrix more = random_matrix(v.type, shapes[k][1], shapes[k][0], sd + 1000 * uint64_t(e));
        m.data.insert(m.data.end(), more.data.begin(), more.data.end());
      }
    }
    s.w.push_back(std::move(ws));
    // The shared expert's gate: n·g of σ ≈ 1 (sigmoid not saturated).
    s.shexp_gate.push_back(v.FS > 0 ? randv(size_t(v.E), -0.2f, 0.2f, rng) : std::vector<float>{});
    for (auto& e : s.shexp_gate.back()) e /= std::sqrt(float(v.E));
    // random_matrix's rows are small (0.0005..0.05 scale): norms of ~10 make the layers matter.
    s.attn_norm.push_back(randv(size_t(v.E), 8.f, 12.f, rng));
    s.ffn_norm.push_back(randv(size_t(v.E), 8.f, 12.f, rng));
    s.bq.push_back(randv(size_t(QD), -0.5f, 0.5f, rng));
    s.bk.push_back(randv(size_t(KD), -0.5f, 0.5f, rng));
    s.bv.push_back(randv(size_t(KD), -0.5f, 0.5f, rng));
    s.qn.push_back(randv(size_t(v.D), 0.7f, 1.3f, rng));
    s.kn.push_back(randv(size_t(v.D), 0.7f, 1.3f, rng));
  }
  for (int i = 0; i < v.n_rot / 2; ++i) s.freqs.push_back(1.0f + 3.0f * float(i) / float(v.n_rot / 2));
  s.head = random_matrix(v.type, v.E, kVocab, seed + 7777);
  s.head_norm = randv(size_t(v.E), 8.f, 12.f, rng);
  return s;
}

int n_mat_of(const Synth& s, int k) { return k >= kSlotGateExps && k <= kSlotDownExps ? s.v.n_expert : 1; }

std::unique_ptr<SpanDescription> describe_span(const Synth& s, int n_ctx, const std::vector<LayerWeights>& w,
                                               int n_seq) {
  const SynthShape& v = s.v;
  auto d = std::make_unique<SpanDescription>();
  d->arch.struct_size = sizeof d->arch;
  d->arch.norm = FISH_NORM_RMS, d->arch.norm_eps = 1e-5f, d->arch.activation = FISH_ACT_SILU;
  d->arch.rope = v.rope, d->arch.n_rot = v.n_rot, d->arch.rope_freq_base = v.base, d->arch.rope_freq_scale = 1;
  d->arch.rope_freqs = v.freqs ? s.freqs.data() : nullptr;
  d->arch.n_expert = v.n_expert, d->arch.n_expert_used = v.n_used, d->arch.n_ff_expert = v.FE, d->arch.n_ff_shexp = v.FS;
  d->arch.gating = v.gating_norm ? FISH_GATING_SOFTMAX_TOPK_NORM : FISH_GATING_SOFTMAX_TOPK;
  d->tensors.reserve(size_t(v.L) * 24);  // no reallocation: the layers point into it
  for (int l = 0; l < v.L; ++l) {
    const size_t first = d->tensors.size(), L = size_t(l);
    for (int k = 0; k < kSynthSlots; ++k) {
      if (s.w[L][size_t(k)].data.empty()) continue;  // not in this layer (w[L][k] may be null: span_bytes)
      fish_layer_tensor t{};
      t.struct_size = sizeof t;
      t.role = kMatrixRoles[k];
      t.weight = w[L][size_t(k)];
      d->tensors.push_back(t);
    }
    d->tensors.push_back(vector_tensor(FISH_ROLE_ATTN_NORM, s.attn_norm[L]));
    d->tensors.push_back(vector_tensor(FISH_ROLE_FFN_NORM, s.ffn_norm[L]));
    if (v.biases) {
      d->tensors.push_back(vector_tensor(FISH_ROLE_ATTN_Q_BIAS, s.bq[L]));
      d->tensors.push_back(vector_tensor(FISH_ROLE_ATTN_K_BIAS, s.bk[L]));
      d->tensors.push_back(vector_tensor(FISH_ROLE_ATTN_V_BIAS, s.bv[L]));
    }
    if (v.qk_norm) {
      d->tensors.push_back(vector_tensor(FISH_ROLE_ATTN_Q_NORM, s.qn[L]));
      d->tensors.push_back(vector_tensor(FISH_ROLE_ATTN_K_NORM, s.kn[L]));
    }
    if (v.FS > 0) d->tensors.push_back(vector_tensor(FISH_ROLE_FFN_SHEXP_GATE, s.shexp_gate[L]));
    fish_span_layer fl{};
    fl.struct_size = sizeof fl;
    fl.n_tensors = uint32_t(d->tensors.size() - first);
    fl.tensors = d->tensors.data() + first;
    d->layers.push_back(fl);
  }
  d->desc.struct_size = sizeof d->desc;
  d->desc.n_layers = v.L;
  d->desc.n_embd = v.E, d->desc.n_head = v.H, d->desc.n_head_kv = v.KVH, d->desc.head_dim = v.D, d->desc.n_ff = v.n_expert > 0 ? 0 : v.F;
  d->desc.n_ctx = n_ctx;
  d->desc.n_seq = n_seq;
  d->desc.arch = &d->arch;
  d->desc.layers = d->layers.data();
  return d;
}

std::unique_ptr<TestSpan> reference_span(const Synth& s, int n_ctx, int n_seq) {
  return std::make_unique<ReferenceSpan>(s, n_ctx, n_seq);
}

std::unique_ptr<TestSpan> vulkan_span(const Synth& s, int n_ctx, const vk::VkConfig& cfg, int n_seq) {
  auto be = open_backend("vulkan span", test_options(cfg));
  if (!be) return nullptr;
  return std::make_unique<VulkanSpan>(std::move(be), s, n_ctx, n_seq);
}

vk::VulkanBackend& backend_of(TestSpan& t) { return dynamic_cast<VulkanSpan&>(t).backend(); }
vk::Span& span_of(TestSpan& t) { return dynamic_cast<VulkanSpan&>(t).span(); }

}  // namespace fish::vktest
