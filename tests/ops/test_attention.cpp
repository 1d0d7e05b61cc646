// Attention over the f16 KV cache: each variant against a double-precision
// softmax(q·K·scale)·V, and the threaded driver's causal masking and GQA.
#include <catch2/catch.hpp>
#include <cmath>
#include <random>
#include <vector>

#include "common/fp16.h"
#include "cpu/attention.h"
#include "cpu/thread_pool.h"

using namespace fish;

namespace {

// out[d] for one head, from f16 k/v rows at stride, in double.
std::vector<double> ref_head(const float* q, const uint16_t* k, const uint16_t* v, int64_t stride, int n_kv, int hd,
                             float scale) {
  std::vector<double> s(n_kv), out(hd, 0.0);
  double mx = -1e300, sum = 0;
  for (int j = 0; j < n_kv; ++j) {
    double d = 0;
    for (int i = 0; i < hd; ++i) d += double(q[i]) * fp16_to_fp32(k[j * stride + i]);
    s[j] = d * scale;
    mx = std::max(mx, s[j]);
  }
  for (int j = 0; j < n_kv; ++j) sum += (s[j] = std::exp(s[j] - mx));
  for (int j = 0; j < n_kv; ++j)
    for (int i = 0; i < hd; ++i) out[i] += s[j] / sum * fp16_to_fp32(v[j * stride + i]);
  return out;
}

}  // namespace

TEST_CASE("attention_head variants vs double reference", "[attention]") {
  std::mt19937 rng(7);
  std::normal_distribution<float> nd(0.f, 1.f);
  for (int hd : {8, 16, 64, 72, 128}) {
    for (int n_kv : {1, 5, 33, 300}) {
      const int64_t stride = hd * 3;
      std::vector<uint16_t> k(size_t(n_kv) * stride), v(k.size());
      for (auto& x : k) x = fp32_to_fp16(nd(rng));
      for (auto& x : v) x = fp32_to_fp16(nd(rng));
      std::vector<float> q(hd), out(hd), scores(n_kv);
      for (auto& x : q) x = nd(rng);
      const float scale = 1.0f / std::sqrt(float(hd));
      const auto want = ref_head(q.data(), k.data(), v.data(), stride, n_kv, hd, scale);
      for (AttentionHeadFn fn : {&attention_head_scalar, attention_head_best()}) {
        fn(q.data(), k.data(), v.data(), stride, n_kv, hd, scale, out.data(), scores.data());
        for (int i = 0; i < hd; ++i) CHECK(std::fabs(out[i] - want[i]) < 1e-4);
      }
    }
  }
}

TEST_CASE("attention: causal mask and GQA head mapping over threads", "[attention]") {
  const int n_head = 8, n_head_kv = 2, hd = 16, n_tok = 5, pos0 = 3;
  const int64_t kvd = n_head_kv * hd;
  std::mt19937 rng(3);
  std::normal_distribution<float> nd(0.f, 1.f);
  std::vector<uint16_t> k(size_t(pos0 + n_tok) * kvd), v(k.size());
  for (auto& x : k) x = fp32_to_fp16(nd(rng));
  for (auto& x : v) x = fp32_to_fp16(nd(rng));
  std::vector<float> q(size_t(n_tok) * n_head * hd), out(q.size());
  for (auto& x : q) x = nd(rng);
  ThreadPool pool(2);
  AttentionScratch scratch;
  AttentionArgs a;
  a.q = q.data();
  a.n_tok = n_tok;
  a.pos0 = pos0;
  a.k = k.data();
  a.v = v.data();
  a.kv_stride = kvd;
  a.n_head = n_head;
  a.n_head_kv = n_head_kv;
  a.head_dim = hd;
  a.scale = 0.25f;
  a.out = out.data();
  attention(pool, a, scratch);
  for (int t = 0; t < n_tok; ++t)
    for (int h = 0; h < n_head; ++h) {
      const int kvh = h / (n_head / n_head_kv);
      const auto want = ref_head(q.data() + (t * n_head + h) * hd, k.data() + kvh * hd, v.data() + kvh * hd, kvd,
                                 pos0 + t + 1, hd, 0.25f);
      for (int i = 0; i < hd; ++i) CHECK(std::fabs(out[(t * n_head + h) * hd + i] - want[i]) < 1e-4);
    }
}
