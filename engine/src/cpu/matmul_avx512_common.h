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

#include "cpu/matmul_drive.h"
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
// 16-row strips (prepare_weight): X8_KS activations (K-quants), X8_32 (Q4_0, Q5_0, Q8_0), X8_32S (Q4_1, Q5_1).
void kernel_q4_k_s16(const KernelArgs& a);
void kernel_q5_k_s16(const KernelArgs& a);
void kernel_q6_k_s16(const KernelArgs& a);
void kernel_q4_0_s16(const KernelArgs& a);
void kernel_q4_1_s16(const KernelArgs& a);
void kernel_q5_0_s16(const KernelArgs& a);
void kernel_q5_1_s16(const KernelArgs& a);
void kernel_q8_0_s16(const KernelArgs& a);

// Quantiser of the X8_32, X8_32S, X8_K and X8_KS layouts.
void quantize(ActLayout l, const float* x, int64_t n_in, uint8_t* dst);

namespace {

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

}  // namespace
}  // namespace fish::mm::avx512
