// The horizontal sum of eight floats, for the *_avx2.cpp files only (compiled
// with AVX2): (v0+v4, v1+v5, v2+v6, v3+v7), then pairs, then the last two.
// Internal linkage, so no AVX2 code can be merged into baseline files. The
// order is fixed: the attention's rows rely on it being the same everywhere.
#pragma once
#include <immintrin.h>

namespace {

inline float avx2_hsum8(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

}  // namespace
