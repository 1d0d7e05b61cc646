// Several sequences in one loaded model, through the C API (fish.h):
//   - a batch of 1..16 sequences of different lengths (prefill rows and then
//     decode rows of every sequence in one forward) gives each sequence the
//     logits it gets alone, bit for bit on the CPU;
//   - fish_seq_copy shares the KV pages of a 300-token prefix (measured in
//     pages) and the copy continues with the logits of an unshared run;
//   - a truncate inside the shared prefix, then new tokens: copy on write
//     leaves the other sequence's positions alone;
//   - with the reference plugin's span (which holds several sequences) the
//     same batches equal its one-sequence runs;
//   - with fish_vulkan's span (lavapipe where there is no GPU) the same
//     batches give each sequence the greedy tokens it gets alone and its
//     logits within 1e-3 of max |logit| (the GPU sums in another order).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "fish/fish.h"
#include "fish/fish_backends.h"
#include "test_model.h"
#include "test_paths.h"
#include "test_skip.h"


namespace {

struct Model {
  fish_model* m = nullptr;
  int32_t n_vocab = 0;
  Model(const char* file, int n_seq, int gpu_layers, int n_ctx = 512, int prefix_cache_mb = 256) {
    fish_model_params p = fish_model_default_params();
    p.prefix_cache_mb = prefix_cache_mb;
    p.n_seq = n_seq;
    p.gpu_layers = gpu_layers;
    p.n_ctx = n_ctx;
    p.n_threads = 2;
    m = fish::test::require_model(file, p);
    fish_model_info info{};
    info.struct_size = sizeof info;
    fish_model_get_info(m, &info);
    n_vocab = info.n_vocab;
  }
  ~Model() { fish_model_free(m); }
  std::vector<float> row(int32_t i) const {
    const float* l = fish_get_logits_ith(m, i);
    REQUIRE(l);
    return std::vector<float>(l, l + n_vocab);
  }
  std::vector<float> last() const {  // the last kept row of the last evaluation
    const float* l = fish_get_logits(m, -1);
    REQUIRE(l);
    return std::vector<float>(l, l + n_vocab);
  }
};

// Deterministic token streams of different lengths, inside the vocabulary.
std::vector<int32_t> stream(int seed, int n, int32_t n_vocab) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  uint32_t x = 2166136261u ^ uint32_t(seed * 7919);
  for (int i = 0; i < n; ++i) {
    x = x * 1664525u + 1013904223u;
    t[size_t(i)] = int32_t(1 + (x >> 8) % uint32_t(n_vocab - 1));
  }
  return t;
}

// fish_decode, its error in the failure message.
void decode(fish_model* m, const fish_batch& b) {
  const int rc = fish_decode(m, &b);
  INFO(fish_last_error(m));
  REQUIRE(rc == 0);
}

int argmax(const std::vector<float>& v) { return int(std::max_element(v.begin(), v.end()) - v.begin()); }

// Sequence s alone in a one-sequence model: its prompt, then n_gen greedy
// steps; the logits after the prompt and after each step.
std::vector<std::vector<float>> alone(const char* file, int gpu_layers, const std::vector<int32_t>& prompt, int n_gen) {
  Model one(file, 1, gpu_layers);
  std::vector<std::vector<float>> out;
  REQUIRE(fish_eval(one.m, prompt.data(), int32_t(prompt.size()), 0, 0) == 0);
  out.push_back(one.row(int32_t(prompt.size()) - 1));
  int32_t pos = int32_t(prompt.size());
  for (int g = 0; g < n_gen; ++g) {
    const int32_t tok = argmax(out.back());
    REQUIRE(fish_eval(one.m, &tok, 1, pos++, 0) == 0);
    out.push_back(one.row(0));
  }
  return out;
}

// N sequences together: one batch with every prompt (rows interleaved), then
// n_gen batches of one decode row per sequence. Logits per sequence and step.
std::vector<std::vector<std::vector<float>>> together(const char* file, int gpu_layers,
                                                      const std::vector<std::vector<int32_t>>& prompts, int n_gen) {
  const int N = int(prompts.size());
  Model many(file, N, gpu_layers);
  std::vector<int32_t> tok, pos, seq;
  std::vector<int8_t> want;
  std::vector<int32_t> last_row(static_cast<size_t>(N));
  size_t longest = 0;
  for (const auto& p : prompts) longest = std::max(longest, p.size());
  for (size_t i = 0; i < longest; ++i)  // interleaved: position i of every sequence that has one
    for (int s = 0; s < N; ++s)
      if (i < prompts[size_t(s)].size()) {
        tok.push_back(prompts[size_t(s)][i]), pos.push_back(int32_t(i)), seq.push_back(s);
        want.push_back(i + 1 == prompts[size_t(s)].size() ? 1 : 0);
        if (want.back()) last_row[size_t(s)] = int32_t(tok.size()) - 1;
      }
  fish_batch b{};
  b.struct_size = sizeof b;
  b.n_tokens = int32_t(tok.size()), b.token = tok.data(), b.pos = pos.data(), b.seq_id = seq.data(),
  b.logits = want.data();
  decode(many.m, b);
  std::vector<std::vector<std::vector<float>>> out(static_cast<size_t>(N));
  for (int s = 0; s < N; ++s) out[size_t(s)].push_back(many.row(last_row[size_t(s)]));
  for (int g = 0; g < n_gen; ++g) {
    tok.assign(size_t(N), 0), pos.assign(size_t(N), 0), seq.assign(size_t(N), 0), want.assign(size_t(N), 1);
    // Rows in another order than the ids: row s is sequence N-1-s.
    for (int s = 0; s < N; ++s) {
      seq[size_t(s)] = N - 1 - s;
      tok[size_t(s)] = argmax(out[size_t(N - 1 - s)].back());
      pos[size_t(s)] = int32_t(prompts[size_t(N - 1 - s)].size()) + g;
    }
    b.n_tokens = N, b.token = tok.data(), b.pos = pos.data(), b.seq_id = seq.data(), b.logits = want.data();
    decode(many.m, b);
    for (int s = 0; s < N; ++s) out[size_t(N - 1 - s)].push_back(many.row(s));
  }
  for (int s = 0; s < N; ++s) CHECK(fish_seq_len(many.m, s) == int32_t(prompts[size_t(s)].size()) + n_gen);
  return out;
}

// tol < 0: bit for bit; else the same greedy token at every step and every
// logit within tol · max |logit| of the one-sequence run's.
void check_batched_equals_alone(const char* file, int gpu_layers, double tol = -1) {
  Model probe(file, 1, 0);
  double worst = 0;
  for (int N : {1, 3, 16}) {
    std::vector<std::vector<int32_t>> prompts;
    for (int s = 0; s < N; ++s) prompts.push_back(stream(s, 5 + 11 * s % 70, probe.n_vocab));
    const auto got = together(file, gpu_layers, prompts, 6);
    for (int s = 0; s < N; ++s) {
      const auto want = alone(file, gpu_layers, prompts[size_t(s)], 6);
      for (size_t step = 0; step < want.size(); ++step) {
        INFO(file << ": " << N << " sequences, sequence " << s << " (" << prompts[size_t(s)].size()
                  << "-token prompt), step " << step);
        const std::vector<float>& g = got[size_t(s)][step];
        const std::vector<float>& w = want[step];
        REQUIRE(g.size() == w.size());
        if (tol < 0) {
          CHECK(std::memcmp(g.data(), w.data(), w.size() * sizeof(float)) == 0);
          continue;
        }
        double d = 0, m = 0;
        for (size_t i = 0; i < w.size(); ++i) {
          d = std::max(d, double(std::fabs(g[i] - w[i])));
          m = std::max(m, double(std::fabs(w[i])));
        }
        worst = std::max(worst, d / m);
        INFO("max |Δlogit| " << d << " of max |logit| " << m);
        CHECK(argmax(g) == argmax(w));
        CHECK(d <= tol * m);
      }
    }
  }
  if (tol >= 0) std::printf("%s: batched vs alone, worst max |dlogit| %.3g of max |logit|\n", file, worst);
}

}  // namespace

TEST_CASE("sequences: a batch of 1, 3, 16 sequences gives each its logits alone, bit for bit (CPU)", "[seq]") {
  check_batched_equals_alone("stories260K.gguf", 0);
  check_batched_equals_alone("synth-tiny-Q4_K_M.gguf", 0);
}

TEST_CASE("sequences: a shared 300-token prefix uses its pages once, copy on write after a truncate inside it",
          "[seq]") {
  const char* file = "stories260K.gguf";
  Model m(file, 2, 0);
  const std::vector<int32_t> prefix = stream(42, 300, m.n_vocab);
  const std::vector<int32_t> a_tail = stream(43, 20, m.n_vocab), b_tail = stream(44, 20, m.n_vocab);
  REQUIRE(fish_eval(m.m, prefix.data(), 300, 0, 0) == 0);
  const int32_t pages_prefix = fish_kv_pages(m.m);
  CHECK(pages_prefix == (300 + 63) / 64);
  REQUIRE(fish_seq_copy(m.m, 0, 1, 300) == 0);
  CHECK(fish_seq_len(m.m, 1) == 300);
  CHECK(fish_kv_pages(m.m) == pages_prefix);  // shared, not copied

  // Each continues with its own tail: sequence 0 at 300.., sequence 1 at 300.. .
  std::vector<int32_t> tok, pos, seq;
  for (int i = 0; i < 20; ++i) {
    tok.push_back(a_tail[size_t(i)]), pos.push_back(300 + i), seq.push_back(0);
    tok.push_back(b_tail[size_t(i)]), pos.push_back(300 + i), seq.push_back(1);
  }
  std::vector<int8_t> want(tok.size(), 0);
  want[tok.size() - 2] = want[tok.size() - 1] = 1;
  fish_batch b{};
  b.struct_size = sizeof b;
  b.n_tokens = int32_t(tok.size()), b.token = tok.data(), b.pos = pos.data(), b.seq_id = seq.data(),
  b.logits = want.data();
  decode(m.m, b);
  const std::vector<float> a_logits = m.row(int32_t(tok.size()) - 2), b_logits = m.row(int32_t(tok.size()) - 1);
  // Pages: 4 shared full ones (0..255), the partial page 256..319 copied once for
  // sequence 1 when it wrote position 300, and nothing else.
  CHECK(fish_kv_pages(m.m) == pages_prefix + 1);

  // Unshared references: each full sequence alone.
  auto alone_last = [&](const std::vector<int32_t>& tail) {
    Model one(file, 1, 0);
    std::vector<int32_t> all = prefix;
    all.insert(all.end(), tail.begin(), tail.end());
    REQUIRE(fish_eval(one.m, all.data(), int32_t(all.size()), 0, 0) == 0);
    return one.last();
  };
  CHECK(a_logits == alone_last(a_tail));
  CHECK(b_logits == alone_last(b_tail));

  // Truncate sequence 1 inside the shared prefix and write there: sequence 0's
  // positions must be untouched (its next token's logits as in an unshared run).
  REQUIRE(fish_seq_truncate(m.m, 1, 200) == 0);
  const std::vector<int32_t> c_tail = stream(45, 30, m.n_vocab);
  std::vector<int32_t> cpos(30), cseq(30, 1);
  for (int i = 0; i < 30; ++i) cpos[size_t(i)] = 200 + i;
  b.n_tokens = 30, b.token = c_tail.data(), b.pos = cpos.data(), b.seq_id = cseq.data(), b.logits = nullptr;
  decode(m.m, b);
  const std::vector<float> c_logits = m.row(29);
  {
    Model one(file, 1, 0);
    std::vector<int32_t> all(prefix.begin(), prefix.begin() + 200);
    all.insert(all.end(), c_tail.begin(), c_tail.end());
    REQUIRE(fish_eval(one.m, all.data(), int32_t(all.size()), 0, 0) == 0);
    CHECK(c_logits == one.last());
  }
  const int32_t next = 7;
  int32_t p0 = 320, s0 = 0;
  b.n_tokens = 1, b.token = &next, b.pos = &p0, b.seq_id = &s0, b.logits = nullptr;
  decode(m.m, b);
  std::vector<int32_t> a_next = a_tail;
  a_next.push_back(next);
  CHECK(m.row(0) == alone_last(a_next));
}

TEST_CASE("prefix cache: a repeated prompt reuses a released sequence's positions, LRU within its bound", "[seq]") {
  const char* file = "stories260K.gguf";
  Model m(file, 2, 0, 512, 1);  // a 1 MB bound
  const std::vector<int32_t> prompt = stream(50, 300, m.n_vocab);
  REQUIRE(fish_seq_reuse(m.m, 0, prompt.data(), 300) == 0);  // nothing cached yet
  REQUIRE(fish_eval(m.m, prompt.data(), 300, 0, 0) == 0);
  const std::vector<float> first = m.last();
  REQUIRE(fish_seq_release(m.m, 0) == 0);
  CHECK(fish_seq_len(m.m, 0) == 0);
  const uint64_t kept = fish_prefix_cache_bytes(m.m);
  CHECK(kept > 0);

  // The same prompt in sequence 1: 299 positions come from the cache, one is evaluated.
  std::vector<int32_t> again = prompt;
  const int32_t reused = fish_seq_reuse(m.m, 1, again.data(), 300);
  CHECK(reused == 299);
  std::vector<int32_t> pos(1, reused), seq(1, 1);
  fish_batch b{};
  b.struct_size = sizeof b;
  b.n_tokens = 1, b.token = &again[size_t(reused)], b.pos = pos.data(), b.seq_id = seq.data();
  decode(m.m, b);
  CHECK(m.row(0) == first);

  // A prompt sharing 200 tokens: 200 reused, and its logits as a fresh run's.
  std::vector<int32_t> other(prompt.begin(), prompt.begin() + 200);
  const std::vector<int32_t> tail = stream(51, 40, m.n_vocab);
  other.insert(other.end(), tail.begin(), tail.end());
  const int32_t r2 = fish_seq_reuse(m.m, 0, other.data(), int32_t(other.size()));
  CHECK(r2 == 200);
  std::vector<int32_t> p2, s2(other.size() - size_t(r2), 0);
  for (size_t i = size_t(r2); i < other.size(); ++i) p2.push_back(int32_t(i));
  b.n_tokens = int32_t(p2.size()), b.token = other.data() + r2, b.pos = p2.data(), b.seq_id = s2.data();
  decode(m.m, b);
  const std::vector<float> got = m.row(int32_t(p2.size()) - 1);
  {
    Model one(file, 1, 0);
    REQUIRE(fish_eval(one.m, other.data(), int32_t(other.size()), 0, 0) == 0);
    CHECK(got == one.last());
  }

  // The bound: released 300-token sequences beyond 1 MB push the oldest out
  // (`kept` is one such entry's pages).
  const int fit = int((uint64_t(1) << 20) / kept), K = fit + 2;
  for (int k = 0; k < K; ++k) {
    const std::vector<int32_t> pk = stream(60 + k, 300, m.n_vocab);
    REQUIRE(fish_seq_reuse(m.m, 0, pk.data(), 300) == 0);
    REQUIRE(fish_eval(m.m, pk.data(), 300, 0, 0) == 0);
    REQUIRE(fish_seq_release(m.m, 0) == 0);
    CHECK(fish_prefix_cache_bytes(m.m) <= (uint64_t(1) << 20));
  }
  const std::vector<int32_t> newest = stream(60 + K - 1, 300, m.n_vocab), oldest = stream(60, 300, m.n_vocab);
  CHECK(fish_seq_reuse(m.m, 0, oldest.data(), 300) == 0);
  CHECK(fish_seq_reuse(m.m, 0, newest.data(), 300) == 299);
}

TEST_CASE("sequences: bad batches are refused, naming the row, and change nothing", "[seq]") {
  Model m("stories260K.gguf", 2, 0);
  const int32_t toks[3] = {5, 6, 7}, pos_gap[3] = {0, 1, 3}, seq0[3] = {0, 0, 0}, seq_bad[3] = {0, 2, 0};
  const int32_t pos_ok[3] = {0, 1, 2};
  fish_batch b{};
  b.struct_size = sizeof b;
  b.n_tokens = 3, b.token = toks, b.pos = pos_gap, b.seq_id = seq0;
  CHECK(fish_decode(m.m, &b) != 0);
  CHECK(std::string(fish_last_error(m.m)).find("consecutive") != std::string::npos);
  b.pos = pos_ok, b.seq_id = seq_bad;
  CHECK(fish_decode(m.m, &b) != 0);
  CHECK(std::string(fish_last_error(m.m)).find("sequence 2") != std::string::npos);
  CHECK(fish_seq_len(m.m, 0) == 0);
  CHECK(fish_seq_len(m.m, 5) == -1);
  b.seq_id = seq0;
  CHECK(fish_decode(m.m, &b) == 0);
  CHECK(fish_seq_len(m.m, 0) == 3);
  CHECK(fish_seq_len(m.m, 1) == 0);
}

#ifdef FISH_TEST_VULKAN
// fish_vulkan reads FISH_GPU when the engine first queries it: lavapipe
// (FISH_GPU=cpu) unless the caller chose otherwise.
const bool kVulkanOnCpu = setenv("FISH_GPU", "cpu", 0) == 0;

TEST_CASE("sequences: fish_vulkan's span: batches of 1, 3, 16 sequences, each its greedy tokens and logits alone",
          "[seq][plugin][vulkan]") {
  (void)kVulkanOnCpu;
  fish_backend_use_file(FISH_TEST_VULKAN);
  std::string no_span;
  {
    Model probe("stories260K.gguf", 3, -1);
    fish_model_info info{};
    info.struct_size = sizeof info;
    fish_model_get_info(probe.m, &info);
    if (info.gpu_span != 1) no_span = std::string("no span on fish_vulkan (") + info.backend + ": " + info.gpu_detail + ")";
  }
  if (!no_span.empty()) {
    fish_backend_use_file(nullptr);
    FISH_SKIP(no_span);
  }
  // f32 weights (f32 activations): summation order alone, 1e-3 of max |logit|
  // as test_vk_span_model's 300 tokens in one call against one at a time.
  check_batched_equals_alone("stories260K.gguf", -1, 1e-3);
  fish_backend_use_file(nullptr);
}
#endif

#ifdef FISH_TEST_REFERENCE
TEST_CASE("sequences: the reference plugin's span holds several sequences: batches equal its one-sequence runs",
          "[seq][plugin]") {
  fish_backend_use_file(FISH_TEST_REFERENCE);
  check_batched_equals_alone("stories260K.gguf", -1);
  fish_backend_use_file(nullptr);
}
#endif
