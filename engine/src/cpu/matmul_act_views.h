// Views of T activation rows in the SIMD layouts (matmul_kernels.h's X8_KS
// and X8_32), starting at token t0: the plane pointers per token that the
// SIMD kernel files read. Internal linkage (each family's file gets its own
// copy, compiled with its own instruction set; see the ODR caution there).
#pragma once
#include <cstdint>

#include "cpu/matmul_kernels.h"

namespace fish::mm {
namespace {

// The X8_KS planes of T activation rows starting at token t0.
template <int T>
struct ActS {
  const int8_t* qs[T];
  const float* d[T];
  const int16_t* bs32[T];
  const int32_t* nb16[T];
  ActS(const KernelArgs& a, int t0) {
    const X8_KSPlanes p = x8_ks_planes(a.n_in);
    for (int t = 0; t < T; ++t) {
      const uint8_t* base = a.act + uint64_t(t0 + t) * a.act_stride;
      qs[t] = reinterpret_cast<const int8_t*>(base);
      d[t] = reinterpret_cast<const float*>(base + p.d);
      bs32[t] = reinterpret_cast<const int16_t*>(base + p.bs32);
      nb16[t] = reinterpret_cast<const int32_t*>(base + p.nb16);
    }
  }
};

// The X8_32 planes of T activation rows starting at token t0 (the 32-element
// block types, GGUF rows and strips; X8_32S the same planes): qs, dx (block j's d
// at dx[8j], repeated 8 times), sa (d Σ qs of block j) and bs (Σ qs).
template <int T>
struct Act32 {
  const int8_t* qs[T];
  const float* dx[T];
  const float* sa[T];
  const int32_t* bs[T];
  int64_t n_blocks;  // blocks of 32 per row
  Act32(const KernelArgs& a, int t0) : n_blocks(a.n_in / 32) {
    const X8_32Planes p = x8_32_planes(a.n_in);
    for (int t = 0; t < T; ++t) {
      const uint8_t* base = a.act + uint64_t(t0 + t) * a.act_stride;
      qs[t] = reinterpret_cast<const int8_t*>(base);
      dx[t] = reinterpret_cast<const float*>(base + p.dx);
      sa[t] = reinterpret_cast<const float*>(base + p.sa);
      bs[t] = reinterpret_cast<const int32_t*>(base + p.bs);
    }
  }
};

}  // namespace
}  // namespace fish::mm
