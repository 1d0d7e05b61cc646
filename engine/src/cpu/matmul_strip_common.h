// What the SIMD strip kernels (matmul_strip_avx512.cpp, matmul_strip_avx2.cpp)
// share: the activation bytes per block, the byte-shuffle controls they build at
// compile time, the decode's prefetch, and the loop over strips (which strips, token tiles and K
// chunks a call covers, in what order). Plain C++; internal linkage, so each
// family's file gets its own copy compiled with its own instruction set.
#pragma once
#include <cstdint>

#include "cpu/matmul_act_views.h"
#include "cpu/matmul_drive.h"
#include "cpu/matmul_kernels.h"
#include "cpu/matmul_strips.h"

namespace fish::mm {
namespace {

// Activation bytes per 256 elements and token: X8_KS (qs, d, bs32, nb16), X8_32 (qs, dx, sa, bs).
constexpr double kActSBytes = QK_K + 4.0 + 16.0 + 64.0, kAct32Bytes = QK_K + 256.0 + 32.0 + 32.0;

// A vpshufb control of kBytes (32 or 64) that applies one byte pattern to
// every dword: byte c of the result dword takes byte (pattern >> 8c) & 3 of
// the same dword, or 0 where that pattern byte is 0x80 (vpshufb indexes
// within 128-bit lanes).
template <int kBytes>
struct Shuffle {
  alignas(64) uint8_t v[kBytes];
};
template <int kBytes>
constexpr Shuffle<kBytes> dword_shuffle(uint32_t pattern) {
  Shuffle<kBytes> s{};
  for (int i = 0; i < kBytes / 4; ++i)
    for (int c = 0; c < 4; ++c) {
      const uint8_t p = uint8_t(pattern >> (8 * c));
      s.v[4 * i + c] = p & 0x80 ? 0x80 : uint8_t(p + 4 * (i % 4));
    }
  return s;
}
// Byte c of each dword zero-extended to 32 bits; bytes (0, 1) / (2, 3) as two
// zero-extended int16.
template <int kBytes>
struct DwordShuffles {
  static constexpr Shuffle<kBytes> ext[4] = {dword_shuffle<kBytes>(0x80808000u), dword_shuffle<kBytes>(0x80808001u),
                                             dword_shuffle<kBytes>(0x80808002u), dword_shuffle<kBytes>(0x80808003u)};
  // Byte c of each dword zero-extended into both int16 halves.
  static constexpr Shuffle<kBytes> dup[4] = {dword_shuffle<kBytes>(0x80008000u), dword_shuffle<kBytes>(0x80018001u),
                                             dword_shuffle<kBytes>(0x80028002u), dword_shuffle<kBytes>(0x80038003u)};
  static constexpr Shuffle<kBytes> pair01 = dword_shuffle<kBytes>(0x80018000u);
  static constexpr Shuffle<kBytes> pair23 = dword_shuffle<kBytes>(0x80038002u);
};

// Decode (one or two tokens) streams each weight byte once. Each strip-block
// prefetches the bytes kNearBytes ahead into L1 and kFarBytes ahead into L2
// (the next strips of a unit follow in memory; prefetcht0 / prefetcht2). Measured on Zen 5 (1B model,
// 2 threads, huge pages): near-only at 4 KiB is 30-40% faster than no
// prefetch (2 KiB or 24 KiB: slower); the far L2 prefetch adds 8-14%.
constexpr uint64_t kNearBytes = 4096, kFarBytes = 12288;
template <uint64_t kBytes>
inline void prefetch_ahead(const uint8_t* sb) {
  const char* p = reinterpret_cast<const char*>(sb);
#pragma GCC unroll 64
  for (uint64_t o = 0; o < kBytes; o += 64) __builtin_prefetch(p + kNearBytes + o, 0, 3);
#pragma GCC unroll 64
  for (uint64_t o = 0; o < kBytes; o += 64) __builtin_prefetch(p + kFarBytes + o, 0, 1);
}

// Tile<Micro, T>::run(a, s, t0, b0, b1, add): strip s, tokens [t0, t0 + T),
// blocks [b0, b1), storing (add: adding) the 16 row sums of each token below r1.
template <template <class, int> class Tile, class Micro, int T>
inline void dispatch_strip(const KernelArgs& a, int64_t s, int t0, int nt, int64_t b0, int64_t b1, bool add) {
  if (nt == T) Tile<Micro, T>::run(a, s, t0, b0, b1, add);
  else if constexpr (T > 1) dispatch_strip<Tile, Micro, T - 1>(a, s, t0, nt, b0, b1, add);
}

// Strips covering rows [r0, r1) (r0 a multiple of 16) x tokens in tiles of
// TT (Micro::kBlockBytes: one strip-block; Micro::kActBytes: its activations
// per token). With more tokens than one tile, as
// drive() in matmul_drive.h: strips in chunks of about kChunkBytes (kept in
// L2 while every token tile sweeps them) and long rows in K chunks whose
// activations for one token tile stay in L1 (later chunks add to y).
template <template <class, int> class Tile, class Micro, int TT>
void drive_strips(const KernelArgs& a) {
  constexpr uint64_t block_bytes = Micro::kBlockBytes;
  constexpr int64_t kChunkBytes = 192 << 10, kActL1Bytes = 20 << 10;
  const int64_t n_blocks = (a.n_in + QK_K - 1) / QK_K;  // Q4_0 / Q8_0: the last may be shorter
  const int64_t s0 = a.r0 / kStripRows, s1 = (a.r1 + kStripRows - 1) / kStripRows;
  int64_t chunk = s1 - s0, kb = n_blocks;
  if (a.n_tok > TT) {
    chunk = kChunkBytes / int64_t(block_bytes * uint64_t(n_blocks));
    if (chunk < 1) chunk = 1;
    kb = int64_t(double(kActL1Bytes) / (Micro::kActBytes * TT));
    if (kb < 1) kb = 1;
    const int64_t n_chunks = (n_blocks + kb - 1) / kb;
    kb = (n_blocks + n_chunks - 1) / n_chunks;
  }
  for (int64_t sc = s0; sc < s1; sc += chunk) {
    const int64_t se = min64(sc + chunk, s1);
    for (int64_t b0 = 0; b0 < n_blocks; b0 += kb) {
      const int64_t b1 = min64(b0 + kb, n_blocks);
      for (int t = 0; t < a.n_tok; t += TT) {
        const int nt = int(min64(TT, a.n_tok - t));
        for (int64_t s = sc; s < se; ++s) dispatch_strip<Tile, Micro, TT>(a, s, t, nt, b0, b1, b0 > 0);
      }
    }
  }
}

}  // namespace
}  // namespace fish::mm
