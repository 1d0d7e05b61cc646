// fish synth: the tiny shape in every type reads back with the right keys,
// shapes and types (its Q4_K_M mix tensor for tensor as llama.cpp's own
// synth-tiny-Q4_K_M.gguf); the weights are deterministic, sensibly scaled and
// keep the residual stream O(1); the real shapes are checked from their plans
// (tensor list, types, exact size) without generating the big models.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <map>
#include <set>

#include "common/error.h"
#include "convert/synth.h"
#include "convert/synth_shape.h"
#include "convert/synth_vocab.h"
#include "convert/type_mix.h"
#include "convert_test_util.h"
#include "quant/quant.h"
#include "gguf/gguf_file.h"
#include "test_paths.h"

using namespace fish;
using namespace fish::convert;

namespace {

std::string synth(const test::ScratchDir& dir, const std::string& shape, const std::string& type, uint64_t seed,
                  int threads, const std::string& name = "") {
  SynthOptions o;
  o.shape = shape;
  o.type = type;
  o.out = dir.file(name.empty() ? shape + "-" + type + ".gguf" : name);
  o.seed = seed;
  o.n_threads = threads;
  const SynthSummary s = synth_model(o);
  CHECK(std::filesystem::file_size(o.out) == s.file_bytes);
  return o.out;
}

double mean_of(const std::vector<float>& v) {
  double s = 0;
  for (float x : v) s += x;
  return s / double(v.size());
}
double std_of(const std::vector<float>& v) {
  const double m = mean_of(v);
  double s = 0;
  for (float x : v) s += (x - m) * (x - m);
  return std::sqrt(s / double(v.size()));
}
double rms(const std::vector<float>& v) {
  double s = 0;
  for (float x : v) s += double(x) * x;
  return std::sqrt(s / double(v.size()));
}

// y[o] = Σ_i W[o][i] x[i] for a GGUF matrix ne = [in, out] (rows of `in`).
std::vector<float> matvec(const gguf::File& f, const std::string& name, const std::vector<float>& x) {
  const gguf::TensorInfo* t = f.tensor(name);
  REQUIRE(t);
  REQUIRE(t->ne[0] == int64_t(x.size()));
  const std::vector<float> w = test::tensor_f32(*t);
  std::vector<float> y(size_t(t->ne[1]));
  for (int64_t o = 0; o < t->ne[1]; ++o) {
    double s = 0;
    for (int64_t i = 0; i < t->ne[0]; ++i) s += double(w[size_t(o * t->ne[0] + i)]) * x[size_t(i)];
    y[size_t(o)] = float(s);
  }
  return y;
}

std::vector<float> rms_norm(const gguf::File& f, const std::string& name, const std::vector<float>& x, float eps) {
  const std::vector<float> g = test::tensor_f32(*f.tensor(name));
  const double r = 1.0 / std::sqrt(rms(x) * rms(x) + eps);
  std::vector<float> y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = float(x[i] * r) * g[i];
  return y;
}

}  // namespace

TEST_CASE("synth: tiny in every type has the real file's keys, tensors and types", "[convert][synth]") {
  test::ScratchDir dir("synth_types");
  auto ref = gguf::File::open(test::model_path("synth-tiny-Q4_K_M.gguf"));  // made by llama.cpp's tools
  const std::map<std::string, uint32_t> file_types = {{"F32", 0}, {"F16", 1}, {"Q8_0", 7}, {"Q4_0", 2}, {"Q4_K_M", 15}};
  for (const char* type : {"F32", "F16", "Q8_0", "Q4_0", "Q4_K_M"}) {
    INFO("type " << type);
    auto f = gguf::File::open(synth(dir, "tiny", type, 7, 2));
    // Every key of the reference, with the same value type.
    for (auto& kv : ref->kvs()) {
      INFO("key " << kv.key);
      const gguf::Value* v = f->find(kv.key);
      REQUIRE(v);
      CHECK(v->type == kv.value.type);
    }
    CHECK(*f->get_str("general.architecture") == "llama");
    CHECK_THAT(std::string(*f->get_str("general.name")), Catch::Contains("synthetic"));
    CHECK(*f->get_u32("llama.embedding_length") == 256);
    CHECK(*f->get_u32("llama.block_count") == 4);
    CHECK(*f->get_u32("llama.attention.head_count") == 8);
    CHECK(*f->get_u32("llama.attention.head_count_kv") == 4);
    CHECK(*f->get_u32("llama.feed_forward_length") == 768);
    CHECK(*f->get_u32("llama.vocab_size") == 4096);
    CHECK(*f->get_u32("llama.context_length") == 2048);
    CHECK(*f->get_u32("llama.rope.dimension_count") == 32);
    CHECK(*f->get_f64("llama.rope.freq_base") == 10000.0);
    CHECK(float(*f->get_f64("llama.attention.layer_norm_rms_epsilon")) == 1e-5f);
    CHECK(*f->get_u32("general.file_type") == file_types.at(type));
    CHECK(*f->get_bool("tokenizer.ggml.add_bos_token"));
    CHECK(f->alignment() == 32);

    // The same tensors as the reference, with the same shapes.
    REQUIRE(f->tensors().size() == ref->tensors().size());
    for (auto& rt : ref->tensors()) {
      INFO("tensor " << rt.name);
      const gguf::TensorInfo* t = f->tensor(rt.name);
      REQUIRE(t);
      CHECK(t->n_dims == rt.n_dims);
      CHECK(std::equal(t->ne, t->ne + 4, rt.ne));
      if (t->n_dims == 1) CHECK(t->type == GgmlType::F32);
      else if (std::string(type) == "Q4_K_M") CHECK(t->type == rt.type);  // llama.cpp's mix, tensor for tensor
      else CHECK(ggml_type_name(t->type) == std::string(type));
    }
  }
}

TEST_CASE("synth: the Q4_K_M mix puts Q6_K exactly where the rule says", "[convert][synth]") {
  test::ScratchDir dir("synth_mix");
  auto f = gguf::File::open(synth(dir, "tiny", "Q4_K_M", 1, 1));
  int n_q6 = 0;
  for (auto& t : f->tensors()) {
    if (t.n_dims == 1) continue;
    const std::string n = t.name;
    const int layer = layer_of(n);
    // n_layer 4: n/8 = 0, 7n/8 = 3, so layers 2 and 3.
    const bool more = layer == 2 || layer == 3;
    const bool q6 = n == "output.weight" || (more && (n.find(".attn_v.") != std::string::npos ||
                                                      n.find(".ffn_down.") != std::string::npos));
    INFO(n);
    CHECK(t.type == (q6 ? GgmlType::Q6_K : GgmlType::Q4_K));
    n_q6 += q6;
  }
  CHECK(n_q6 == 5);
}

TEST_CASE("synth: deterministic for a seed, whatever the thread count", "[convert][synth]") {
  test::ScratchDir dir("synth_det");
  const auto a = test::read_bytes(synth(dir, "tiny", "Q4_K_M", 11, 1, "a.gguf"));
  const auto b = test::read_bytes(synth(dir, "tiny", "Q4_K_M", 11, 2, "b.gguf"));
  const auto c = test::read_bytes(synth(dir, "tiny", "Q4_K_M", 12, 2, "c.gguf"));
  CHECK(a.size() > 3000000);
  CHECK(a == b);
  REQUIRE(a.size() == c.size());  // same layout ("seed 11" and "seed 12" in the name are the same length)
  CHECK(a != c);
  // Different seeds give different weights in every tensor.
  auto fa = gguf::File::from_bytes(a, "a"), fc = gguf::File::from_bytes(c, "c");
  for (auto& t : fa->tensors()) {
    INFO(t.name);
    CHECK(std::memcmp(t.data, fc->tensor(t.name)->data, t.nbytes) != 0);
  }
}

TEST_CASE("synth: weight scales, and every type holds the same underlying weights", "[convert][synth]") {
  test::ScratchDir dir("synth_scale");
  auto f32 = gguf::File::open(synth(dir, "tiny", "F32", 3, 2));
  // token_embd and the input projections: std 1/sqrt(n_embd) = 1/16; ffn_down:
  // 1/sqrt(n_ff) / sqrt(2 n_layer); norms 1 ± 0.02.
  const auto emb = test::tensor_f32(*f32->tensor("token_embd.weight"));
  CHECK(std::abs(mean_of(emb)) < 0.001);
  CHECK(std_of(emb) == Approx(1.0 / 16).epsilon(0.01));
  const auto down = test::tensor_f32(*f32->tensor("blk.1.ffn_down.weight"));
  CHECK(std_of(down) == Approx(1.0 / std::sqrt(768.0) / std::sqrt(8.0)).epsilon(0.02));
  const auto norm = test::tensor_f32(*f32->tensor("blk.2.ffn_norm.weight"));
  CHECK(mean_of(norm) == Approx(1.0).epsilon(0.005));
  CHECK(std_of(norm) == Approx(0.02).epsilon(0.2));
  // Close to normal: 68.3% of a normal lies within one std; the sum of four
  // uniforms gives 1 - 2 F(2 - 1/sqrt(3)) = 66.93% (F the Irwin-Hall CDF).
  int64_t within = 0;
  for (float x : emb) within += std::abs(x) < 1.0f / 16;
  CHECK(double(within) / double(emb.size()) == Approx(0.6693).margin(0.005));

  // The quantised files hold the same weights, to the type's precision.
  const std::pair<const char*, double> bounds[] = {{"F16", 0.001}, {"Q8_0", 0.01}, {"Q4_0", 0.15}, {"Q4_K_M", 0.10}};
  for (auto& [type, bound] : bounds) {
    auto q = gguf::File::open(synth(dir, "tiny", type, 3, 2));
    for (const char* name : {"token_embd.weight", "blk.0.attn_q.weight", "blk.3.ffn_down.weight", "output.weight"}) {
      const auto a = test::tensor_f32(*f32->tensor(name));
      const auto b = test::tensor_f32(*q->tensor(name));
      double err = 0;
      for (size_t i = 0; i < a.size(); ++i) err += double(a[i] - b[i]) * (a[i] - b[i]);
      const double rel = std::sqrt(err / double(a.size())) / rms(a);
      INFO(type << " " << name << ": relative RMS error " << rel);
      CHECK(rel < bound);
      CHECK(rel > 0);
    }
  }
}

TEST_CASE("synth: the residual stream stays O(1) through the layers", "[convert][synth]") {
  // A one-token forward pass of the F32 tiny model (with one position, attention
  // returns v itself, so no RoPE or softmax is needed).
  test::ScratchDir dir("synth_resid");
  auto f = gguf::File::open(synth(dir, "tiny", "F32", 5, 2));
  const float eps = 1e-5f;
  const auto emb = test::tensor_f32(*f->tensor("token_embd.weight"));
  for (int token : {1, 300, 4000}) {
    std::vector<float> x(emb.begin() + token * 256, emb.begin() + (token + 1) * 256);
    for (int l = 0; l < 4; ++l) {
      const std::string b = "blk." + std::to_string(l) + ".";
      const auto v = matvec(*f, b + "attn_v.weight", rms_norm(*f, b + "attn_norm.weight", x, eps));
      std::vector<float> heads(256);  // 8 query heads of 32 share 4 KV heads
      for (int h = 0; h < 8; ++h)
        for (int j = 0; j < 32; ++j) heads[size_t(h * 32 + j)] = v[size_t((h / 2) * 32 + j)];
      const auto attn = matvec(*f, b + "attn_output.weight", heads);
      for (size_t i = 0; i < x.size(); ++i) x[i] += attn[i];
      const auto hn = rms_norm(*f, b + "ffn_norm.weight", x, eps);
      const auto g = matvec(*f, b + "ffn_gate.weight", hn);
      const auto u = matvec(*f, b + "ffn_up.weight", hn);
      std::vector<float> act(g.size());
      for (size_t i = 0; i < g.size(); ++i) act[i] = g[i] / (1.0f + std::exp(-g[i])) * u[i];
      const auto ffn = matvec(*f, b + "ffn_down.weight", act);
      for (size_t i = 0; i < x.size(); ++i) x[i] += ffn[i];
      INFO("token " << token << " layer " << l << ": attn " << rms(attn) << " ffn " << rms(ffn) << " residual "
                    << rms(x));
      CHECK(rms(attn) > 0.05);
      CHECK(rms(attn) < 1.0);
      CHECK(rms(ffn) > 0.05);
      CHECK(rms(ffn) < 1.0);
      CHECK(rms(x) < 2.0);
    }
    const auto logits = matvec(*f, "output.weight", rms_norm(*f, "output_norm.weight", x, eps));
    INFO("logit std " << std_of(logits));
    CHECK(std_of(logits) > 0.5);
    CHECK(std_of(logits) < 2.0);
  }
}

TEST_CASE("synth: the vocabulary", "[convert][synth]") {
  const SynthVocab v = make_synth_vocab(151936);
  REQUIRE(v.tokens.size() == 151936);
  REQUIRE(v.scores.size() == 151936);
  REQUIRE(v.token_type.size() == 151936);
  CHECK(v.tokens[0] == "<unk>");
  CHECK(v.tokens[1] == "<s>");
  CHECK(v.tokens[2] == "</s>");
  CHECK(v.token_type[0] == 2);
  CHECK(v.token_type[1] == 3);
  CHECK(v.token_type[2] == 3);
  char buf[8];
  for (int b = 0; b < 256; ++b) {
    std::snprintf(buf, sizeof buf, "<0x%02X>", b);
    CHECK(v.tokens[size_t(3 + b)] == buf);
    CHECK(v.token_type[size_t(3 + b)] == 6);
  }
  CHECK(std::set<std::string>(v.tokens.begin(), v.tokens.end()).size() == v.tokens.size());
  bool descending = true, normal = true, letters = true;
  for (size_t i = 259; i < v.tokens.size(); ++i) {
    if (i > 259) descending = descending && v.scores[i] < v.scores[i - 1];
    normal = normal && v.token_type[i] == 1;
    std::string s = v.tokens[i];
    if (s.rfind("\xE2\x96\x81", 0) == 0) s = s.substr(3);
    letters = letters && !s.empty() && s.find_first_not_of("abcdefghijklmnopqrstuvwxyz") == std::string::npos;
  }
  CHECK(descending);
  CHECK(normal);
  CHECK(letters);
  // Every single letter exists both as a word start and as a continuation.
  std::set<std::string> all(v.tokens.begin(), v.tokens.end());
  for (char c = 'a'; c <= 'z'; ++c) {
    CHECK(all.count(std::string(1, c)));
    CHECK(all.count("\xE2\x96\x81" + std::string(1, c)));
  }
  CHECK_THROWS_AS(make_synth_vocab(100), Error);
}

TEST_CASE("synth: Llama 3 rope_freqs factors", "[convert][synth]") {
  // Llama 3.2 1B: head_dim 64, base 500000, factor 32, low 1, high 4, original 8192.
  // Wavelength 2π·500000^(k/32) is below 8192/4 for k <= 14 (factor 1), above
  // 8192/1 for k >= 18 (factor 32), and in between for k = 15, 16, 17.
  const auto f = llama3_rope_factors(64, 500000.f, 32.f, 1.f, 4.f, 8192);
  REQUIRE(f.size() == 32);
  for (int k = 0; k <= 14; ++k) CHECK(f[size_t(k)] == 1.0f);
  for (int k = 18; k < 32; ++k) CHECK(f[size_t(k)] == 32.0f);
  CHECK(f[15] == Approx(1.65133).epsilon(1e-4));
  CHECK(f[16] == Approx(3.29226).epsilon(1e-4));
  CHECK(f[17] == Approx(9.66673).epsilon(1e-4));
  // Llama 3.1 8B: head_dim 128, factor 8.
  const auto g = llama3_rope_factors(128, 500000.f, 8.f, 1.f, 4.f, 8192);
  REQUIRE(g.size() == 64);
  CHECK(g.front() == 1.0f);
  CHECK(g.back() == 8.0f);
  CHECK(std::is_sorted(g.begin(), g.end()));
}

TEST_CASE("synth: the real shapes' plans (tensors, types, sizes)", "[convert][synth]") {
  auto plan = [](const char* shape, const char* type) {
    SynthOptions o;
    o.shape = shape;
    o.type = type;
    return plan_synth(o);
  };
  auto find = [](const SynthSummary& s, const std::string& name) -> const SynthTensor* {
    for (auto& t : s.tensors)
      if (t.name == name) return &t;
    return nullptr;
  };
  using V = std::vector<int64_t>;

  // Llama 3.2 1B, Q4_K_M: 147 tensors, tied (no output.weight: token_embd is Q6_K),
  // rope_freqs [32], ~1.24 B parameters, and a file of about the real one's 808 MB.
  const auto l1 = plan("llama-1b", "Q4_K_M");
  CHECK(l1.tensors.size() == 147);
  CHECK(find(l1, "output.weight") == nullptr);
  REQUIRE(find(l1, "token_embd.weight"));
  CHECK(find(l1, "token_embd.weight")->type == GgmlType::Q6_K);
  CHECK(find(l1, "token_embd.weight")->ne == V{2048, 128256});
  REQUIRE(find(l1, "rope_freqs.weight"));
  CHECK(find(l1, "rope_freqs.weight")->ne == V{32});
  CHECK(find(l1, "rope_freqs.weight")->type == GgmlType::F32);
  CHECK(find(l1, "blk.15.attn_k.weight")->ne == V{2048, 512});
  CHECK(find(l1, "blk.15.ffn_down.weight")->ne == V{8192, 2048});
  CHECK(find(l1, "blk.15.ffn_down.weight")->type == GgmlType::Q6_K);
  CHECK(find(l1, "blk.5.ffn_down.weight")->type == GgmlType::Q4_K);
  CHECK(l1.n_params == 1235814432);
  CHECK(double(l1.file_bytes) / 1e6 == Approx(808).margin(12));

  // Llama 3.1 8B: untied output (Q6_K), rope_freqs [64], ~4.9 GB in Q4_K_M.
  const auto l8 = plan("llama-8b", "Q4_K_M");
  CHECK(l8.tensors.size() == 292);
  REQUIRE(find(l8, "output.weight"));
  CHECK(find(l8, "output.weight")->type == GgmlType::Q6_K);
  CHECK(find(l8, "token_embd.weight")->type == GgmlType::Q4_K);
  CHECK(find(l8, "rope_freqs.weight")->ne == V{64});
  CHECK(find(l8, "blk.31.attn_q.weight")->ne == V{4096, 4096});
  CHECK(find(l8, "blk.31.ffn_up.weight")->ne == V{4096, 14336});
  CHECK(l8.n_params == 8030261312);
  CHECK(double(l8.file_bytes) / 1e9 == Approx(4.92).margin(0.05));

  // Qwen2.5 0.5B: q/k/v biases, tied, 896-wide rows (K-quants fall back).
  const auto q2 = plan("qwen2-0.5b", "Q8_0");
  CHECK(q2.tensors.size() == 1 + 24 * 12 + 1);
  CHECK(find(q2, "output.weight") == nullptr);
  CHECK(find(q2, "blk.0.attn_q.bias")->ne == V{896});
  CHECK(find(q2, "blk.0.attn_k.bias")->ne == V{128});
  CHECK(find(q2, "blk.0.attn_v.weight")->ne == V{896, 128});
  CHECK(find(q2, "blk.0.attn_q.weight")->type == GgmlType::Q8_0);
  CHECK(find(q2, "blk.0.attn_q.bias")->type == GgmlType::F32);
  CHECK(q2.n_params == 494032768);
  CHECK(q2.notes.empty());
  // In Q4_K_M no K-quant fits 896: Q4_K falls back to Q5_0 (Q4_0 while fish cannot
  // quantise Q5_0) and Q6_K to Q8_0, each noted; ffn_down (4864 wide) stays a K-quant.
  const auto q2k = plan("qwen2-0.5b", "Q4_K_M");
  const GgmlType alt = can_quantize(GgmlType::Q5_0) ? GgmlType::Q5_0 : GgmlType::Q4_0;
  CHECK(q2k.notes.size() == 1 + 24 * 6);
  CHECK(find(q2k, "token_embd.weight")->type == GgmlType::Q8_0);
  CHECK(find(q2k, "blk.0.attn_v.weight")->type == GgmlType::Q8_0);   // a more-bits layer
  CHECK(find(q2k, "blk.3.attn_v.weight")->type == alt);
  CHECK(find(q2k, "blk.3.attn_q.weight")->type == alt);
  CHECK(find(q2k, "blk.0.ffn_down.weight")->type == GgmlType::Q6_K);
  CHECK(find(q2k, "blk.3.ffn_down.weight")->type == GgmlType::Q4_K);

  // Qwen3 0.6B: head_dim 128 != 1024/16, q/k norms [128], tied.
  const auto q3 = plan("qwen3-0.6b", "F16");
  CHECK(q3.tensors.size() == 1 + 28 * 11 + 1);
  CHECK(find(q3, "blk.0.attn_q.weight")->ne == V{1024, 2048});
  CHECK(find(q3, "blk.0.attn_k.weight")->ne == V{1024, 1024});
  CHECK(find(q3, "blk.0.attn_output.weight")->ne == V{2048, 1024});
  CHECK(find(q3, "blk.0.attn_q_norm.weight")->ne == V{128});
  CHECK(find(q3, "blk.0.attn_k_norm.weight")->type == GgmlType::F32);
  CHECK(find(q3, "blk.0.ffn_gate.weight")->type == GgmlType::F16);
  CHECK(q3.n_params == 596049920);
}

TEST_CASE("synth: the real shapes' metadata", "[convert][synth]") {
  // The metadata synth_model writes, read back through the writer and reader.
  auto meta = [](const char* shape, const char* type) {
    gguf::Writer w;
    synth_metadata(w, shape, type, 9);
    return gguf::File::from_bytes(w.write_to_memory(), shape);
  };
  auto l1 = meta("llama-1b", "Q4_K_M");
  CHECK(*l1->get_str("general.architecture") == "llama");
  CHECK_THAT(std::string(*l1->get_str("general.name")), Catch::Contains("synthetic Llama 3.2 1B"));
  CHECK(*l1->get_u32("llama.embedding_length") == 2048);
  CHECK(*l1->get_u32("llama.block_count") == 16);
  CHECK(*l1->get_u32("llama.attention.head_count") == 32);
  CHECK(*l1->get_u32("llama.attention.head_count_kv") == 8);
  CHECK(*l1->get_u32("llama.attention.key_length") == 64);
  CHECK(*l1->get_u32("llama.feed_forward_length") == 8192);
  CHECK(*l1->get_u32("llama.vocab_size") == 128256);
  CHECK(*l1->get_u32("llama.context_length") == 131072);
  CHECK(*l1->get_f64("llama.rope.freq_base") == 500000.0);
  CHECK(float(*l1->get_f64("llama.attention.layer_norm_rms_epsilon")) == 1e-5f);
  CHECK(*l1->get_u32("general.file_type") == 15);
  CHECK(l1->get_arr("tokenizer.ggml.tokens")->size == 128256);
  CHECK(l1->get_arr("tokenizer.ggml.scores")->size == 128256);
  CHECK(l1->get_arr("tokenizer.ggml.token_type")->size == 128256);
  CHECK(*l1->get_str("tokenizer.ggml.model") == "llama");
  CHECK(*l1->get_u32("tokenizer.ggml.bos_token_id") == 1);
  CHECK(*l1->get_u32("tokenizer.ggml.eos_token_id") == 2);
  CHECK(*l1->get_u32("tokenizer.ggml.unknown_token_id") == 0);

  auto l8 = meta("llama-8b", "Q8_0");
  CHECK(*l8->get_u32("llama.embedding_length") == 4096);
  CHECK(*l8->get_u32("llama.block_count") == 32);
  CHECK(*l8->get_u32("llama.feed_forward_length") == 14336);
  CHECK(*l8->get_u32("llama.attention.key_length") == 128);
  CHECK(*l8->get_u32("general.file_type") == 7);

  auto q2 = meta("qwen2-0.5b", "F16");
  CHECK(*q2->get_str("general.architecture") == "qwen2");
  CHECK(*q2->get_u32("qwen2.embedding_length") == 896);
  CHECK(*q2->get_u32("qwen2.block_count") == 24);
  CHECK(*q2->get_u32("qwen2.attention.head_count") == 14);
  CHECK(*q2->get_u32("qwen2.attention.head_count_kv") == 2);
  CHECK(*q2->get_u32("qwen2.feed_forward_length") == 4864);
  CHECK(*q2->get_u32("qwen2.vocab_size") == 151936);
  CHECK(*q2->get_f64("qwen2.rope.freq_base") == 1000000.0);
  CHECK(float(*q2->get_f64("qwen2.attention.layer_norm_rms_epsilon")) == 1e-6f);
  CHECK(*q2->get_u32("general.file_type") == 1);

  auto q3 = meta("qwen3-0.6b", "F32");
  CHECK(*q3->get_str("general.architecture") == "qwen3");
  CHECK(*q3->get_u32("qwen3.embedding_length") == 1024);
  CHECK(*q3->get_u32("qwen3.block_count") == 28);
  CHECK(*q3->get_u32("qwen3.attention.head_count") == 16);
  CHECK(*q3->get_u32("qwen3.attention.head_count_kv") == 8);
  CHECK(*q3->get_u32("qwen3.attention.key_length") == 128);  // != 1024 / 16
  CHECK(*q3->get_u32("qwen3.attention.value_length") == 128);
  CHECK(*q3->get_u32("qwen3.feed_forward_length") == 3072);
  CHECK(q3->get_arr("tokenizer.ggml.tokens")->size == 151936);
  CHECK(*q3->get_u32("general.file_type") == 0);
}

TEST_CASE("synth: bad requests are refused with a clear message", "[convert][synth]") {
  test::ScratchDir dir("synth_bad");
  SynthOptions o;
  o.shape = "llama-70b";
  o.type = "Q4_K_M";
  o.out = dir.file("x.gguf");
  CHECK_THROWS_WITH(synth_model(o), Catch::Contains("unknown shape 'llama-70b'") && Catch::Contains("qwen3-0.6b"));
  o.shape = "tiny";
  o.type = "Q3_K";
  CHECK_THROWS_WITH(synth_model(o), Catch::Contains("unknown type 'Q3_K'"));
  o.type = "Q8_0";
  o.out = dir.file("missing/dir/x.gguf");
  CHECK_THROWS_WITH(synth_model(o), Catch::Contains("missing/dir/x.gguf.tmp"));
  CHECK_FALSE(std::filesystem::exists(o.out));
}
