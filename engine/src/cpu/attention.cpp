#include "cpu/attention.h"

#include <algorithm>
#include <cmath>

#include "common/fp16.h"
#include "cpu/cpu_features.h"
#include "cpu/thread_pool.h"

namespace fish {

void attention_head_avx2(const float* q, const KvView& kv, int32_t n_kv, int32_t hd, float scale, float* out,
                         float* scores);

void attention_head_scalar(const float* q, const KvView& kv, int32_t n_kv, int32_t hd, float scale, float* out,
                           float* scores) {
  float mx = -INFINITY;
  for (int32_t j = 0; j < n_kv; ++j) {
    const uint16_t* kj = kv.key(j);
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
    const uint16_t* vj = kv.value(j);
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
  int32_t max_kv = a.pos0 + a.n_tok;
  if (a.rows)
    for (int32_t t = 0; t < a.n_tok; ++t) max_kv = std::max(max_kv, a.rows[t].pos + 1);
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
    KvView kv;
    kv.stride = a.kv_stride;
    kv.page_shift = a.rows ? a.page_shift : 31;
    for (int64_t it = ith; it < n_items; it += nthr) {
      const int32_t t = int32_t(it / a.n_head), h = int32_t(it % a.n_head);
      int32_t n_kv = a.pos0 + t + 1;
      if (a.rows) {
        kv.k = a.rows[t].k_pages, kv.v = a.rows[t].v_pages;
        n_kv = a.rows[t].pos + 1;
      } else {
        kv.k = &a.k, kv.v = &a.v;
      }
      kv.off = int64_t(h / group) * a.head_dim;
      head_fn(a.q + t * q_stride + int64_t(h) * a.head_dim, kv, n_kv, a.head_dim, a.scale,
              a.out + t * q_stride + int64_t(h) * a.head_dim, scores);
    }
  });
}

}  // namespace fish
