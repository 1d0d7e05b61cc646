// Shared by the *_avx512.cpp files only (they are compiled with AVX-512 flags):
// the kernel declarations of the family and the tile driver. Everything with a
// body has internal linkage (anonymous namespace), so no AVX-512 code can be
// merged into baseline files by the linker.
#pragma once
// GCC 12's AVX-512 headers build casts and reductions on _mm512_undefined_*(),
// which trips -Wuninitialized / -Wmaybe-uninitialized at every inlined use
// (GCC bug 105593, fixed in 12.3). The warnings are about the header only.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>

#include <cstdint>

#include "cpu/matmul_kernels.h"

namespace fish::mm::avx512 {

// Kernels (one per weight type, see matmul_kernels.h for the contract).
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

// Lane k of the result = horizontal sum of v[k] (16 vectors, 45 shuffles and
// adds instead of 16 separate reductions).
inline __m512 hsum16(const __m512* v) {
  __m512 u[8], w[4];
  for (int i = 0; i < 8; ++i)  // per 128-bit lane: [a0+a2, b0+b2, a1+a3, b1+b3]
    u[i] = _mm512_add_ps(_mm512_unpacklo_ps(v[2 * i], v[2 * i + 1]), _mm512_unpackhi_ps(v[2 * i], v[2 * i + 1]));
  for (int i = 0; i < 4; ++i)  // per 128-bit lane: partial sums of v[4i .. 4i+3]
    w[i] = _mm512_add_ps(_mm512_shuffle_ps(u[2 * i], u[2 * i + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                         _mm512_shuffle_ps(u[2 * i], u[2 * i + 1], _MM_SHUFFLE(3, 2, 3, 2)));
  const __m512 x0 = _mm512_add_ps(_mm512_shuffle_f32x4(w[0], w[1], 0x44), _mm512_shuffle_f32x4(w[0], w[1], 0xEE));
  const __m512 x1 = _mm512_add_ps(_mm512_shuffle_f32x4(w[2], w[3], 0x44), _mm512_shuffle_f32x4(w[2], w[3], 0xEE));
  return _mm512_add_ps(_mm512_shuffle_f32x4(x0, x1, 0x88), _mm512_shuffle_f32x4(x0, x1, 0xDD));
}

// The part of the row a tile call covers: elements [k0, k1); with acc the sums
// are added to y (a later K chunk) instead of stored.
struct KSpan {
  int64_t k0, k1;
  bool acc;
};

// Sums of R x T accumulators, stored to (or added to) y[(t0 + t) * ldy + r0 + i].
template <int R, int T>
inline void store_sums(const KernelArgs& a, int64_t r0, int t0, const __m512 (&acc)[R][T], bool add) {
  alignas(64) float sums[((R * T + 15) / 16) * 16];
  if constexpr (R * T < 4) {
    for (int i = 0; i < R; ++i)
      for (int t = 0; t < T; ++t) sums[i * T + t] = _mm512_reduce_add_ps(acc[i][t]);
  } else {
    constexpr int kN = R * T, kGroups = (kN + 15) / 16;
    for (int g = 0; g < kGroups; ++g) {
      __m512 v[16];
      for (int k = 0; k < 16; ++k) {
        const int n = 16 * g + k;
        v[k] = n < kN ? acc[n / T][n % T] : _mm512_setzero_ps();
      }
      _mm512_store_ps(sums + 16 * g, hsum16(v));
    }
  }
  for (int i = 0; i < R; ++i)
    for (int t = 0; t < T; ++t) {
      float& y = a.y[(t0 + t) * a.ldy + r0 + i];
      y = add ? y + sums[i * T + t] : sums[i * T + t];
    }
}

// Runs the tile of exactly nt tokens (1 <= nt <= T).
template <class Micro, int R, int T>
inline void dispatch_tokens(const KernelArgs& a, int64_t r, int t, int nt, const KSpan& ks) {
  if (nt == T) Micro::template tile<R, T>(a, r, t, ks);
  else if constexpr (T > 1) dispatch_tokens<Micro, R, T - 1>(a, r, t, nt, ks);
}

// Covers rows [r0, r1) x tokens [0, n_tok) with Micro's register tiles of RT
// rows x TT tokens (remainder rows one at a time, remainder tokens with a
// narrower tile). With more tokens than one tile:
//  - rows go in chunks of about kChunkBytes of weights, which stay in L2
//    while every token tile sweeps them;
//  - long rows go in K chunks whose activations for one token tile (at
//    Micro::kActBytes per element) stay in L1 while the row tiles sweep them;
//    later chunks add to y.
// Micro::kKUnit: the elements a K chunk boundary must be a multiple of.
template <class Micro, int RT, int TT>
void drive(const KernelArgs& a) {
  constexpr int64_t kChunkBytes = 192 << 10, kActL1Bytes = 20 << 10;
  int64_t chunk = a.r1 - a.r0, kc = a.n_in;
  if (a.n_tok > TT) {
    chunk = int64_t(kChunkBytes / (a.w_stride ? a.w_stride : 1)) / RT * RT;
    if (chunk < RT) chunk = RT;
    kc = int64_t(double(kActL1Bytes) / (Micro::kActBytes * TT)) / Micro::kKUnit * Micro::kKUnit;
    if (kc < Micro::kKUnit) kc = Micro::kKUnit;
    // Even chunks: 8192 in two halves rather than 5120 + 3072.
    const int64_t n_chunks = (a.n_in + kc - 1) / kc;
    kc = ((a.n_in + n_chunks - 1) / n_chunks + Micro::kKUnit - 1) / Micro::kKUnit * Micro::kKUnit;
  }
  for (int64_t rc = a.r0; rc < a.r1; rc += chunk) {
    const int64_t re = min64(rc + chunk, a.r1);
    for (int64_t k0 = 0; k0 < a.n_in; k0 += kc) {
      const KSpan ks{k0, min64(k0 + kc, a.n_in), k0 > 0};
      for (int t = 0; t < a.n_tok; t += TT) {
        const int nt = int(min64(TT, a.n_tok - t));
        int64_t r = rc;
        for (; r + RT <= re; r += RT) dispatch_tokens<Micro, RT, TT>(a, r, t, nt, ks);
        for (; r < re; ++r) dispatch_tokens<Micro, 1, TT>(a, r, t, nt, ks);
      }
    }
  }
}

}  // namespace
}  // namespace fish::mm::avx512
