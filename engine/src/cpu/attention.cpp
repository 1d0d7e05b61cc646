#include "cpu/attention.h"

#include <algorithm>
#include <cmath>

#include "common/fp16.h"
#include "cpu/cpu_features.h"
#include "cpu/thread_pool.h"

namespace fish {

void attention_heads_avx2(const float* q, int32_t n_heads, const KvView& kv, int32_t n_kv, int32_t hd, float scale,
                          float* out, float* scores);

namespace {

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

}  // namespace

void attention_heads_scalar(const float* q, int32_t n_heads, const KvView& kv, int32_t n_kv, int32_t hd, float scale,
                            float* out, float* scores) {
  for (int32_t i = 0; i < n_heads; ++i)
    attention_head_scalar(q + int64_t(i) * hd, kv, n_kv, hd, scale, out + int64_t(i) * hd, scores + int64_t(i) * n_kv);
}

AttentionHeadsFn attention_heads_best() {
#if defined(__x86_64__)
  static const AttentionHeadsFn fn = [] {
    const CpuFeatures& f = cpu_features();
    return f.avx2 && f.fma && f.f16c ? &attention_heads_avx2 : &attention_heads_scalar;
  }();
  return fn;
#else
  return &attention_heads_scalar;
#endif
}

void attention(ThreadPool& pool, const AttentionArgs& a, AttentionScratch& scratch) {
  const int nth = pool.size();
  int32_t max_kv = a.pos0 + a.n_tok;
  if (a.rows)
    for (int32_t t = 0; t < a.n_tok; ++t) max_kv = std::max(max_kv, a.rows[t].pos + 1);
  const int32_t group = a.n_head / a.n_head_kv;
  // Work items are (token, block of a KV head's query heads). Whole groups
  // share each K/V row's loads; halved while there are fewer than 4 items per
  // thread (a decode on many threads). The results are the same either way.
  int32_t hb = group;
  while (hb > 1 && int64_t(a.n_tok) * a.n_head_kv * ((group + hb - 1) / hb) < 4 * int64_t(nth)) hb = (hb + 1) / 2;
  const int32_t blocks = (group + hb - 1) / hb;
  if (int(scratch.scores.size()) < nth) scratch.scores.resize(size_t(nth));
  for (auto& s : scratch.scores)
    if (int64_t(s.size()) < int64_t(max_kv) * hb) s.resize(size_t(max_kv) * size_t(hb));
  const AttentionHeadsFn heads_fn = attention_heads_best();
  const int64_t q_stride = int64_t(a.n_head) * a.head_dim;
  // Later tokens see more positions, so a plain contiguous split would be
  // unbalanced for prefill: interleave instead.
  const int64_t per_tok = int64_t(a.n_head_kv) * blocks, n_items = int64_t(a.n_tok) * per_tok;
  pool.run([&](int ith, int nthr) {
    float* scores = scratch.scores[size_t(ith)].data();
    KvView kv;
    kv.stride = a.kv_stride;
    kv.page_shift = a.rows ? a.page_shift : 31;
    for (int64_t it = ith; it < n_items; it += nthr) {
      const int32_t t = int32_t(it / per_tok), g = int32_t(it % per_tok / blocks), b = int32_t(it % blocks);
      const int32_t h = g * group + b * hb, nh = std::min(hb, group - b * hb);
      int32_t n_kv = a.pos0 + t + 1;
      if (a.rows) {
        kv.k = a.rows[t].k_pages, kv.v = a.rows[t].v_pages;
        n_kv = a.rows[t].pos + 1;
      } else {
        kv.k = &a.k, kv.v = &a.v;
      }
      kv.off = int64_t(g) * a.head_dim;
      heads_fn(a.q + t * q_stride + int64_t(h) * a.head_dim, nh, kv, n_kv, a.head_dim, a.scale,
               a.out + t * q_stride + int64_t(h) * a.head_dim, scores);
    }
  });
}

}  // namespace fish
