// The tile driver shared by the SIMD kernel families: it walks rows x tokens x
// K in register tiles of a family's micro-kernel. Plain C++ (no intrinsics);
// internal linkage, so each family's files get their own copy compiled with
// their own instruction set.
#pragma once
#include <cstdint>

#include "cpu/matmul_kernels.h"

namespace fish::mm {
namespace {

inline int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

// The part of the row a tile call covers: elements [k0, k1); with acc the sums
// are added to y (a later K chunk) instead of stored.
struct KSpan {
  int64_t k0, k1;
  bool acc;
};

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
}  // namespace fish::mm
