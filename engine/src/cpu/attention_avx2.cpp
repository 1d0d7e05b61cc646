// AVX2 + FMA + F16C attention for the query heads of one KV head at one
// token. Only called after a cpuid check. Every head's arithmetic is the
// one-head computation's, operation for operation (the same FMA chains in
// the same order, the same horizontal sums, the same vector e^x): the heads
// share the loads and f16 conversions of each K and V row and run their
// chains side by side, so a head's output does not depend on how many heads
// were computed with it.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "common/fp16.h"
#include "cpu/attention.h"

namespace fish {
namespace {

inline float hsum256(__m256 v) {
  __m128 lo = _mm256_castps256_ps128(v), hi = _mm256_extractf128_ps(v, 1);
  lo = _mm_add_ps(lo, hi);
  lo = _mm_add_ps(lo, _mm_movehl_ps(lo, lo));
  lo = _mm_add_ss(lo, _mm_movehdup_ps(lo));
  return _mm_cvtss_f32(lo);
}

// e^x for the softmax (x = s - max <= 0, or NaN): 2^n · e^r with n = round(x·log2 e),
// r = x - n·ln 2 (ln 2 in two parts), e^r by its Taylor polynomial of degree 6
// (|r| <= ln2/2: relative error below 2e-8 before rounding, about an ulp
// after); x below -87.33 (2^-126) gives 0; NaN stays NaN.
inline __m256 exp256(__m256 x) {
  const __m256 lo = _mm256_set1_ps(-87.33654f);
  const __m256 under = _mm256_cmp_ps(x, lo, _CMP_LT_OQ);
  x = _mm256_max_ps(lo, x);  // the second operand where either is NaN: x
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504f)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 p = _mm256_set1_ps(1.0f / 720);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 120));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 24));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 6));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
  const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_andnot_ps(under, _mm256_mul_ps(p, _mm256_castsi256_ps(e)));
}

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
    const __m256 e = exp256(_mm256_sub_ps(_mm256_loadu_ps(s + j), m));
    _mm256_storeu_ps(s + j, e);
    add(e);
  }
  if (j < n) {  // the tail through the same arithmetic, padded with -inf (-> 0)
    alignas(32) float t[8];
    for (int i = 0; i < 8; ++i) t[i] = j + i < n ? s[j + i] : -INFINITY;
    const __m256 e = exp256(_mm256_sub_ps(_mm256_load_ps(t), m));
    _mm256_store_ps(t, e);
    for (int i = 0; j + i < n; ++i) s[j + i] = t[i];
    add(e);
  }
  alignas(32) double d[4];
  _mm256_store_pd(d, _mm256_add_pd(lo, hi));
  return (d[0] + d[1]) + (d[2] + d[3]);
}

inline __m256 load_h8(const uint16_t* p) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }

// Scores of NH heads (q + i·hd, into scores + i·n_kv) over positions 0..n_kv-1,
// two positions per step (2·NH independent FMA chains: one chain per head
// and position, as the one-head loop has); returns each head's maximum in mx.
template <int NH>
void scores_nh(const float* q, const KvView& kv, int32_t n_kv, int32_t hd, float scale, float* scores, float* mx) {
  const int32_t hd8 = hd & ~7;
  for (int i = 0; i < NH; ++i) mx[i] = -INFINITY;
  // The score of head i at position j from its chain (the one-head loop's tail and scale).
  const auto finish = [&](int i, int32_t j, __m256 acc, const uint16_t* kj) {
    float s = hsum256(acc);
    for (int32_t d = hd8; d < hd; ++d) s += q[i * hd + d] * fp16_to_fp32(kj[d]);
    s *= scale;
    scores[i * n_kv + j] = s;
    mx[i] = s > mx[i] ? s : mx[i];
  };
  int32_t j = 0;
  for (; j + 2 <= n_kv; j += 2) {
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
  for (; j < n_kv; ++j) {
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

// out (NH heads) = Σ_j p[i][j] · v_j · inv[i], 32 dims at a time with the
// head's four accumulators, then 8 at a time, then one.
template <int NH>
void values_nh(const float* p, const float* inv, const KvView& kv, int32_t n_kv, int32_t hd, float* out) {
  int32_t d = 0;
  for (; d + 32 <= hd; d += 32) {
    __m256 a[NH][4];
    for (int i = 0; i < NH; ++i) a[i][0] = a[i][1] = a[i][2] = a[i][3] = _mm256_setzero_ps();
    for (int32_t j = 0; j < n_kv; ++j) {
      const uint16_t* vj = kv.value(j) + d;
      const __m256 v0 = load_h8(vj), v1 = load_h8(vj + 8), v2 = load_h8(vj + 16), v3 = load_h8(vj + 24);
      for (int i = 0; i < NH; ++i) {
        const __m256 pj = _mm256_set1_ps(p[i * n_kv + j]);
        a[i][0] = _mm256_fmadd_ps(pj, v0, a[i][0]);
        a[i][1] = _mm256_fmadd_ps(pj, v1, a[i][1]);
        a[i][2] = _mm256_fmadd_ps(pj, v2, a[i][2]);
        a[i][3] = _mm256_fmadd_ps(pj, v3, a[i][3]);
      }
    }
    for (int i = 0; i < NH; ++i) {
      const __m256 vi = _mm256_set1_ps(inv[i]);
      for (int c = 0; c < 4; ++c) _mm256_storeu_ps(out + i * hd + d + 8 * c, _mm256_mul_ps(a[i][c], vi));
    }
  }
  for (; d + 8 <= hd; d += 8)
    for (int i = 0; i < NH; ++i) {
      __m256 a0 = _mm256_setzero_ps();
      for (int32_t j = 0; j < n_kv; ++j) a0 = _mm256_fmadd_ps(_mm256_set1_ps(p[i * n_kv + j]), load_h8(kv.value(j) + d), a0);
      _mm256_storeu_ps(out + i * hd + d, _mm256_mul_ps(a0, _mm256_set1_ps(inv[i])));
    }
  for (; d < hd; ++d)
    for (int i = 0; i < NH; ++i) {
      float acc = 0;
      for (int32_t j = 0; j < n_kv; ++j) acc += p[i * n_kv + j] * fp16_to_fp32(kv.value(j)[d]);
      out[i * hd + d] = acc * inv[i];
    }
}

}  // namespace

void attention_heads_avx2(const float* q, int32_t n_heads, const KvView& kv, int32_t n_kv, int32_t hd, float scale,
                          float* out, float* scores) {
  // Four heads at a time: their scores in one pass over K, the softmax per
  // head (e^(s - max) eight at a time, the sum in double), their values two
  // heads per pass over V.
  for (int32_t h0 = 0; h0 < n_heads; h0 += 4) {
    const int32_t nh = std::min(4, n_heads - h0);
    const float* qh = q + int64_t(h0) * hd;
    float* sh = scores + int64_t(h0) * n_kv;
    float* oh = out + int64_t(h0) * hd;
    float mx[4], inv[4];
    switch (nh) {
      case 4: scores_nh<4>(qh, kv, n_kv, hd, scale, sh, mx); break;
      case 3: scores_nh<3>(qh, kv, n_kv, hd, scale, sh, mx); break;
      case 2: scores_nh<2>(qh, kv, n_kv, hd, scale, sh, mx); break;
      default: scores_nh<1>(qh, kv, n_kv, hd, scale, sh, mx); break;
    }
    for (int32_t i = 0; i < nh; ++i) inv[i] = float(1.0 / softmax_exp(sh + int64_t(i) * n_kv, n_kv, mx[i]));
    for (int32_t i = 0; i < nh; i += 2) {
      if (i + 1 < nh) values_nh<2>(sh + int64_t(i) * n_kv, inv + i, kv, n_kv, hd, oh + int64_t(i) * hd);
      else values_nh<1>(sh + int64_t(i) * n_kv, inv + i, kv, n_kv, hd, oh + int64_t(i) * hd);
    }
  }
}

}  // namespace fish
