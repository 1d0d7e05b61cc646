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
void kernel_q4_k(const KernelArgs& a);
void kernel_q5_k(const KernelArgs& a);
void kernel_q6_k(const KernelArgs& a);

// Quantiser of the X8_32, X8_32S and X8_K layouts.
void quantize(ActLayout l, const float* x, int64_t n_in, uint8_t* dst);

namespace {

inline int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

// Sums of R x T accumulators, written to y[(t0 + t) * ldy + r0 + r].
template <int R, int T>
inline void store_sums(const KernelArgs& a, int64_t r0, int t0, const __m512 (&acc)[R][T]) {
#pragma GCC unroll 4
  for (int i = 0; i < R; ++i)
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) a.y[(t0 + t) * a.ldy + r0 + i] = _mm512_reduce_add_ps(acc[i][t]);
}

template <class Micro, int R, int TT>
inline void dispatch_tokens(const KernelArgs& a, int64_t r, int t, int nt) {
  static_assert(TT >= 1 && TT <= 8);
  switch (nt) {
    case 1: Micro::template tile<R, 1>(a, r, t); break;
    case 2: if constexpr (TT >= 2) Micro::template tile<R, 2>(a, r, t); break;
    case 3: if constexpr (TT >= 3) Micro::template tile<R, 3>(a, r, t); break;
    case 4: if constexpr (TT >= 4) Micro::template tile<R, 4>(a, r, t); break;
    case 5: if constexpr (TT >= 5) Micro::template tile<R, 5>(a, r, t); break;
    case 6: if constexpr (TT >= 6) Micro::template tile<R, 6>(a, r, t); break;
    case 7: if constexpr (TT >= 7) Micro::template tile<R, 7>(a, r, t); break;
    case 8: if constexpr (TT >= 8) Micro::template tile<R, 8>(a, r, t); break;
    default: break;
  }
}

// Covers rows [r0, r1) x tokens [0, n_tok) with Micro's register tiles of RT
// rows x TT tokens (remainder rows one at a time, remainder tokens with a
// narrower tile). With many tokens the rows go in chunks of about kChunkBytes
// of weights, which stay in L2 while every token tile sweeps them.
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
}  // namespace fish::mm::avx512
