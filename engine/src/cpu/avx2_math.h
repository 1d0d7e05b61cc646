// Shared AVX2 + FMA math for the *_avx2.cpp files only (compiled with AVX2):
// internal linkage, so no AVX2 code can be merged into baseline files.
#pragma once
#include <immintrin.h>

namespace {

// A horizontal reduction of eight floats by op (a packed __m128 operation:
// _mm_add_ps, _mm_max_ps): (v0 op v4, v1 op v5, v2 op v6, v3 op v7), then
// pairs, then the last two; lane 0 is the result. The order is fixed: the
// attention's rows rely on the sum being the same everywhere.
template <class Op>
inline float avx2_hreduce8(__m256 v, Op op) {
  __m128 s = op(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = op(s, _mm_movehl_ps(s, s));
  s = op(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

inline float avx2_hsum8(__m256 v) {
  return avx2_hreduce8(v, [](__m128 a, __m128 b) { return _mm_add_ps(a, b); });
}

// e^x for x <= 0 (or NaN): 2^n · e^r with n = round(x·log2 e), r = x - n·ln 2
// (ln 2 in two parts), e^r by its Taylor polynomial of degree 6 (|r| <= ln2/2:
// relative error below 2e-8 before rounding, about an ulp after); x below
// -87.33 (2^-126) gives 0; NaN stays NaN.
inline __m256 avx2_exp8_nonpos(__m256 x) {
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

}  // namespace
