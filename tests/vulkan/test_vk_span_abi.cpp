// The plugin ABI's span structs into fish_vulkan's (span_abi.cpp), without a
// device: a llama / qwen2 / qwen3 description by role becomes the SpanIn it
// says, and everything fish_vulkan does not run is refused with
// FISH_E_UNSUPPORTED naming it (an unknown role, a norm,
// activation, RoPE or gating value it lacks, several sequences, logits of a
// row other than the batch's last), malformed structs with
// FISH_E_INVALID_ARGUMENT.
#include <catch2/catch.hpp>

#include <functional>
#include <string>
#include <vector>

#include "span_abi.h"

using fish::vk::FailKind;
using fish::vk::Failure;

namespace {

constexpr int E = 64, H = 4, KVH = 2, D = 16, F = 96;

// A two-layer description with fake weight handles (the conversion never
// dereferences them) that the tests then break one field at a time.
struct Desc {
  fish_arch arch{};
  std::vector<float> norm = std::vector<float>(E, 1.0f), qbias = std::vector<float>(H * D, 0.5f);
  std::vector<float> kbias = std::vector<float>(KVH * D, 0.5f), qk = std::vector<float>(D, 1.0f);
  std::vector<std::vector<fish_layer_tensor>> tensors;
  std::vector<fish_span_layer> layers;
  fish_span_desc desc{};
  std::vector<uint64_t> fake = std::vector<uint64_t>(64);

  Desc() {
    arch.struct_size = sizeof arch;
    arch.norm_eps = 1e-6f, arch.rope = FISH_ROPE_NEOX, arch.n_rot = D, arch.rope_freq_base = 1e6f, arch.rope_freq_scale = 1;
    for (int l = 0; l < 2; ++l) {
      std::vector<fish_layer_tensor> t;
      const uint32_t mats[] = {FISH_ROLE_ATTN_Q, FISH_ROLE_ATTN_K, FISH_ROLE_ATTN_V, FISH_ROLE_ATTN_OUT,
                               FISH_ROLE_FFN_GATE, FISH_ROLE_FFN_UP, FISH_ROLE_FFN_DOWN};
      for (uint32_t r : mats) t.push_back(tensor(r, reinterpret_cast<fish_weight*>(&fake[size_t(l * 8) + r]), nullptr, 0));
      t.push_back(tensor(FISH_ROLE_ATTN_NORM, nullptr, norm.data(), E));
      t.push_back(tensor(FISH_ROLE_FFN_NORM, nullptr, norm.data(), E));
      t.push_back(tensor(FISH_ROLE_ATTN_Q_BIAS, nullptr, qbias.data(), H * D));
      t.push_back(tensor(FISH_ROLE_ATTN_K_BIAS, nullptr, kbias.data(), KVH * D));
      t.push_back(tensor(FISH_ROLE_ATTN_K_NORM, nullptr, qk.data(), D));
      tensors.push_back(t);
    }
    desc.struct_size = sizeof desc;
    desc.first_layer = 3, desc.n_layers = 2, desc.n_embd = E, desc.n_head = H, desc.n_head_kv = KVH, desc.head_dim = D;
    desc.n_ff = F, desc.n_ctx = 64, desc.n_seq = 1, desc.arch = &arch;
  }
  static fish_layer_tensor tensor(uint32_t role, fish_weight* w, const float* data, int64_t n) {
    fish_layer_tensor t{};
    t.struct_size = sizeof t;
    t.role = role, t.weight = w, t.data = data, t.n = n;
    return t;
  }
  const fish_span_desc* get() {
    layers.clear();
    for (auto& t : tensors) {
      fish_span_layer l{};
      l.struct_size = sizeof l;
      l.n_tensors = uint32_t(t.size());
      l.tensors = t.data();
      layers.push_back(l);
    }
    desc.layers = layers.data();
    return &desc;
  }
};

// The conversion's failure (kind and message), or "" when it succeeds.
std::string refusal(const std::function<void()>& f, FailKind* kind) {
  try {
    f();
  } catch (const Failure& e) {
    *kind = e.kind();
    return e.what();
  }
  return "";
}

void refused(Desc& d, FailKind want, const std::string& says, bool with_weights = true) {
  FailKind kind = FailKind::Internal;
  const std::string m = refusal([&] { fish::vk::span_in_from_abi(d.get(), with_weights); }, &kind);
  INFO("refusal: \"" << m << "\", expected one that says \"" << says << "\"");
  CHECK(kind == want);
  CHECK(m.find(says) != std::string::npos);
  if (want == FailKind::Unsupported) CHECK(m.rfind("fish_vulkan: ", 0) == 0);
}

}  // namespace

TEST_CASE("span_abi: a description by role becomes the span it describes", "[vulkan]") {
  Desc d;
  const fish::vk::SpanIn in = fish::vk::span_in_from_abi(d.get(), true);
  CHECK((in.first_layer == 3 && in.n_layers == 2 && in.n_embd == E && in.n_head == H && in.n_head_kv == KVH));
  CHECK((in.head_dim == D && in.n_ff == F && in.n_ctx == 64 && in.neox && in.n_rot == D && in.norm_eps == 1e-6f));
  CHECK((in.rope_freq_base == 1e6f && in.rope_freq_scale == 1.0f && in.rope_freqs == nullptr && in.attn_scale == 0.0f));
  REQUIRE(in.layers.size() == 2);
  for (int l = 0; l < 2; ++l) {
    const fish::vk::SpanLayerIn& L = in.layers[size_t(l)];
    // Every matrix role lands in its slot, whatever order the tensors came in.
    const uint32_t roles[] = {FISH_ROLE_ATTN_Q, FISH_ROLE_ATTN_K, FISH_ROLE_ATTN_V, FISH_ROLE_ATTN_OUT,
                              FISH_ROLE_FFN_GATE, FISH_ROLE_FFN_UP, FISH_ROLE_FFN_DOWN};
    for (int k = 0; k <= fish::vk::kFfnDown; ++k)
      CHECK(reinterpret_cast<uint64_t*>(L.w[k]) == &d.fake[size_t(l * 8) + roles[k]]);
    for (int k = fish::vk::kFfnRouter; k < fish::vk::kLayerWeights; ++k) CHECK(L.w[k] == nullptr);  // MoE's
    CHECK((L.attn_norm == d.norm.data() && L.ffn_norm == d.norm.data() && L.bq == d.qbias.data()));
    CHECK((L.bk == d.kbias.data() && L.bv == nullptr && L.q_norm == nullptr && L.k_norm == d.qk.data()));
  }
  // span_bytes is asked before the weights exist.
  for (auto& t : d.tensors)
    for (auto& e : t) e.weight = nullptr;
  CHECK(fish::vk::span_in_from_abi(d.get(), false).layers.size() == 2);
  refused(d, FailKind::InvalidArgument, "FISH_ROLE_ATTN_Q has no weight");
}

TEST_CASE("span_abi: what fish_vulkan does not run is refused as unsupported, naming it", "[vulkan]") {
  {
    Desc d;  // several sequences are taken
    d.desc.n_seq = 5;
    CHECK(fish::vk::span_in_from_abi(d.get(), true).n_seq == 5);
  }
  {
    Desc d;
    d.tensors[0].push_back(Desc::tensor(77, nullptr, d.norm.data(), E));
    refused(d, FailKind::Unsupported, "role 77 is not a role it knows");
  }
  const std::pair<std::function<void(fish_arch&)>, const char*> arch_cases[] = {
      {[](fish_arch& a) { a.norm = 1; }, "norm kind 1"},
      {[](fish_arch& a) { a.activation = 3; }, "activation 3"},
      {[](fish_arch& a) { a.rope = 1; }, "RoPE kind 1"},
      {[](fish_arch& a) { a.gating = 9; }, "gating 9"},
  };
  for (const auto& [change, says] : arch_cases) {
    Desc d;
    change(d.arch);
    refused(d, FailKind::Unsupported, says);
  }
}

TEST_CASE("span_abi: malformed descriptions are invalid arguments", "[vulkan]") {
  // MoE roles in a dense span, a dense FFN in a MoE span, a shared expert without experts.
  {
    Desc d;
    d.tensors[1].push_back(Desc::tensor(FISH_ROLE_FFN_ROUTER, reinterpret_cast<fish_weight*>(&d.fake[0]), nullptr, 0));
    refused(d, FailKind::InvalidArgument, "layer 4 FISH_ROLE_FFN_ROUTER in a span with n_expert 0");
  }
  {
    Desc d;
    d.tensors[0].push_back(Desc::tensor(FISH_ROLE_FFN_SHEXP_GATE, nullptr, d.norm.data(), E));
    refused(d, FailKind::InvalidArgument, "FISH_ROLE_FFN_SHEXP_GATE in a span with n_expert 0");
  }
  {
    Desc d;
    d.arch.n_expert = 8, d.arch.n_expert_used = 2, d.arch.n_ff_expert = 32;
    refused(d, FailKind::InvalidArgument, "FISH_ROLE_FFN_GATE in a span with n_expert 8");
  }
  {
    Desc d;
    d.arch.n_expert = 8, d.arch.n_expert_used = 9, d.arch.n_ff_expert = 32;
    refused(d, FailKind::InvalidArgument, "1 <= n_expert_used (9) <= n_expert (8)");
  }
  {
    Desc d;
    d.arch.n_ff_shexp = 128;
    refused(d, FailKind::InvalidArgument, "a shared expert needs experts");
  }
  {
    Desc d;
    d.desc.n_seq = 0;
    refused(d, FailKind::InvalidArgument, "n_seq 0");
  }
  {
    Desc d;
    d.desc.arch = nullptr;
    refused(d, FailKind::InvalidArgument, "no architecture block");
  }
  {
    Desc d;
    d.tensors[0].push_back(d.tensors[0][0]);
    refused(d, FailKind::InvalidArgument, "layer 3 FISH_ROLE_ATTN_Q is given twice");
  }
  {
    Desc d;
    d.tensors[1][8].n = E - 1;  // FFN_NORM
    refused(d, FailKind::InvalidArgument, "layer 4 FISH_ROLE_FFN_NORM has 63 values, the span needs 64");
  }
  {
    Desc d;
    d.tensors[0].erase(d.tensors[0].begin() + 7);  // ATTN_NORM
    refused(d, FailKind::InvalidArgument, "FISH_ROLE_ATTN_NORM / FISH_ROLE_FFN_NORM missing");
  }
  {
    // Fields past a struct's struct_size read as 0: an arch block of 2.0's first
    // fields only is a plain RMS / SiLU / normal-RoPE one.
    Desc d;
    d.arch.rope = FISH_ROPE_NEOX;
    d.arch.struct_size = offsetof(fish_arch, rope);
    CHECK_FALSE(fish::vk::span_in_from_abi(d.get(), true).neox);
  }
}

TEST_CASE("span_abi: a batch is one forward: its rows' sequences and positions, the rows whose logits are wanted",
          "[vulkan]") {
  std::vector<float> x(3 * E), logits(100);
  std::vector<int32_t> pos = {7, 3, 8}, seq = {0, 2, 0};
  std::vector<uint8_t> want = {0, 1, 1};
  auto batch = [&] {
    fish_span_batch b{};
    b.struct_size = sizeof b;
    b.flags = FISH_FORWARD_X_OUT;
    b.n_tok = 3, b.x = x.data(), b.seq = seq.data(), b.pos = pos.data(), b.logits_rows = want.data();
    b.logits = logits.data();
    return b;
  };
  fish_span_batch b = batch();
  fish::vk::Span::Forward f = fish::vk::forward_from_abi(&b);
  CHECK((f.x == x.data() && f.x_out == x.data() && f.n_tok == 3 && f.pos0 == 7));
  CHECK((f.seq == seq.data() && f.pos == pos.data() && f.logits_rows == want.data()));
  // No rows wanted, no seq: every row is sequence 0; no x out.
  want = {0, 0, 0};
  b.flags = FISH_FORWARD_LOGITS_VIEW, b.logits = nullptr, b.seq = nullptr;
  f = fish::vk::forward_from_abi(&b);
  CHECK((f.x_out == nullptr && f.logits_rows == nullptr && f.seq == nullptr && !f.logits));

  // The batch itself is checked here; its rows against the span (ids, order,
  // gaps, capacity) by Span::forward (test_vk_span_seq).
  struct Bad {
    std::function<void(fish_span_batch&)> change;
    FailKind kind;
    const char* says;
  };
  const Bad bad[] = {
      {[&](fish_span_batch& c) { c.flags |= 1u << 7; }, FailKind::Unsupported, "flags 128"},
      {[&](fish_span_batch& c) { c.logits = nullptr; }, FailKind::InvalidArgument, "no logits buffer"},
      {[&](fish_span_batch& c) { c.n_tok = 0; }, FailKind::InvalidArgument, "n_tok >= 1"},
      {[&](fish_span_batch& c) { c.pos = nullptr; }, FailKind::InvalidArgument, "x and pos"},
      {[&](fish_span_batch& c) { c.struct_size = offsetof(fish_span_batch, logits); }, FailKind::InvalidArgument,
       "short batch"},
  };
  for (const Bad& e : bad) {
    seq = {0, 2, 0}, pos = {7, 3, 8}, want = {0, 1, 1};
    fish_span_batch c = batch();
    e.change(c);
    FailKind kind = FailKind::Internal;
    const std::string m = refusal([&] { fish::vk::forward_from_abi(&c); }, &kind);
    INFO("refusal: \"" << m << "\", expected one that says \"" << e.says << "\"");
    CHECK(kind == e.kind);
    CHECK(m.find(e.says) != std::string::npos);
  }
}
