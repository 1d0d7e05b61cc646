// The 256-bit kernels of the 16-row strips (prepare_weight's Q4_K / Q5_K /
// Q6_K repack against X8_KS activations, Q4_0 / Q5_0 / Q8_0 against X8_32,
// Q4_1 / Q5_1 against X8_32S; layouts in cpu/matmul_strips.h): the AVX-512 kernels' arithmetic
// (matmul_strip_avx512.cpp) on two 32-byte halves of each 64-byte plane, rows
// 0..7 and 8..15, int32 lane i of a half being row 8h + i. Compiled twice,
// into two kernel families:
//
//  - matmul_strip_avx2.cpp (AVX2, no vpdpbusd): a quad's 4 products per row
//    come from vpmaddubsw (unsigned quants x signed activations, pairs into
//    int16) and vpmaddwd (pairs into int32: against the sub-block scale for
//    Q4_K / Q5_K, which it applies in the same step; against ones
//    otherwise). The int16 sums never saturate: a pair is at most 2 · 63 ·
//    127 = 16002 (|q8| <= 127, X8_KS's Q8_K rule), so four Q4_K / Q5_K quads
//    (quants <= 31: 4 · 7874) or two Q6_K quads (<= 63) are added in int16
//    before one vpmaddwd.
//  - matmul_strip_avxvnni.cpp (AVX2 + AVX-VNNI, __AVXVNNI__: Intel's client
//    cores from Alder Lake on, which lack AVX-512): vpdpbusd on 256 bits, the
//    AVX-512 kernels' sums per half.
//
// Either way the integer block sums are the AVX-512 kernels' (exact), so the
// families agree up to f32 summation order.
#pragma once
#include <immintrin.h>

#include <cstring>

#include "cpu/matmul_strip_common.h"
#include "cpu/matmul_strips.h"

namespace fish::mm {
namespace {  // internal linkage: one copy per including file, each compiled for its own instruction set

constexpr int kTokTileS = 4;

inline __m256i bcast32(const void* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm256_set1_epi32(v);
}
inline __m256i load256(const uint8_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }
inline __m256 load_f16x8(const uint8_t* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}
// (a & m) | b
inline __m256i and_or(__m256i a, __m256i m, __m256i b) { return _mm256_or_si256(_mm256_and_si256(a, m), b); }
// The 4-element dots of one quad per int32 lane, in int16 pairs.
inline __m256i dot16(__m256i w, const int8_t* a) { return _mm256_maddubs_epi16(w, bcast32(a)); }
#if defined(__AVXVNNI__)
constexpr bool kVnni = true;
// acc + the 4-element dots of one quad per int32 lane (AVX-VNNI's vpdpbusd).
inline __m256i dot32(__m256i acc, __m256i w, const int8_t* a) { return _mm256_dpbusd_avx_epi32(acc, w, bcast32(a)); }
#else
constexpr bool kVnni = false;
#endif

using Shuffles = DwordShuffles<32>;
inline __m256i load_shuffle(const Shuffle<32>& s) {
  return _mm256_load_si256(reinterpret_cast<const __m256i*>(s.v));
}

// Bit 4 of every byte of h shifted by kShift (> 0: left; see the AVX-512 file).
template <int kShift>
inline __m256i bit4_from(__m256i h) {
  if constexpr (kShift > 0) return _mm256_slli_epi16(h, kShift);
  else if constexpr (kShift < 0) return _mm256_srli_epi16(h, -kShift);
  else return h;
}

// The 5th bits of a qh plane (Q5_K's layout, also Q5_0's) OR-ed in at bit 4
// of the 4 low-nibble quads lo (bits 2q) and the 4 high-nibble quads hi (bits 2q + 1).
inline void merge_bit4(__m256i h, __m256i m10, __m256i* lo, __m256i* hi) {
  lo[0] = and_or(bit4_from<4>(h), m10, lo[0]);
  lo[1] = and_or(bit4_from<2>(h), m10, lo[1]);
  lo[2] = and_or(h, m10, lo[2]);
  lo[3] = and_or(bit4_from<-2>(h), m10, lo[3]);
  hi[0] = and_or(bit4_from<3>(h), m10, hi[0]);
  hi[1] = and_or(bit4_from<1>(h), m10, hi[1]);
  hi[2] = and_or(bit4_from<-1>(h), m10, hi[2]);
  hi[3] = and_or(bit4_from<-3>(h), m10, hi[3]);
}

struct Consts {
  __m256i m0f = _mm256_set1_epi8(0x0F), m3f = _mm256_set1_epi8(0x3F), m30 = _mm256_set1_epi8(0x30);
  __m256i m10 = _mm256_set1_epi8(0x10), ones = _mm256_set1_epi16(1), m80 = _mm256_set1_epi8(char(0x80));
  __m256i dup[4] = {load_shuffle(Shuffles::dup[0]), load_shuffle(Shuffles::dup[1]), load_shuffle(Shuffles::dup[2]),
                    load_shuffle(Shuffles::dup[3])};
  __m256i ext[4] = {load_shuffle(Shuffles::ext[0]), load_shuffle(Shuffles::ext[1]), load_shuffle(Shuffles::ext[2]),
                    load_shuffle(Shuffles::ext[3])};
  __m256i pair01 = load_shuffle(Shuffles::pair01), pair23 = load_shuffle(Shuffles::pair23);
};

// Q4_K, and with kQ5 Q5_K. Half hf: rows 8hf .. 8hf + 7.
template <bool kQ5>
struct Q45Strip {
  static constexpr uint64_t kBlockBytes = kQ5 ? Q5KStrip::kBytes : Q4KStrip::kBytes;
  static constexpr double kActBytes = kActSBytes;
  template <int T>
  using Act = ActS<T>;

  template <int T>
  static inline void block(const Consts& k, const uint8_t* sb, const ActS<T>& act, int64_t b, int hf,
                           __m256 (&acc)[T]) {
    const uint64_t o = 32 * uint64_t(hf);
    const __m256i p0 = load256(sb + Q4KStrip::kScales + o), p1 = load256(sb + Q4KStrip::kScales + 64 + o),
                  p2 = load256(sb + Q4KStrip::kScales + 128 + o);
    const __m256i sc_lo = _mm256_and_si256(p0, k.m3f);
    const __m256i sc_hi = and_or(p2, k.m0f, _mm256_and_si256(_mm256_srli_epi32(p0, 2), k.m30));
    __m256i isum[T];
    for (int t = 0; t < T; ++t) isum[t] = _mm256_setzero_si256();
#pragma GCC unroll 8
    for (int j = 0; j < 8; ++j) {
      // Row i's sub-block scale in lane i: in both int16 halves without VNNI
      // (vpmaddwd against it sums the quads' int16 pairs and scales them in
      // one step), zero-extended to int32 with it (vpmulld on vpdpbusd's sums).
      const __m256i sc = _mm256_shuffle_epi8(j < 4 ? sc_lo : sc_hi, kVnni ? k.ext[j % 4] : k.dup[j % 4]);
      __m256i lo[4], hi[4];
#pragma GCC unroll 4
      for (int q = 0; q < 4; ++q) {
        const __m256i w = load256(sb + Q4KStrip::kQs + 64 * (4 * j + q) + o);
        lo[q] = _mm256_and_si256(w, k.m0f);
        hi[q] = _mm256_and_si256(_mm256_srli_epi16(w, 4), k.m0f);
      }
      if constexpr (kQ5) {  // bits 2q / 2q + 1 of the plane: quad q's 5th bits (low / high nibbles)
        merge_bit4(load256(sb + Q5KStrip::kQh + 64 * j + o), k.m10, lo, hi);
      }
      for (int t = 0; t < T; ++t) {
        const int8_t* aq = act.qs[t] + b * QK_K + 32 * j;
#if defined(__AVXVNNI__)
        __m256i s0 = dot32(_mm256_setzero_si256(), lo[0], aq), s1 = dot32(_mm256_setzero_si256(), hi[0], aq + 16);
        for (int q = 1; q < 4; ++q) s0 = dot32(s0, lo[q], aq + 4 * q), s1 = dot32(s1, hi[q], aq + 16 + 4 * q);
        isum[t] = _mm256_add_epi32(isum[t], _mm256_mullo_epi32(_mm256_add_epi32(s0, s1), sc));
#else
        const __m256i s0 = _mm256_add_epi16(_mm256_add_epi16(dot16(lo[0], aq), dot16(lo[1], aq + 4)),
                                            _mm256_add_epi16(dot16(lo[2], aq + 8), dot16(lo[3], aq + 12)));
        const __m256i s1 = _mm256_add_epi16(_mm256_add_epi16(dot16(hi[0], aq + 16), dot16(hi[1], aq + 20)),
                                            _mm256_add_epi16(dot16(hi[2], aq + 24), dot16(hi[3], aq + 28)));
        isum[t] = _mm256_add_epi32(isum[t], _mm256_add_epi32(_mm256_madd_epi16(s0, sc), _mm256_madd_epi16(s1, sc)));
#endif
      }
    }
    const __m256i mn_lo = _mm256_and_si256(p1, k.m3f);
    const __m256i mn_hi = and_or(_mm256_srli_epi32(p2, 4), k.m0f, _mm256_and_si256(_mm256_srli_epi32(p1, 2), k.m30));
    const __m256i mp[4] = {_mm256_shuffle_epi8(mn_lo, k.pair01), _mm256_shuffle_epi8(mn_lo, k.pair23),
                           _mm256_shuffle_epi8(mn_hi, k.pair01), _mm256_shuffle_epi8(mn_hi, k.pair23)};
    const __m256 dv = load_f16x8(sb + Q4KStrip::kD + 16 * hf), mv = load_f16x8(sb + Q4KStrip::kDmin + 16 * hf);
    for (int t = 0; t < T; ++t) {
      const int16_t* bs = act.bs32[t] + 8 * b;
      const __m256i imin = _mm256_add_epi32(
          _mm256_add_epi32(_mm256_madd_epi16(mp[0], bcast32(bs)), _mm256_madd_epi16(mp[1], bcast32(bs + 2))),
          _mm256_add_epi32(_mm256_madd_epi16(mp[2], bcast32(bs + 4)), _mm256_madd_epi16(mp[3], bcast32(bs + 6))));
      const __m256 da = _mm256_set1_ps(act.d[t][b]);
      acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[t]), _mm256_mul_ps(dv, da), acc[t]);
      acc[t] = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(imin), _mm256_mul_ps(mv, da), acc[t]);
    }
  }
};

struct Q6Strip {
  static constexpr uint64_t kBlockBytes = Q6KStrip::kBytes;
  static constexpr double kActBytes = kActSBytes;
  template <int T>
  using Act = ActS<T>;

  template <int T>
  static inline void block(const Consts& k, const uint8_t* sb, const ActS<T>& act, int64_t b, int hf,
                           __m256 (&acc)[T]) {
    const uint64_t o = 32 * uint64_t(hf);
    __m256i isum[T];
    for (int t = 0; t < T; ++t) isum[t] = _mm256_setzero_si256();
#pragma GCC unroll 16
    for (int g = 0; g < 16; ++g) {
      const __m256i sc = _mm256_cvtepi8_epi32(
          _mm_loadl_epi64(reinterpret_cast<const __m128i*>(sb + Q6KStrip::kScales + 16 * g + 8 * hf)));
      const __m256i a = load256(sb + Q6KStrip::kQl + 128 * g + o), c = load256(sb + Q6KStrip::kQl + 128 * g + 64 + o);
      const __m256i h = load256(sb + Q6KStrip::kQh + 64 * g + o);
      const __m256i w0 = and_or(a, k.m0f, _mm256_and_si256(_mm256_slli_epi16(h, 4), k.m30));
      const __m256i w1 = and_or(_mm256_srli_epi16(a, 4), k.m0f, _mm256_and_si256(_mm256_slli_epi16(h, 2), k.m30));
      const __m256i w2 = and_or(c, k.m0f, _mm256_and_si256(h, k.m30));
      const __m256i w3 = and_or(_mm256_srli_epi16(c, 4), k.m0f, _mm256_and_si256(_mm256_srli_epi16(h, 2), k.m30));
      for (int t = 0; t < T; ++t) {
        const int8_t* aq = act.qs[t] + b * QK_K + 16 * g;
#if defined(__AVXVNNI__)
        __m256i sv = _mm256_set1_epi32(act.nb16[t][16 * b + g]);
        sv = dot32(dot32(dot32(dot32(sv, w0, aq), w1, aq + 4), w2, aq + 8), w3, aq + 12);
        isum[t] = _mm256_add_epi32(isum[t], _mm256_mullo_epi32(sv, sc));
#else
        const __m256i s01 = _mm256_add_epi16(dot16(w0, aq), dot16(w1, aq + 4));
        const __m256i s23 = _mm256_add_epi16(dot16(w2, aq + 8), dot16(w3, aq + 12));
        __m256i s = _mm256_add_epi32(_mm256_madd_epi16(s01, k.ones), _mm256_madd_epi16(s23, k.ones));
        s = _mm256_add_epi32(s, _mm256_set1_epi32(act.nb16[t][16 * b + g]));
        isum[t] = _mm256_add_epi32(isum[t], _mm256_mullo_epi32(s, sc));
#endif
      }
    }
    const __m256 dv = load_f16x8(sb + Q6KStrip::kD + 16 * hf);
    for (int t = 0; t < T; ++t)
      acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[t]), _mm256_mul_ps(dv, _mm256_set1_ps(act.d[t][b])), acc[t]);
  }
};

// The 32-element types (8 blocks of 32 per strip-block), as the AVX-512
// kernels: s = Σ quant · a - off · Σ a (exact), y += d_w d_a s (+ m_w d_a Σ a
// for Q4_1 / Q5_1). With AVX-VNNI all take vpdpbusd on the stored unsigned
// quants (Q8_0's q + 128). Without: 4-bit quants (<= 15) go through
// vpmaddubsw and all 8 quads of a block add up in int16 (8 · 3810), 5-bit
// ones (<= 31) 4 quads at a time (4 · 7874); Q8_0's quants are flipped back to signed, vpmaddubsw takes |q|
// against a with q's sign (vpsignb), one vpmaddwd per quad (two quads' pairs
// could reach 2 · 32258), and there is no offset.
template <Strip32 kT>
struct Legacy32Strip {
  using L = Strip32Layout<kT>;
  static constexpr bool kQ8 = L::kQ8, kQ5 = L::kQh;
  static constexpr uint64_t kBlockBytes = L::kBytes;
  static constexpr double kActBytes = kAct32Bytes;
  static constexpr int32_t kOff = kQ8 ? (kVnni ? 128 : 0) : L::kOff;  // Q8_0 without VNNI: signed products
  template <int T>
  using Act = Act32<T>;

  template <int T>
  static inline void block(const Consts& k, const uint8_t* sb, const Act32<T>& act, int64_t b, int hf,
                           __m256 (&acc)[T]) {
    const uint64_t o = 32 * uint64_t(hf);
    const int nj = int(act.n_blocks - 8 * b < 8 ? act.n_blocks - 8 * b : 8);  // blocks in this strip-block
    const uint8_t* qs = sb + L::qs(nj) + o;
#pragma GCC unroll 8
    for (int j = 0; j < 8; ++j) {
      if (j == nj) break;
      __m256i w[8], sgn[8];
      if constexpr (kQ8 && kVnni) {  // the stored q + 128 as they are
#pragma GCC unroll 8
        for (int u = 0; u < 8; ++u) w[u] = load256(qs + 64 * (8 * j + u));
      } else if constexpr (kQ8) {
#pragma GCC unroll 8
        for (int u = 0; u < 8; ++u) {
          sgn[u] = _mm256_xor_si256(load256(qs + 64 * (8 * j + u)), k.m80);
          w[u] = _mm256_abs_epi8(sgn[u]);
        }
      } else {  // w[q]: elements 4q .. 4q + 3 (low nibbles), w[4 + q]: 16 + 4q .. (high)
#pragma GCC unroll 4
        for (int q = 0; q < 4; ++q) {
          const __m256i v = load256(qs + 64 * (4 * j + q));
          w[q] = _mm256_and_si256(v, k.m0f);
          w[4 + q] = _mm256_and_si256(_mm256_srli_epi16(v, 4), k.m0f);
        }
        if constexpr (kQ5) {  // bits 2q / 2q + 1: quad q's 5th bits (low / high nibbles)
          merge_bit4(load256(sb + L::qh(nj) + 64 * j + o), k.m10, w, w + 4);
        }
      }
      const __m256 dw = load_f16x8(sb + L::kD + 32 * j + 16 * hf);
      __m256 mw = _mm256_setzero_ps();
      if constexpr (L::kMin) mw = load_f16x8(sb + L::m(nj) + 32 * j + 16 * hf);
      const int64_t blk = 8 * b + j;
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t) {
        const int8_t* aq = act.qs[t] + 32 * blk;
        __m256i s;
#if defined(__AVXVNNI__)
        s = dot32(_mm256_setzero_si256(), w[0], aq);
        for (int u = 1; u < 4; ++u) s = dot32(s, w[u], aq + 4 * u);
        __m256i s_hi = dot32(_mm256_setzero_si256(), w[4], aq + 16);
        for (int u = 5; u < 8; ++u) s_hi = dot32(s_hi, w[u], aq + 4 * u);
        s = _mm256_add_epi32(s, s_hi);
#else
        if constexpr (kQ8) {
          // element order: w[u] holds 4u .. 4u + 3
          s = _mm256_madd_epi16(_mm256_maddubs_epi16(w[0], _mm256_sign_epi8(bcast32(aq), sgn[0])), k.ones);
#pragma GCC unroll 7
          for (int u = 1; u < 8; ++u)
            s = _mm256_add_epi32(
                s, _mm256_madd_epi16(_mm256_maddubs_epi16(w[u], _mm256_sign_epi8(bcast32(aq + 4 * u), sgn[u])), k.ones));
        } else if constexpr (kQ5) {
          __m256i lo = dot16(w[0], aq), hi = dot16(w[4], aq + 16);
#pragma GCC unroll 3
          for (int u = 1; u < 4; ++u)
            lo = _mm256_add_epi16(lo, dot16(w[u], aq + 4 * u)), hi = _mm256_add_epi16(hi, dot16(w[4 + u], aq + 16 + 4 * u));
          s = _mm256_add_epi32(_mm256_madd_epi16(lo, k.ones), _mm256_madd_epi16(hi, k.ones));
        } else {
          __m256i s16 = _mm256_add_epi16(dot16(w[0], aq), dot16(w[4], aq + 16));
#pragma GCC unroll 3
          for (int u = 1; u < 4; ++u) s16 = _mm256_add_epi16(s16, _mm256_add_epi16(dot16(w[u], aq + 4 * u), dot16(w[4 + u], aq + 16 + 4 * u)));
          s = _mm256_madd_epi16(s16, k.ones);
        }
#endif
        if constexpr (kOff != 0) s = _mm256_add_epi32(s, _mm256_set1_epi32(-kOff * act.bs[t][blk]));
        const __m256 f = _mm256_mul_ps(_mm256_cvtepi32_ps(s), _mm256_set1_ps(act.dx[t][8 * blk]));
        acc[t] = _mm256_fmadd_ps(f, dw, acc[t]);
        if constexpr (L::kMin) acc[t] = _mm256_fmadd_ps(mw, _mm256_set1_ps(act.sa[t][blk]), acc[t]);
      }
    }
  }
};

// Strip s, tokens [t0, t0 + T), blocks [b0, b1). Decode (T <= 2) takes both
// halves of each strip-block before the next, so each 64-byte line is loaded
// from memory once; more tokens take one half (8 rows) at a time, over all
// blocks, keeping 2T accumulators in registers.
template <class Micro, int T>
struct StripTile {
  static constexpr int kHalves = T <= 2 ? 2 : 1;  // halves per pass over the blocks
  static void run(const KernelArgs& a, int64_t s, int t0, int64_t b0, int64_t b1, bool add) {
    const typename Micro::template Act<T> act(a, t0);
    const Consts k;
    const uint8_t* strip = a.w + uint64_t(s) * kStripRows * a.w_stride;
    const int64_t r = s * kStripRows;
    const int64_t valid = a.r1 - r < kStripRows ? a.r1 - r : kStripRows;
    for (int h0 = 0; h0 < 2 && 8 * h0 < valid; h0 += kHalves) {
      __m256 acc[kHalves][T];
      for (int h = 0; h < kHalves; ++h)
        for (int t = 0; t < T; ++t) acc[h][t] = _mm256_setzero_ps();
      for (int64_t b = b0; b < b1; ++b) {
        const uint8_t* sb = strip + uint64_t(b) * Micro::kBlockBytes;
        if constexpr (T <= 2) prefetch_ahead<Micro::kBlockBytes>(sb);
        for (int h = 0; h < kHalves; ++h) Micro::template block<T>(k, sb, act, b, h0 + h, acc[h]);
      }
      for (int h = 0; h < kHalves && 8 * (h0 + h) < valid; ++h) {
        const int hf = h0 + h;
        const int n = valid - 8 * hf < 8 ? int(valid - 8 * hf) : 8;
        for (int t = 0; t < T; ++t) {
          alignas(32) float v[8];
          _mm256_store_ps(v, acc[h][t]);
          float* y = a.y + (t0 + t) * a.ldy + r + 8 * hf;
          for (int i = 0; i < n; ++i) y[i] = add ? y[i] + v[i] : v[i];
        }
      }
    }
  }
};

// Strip kernel of Micro (the including file's kernel_*_s16).
template <class Micro>
void ymm_strips(const KernelArgs& a) {
  drive_strips<StripTile, Micro, kTokTileS>(a);
}

}  // namespace
}  // namespace fish::mm
