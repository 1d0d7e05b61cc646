// The 16-row strip layout of prepared Q4_K / Q5_K / Q6_K / Q4_0 / Q4_1 / Q5_0 / Q5_1 / Q8_0 weights (WeightLayout::Strips16,
// made by prepare_weight). Plain data with internal linkage: shared by the
// repack (baseline), the scalar fallback and the AVX-512 kernels (see the ODR
// caution in matmul_kernels.h).
//
// Why: decoding a GGUF K-quant block row by row costs more instructions than
// the 144 / 210 bytes take to arrive from memory (nibble splits, 6-bit scale
// unpacking, per-block scale permutes). Interleaving 16 rows puts row i in
// int32 lane i of every vector: a 64-byte load holds 4 consecutive quants of
// each of 16 rows, one vpdpbusd against a broadcast of 4 activations gives 16
// partial row sums, and the scales and mins of 16 rows are decoded with a
// handful of whole-vector operations. The repack is a byte permutation of the
// GGUF blocks (quants regrouped, scale bytes moved): same size, exact inverse.
//
// A strip is rows 16s .. 16s + 15 (missing rows are zero); it holds n_in / 256
// strip-blocks back to back, strip-block b being the GGUF blocks b of its 16
// rows, 16 * sizeof(block) bytes (the 32-element types: blocks 8b .. 8b + 7
// of each row, 16 * 8 * sizeof(block), the last one possibly shorter). Row i of a strip is lane i (int32 lane or
// f16/int8 element i) of every plane below. A "quad" is 4 consecutive
// elements 4u .. 4u + 3 of a 256-block; byte 4i + c of a quad plane is
// element 4u + c of row i.
#pragma once
#include <cstdint>

#include "quant/blocks.h"

namespace fish::mm {
namespace {  // internal linkage: also compiled into the SIMD files

constexpr int kStripRows = 16;

// Q4_K strip-block (2304 bytes = 16 * 144):
//   [0, 32)      d[16]    f16, row i at 2i
//   [32, 64)     dmin[16] f16
//   [64, 256)    scales: 3 planes of 64 bytes; plane p, dword i = bytes
//                4p .. 4p + 3 of row i's 12-byte packed 6-bit scales/mins
//   [256, 2304)  qs: 32 planes of 64 bytes; plane k = 4j + q (sub-block j of
//                32 elements, q = 0..3): byte 4i + c holds element
//                32j + 4q + c of row i in its low nibble and element
//                32j + 16 + 4q + c in its high nibble
struct Q4KStrip {
  static constexpr uint64_t kD = 0, kDmin = 32, kScales = 64, kQs = 256;
  static constexpr uint64_t kBytes = kStripRows * sizeof(BlockQ4_K);
};
static_assert(Q4KStrip::kQs + 32 * 64 == Q4KStrip::kBytes);

// Q5_K strip-block (2816 bytes = 16 * 176): Q4_K's planes (the low 4 bits of
// each quant in qs, the same offsets), then
//   [2304, 2816)  qh: 8 planes of 64 bytes; plane j (sub-block j): byte 4i + c
//                 holds the 5th bit of element 32j + 4q + c of row i at bit 2q
//                 and of element 32j + 16 + 4q + c at bit 2q + 1 (q = 0..3)
struct Q5KStrip {
  static constexpr uint64_t kD = Q4KStrip::kD, kDmin = Q4KStrip::kDmin, kScales = Q4KStrip::kScales,
                            kQs = Q4KStrip::kQs, kQh = Q4KStrip::kBytes;
  static constexpr uint64_t kBytes = kStripRows * sizeof(BlockQ5_K);
};
static_assert(Q5KStrip::kQh + 8 * 64 == Q5KStrip::kBytes);

// Q6_K strip-block (3360 bytes = 16 * 210):
//   [0, 32)       d[16] f16
//   [32, 288)     scales int8: byte 16g + i = scale of 16-group g of row i
//   [288, 2336)   ql: 32 planes of 64 bytes; plane 2g + p (16-group g,
//                 p = 0, 1): low nibble = low 4 bits of quad 4g + 2p, high
//                 nibble = of quad 4g + 2p + 1
//   [2336, 3360)  qh: 16 planes of 64 bytes; plane g: bits 2u, 2u + 1 = the
//                 high 2 bits of quad 4g + u (u = 0..3)
struct Q6KStrip {
  static constexpr uint64_t kD = 0, kScales = 32, kQl = 288, kQh = 2336;
  static constexpr uint64_t kBytes = kStripRows * sizeof(BlockQ6_K);
};
static_assert(Q6KStrip::kQh + 16 * 64 == Q6KStrip::kBytes);

// The 32-element block types take 8 GGUF blocks (256 elements) of each row
// per strip-block; block j of the 8 is elements 32j .. 32j + 31. Rows whose
// length is not a multiple of 256 (Qwen2 0.5B's 896) end in a strip-block of
// nj < 8 blocks with the same planes for its nj blocks, each region nj/8 of
// its size below (offsets: Strip32Layout). A strip-block of nj blocks:
//   d     nj planes of 32 bytes; plane j = f16 d of block j, row i at 2i
//   m     (Q4_1, Q5_1) nj planes of 32 bytes: f16 m of block j, as d
//   qs    Q4_0 / Q4_1 / Q5_0 / Q5_1: 4 nj planes of 64 bytes; plane 4j + q
//         (q = 0..3): byte 4i + c holds the low 4 bits of element 32j + 4q + c
//         of row i in its low nibble and of element 32j + 16 + 4q + c in its
//         high nibble (Q4_K's planes with block j for sub-block j; the GGUF
//         qs[4q + c] bytes as they are);
//         Q8_0: 8 nj planes of 64 bytes; plane 8j + u (u = 0..7): byte 4i + c
//         = element 32j + 4u + c of row i XOR 0x80 (the int8 quant q as the
//         unsigned q + 128, what vpdpbusd multiplies)
//   qh    (Q5_0, Q5_1) nj planes of 64 bytes; plane j: byte 4i + c holds the
//         5th bit of element 32j + 4q + c of row i at bit 2q and of element
//         32j + 16 + 4q + c at bit 2q + 1 (Q5_K's qh planes)
// x = d (q - off) with off = 8 (Q4_0), 16 (Q5_0), 0 (Q8_0's signed q); x = d q + m (Q4_1, Q5_1).
enum class Strip32 { Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 };

template <Strip32 kT>
struct Strip32Layout {
  static constexpr bool kMin = kT == Strip32::Q4_1 || kT == Strip32::Q5_1;
  static constexpr bool kQh = kT == Strip32::Q5_0 || kT == Strip32::Q5_1;
  static constexpr bool kQ8 = kT == Strip32::Q8_0;
  static constexpr int kOff = kT == Strip32::Q4_0 ? 8 : kT == Strip32::Q5_0 ? 16 : 0;
  static constexpr uint64_t kGgufBlock = kT == Strip32::Q4_0   ? sizeof(BlockQ4_0)
                                         : kT == Strip32::Q4_1 ? sizeof(BlockQ4_1)
                                         : kT == Strip32::Q5_0 ? sizeof(BlockQ5_0)
                                         : kT == Strip32::Q5_1 ? sizeof(BlockQ5_1)
                                                               : sizeof(BlockQ8_0);
  static constexpr uint64_t kBytes = kStripRows * 8 * kGgufBlock;  // a full strip-block
  static constexpr uint64_t kD = 0;
  static constexpr uint64_t m(int nj) { return 32 * uint64_t(nj); }
  static constexpr uint64_t qs(int nj) { return (kMin ? 64 : 32) * uint64_t(nj); }
  static constexpr uint64_t qh(int nj) { return qs(nj) + 256 * uint64_t(nj); }
  static_assert(qs(8) + (kQ8 ? 4096 : 2048) + (kQh ? 512 : 0) == kBytes);
};

// The 4-bit quant e (0..255) of a GGUF Q4_K block's qs: qs[32 (e / 64) + e % 32],
// low nibble for e % 64 < 32. (Q5_K's low 4 bits sit the same way in its qs;
// its 5th bit of e is bit e / 32 of qh[e % 32].)
constexpr int q4k_nibble_index(int e) { return 32 * (e / 64) + e % 32; }
constexpr int q4k_nibble_shift(int e) { return e % 64 < 32 ? 0 : 4; }

// The quant e of a GGUF Q6_K block: low 4 bits in ql[64 h + l + 32 (k & 1)]
// (high nibble for k >= 2), high 2 bits at bit 2k of qh[32 h + l], where
// e = 128 h + 32 k + l.
constexpr int q6k_ql_index(int e) { return 64 * (e / 128) + e % 32 + 32 * ((e % 128 / 32) & 1); }
constexpr int q6k_ql_shift(int e) { return e % 128 / 32 >= 2 ? 4 : 0; }
constexpr int q6k_qh_index(int e) { return 32 * (e / 128) + e % 32; }
constexpr int q6k_qh_shift(int e) { return 2 * (e % 128 / 32); }

}  // namespace
}  // namespace fish::mm
