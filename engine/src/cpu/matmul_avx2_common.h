// Shared by the *_avx2.cpp files only (compiled with AVX2 + FMA + F16C): the
// kernel declarations of the family and the tile driver. Everything with a
// body has internal linkage, so no AVX2 code can be merged into baseline files.
#pragma once
#include <immintrin.h>

#include <cstdint>

#include "cpu/matmul_kernels.h"

namespace fish::mm::avx2 {

void kernel_f32(const KernelArgs& a);
void kernel_f16(const KernelArgs& a);
void kernel_bf16(const KernelArgs& a);
void kernel_q4_0(const KernelArgs& a);
void kernel_q4_1(const KernelArgs& a);
void kernel_q5_0(const KernelArgs& a);
void kernel_q5_1(const KernelArgs& a);
void kernel_q8_0(const KernelArgs& a);
void kernel_q2_k(const KernelArgs& a);
void kernel_q3_k(const KernelArgs& a);
void kernel_q4_k(const KernelArgs& a);
void kernel_q5_k(const KernelArgs& a);
void kernel_q6_k(const KernelArgs& a);

// Quantiser of the X8_32, X8_32S and X8_K layouts.
void quantize(ActLayout l, const float* x, int64_t n_in, uint8_t* dst);

namespace {

inline int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

inline float hsum8(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

inline int hsum8_epi32(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(1, 0, 3, 2)));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(2, 3, 0, 1)));
  return _mm_cvtsi128_si32(s);
}

template <int R, int T>
inline void store_sums(const KernelArgs& a, int64_t r0, int t0, const __m256 (&acc)[R][T]) {
  for (int i = 0; i < R; ++i)
    for (int t = 0; t < T; ++t) a.y[(t0 + t) * a.ldy + r0 + i] = hsum8(acc[i][t]);
}

template <class Micro, int R, int T>
inline void dispatch_tokens(const KernelArgs& a, int64_t r, int t, int nt) {
  if (nt == T) Micro::template tile<R, T>(a, r, t);
  else if constexpr (T > 1) dispatch_tokens<Micro, R, T - 1>(a, r, t, nt);
}

// As the AVX-512 driver: RT x TT register tiles, rows in L2-sized chunks
// while the token tiles sweep them.
template <class Micro, int RT, int TT>
void drive(const KernelArgs& a) {
  constexpr int64_t kChunkBytes = 192 << 10;
  int64_t chunk = a.r1 - a.r0;
  if (a.n_tok > TT) {
    chunk = int64_t(kChunkBytes / (a.w_stride ? a.w_stride : 1)) / RT * RT;
    if (chunk < RT) chunk = RT;
  }
  for (int64_t rc = a.r0; rc < a.r1; rc += chunk) {
    const int64_t re = min64(rc + chunk, a.r1);
    for (int t = 0; t < a.n_tok; t += TT) {
      const int nt = int(min64(TT, a.n_tok - t));
      int64_t r = rc;
      for (; r + RT <= re; r += RT) dispatch_tokens<Micro, RT, TT>(a, r, t, nt);
      for (; r < re; ++r) dispatch_tokens<Micro, 1, TT>(a, r, t, nt);
    }
  }
}

}  // namespace
}  // namespace fish::mm::avx2
