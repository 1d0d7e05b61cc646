// AVX2 + FMA + F16C attention for a block of query rows over one KV head
// (cpu/attention.h: AttentionBlock). Only called after a cpuid check. Every
// row's arithmetic is what it would be alone, operation for operation (the
// same FMA chain per score, the same order of positions per output lane, the
// same horizontal sums and vector e^x): the rows share the loads and f16
// conversions of each K and V row, from L1, and run their chains side by
// side, so a row's output does not depend on what it was computed with.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "common/fp16.h"
#include "cpu/avx2_math.h"
#include "cpu/attention.h"

namespace fish {
namespace {

// s[j] = e^(s[j] - mx) for j < n; returns Σ s[j] (in double, eight lanes, then summed).
double softmax_exp(float* s, int32_t n, float mx) {
  const __m256 m = _mm256_set1_ps(mx);
  __m256d lo = _mm256_setzero_pd(), hi = lo;
  int32_t j = 0;
  const auto add = [&](__m256 e) {
    lo = _mm256_add_pd(lo, _mm256_cvtps_pd(_mm256_castps256_ps128(e)));
    hi = _mm256_add_pd(hi, _mm256_cvtps_pd(_mm256_extractf128_ps(e, 1)));
  };
  for (; j + 8 <= n; j += 8) {
    const __m256 e = avx2_exp8_nonpos(_mm256_sub_ps(_mm256_loadu_ps(s + j), m));
    _mm256_storeu_ps(s + j, e);
    add(e);
  }
  if (j < n) {  // the tail through the same arithmetic, padded with -inf (-> 0)
    alignas(32) float t[8];
    for (int i = 0; i < 8; ++i) t[i] = j + i < n ? s[j + i] : -INFINITY;
    const __m256 e = avx2_exp8_nonpos(_mm256_sub_ps(_mm256_load_ps(t), m));
    _mm256_store_ps(t, e);
    for (int i = 0; j + i < n; ++i) s[j + i] = t[i];
    add(e);
  }
  alignas(32) double d[4];
  _mm256_store_pd(d, _mm256_add_pd(lo, hi));
  return (d[0] + d[1]) + (d[2] + d[3]);
}

inline __m256 load_h8(const uint16_t* p) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }

// Scores of NH heads (q + i·hd, into scores + i·stride) at positions j0..j1-1,
// two positions per step (2·NH independent FMA chains: one chain per head and
// position); each head's running maximum in mx[i].
template <int NH>
void scores_nh(const float* q, const KvView& kv, int32_t j0, int32_t j1, int32_t hd, float scale, float* scores,
               int64_t stride, float* mx) {
  const int32_t hd8 = hd & ~7;
  // The score of head i at position j from its chain (+ the dims past the last 8, × scale).
  const auto finish = [&](int i, int32_t j, __m256 acc, const uint16_t* kj) {
    float s = avx2_hsum8(acc);
    for (int32_t d = hd8; d < hd; ++d) s += q[i * hd + d] * fp16_to_fp32(kj[d]);
    s *= scale;
    scores[i * stride + j] = s;
    mx[i] = s > mx[i] ? s : mx[i];
  };
  int32_t j = j0;
  for (; j + 2 <= j1; j += 2) {
    const uint16_t* k0 = kv.key(j);
    const uint16_t* k1 = kv.key(j + 1);
    __m256 a0[NH], a1[NH];
    for (int i = 0; i < NH; ++i) a0[i] = a1[i] = _mm256_setzero_ps();
    for (int32_t d = 0; d < hd8; d += 8) {
      const __m256 f0 = load_h8(k0 + d), f1 = load_h8(k1 + d);
      for (int i = 0; i < NH; ++i) {
        const __m256 qd = _mm256_loadu_ps(q + i * hd + d);
        a0[i] = _mm256_fmadd_ps(qd, f0, a0[i]);
        a1[i] = _mm256_fmadd_ps(qd, f1, a1[i]);
      }
    }
    for (int i = 0; i < NH; ++i) finish(i, j, a0[i], k0), finish(i, j + 1, a1[i], k1);
  }
  for (; j < j1; ++j) {
    const uint16_t* kj = kv.key(j);
    __m256 acc[NH];
    for (int i = 0; i < NH; ++i) acc[i] = _mm256_setzero_ps();
    for (int32_t d = 0; d < hd8; d += 8) {
      const __m256 kf = load_h8(kj + d);
      for (int i = 0; i < NH; ++i) acc[i] = _mm256_fmadd_ps(_mm256_loadu_ps(q + i * hd + d), kf, acc[i]);
    }
    for (int i = 0; i < NH; ++i) finish(i, j, acc[i], kj);
  }
}

// acc (NH heads, out + i·hd) += Σ_{j0 <= j < j1} p[i][j] · v_j (p rows at stride),
// 32 dims at a time with four accumulators per head, then 8, then one; the
// accumulators start at 0 where j0 == 0, else continue from acc.
template <int NH>
void values_nh(const float* p, int64_t stride, const KvView& kv, int32_t j0, int32_t j1, int32_t hd, float* acc) {
  const bool first = j0 == 0;
  int32_t d = 0;
  for (; d + 32 <= hd; d += 32) {
    __m256 a[NH][4];
    for (int i = 0; i < NH; ++i)
      for (int c = 0; c < 4; ++c) a[i][c] = first ? _mm256_setzero_ps() : _mm256_loadu_ps(acc + i * hd + d + 8 * c);
    for (int32_t j = j0; j < j1; ++j) {
      const uint16_t* vj = kv.value(j) + d;
      const __m256 v0 = load_h8(vj), v1 = load_h8(vj + 8), v2 = load_h8(vj + 16), v3 = load_h8(vj + 24);
      for (int i = 0; i < NH; ++i) {
        const __m256 pj = _mm256_set1_ps(p[i * stride + j]);
        a[i][0] = _mm256_fmadd_ps(pj, v0, a[i][0]);
        a[i][1] = _mm256_fmadd_ps(pj, v1, a[i][1]);
        a[i][2] = _mm256_fmadd_ps(pj, v2, a[i][2]);
        a[i][3] = _mm256_fmadd_ps(pj, v3, a[i][3]);
      }
    }
    for (int i = 0; i < NH; ++i)
      for (int c = 0; c < 4; ++c) _mm256_storeu_ps(acc + i * hd + d + 8 * c, a[i][c]);
  }
  for (; d + 8 <= hd; d += 8)
    for (int i = 0; i < NH; ++i) {
      __m256 a0 = first ? _mm256_setzero_ps() : _mm256_loadu_ps(acc + i * hd + d);
      for (int32_t j = j0; j < j1; ++j) a0 = _mm256_fmadd_ps(_mm256_set1_ps(p[i * stride + j]), load_h8(kv.value(j) + d), a0);
      _mm256_storeu_ps(acc + i * hd + d, a0);
    }
  for (; d < hd; ++d)
    for (int i = 0; i < NH; ++i) {
      float a0 = first ? 0.0f : acc[i * hd + d];
      for (int32_t j = j0; j < j1; ++j) a0 = std::fma(p[i * stride + j], fp16_to_fp32(kv.value(j)[d]), a0);
      acc[i * hd + d] = a0;
    }
}

}  // namespace

void attention_block_avx2(const AttentionBlock& b, const KvView& kv, int32_t hd, float scale, float* scores) {
  // Rows r = token i · n_heads + head h (scores at r · n_max); positions in
  // blocks of kPos, so that a block's K (then V) rows serve every row of the
  // block from L1 before the next block is read. Per row, every score is its
  // own chain and every output lane sums its positions in order, as computed
  // alone; the running maximum is exact in any order.
  constexpr int32_t kPos = 32;
  if (split_large_block(b, kv, hd, scale, scores, attention_block_avx2)) return;
  const int32_t n_max = b.n_kv0 + b.n_tok - 1, H = b.n_heads;
  float mx[kMaxBlockRows], inv[kMaxBlockRows];
  for (int32_t r = 0; r < b.n_tok * H; ++r) mx[r] = -INFINITY;
  const auto each_block = [&](const auto& fn) {  // fn(token i, first head, heads, j0, j1)
    for (int32_t j0 = 0; j0 < n_max; j0 += kPos)
      for (int32_t i = 0; i < b.n_tok; ++i) {
        const int32_t j1 = std::min(j0 + kPos, b.n_kv0 + i);
        for (int32_t h0 = 0; j1 > j0 && h0 < H; h0 += 4) fn(i, h0, std::min(4, H - h0), j0, j1);
      }
  };
  each_block([&](int32_t i, int32_t h0, int32_t nh, int32_t j0, int32_t j1) {
    const float* q = b.q + i * b.q_stride + int64_t(h0) * hd;
    float* sc = scores + int64_t(i * H + h0) * n_max;
    float* m = mx + i * H + h0;
    switch (nh) {
      case 4: scores_nh<4>(q, kv, j0, j1, hd, scale, sc, n_max, m); break;
      case 3: scores_nh<3>(q, kv, j0, j1, hd, scale, sc, n_max, m); break;
      case 2: scores_nh<2>(q, kv, j0, j1, hd, scale, sc, n_max, m); break;
      default: scores_nh<1>(q, kv, j0, j1, hd, scale, sc, n_max, m); break;
    }
  });
  // Softmax per row: e^(s - max) eight at a time, the sum in double.
  for (int32_t r = 0; r < b.n_tok * H; ++r)
    inv[r] = float(1.0 / softmax_exp(scores + int64_t(r) * n_max, b.n_kv0 + r / H, mx[r]));
  each_block([&](int32_t i, int32_t h0, int32_t nh, int32_t j0, int32_t j1) {
    const float* p = scores + int64_t(i * H + h0) * n_max;
    float* acc = b.out + i * b.out_stride + int64_t(h0) * hd;
    for (int32_t k = 0; k < nh; k += 2) {
      if (k + 1 < nh) values_nh<2>(p + k * n_max, n_max, kv, j0, j1, hd, acc + k * hd);
      else values_nh<1>(p + k * n_max, n_max, kv, j0, j1, hd, acc + k * hd);
    }
  });
  for (int32_t r = 0; r < b.n_tok * H; ++r) {
    float* o = b.out + (r / H) * b.out_stride + int64_t(r % H) * hd;
    for (int32_t d = 0; d < hd; ++d) o[d] *= inv[r];
  }
}

}  // namespace fish
