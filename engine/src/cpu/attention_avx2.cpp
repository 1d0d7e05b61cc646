// AVX2 + FMA + F16C attention for one (token, head). Only called after a cpuid check.
#include <immintrin.h>

#include <cmath>
#include <cstdint>

#include "common/fp16.h"
#include "cpu/attention.h"

namespace fish {

static inline float hsum256(__m256 v) {
  __m128 lo = _mm256_castps256_ps128(v), hi = _mm256_extractf128_ps(v, 1);
  lo = _mm_add_ps(lo, hi);
  lo = _mm_add_ps(lo, _mm_movehl_ps(lo, lo));
  lo = _mm_add_ss(lo, _mm_movehdup_ps(lo));
  return _mm_cvtss_f32(lo);
}

void attention_head_avx2(const float* q, const KvView& kv, int32_t n_kv, int32_t hd, float scale, float* out,
                         float* scores) {
  const int32_t hd8 = hd & ~7;
  float mx = -INFINITY;
  for (int32_t j = 0; j < n_kv; ++j) {
    const uint16_t* kj = kv.key(j);
    __m256 acc = _mm256_setzero_ps();
    int32_t d = 0;
    for (; d < hd8; d += 8) {
      const __m256 kf = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(kj + d)));
      acc = _mm256_fmadd_ps(_mm256_loadu_ps(q + d), kf, acc);
    }
    float s = hsum256(acc);
    for (; d < hd; ++d) s += q[d] * fp16_to_fp32(kj[d]);
    s *= scale;
    scores[j] = s;
    mx = s > mx ? s : mx;
  }
  double sum = 0;
  for (int32_t j = 0; j < n_kv; ++j) {
    scores[j] = std::exp(scores[j] - mx);
    sum += scores[j];
  }
  const float inv = float(1.0 / sum);
  int32_t d = 0;
  // Accumulate 8 output lanes at a time across all positions (out stays in registers).
  for (; d + 32 <= hd; d += 32) {
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    for (int32_t j = 0; j < n_kv; ++j) {
      const uint16_t* vj = kv.value(j) + d;
      const __m256 p = _mm256_set1_ps(scores[j]);
      a0 = _mm256_fmadd_ps(p, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(vj))), a0);
      a1 = _mm256_fmadd_ps(p, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(vj + 8))), a1);
      a2 = _mm256_fmadd_ps(p, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(vj + 16))), a2);
      a3 = _mm256_fmadd_ps(p, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(vj + 24))), a3);
    }
    const __m256 vi = _mm256_set1_ps(inv);
    _mm256_storeu_ps(out + d, _mm256_mul_ps(a0, vi));
    _mm256_storeu_ps(out + d + 8, _mm256_mul_ps(a1, vi));
    _mm256_storeu_ps(out + d + 16, _mm256_mul_ps(a2, vi));
    _mm256_storeu_ps(out + d + 24, _mm256_mul_ps(a3, vi));
  }
  for (; d + 8 <= hd; d += 8) {
    __m256 a0 = _mm256_setzero_ps();
    for (int32_t j = 0; j < n_kv; ++j) {
      const uint16_t* vj = kv.value(j) + d;
      a0 = _mm256_fmadd_ps(_mm256_set1_ps(scores[j]),
                           _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(vj))), a0);
    }
    _mm256_storeu_ps(out + d, _mm256_mul_ps(a0, _mm256_set1_ps(inv)));
  }
  for (; d < hd; ++d) {
    float acc = 0;
    for (int32_t j = 0; j < n_kv; ++j) acc += scores[j] * fp16_to_fp32(kv.value(j)[d]);
    out[d] = acc * inv;
  }
}

}  // namespace fish
