// Spans inside the engine (libfish's C API, fish_vulkan chosen with
// FISH_BACKEND=vulkan) on the shared models, with fish_vulkan's default
// configuration for the device (a GPU when there is one, else lavapipe): all
// cases run in one process, which sets its environment once, before the
// engine loads the plugin:
//   - greedy text through the span equals the CPU's and the reference ids
//     (models/SOURCES.md, tests/e2e);
//   - truncating the KV and decoding again gives the logits of a fresh run;
//   - a 300-token prompt evaluated in one call (submissions of 128 tokens)
//     gives the logits of the same tokens evaluated one at a time;
//   - with int8 activations, a token's logits are the CPU's (the CPU's Q8_K
//     rows) or near them (the GPUs' B32 decode).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "fish/fish.h"
#include "plugin_device.h"
#include "test_paths.h"
#include "test_skip.h"

using namespace fish::test;

namespace {

struct Model {
  fish_model* m = nullptr;
  fish_model_info info{};
  Model(const std::string& path, int32_t gpu_layers, int32_t n_ctx) {
    fish_model_params p = fish_model_default_params();
    p.n_threads = 2;
    p.n_ctx = n_ctx;
    p.gpu_layers = gpu_layers;
    fish_error* err = nullptr;
    m = fish_model_load(path.c_str(), &p, &err);
    INFO(path << ": " << (err ? fish_error_message(err) : ""));
    REQUIRE(m);
    info.struct_size = sizeof info;
    fish_model_get_info(m, &info);
  }
  ~Model() { fish_model_free(m); }
  std::vector<float> eval(const std::vector<int32_t>& toks, int32_t pos) {
    REQUIRE(fish_eval(m, toks.data(), int32_t(toks.size()), pos, 0) == 0);
    const float* lg = fish_get_logits(m, -1);
    return std::vector<float>(lg, lg + info.n_vocab);
  }
};

// The process's environment, set once before any case loads a model: the
// engine loads fish_vulkan (and nothing else), which finds the GPU, or
// lavapipe where there is none.
const bool kEnvironment = [] {
  setenv("FISH_BACKEND", "vulkan", 1);
  fish::vktest::select_vulkan_device();
  return true;
}();

// "" when the model placed its layers as a span, else why not (the case skips).
std::string no_span(const Model& g) {
  if (g.info.gpu_span == 1) return "";
  return std::string("no span on fish_vulkan (") + g.info.backend + ": " + g.info.gpu_detail + ")";
}

int32_t argmax(const std::vector<float>& v) { return int32_t(std::max_element(v.begin(), v.end()) - v.begin()); }

std::vector<int32_t> greedy(Model& g, int n) {
  std::vector<int32_t> out;
  std::vector<float> lg = g.eval({1}, 0);
  for (int i = 0; i < n; ++i) {
    const int32_t t = argmax(lg);
    out.push_back(t);
    lg = g.eval({t}, 1 + i);
  }
  return out;
}

std::vector<int32_t> ids(const std::string& s) {
  std::vector<int32_t> v;
  std::stringstream ss(s);
  int32_t x;
  while (ss >> x) v.push_back(x);
  return v;
}

double max_abs(const std::vector<float>& v) {
  double m = 0;
  for (float e : v) m = std::max(m, double(std::fabs(e)));
  return m;
}
double max_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, double(std::fabs(a[i] - b[i])));
  return m;
}

}  // namespace

TEST_CASE("span: greedy text equals the CPU's and the reference ids", "[vulkan][span][model]") {
  struct Case {
    const char* model;
    const char* want;
  };
  const Case cases[] = {
      {"stories260K.gguf",
       "403 407 261 378 432 383 286 261 376 298 315 421 395 317 426 338 401 396 267 337 410 408 419 292 411 322 265 "
       "282 295 433 426 385 328 432 358 394 261 370 432 352 266 268 388 426 338 391 266 267"},
      {"TinyStories-656K-Q8_0.gguf",
       "147 201 282 215 286 598 1662 356 499 826 1363 1145 1652 615 242 1482 951 628 499 826 872 921 318 385 628 499 "
       "826 617 242 198 1047 425 1939 122 1924 1171 94 303 328 229 521 776 115 1139 312 447 1456 319"},
  };
  for (const Case& c : cases) {
    Model gpu(model_path(c.model), -1, 256);
    if (!no_span(gpu).empty()) FISH_SKIP(no_span(gpu));
    Model cpu(model_path(c.model), 0, 256);
    const auto g = greedy(gpu, 48), want = ids(c.want);
    INFO(c.model);
    CHECK(g == want);
    CHECK(g == greedy(cpu, 48));
  }
}

TEST_CASE("span: truncate + decode again gives the logits of a fresh run", "[vulkan][span][model]") {
  Model a(model_path("TinyStories-656K-Q8_0.gguf"), -1, 256);
  if (!no_span(a).empty()) FISH_SKIP(no_span(a));
  // Prompt of 10 tokens in one call, then 30 decoded one at a time.
  std::vector<int32_t> toks = {1};
  for (int i = 0; i < 39; ++i) toks.push_back(int32_t(3 + (i * 37) % 2000));
  auto run = [&](Model& g, int from, std::vector<std::vector<float>>* out) {
    for (int p = from; p < 40; ++p) out->push_back(g.eval({toks[size_t(p)]}, p));
  };
  std::vector<std::vector<float>> first, again, fresh;
  a.eval(std::vector<int32_t>(toks.begin(), toks.begin() + 10), 0);
  run(a, 10, &first);
  REQUIRE(fish_kv_truncate(a.m, 20) == 0);
  run(a, 20, &again);
  Model b(model_path("TinyStories-656K-Q8_0.gguf"), -1, 256);
  b.eval(std::vector<int32_t>(toks.begin(), toks.begin() + 10), 0);
  run(b, 10, &fresh);
  double d_again = 0, d_fresh = 0, m = 0;
  for (size_t i = 0; i < again.size(); ++i) d_again = std::max(d_again, max_diff(again[i], first[i + 10]));
  for (size_t i = 0; i < fresh.size(); ++i) {
    d_fresh = std::max(d_fresh, max_diff(fresh[i], first[i]));
    m = std::max(m, max_abs(first[i]));
  }
  INFO("re-decoded vs first: max |Δlogit| " << d_again << "; fresh vs first " << d_fresh << "; max |logit| " << m);
  // Same kernels on the same inputs: identical up to float noise (measured 0 on lavapipe).
  CHECK(d_again <= 1e-5 * m);
  CHECK(d_fresh <= 1e-5 * m);
  CHECK(fish_kv_len(a.m) == 40);
}

// The span's chunking and causality: the same 300 tokens in one call (tiled
// prefill, submissions of 128) and one at a time (decode matvecs). With f32
// activations the two differ only in summation order; with int8 activations
// they quantise inputs that differ in the last bits, so where the float
// paths differ by an ulp an int8 step may flip (lavapipe: 292 of 300 argmaxes
// equal, the rest near-ties within 2% of max |logit|; max |Δlogit| 1.4% of
// max |logit|, against 1.4e-4 with f32 activations).
TEST_CASE("span: a 300-token prompt in one call ≡ the tokens one at a time", "[vulkan][span][model]") {
  Model a(model_path("TinyStories-656K-Q8_0.gguf"), -1, 512);
  if (!no_span(a).empty()) FISH_SKIP(no_span(a));
  const bool int8 = std::string(a.info.gpu_detail).find("int8") != std::string::npos;
  std::vector<int32_t> toks = {1};
  for (int i = 0; i < 299; ++i) toks.push_back(int32_t(3 + (i * 131 + 7) % 2040));
  REQUIRE(fish_eval(a.m, toks.data(), 300, 0, 1) == 0);
  std::vector<std::vector<float>> batch;
  for (int i = 0; i < 300; ++i) {
    const float* lg = fish_get_logits(a.m, i);
    REQUIRE(lg);
    batch.emplace_back(lg, lg + a.info.n_vocab);
  }
  REQUIRE(fish_kv_truncate(a.m, 0) == 0);
  double worst = 0, m = 0;
  int argmax_equal = 0, argmax_exact = 0;
  for (int i = 0; i < 300; ++i) {
    const auto one = a.eval({toks[size_t(i)]}, i);
    worst = std::max(worst, max_diff(one, batch[size_t(i)]));
    m = std::max(m, max_abs(one));
    const int32_t x = argmax(one), y = argmax(batch[size_t(i)]);
    // A flip between two logits within 1e-4 (f32) / 2% (int8) of max |logit| is a tie, not a difference.
    if (x == y || std::fabs(one[size_t(x)] - one[size_t(y)]) <= (int8 ? 0.02 : 1e-4) * max_abs(one)) ++argmax_equal;
    argmax_exact += x == y;
  }
  INFO((int8 ? "int8" : "f32") << " activations: max |Δlogit| " << worst << " of max |logit| " << m << ", argmax equal "
                               << argmax_equal << "/300");
  std::printf("%s activations: max |dlogit| %.3g of max |logit| %.3g, argmax equal (or a near-tie) %d/300, exactly %d/300\n",
              int8 ? "int8" : "f32", worst, m, argmax_equal, argmax_exact);
  CHECK(argmax_equal == 300);
  CHECK(worst <= (int8 ? 0.03 : 1e-3) * m);  // summation order through the layers and the f16 KV
}

// int8 activations (the default where int8 dot products are accelerated, and
// on lavapipe): the GPU quantises activations as the CPU does and sums the
// same integers, so a token's logits are the CPU's up to float summation
// order (lavapipe: max |Δlogit| ~5e-7 of max |logit| 6, where f32 activations
// give 2.2%), except where an ulp-level input difference flips one int8 step
// (rare, discrete): per-matmul, and the span with the CPU's Q8_K rows (CPU
// implementations' default), give at least 6 of 8 independent one-token
// evaluations to 1e-5 of max |logit|. The GPUs' B32 decode (blocks of 32,
// finer than the CPU's 256, not its arithmetic) stays within 5% (lavapipe
// with FISH_VK_SPAN_QFOLD=15: 2.5%; a broken kernel ~100%).
TEST_CASE("int8 activations: a token's logits = the CPU's (near them with the B32 decode)", "[vulkan][span][model][int8]") {
  const std::string path = model_path("synth-tiny-Q4_K_M.gguf");
  Model cpu(path, 0, 64);
  for (int32_t span : {1, 0}) {
    fish_model_params p = fish_model_default_params();
    p.n_threads = 2, p.n_ctx = 64, p.gpu_layers = -1, p.gpu_span = span;
    fish_model* g = fish_model_load(path.c_str(), &p, nullptr);
    REQUIRE(g);
    fish_model_info gi{};
    gi.struct_size = sizeof gi;
    fish_model_get_info(g, &gi);
    const std::string detail = gi.gpu_detail;
    if (gi.gpu_layers == 0 || detail.find("int8") == std::string::npos) {
      fish_model_free(g);
      FISH_SKIP(std::string("no int8 matmuls on fish_vulkan (") + gi.backend + ": " + detail + ")");
    }
    const bool b32 = span && detail.find("B32 rows") != std::string::npos;
    int exact = 0;
    double worst = 0;
    for (int k = 0; k < 8; ++k) {
      const int32_t tok = 5 + 371 * k;
      REQUIRE(fish_kv_truncate(g, 0) == 0);
      REQUIRE(fish_eval(g, &tok, 1, 0, 0) == 0);
      const float* lg = fish_get_logits(g, -1);
      const std::vector<float> gv(lg, lg + gi.n_vocab);
      REQUIRE(fish_kv_truncate(cpu.m, 0) == 0);
      const std::vector<float> cv = cpu.eval({tok}, 0);
      const double d = max_diff(gv, cv), m = max_abs(cv);
      worst = std::max(worst, d / m);
      if (d <= 1e-5 * m) ++exact;
    }
    fish_model_free(g);
    INFO((span ? "span" : "per-matmul") << (b32 ? " (B32 decode)" : "") << ": " << exact
                                        << "/8 tokens exact, worst |Δlogit| " << worst << " of max |logit|");
    std::printf("%s%s: %d/8 tokens exact, worst |dlogit| %.3g of max |logit|\n", span ? "span" : "per-matmul",
                b32 ? " (B32 decode)" : "", exact, worst);
    if (b32) CHECK(worst <= 0.05);
    else CHECK(exact >= 6);
  }
}
