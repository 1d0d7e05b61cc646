#include "cpu/attention.h"

#include <algorithm>
#include <cmath>

#include "common/fp16.h"
#include "cpu/cpu_features.h"
#include "cpu/thread_pool.h"

namespace fish {

void attention_head_avx2(const float* q, const uint16_t* k, const uint16_t* v, int64_t stride, int32_t n_kv,
                         int32_t hd, float scale, float* out, float* scores);

void attention_head_scalar(const float* q, const uint16_t* k, const uint16_t* v, int64_t stride, int32_t n_kv,
                           int32_t hd, float scale, float* out, float* scores) {
  float mx = -INFINITY;
  for (int32_t j = 0; j < n_kv; ++j) {
    const uint16_t* kj = k + int64_t(j) * stride;
    float s = 0;
    for (int32_t d = 0; d < hd; ++d) s += q[d] * fp16_to_fp32(kj[d]);
    s *= scale;
    scores[j] = s;
    mx = std::max(mx, s);
  }
  double sum = 0;
  for (int32_t j = 0; j < n_kv; ++j) {
    scores[j] = std::exp(scores[j] - mx);
    sum += scores[j];
  }
  const float inv = float(1.0 / sum);
  for (int32_t d = 0; d < hd; ++d) out[d] = 0;
  for (int32_t j = 0; j < n_kv; ++j) {
    const uint16_t* vj = v + int64_t(j) * stride;
    const float p = scores[j] * inv;
    for (int32_t d = 0; d < hd; ++d) out[d] += p * fp16_to_fp32(vj[d]);
  }
}

AttentionHeadFn attention_head_best() {
#if defined(__x86_64__)
  static const AttentionHeadFn fn = [] {
    const CpuFeatures& f = cpu_features();
    return f.avx2 && f.fma && f.f16c ? &attention_head_avx2 : &attention_head_scalar;
  }();
  return fn;
#else
  return &attention_head_scalar;
#endif
}

void attention(ThreadPool& pool, const AttentionArgs& a, AttentionScratch& scratch) {
  const int nth = pool.size();
  const int32_t max_kv = a.pos0 + a.n_tok;
  if (int(scratch.scores.size()) < nth) scratch.scores.resize(size_t(nth));
  for (auto& s : scratch.scores)
    if (int32_t(s.size()) < max_kv) s.resize(size_t(max_kv));
  const AttentionHeadFn head_fn = attention_head_best();
  const int32_t group = a.n_head / a.n_head_kv;
  const int64_t q_stride = int64_t(a.n_head) * a.head_dim;
  // Work items are (token, head) pairs; later tokens see more positions, so a
  // plain contiguous split would be unbalanced for prefill: interleave instead.
  const int64_t n_items = int64_t(a.n_tok) * a.n_head;
  pool.run([&](int ith, int nthr) {
    float* scores = scratch.scores[size_t(ith)].data();
    for (int64_t it = ith; it < n_items; it += nthr) {
      const int32_t t = int32_t(it / a.n_head), h = int32_t(it % a.n_head);
      const int32_t kvh = h / group;
      const int64_t off = int64_t(kvh) * a.head_dim;
      head_fn(a.q + t * q_stride + int64_t(h) * a.head_dim, a.k + off, a.v + off, a.kv_stride, a.pos0 + t + 1,
              a.head_dim, a.scale, a.out + t * q_stride + int64_t(h) * a.head_dim, scores);
    }
  });
}

}  // namespace fish
