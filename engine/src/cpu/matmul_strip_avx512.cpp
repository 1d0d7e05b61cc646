// AVX-512 VNNI kernels of the 16-row strips (prepare_weight's Q4_K / Q5_K / Q6_K
// repack against X8_KS activations, Q4_0 / Q5_0 / Q8_0 against X8_32, Q4_1 /
// Q5_1 against X8_32S; layouts in cpu/matmul_strips.h).
//
// Int32 lane i of every vector is row i of the strip. For each quad (4
// consecutive elements) one vpdpbusd multiplies 4 unsigned quants of 16 rows by
// a broadcast of the token's 4 int8 activations and adds the 4 products per
// row: 64 multiply-adds per instruction, with no per-row shuffles. Per block
// of 256:
//  - Q4_K: a 64-byte plane gives two quads (low / high nibbles, 3 ops); a
//    32-element sub-block j (8 quads) sums into s_j, then isum += s_j * sc_j
//    (vpmulld; sc_j of 16 rows pulled out of the packed 6-bit scales with a
//    byte shuffle); the mins go through vpdpwssd on (m_2k, m_2k+1) pairs
//    against the activation's 32-group sums (bs32);
//    y += d_a (d * isum - dmin * imin).
//  - Q5_K: as Q4_K, each quad's 5th bits OR-ed in at bit 4 from the
//    sub-block's qh plane (2 ops per quad: a shift and a masked merge).
//  - Q6_K: a 16-group g is 2 ql planes + 1 qh plane (13 ops for 4 quads of 6
//    bits); s_g starts at -32 * bsum_g (the -32 offset of the quants, from
//    the activation's nb16 plane), isum += s_g * sc_g; y += d_a * d * isum.
// The integer sums are exact (|isum| < 2^28), as in ggml's reference dots.
// Several tokens (a tile of T) share each unpacked plane.
#if defined(__x86_64__) || defined(_M_X64)
#include <cstring>

#include "cpu/matmul_avx512_common.h"
#include "cpu/matmul_strip_common.h"
#include "cpu/matmul_strips.h"

namespace fish::mm::avx512 {
namespace {

constexpr int kTokTileS = 4;

// 4 bytes at p, in every int32 lane (folds into vpdpbusd's {1to16} operand).
inline __m512i bcast32(const void* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm512_set1_epi32(v);
}

inline __m512i load512(const uint8_t* p) { return _mm512_loadu_si512(p); }

using Shuffles = DwordShuffles<64>;
inline __m512i load_shuffle(const Shuffle<64>& s) { return _mm512_load_si512(s.v); }

// (a & b) | c
inline __m512i and_or(__m512i a, __m512i b, __m512i c) { return _mm512_ternarylogic_epi32(a, b, c, 0xEA); }

// The int32 constants the Q4_K block decode needs (hoisted out of the loops
// once the block functions are inlined).
struct Q4Consts {
  __m512i m0f = _mm512_set1_epi8(0x0F), m3f = _mm512_set1_epi8(0x3F), m30 = _mm512_set1_epi8(0x30);
  __m512i m10 = _mm512_set1_epi8(0x10);  // Q5_K: the 5th bit's place in a byte
  // vpshufb controls: byte c of each dword, zero-extended to 32 bits; and
  // bytes (0, 1) / (2, 3) of each dword as two zero-extended int16.
  __m512i ext[4] = {load_shuffle(Shuffles::ext[0]), load_shuffle(Shuffles::ext[1]), load_shuffle(Shuffles::ext[2]),
                    load_shuffle(Shuffles::ext[3])};
  __m512i pair01 = load_shuffle(Shuffles::pair01), pair23 = load_shuffle(Shuffles::pair23);
};

// Bit 4 of every byte of h shifted by kShift (> 0: left, < 0: right; 16-bit
// shifts: bit 4 of a byte comes from bit 4 - kShift of the same byte for
// -3 <= kShift <= 4).
template <int kShift>
inline __m512i bit4_from(__m512i h) {
  if constexpr (kShift > 0) return _mm512_slli_epi16(h, kShift);
  else if constexpr (kShift < 0) return _mm512_srli_epi16(h, -kShift);
  else return h;
}

// The 5th bits of a qh plane (Q5_K's layout, also Q5_0's) OR-ed in at bit 4
// of the 4 low-nibble quads lo (bits 2q) and the 4 high-nibble quads hi (bits 2q + 1).
inline void merge_bit4(__m512i h, __m512i m10, __m512i* lo, __m512i* hi) {
  lo[0] = and_or(bit4_from<4>(h), m10, lo[0]);
  lo[1] = and_or(bit4_from<2>(h), m10, lo[1]);
  lo[2] = and_or(h, m10, lo[2]);
  lo[3] = and_or(bit4_from<-2>(h), m10, lo[3]);
  hi[0] = and_or(bit4_from<3>(h), m10, hi[0]);
  hi[1] = and_or(bit4_from<1>(h), m10, hi[1]);
  hi[2] = and_or(bit4_from<-1>(h), m10, hi[2]);
  hi[3] = and_or(bit4_from<-3>(h), m10, hi[3]);
}

// Q4_K, and with kQ5 Q5_K (the same planes and arithmetic, quants of 5 bits).
template <bool kQ5>
struct Q45Strip {
  static constexpr uint64_t kBlockBytes = kQ5 ? Q5KStrip::kBytes : Q4KStrip::kBytes;
  static constexpr double kActBytes = kActSBytes;
  template <int T>
  using Act = ActS<T>;
  using Consts = Q4Consts;

  // acc[t] (lane i = row i) += the dot of strip-block sb (block b) with token t.
  template <int T>
  static inline void block(const Consts& k, const uint8_t* sb, const ActS<T>& act, int64_t b, __m512 (&acc)[T]) {
    // Packed 6-bit scales: dword p of each row's 12 bytes (see BlockQ4_K):
    // sc 0..3 = p0 & 63, m 0..3 = p1 & 63, sc 4..7 = (p2 & 15) | (p0 >> 6) << 4,
    // m 4..7 = (p2 >> 4) | (p1 >> 6) << 4, byte by byte.
    const __m512i p0 = load512(sb + Q4KStrip::kScales), p1 = load512(sb + Q4KStrip::kScales + 64),
                  p2 = load512(sb + Q4KStrip::kScales + 128);
    const __m512i sc_lo = _mm512_and_si512(p0, k.m3f);
    const __m512i sc_hi = and_or(p2, k.m0f, _mm512_and_si512(_mm512_srli_epi32(p0, 2), k.m30));
    __m512i isum[T];
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) isum[t] = _mm512_setzero_si512();
#pragma GCC unroll 8
    for (int j = 0; j < 8; ++j) {
      const __m512i sc = _mm512_shuffle_epi8(j < 4 ? sc_lo : sc_hi, k.ext[j % 4]);
      __m512i lo[4], hi[4];
#pragma GCC unroll 4
      for (int q = 0; q < 4; ++q) {
        const __m512i w = load512(sb + Q4KStrip::kQs + 64 * (4 * j + q));
        lo[q] = _mm512_and_si512(w, k.m0f);
        hi[q] = _mm512_and_si512(_mm512_srli_epi16(w, 4), k.m0f);
      }
      if constexpr (kQ5) {  // bits 2q / 2q + 1 of the plane: quad q's 5th bits (low / high nibbles)
        merge_bit4(load512(sb + Q5KStrip::kQh + 64 * j), k.m10, lo, hi);
      }
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t) {
        const int8_t* aq = act.qs[t] + b * QK_K + 32 * j;
        __m512i s0 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), lo[0], bcast32(aq));
        __m512i s1 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), hi[0], bcast32(aq + 16));
        s0 = _mm512_dpbusd_epi32(s0, lo[1], bcast32(aq + 4));
        s1 = _mm512_dpbusd_epi32(s1, hi[1], bcast32(aq + 20));
        s0 = _mm512_dpbusd_epi32(s0, lo[2], bcast32(aq + 8));
        s1 = _mm512_dpbusd_epi32(s1, hi[2], bcast32(aq + 24));
        s0 = _mm512_dpbusd_epi32(s0, lo[3], bcast32(aq + 12));
        s1 = _mm512_dpbusd_epi32(s1, hi[3], bcast32(aq + 28));
        isum[t] = _mm512_add_epi32(isum[t], _mm512_mullo_epi32(_mm512_add_epi32(s0, s1), sc));
      }
    }
    const __m512i mn_lo = _mm512_and_si512(p1, k.m3f);
    const __m512i mn_hi = and_or(_mm512_srli_epi32(p2, 4), k.m0f, _mm512_and_si512(_mm512_srli_epi32(p1, 2), k.m30));
    const __m512i mp[4] = {_mm512_shuffle_epi8(mn_lo, k.pair01), _mm512_shuffle_epi8(mn_lo, k.pair23),
                           _mm512_shuffle_epi8(mn_hi, k.pair01), _mm512_shuffle_epi8(mn_hi, k.pair23)};
    const __m512 dv = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(sb + Q4KStrip::kD)));
    const __m512 mv = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(sb + Q4KStrip::kDmin)));
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      const int16_t* bs = act.bs32[t] + 8 * b;
      __m512i imin = _mm512_dpwssd_epi32(_mm512_setzero_si512(), mp[0], bcast32(bs));
      imin = _mm512_dpwssd_epi32(imin, mp[1], bcast32(bs + 2));
      imin = _mm512_dpwssd_epi32(imin, mp[2], bcast32(bs + 4));
      imin = _mm512_dpwssd_epi32(imin, mp[3], bcast32(bs + 6));
      const __m512 da = _mm512_set1_ps(act.d[t][b]);
      acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[t]), _mm512_mul_ps(dv, da), acc[t]);
      acc[t] = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(imin), _mm512_mul_ps(mv, da), acc[t]);
    }
  }
};

struct Q6Consts {
  __m512i m0f = _mm512_set1_epi8(0x0F), m30 = _mm512_set1_epi8(0x30);
};

struct Q6Strip {
  static constexpr uint64_t kBlockBytes = Q6KStrip::kBytes;
  static constexpr double kActBytes = kActSBytes;
  template <int T>
  using Act = ActS<T>;
  using Consts = Q6Consts;

  template <int T>
  static inline void block(const Consts& k, const uint8_t* sb, const ActS<T>& act, int64_t b, __m512 (&acc)[T]) {
    __m512i isum[T];
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) isum[t] = _mm512_setzero_si512();
#pragma GCC unroll 16
    for (int g = 0; g < 16; ++g) {
      const __m512i sc =
          _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(sb + Q6KStrip::kScales + 16 * g)));
      const __m512i a = load512(sb + Q6KStrip::kQl + 128 * g), c = load512(sb + Q6KStrip::kQl + 128 * g + 64);
      const __m512i h = load512(sb + Q6KStrip::kQh + 64 * g);
      // quad u: low nibble source | (high 2 bits at 2u moved to bits 4-5);
      // the 16-bit shifts move bits across bytes only where m30 / m0f clear them.
      const __m512i w0 = and_or(a, k.m0f, _mm512_and_si512(_mm512_slli_epi16(h, 4), k.m30));
      const __m512i w1 = and_or(_mm512_srli_epi16(a, 4), k.m0f, _mm512_and_si512(_mm512_slli_epi16(h, 2), k.m30));
      const __m512i w2 = and_or(c, k.m0f, _mm512_and_si512(h, k.m30));
      const __m512i w3 = and_or(_mm512_srli_epi16(c, 4), k.m0f, _mm512_and_si512(_mm512_srli_epi16(h, 2), k.m30));
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t) {
        const int8_t* aq = act.qs[t] + b * QK_K + 16 * g;
        __m512i s = _mm512_set1_epi32(act.nb16[t][16 * b + g]);
        s = _mm512_dpbusd_epi32(s, w0, bcast32(aq));
        s = _mm512_dpbusd_epi32(s, w1, bcast32(aq + 4));
        s = _mm512_dpbusd_epi32(s, w2, bcast32(aq + 8));
        s = _mm512_dpbusd_epi32(s, w3, bcast32(aq + 12));
        isum[t] = _mm512_add_epi32(isum[t], _mm512_mullo_epi32(s, sc));
      }
    }
    const __m512 dv = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(sb + Q6KStrip::kD)));
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t)
      acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[t]), _mm512_mul_ps(dv, _mm512_set1_ps(act.d[t][b])), acc[t]);
  }
};

// The 32-element types: a strip-block is 8 blocks of 32. Block j: s = Σ
// quant · a over its 32 elements (vpdpbusd; 4-bit quants as they are, Q5_0 /
// Q5_1's with their 5th bits merged in as Q5_K's, Q8_0's bytes stored as q +
// 128) from s = -off · Σ a (X8_32's bs plane; off = 8 / 16 / 128), so s is
// the exact integer Σ (quant - off) · a, then y += d_w d_a s; Q4_1 / Q5_1
// add m_w · d_a Σ a (X8_32S's sa, Q8_1's s).
struct Q40Consts {
  __m512i m0f = _mm512_set1_epi8(0x0F), m10 = _mm512_set1_epi8(0x10);
};

template <Strip32 kT>
struct Legacy32Strip {
  using L = Strip32Layout<kT>;
  static constexpr bool kQ8 = L::kQ8, kQ5 = L::kQh;
  static constexpr uint64_t kBlockBytes = L::kBytes;
  static constexpr double kActBytes = kAct32Bytes;
  static constexpr int32_t kOff = kQ8 ? 128 : L::kOff;
  template <int T>
  using Act = Act32<T>;
  using Consts = Q40Consts;

  template <int T>
  static inline void block(const Consts& k, const uint8_t* sb, const Act32<T>& act, int64_t b, __m512 (&acc)[T]) {
    const int nj = int(act.n_blocks - 8 * b < 8 ? act.n_blocks - 8 * b : 8);  // blocks in this strip-block
    const uint8_t* qs = sb + L::qs(nj);
#pragma GCC unroll 8
    for (int j = 0; j < 8; ++j) {
      if (j == nj) break;
      __m512i w[8];
      if constexpr (kQ8) {
#pragma GCC unroll 8
        for (int u = 0; u < 8; ++u) w[u] = load512(qs + 64 * (8 * j + u));
      } else {  // w[q]: elements 4q .. 4q + 3 (low nibbles), w[4 + q]: 16 + 4q .. (high)
#pragma GCC unroll 4
        for (int q = 0; q < 4; ++q) {
          const __m512i v = load512(qs + 64 * (4 * j + q));
          w[q] = _mm512_and_si512(v, k.m0f);
          w[4 + q] = _mm512_and_si512(_mm512_srli_epi16(v, 4), k.m0f);
        }
        if constexpr (kQ5) {  // bits 2q / 2q + 1: quad q's 5th bits (low / high nibbles)
          merge_bit4(load512(sb + L::qh(nj) + 64 * j), k.m10, w, w + 4);
        }
      }
      const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(sb + L::kD + 32 * j)));
      __m512 mw = _mm512_setzero_ps();
      if constexpr (L::kMin) mw = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(sb + L::m(nj) + 32 * j)));
      const int64_t blk = 8 * b + j;
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t) {
        const int8_t* aq = act.qs[t] + 32 * blk;
        __m512i s0 = _mm512_dpbusd_epi32(kOff ? _mm512_set1_epi32(-kOff * act.bs[t][blk]) : _mm512_setzero_si512(), w[0],
                                         bcast32(aq));
        __m512i s1 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), w[4], bcast32(aq + 16));
#pragma GCC unroll 3
        for (int u = 1; u < 4; ++u) {
          s0 = _mm512_dpbusd_epi32(s0, w[u], bcast32(aq + 4 * u));
          s1 = _mm512_dpbusd_epi32(s1, w[4 + u], bcast32(aq + 16 + 4 * u));
        }
        const __m512 f = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(s0, s1)), _mm512_set1_ps(act.dx[t][8 * blk]));
        acc[t] = _mm512_fmadd_ps(f, dw, acc[t]);
        if constexpr (L::kMin) acc[t] = _mm512_fmadd_ps(mw, _mm512_set1_ps(act.sa[t][blk]), acc[t]);
      }
    }
  }
};

// Strip s, tokens [t0, t0 + T), blocks [b0, b1): stores (or with add, adds)
// the 16 row sums of each token, rows below r1 only.
template <class Micro, int T>
struct StripTile {
  static void run(const KernelArgs& a, int64_t s, int t0, int64_t b0, int64_t b1, bool add) {
    const typename Micro::template Act<T> act(a, t0);
    const typename Micro::Consts k;
    __m512 acc[T];
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) acc[t] = _mm512_setzero_ps();
    const uint8_t* strip = a.w + uint64_t(s) * kStripRows * a.w_stride;
    for (int64_t b = b0; b < b1; ++b) {
      const uint8_t* sb = strip + uint64_t(b) * Micro::kBlockBytes;
      if constexpr (T <= 2) prefetch_ahead<Micro::kBlockBytes>(sb);
      Micro::template block<T>(k, sb, act, b, acc);
    }
    const int64_t r = s * kStripRows;
    const int64_t valid = a.r1 - r < kStripRows ? a.r1 - r : kStripRows;
    const __mmask16 m = __mmask16((1u << valid) - 1u);
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      float* y = a.y + (t0 + t) * a.ldy + r;
      __m512 v = acc[t];
      if (add) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(m, y));
      _mm512_mask_storeu_ps(y, m, v);
    }
  }
};

}  // namespace

void kernel_q4_k_s16(const KernelArgs& a) { drive_strips<StripTile, Q45Strip<false>, kTokTileS>(a); }
void kernel_q5_k_s16(const KernelArgs& a) { drive_strips<StripTile, Q45Strip<true>, kTokTileS>(a); }
void kernel_q6_k_s16(const KernelArgs& a) { drive_strips<StripTile, Q6Strip, kTokTileS>(a); }
void kernel_q4_0_s16(const KernelArgs& a) { drive_strips<StripTile, Legacy32Strip<Strip32::Q4_0>, kTokTileS>(a); }
void kernel_q4_1_s16(const KernelArgs& a) { drive_strips<StripTile, Legacy32Strip<Strip32::Q4_1>, kTokTileS>(a); }
void kernel_q5_0_s16(const KernelArgs& a) { drive_strips<StripTile, Legacy32Strip<Strip32::Q5_0>, kTokTileS>(a); }
void kernel_q5_1_s16(const KernelArgs& a) { drive_strips<StripTile, Legacy32Strip<Strip32::Q5_1>, kTokTileS>(a); }
void kernel_q8_0_s16(const KernelArgs& a) { drive_strips<StripTile, Legacy32Strip<Strip32::Q8_0>, kTokTileS>(a); }

}  // namespace fish::mm::avx512
#endif
