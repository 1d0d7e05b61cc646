// AVX-512 VNNI kernels of the K-quants (Q2_K, Q3_K, Q4_K, Q5_K, Q6_K)
// against X8_K activations (int8 values of Q8_K, see matmul_kernels.h).
//
// Per weight row and 256-block the kernel unpacks the quants into four zmm of
// unsigned bytes, element order 0..255 (64 per register), and builds the
// matching sub-block scales as int16 lanes. Then for each token of the tile:
//   vpmaddubsw (u8 weights x s8 activations -> s16 pairs, no saturation: the
//   quants are < 64 and |activation| <= 127) and vpdpwssd (s16 pairs x scales,
//   accumulated in s32), 2 instructions per 64 elements; one int->float
//   conversion and FMA with d_w * d_a per block; and one FMA for the term that
//   does not depend on the weight quants (Q4_K/Q5_K mins, Q6_K's -32 offset),
//   dotted with the activation's 16-group sums d_a * bsum.
// A register tile is R rows x T tokens of f32 accumulators (16 lanes each),
// reduced once at the end.
#if defined(__x86_64__) || defined(_M_X64)
#include <cstring>

#include "cpu/matmul_avx512_common.h"
#include "quant/blocks.h"

namespace fish::mm::avx512 {
namespace {

constexpr int kRowTile = 4, kTokTile = 4;

// The X8_K planes of T activation rows starting at token t0.
template <int T>
struct ActK {
  const int8_t* qs[T];
  const float* d[T];
  const float* sf[T];
  ActK(const KernelArgs& a, int t0) {
    const X8_KPlanes p = x8_k_planes(a.n_in);
    for (int t = 0; t < T; ++t) {
      const uint8_t* base = a.act + uint64_t(t0 + t) * a.act_stride;
      qs[t] = reinterpret_cast<const int8_t*>(base);
      d[t] = reinterpret_cast<const float*>(base + p.d);
      sf[t] = reinterpret_cast<const float*>(base + p.sf);
    }
  }
};

inline float half_to_float(uint16_t h) { return _cvtsh_ss(h); }

// The 8 six-bit scales and 8 mins of a Q4_K / Q5_K block, one per byte:
// bytes 0..7 scales, 8..15 mins (for j >= 4 the top 2 bits come from the
// spare bits 6..7 of bytes j - 4 (scale) and j (min)).
inline __m128i k4_scales_mins(const uint8_t* s) {
  uint32_t a0, a1, a2;
  std::memcpy(&a0, s, 4);
  std::memcpy(&a1, s + 4, 4);
  std::memcpy(&a2, s + 8, 4);
  const uint32_t sc_lo = a0 & 0x3f3f3f3fu, mn_lo = a1 & 0x3f3f3f3fu;
  const uint32_t sc_hi = (a2 & 0x0f0f0f0fu) | ((a0 >> 2) & 0x30303030u);
  const uint32_t mn_hi = ((a2 >> 4) & 0x0f0f0f0fu) | ((a1 >> 2) & 0x30303030u);
  return _mm_set_epi32(int(mn_hi), int(mn_lo), int(sc_hi), int(sc_lo));
}

// int16 lane i of chunk c (elements 64c .. 64c + 63, lane i = elements 2i, 2i+1)
// takes the scale of 32-element sub-block 2c + i / 16.
inline __m512i idx_sub32(int c) {
  alignas(64) int16_t v[32];
  for (int i = 0; i < 32; ++i) v[i] = int16_t(2 * c + i / 16);
  return _mm512_load_si512(v);
}
// ... of 16-element group 4c + i / 8 (Q6_K).
inline __m512i idx_sub16(int c) {
  alignas(64) int16_t v[32];
  for (int i = 0; i < 32; ++i) v[i] = int16_t(4 * c + i / 8);
  return _mm512_load_si512(v);
}

// One row of one block, ready for the token loop: four chunks of 64 unsigned
// quants, their int16 scales, the per-16-group correction coefficients (f32,
// dotted with the activation's d_a * bsum) and the block scale d.
struct RowBlock {
  __m512i w[4];
  __m512i sc[4];
  __m512 corr;
  __m512 d;
};

// Q4_K: qs[32j + l] holds element 64j + l (low nibble) and 64j + 32 + l (high).
// A 64-byte load covers j = 2z, 2z + 1; lanes 0-1 / 2-3 of the low and high
// nibbles are regrouped so chunk 2z + h is elements 128z + 64h .. + 63.
// Q5_K adds bit s of qh[l] (16) to the element l of sub-block s.
template <bool kQ5>
inline void unpack_q45(const uint8_t* blk, RowBlock& rb, const __m512i (&idx)[4]) {
  const auto* head = reinterpret_cast<const BlockQ4_K*>(blk);
  const uint8_t* qs = kQ5 ? reinterpret_cast<const BlockQ5_K*>(blk)->qs : head->qs;
  const __m512i m4 = _mm512_set1_epi8(0x0F);
  __m512i qhv = _mm512_setzero_si512();
  if constexpr (kQ5)
    qhv = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(
        reinterpret_cast<const BlockQ5_K*>(blk)->qh)));
  for (int z = 0; z < 2; ++z) {
    const __m512i v = _mm512_loadu_si512(qs + 64 * z);
    __m512i lo = _mm512_and_si512(v, m4);
    __m512i hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
    if constexpr (kQ5) {
      // lo bytes 0..31: sub-block 4z, 32..63: 4z + 2; hi: 4z + 1, 4z + 3.
      const __m512i sel_lo = _mm512_inserti64x4(_mm512_set1_epi8(char(1 << (4 * z))),
                                                _mm256_set1_epi8(char(1 << (4 * z + 2))), 1);
      const __m512i sel_hi = _mm512_inserti64x4(_mm512_set1_epi8(char(1 << (4 * z + 1))),
                                                _mm256_set1_epi8(char(1 << (4 * z + 3))), 1);
      const __m512i b16 = _mm512_set1_epi8(16);
      lo = _mm512_mask_add_epi8(lo, _mm512_test_epi8_mask(qhv, sel_lo), lo, b16);
      hi = _mm512_mask_add_epi8(hi, _mm512_test_epi8_mask(qhv, sel_hi), hi, b16);
    }
    rb.w[2 * z] = _mm512_shuffle_i64x2(lo, hi, 0x44);
    rb.w[2 * z + 1] = _mm512_shuffle_i64x2(lo, hi, 0xEE);
  }
  const __m128i scm = k4_scales_mins(head->scales);
  const __m512i s16 = _mm512_castsi256_si512(_mm256_cvtepu8_epi16(scm));  // lanes 0-7 sc, 8-15 min
  for (int c = 0; c < 4; ++c) rb.sc[c] = _mm512_permutexvar_epi16(idx[c], s16);
  // corr[g] = -dmin * min[g / 2]: x = d sc q - dmin m, and Σ_g m * (d_a bsum_g).
  const __m512i mins = _mm512_permutexvar_epi32(
      _mm512_set_epi32(15, 15, 14, 14, 13, 13, 12, 12, 11, 11, 10, 10, 9, 9, 8, 8), _mm512_cvtepu8_epi32(scm));
  rb.corr = _mm512_mul_ps(_mm512_cvtepi32_ps(mins), _mm512_set1_ps(-half_to_float(head->dmin)));
  rb.d = _mm512_set1_ps(half_to_float(head->d));
}

// Q6_K: element 128h + 32k + l: 4 bits from ql[64h + l + 32(k & 1)] (low
// nibble for k < 2), 2 bits from qh[32h + l] at bit 2k. A 64-byte ql load gives
// elements 128h + 0..63 (low nibbles) and 128h + 64..127 (high); the 32 qh
// bytes are broadcast to both halves and shifted per 64-bit lane so the wanted
// pair lands on bits 4-5.
inline void unpack_q6(const uint8_t* blk, RowBlock& rb, const __m512i (&idx)[4]) {
  const auto* b = reinterpret_cast<const BlockQ6_K*>(blk);
  const __m512i m4 = _mm512_set1_epi8(0x0F), m30 = _mm512_set1_epi8(0x30);
  const __m512i sh_lo = _mm512_set_epi64(2, 2, 2, 2, 4, 4, 4, 4);  // left: bits 0-1 / 2-3 -> 4-5
  const __m512i sh_hi = _mm512_set_epi64(2, 2, 2, 2, 0, 0, 0, 0);  // right: bits 4-5 / 6-7 -> 4-5
  for (int h = 0; h < 2; ++h) {
    const __m512i v = _mm512_loadu_si512(b->ql + 64 * h);
    const __m512i qhv = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b->qh + 32 * h)));
    rb.w[2 * h] = _mm512_or_si512(_mm512_and_si512(v, m4), _mm512_and_si512(_mm512_sllv_epi64(qhv, sh_lo), m30));
    rb.w[2 * h + 1] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(v, 4), m4),
                                      _mm512_and_si512(_mm512_srlv_epi64(qhv, sh_hi), m30));
  }
  const __m128i sc8 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b->scales));
  const __m512i s16 = _mm512_castsi256_si512(_mm256_cvtepi8_epi16(sc8));
  for (int c = 0; c < 4; ++c) rb.sc[c] = _mm512_permutexvar_epi16(idx[c], s16);
  const float d = half_to_float(b->d);
  // x = d sc (q - 32): corr[g] = -32 d sc[g], dotted with d_a bsum_g.
  rb.corr = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(sc8)), _mm512_set1_ps(-32.0f * d));
  rb.d = _mm512_set1_ps(d);
}

// Q2_K / Q3_K: element 128h + 32j + l has its 2 low bits at bits 2j of
// qs[32h + l]. The 32 bytes are broadcast to both halves of a zmm and shifted
// per 64-bit lane so chunk c = 2h + p (elements 64c .. 64c + 63, j = 2p and
// 2p + 1) comes out in element order.
inline __m512i q2_bits(const uint8_t* qs32, int p) {
  const __m512i q = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs32)));
  const __m512i sh = _mm512_inserti64x4(_mm512_set1_epi64(4 * p), _mm256_set1_epi64x(4 * p + 2), 1);
  return _mm512_and_si512(_mm512_srlv_epi64(q, sh), _mm512_set1_epi8(3));
}

// Q2_K: x = d (scales[g] & 15) q - dmin (scales[g] >> 4), groups of 16.
inline void unpack_q2(const uint8_t* blk, RowBlock& rb, const __m512i (&idx)[4]) {
  const auto* b = reinterpret_cast<const BlockQ2_K*>(blk);
  for (int c = 0; c < 4; ++c) rb.w[c] = q2_bits(b->qs + 32 * (c / 2), c % 2);
  const __m128i s8 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b->scales));
  const __m128i m4 = _mm_set1_epi8(0x0F);
  const __m512i s16 = _mm512_castsi256_si512(_mm256_cvtepu8_epi16(_mm_and_si128(s8, m4)));
  for (int c = 0; c < 4; ++c) rb.sc[c] = _mm512_permutexvar_epi16(idx[c], s16);
  const __m512i mins = _mm512_cvtepu8_epi32(_mm_and_si128(_mm_srli_epi16(s8, 4), m4));
  rb.corr = _mm512_mul_ps(_mm512_cvtepi32_ps(mins), _mm512_set1_ps(-half_to_float(b->dmin)));
  rb.d = _mm512_set1_ps(half_to_float(b->d));
}

// Q3_K: q = low 2 bits - 4 unless bit (4h + j) of hmask[l] is set. Kept
// unsigned as u = q + 4 in 0..7: x = d sc (u - 4), the -4 going to corr. The
// 16 signed 6-bit scales: low nibbles from bytes 0..7 (scale j: byte j % 8,
// nibble j / 8), high 2 bits from bytes 8..11 (byte 8 + j % 4, bits 2 (j / 4)).
inline void unpack_q3(const uint8_t* blk, RowBlock& rb, const __m512i (&idx)[4]) {
  const auto* b = reinterpret_cast<const BlockQ3_K*>(blk);
  const __m512i hm = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b->hmask)));
  const __m512i four = _mm512_set1_epi8(4);
  for (int c = 0; c < 4; ++c) {
    const int h = c / 2, p = c % 2;
    const __m512i v = q2_bits(b->qs + 32 * h, p);
    const __m512i sel = _mm512_inserti64x4(_mm512_set1_epi8(char(1 << (4 * h + 2 * p))),
                                           _mm256_set1_epi8(char(1 << (4 * h + 2 * p + 1))), 1);
    rb.w[c] = _mm512_mask_add_epi8(v, _mm512_test_epi8_mask(hm, sel), v, four);
  }
  uint32_t a0, a1, a2;
  std::memcpy(&a0, b->scales, 4);
  std::memcpy(&a1, b->scales + 4, 4);
  std::memcpy(&a2, b->scales + 8, 4);
  const uint32_t k4 = 0x0f0f0f0fu, k2 = 0x03030303u;
  const __m128i u6 = _mm_set_epi32(int(((a1 >> 4) & k4) | (((a2 >> 6) & k2) << 4)),
                                   int(((a0 >> 4) & k4) | (((a2 >> 4) & k2) << 4)),
                                   int((a1 & k4) | (((a2 >> 2) & k2) << 4)), int((a0 & k4) | ((a2 & k2) << 4)));
  const __m128i sc8 = _mm_sub_epi8(u6, _mm_set1_epi8(32));
  const __m512i s16 = _mm512_castsi256_si512(_mm256_cvtepi8_epi16(sc8));
  for (int c = 0; c < 4; ++c) rb.sc[c] = _mm512_permutexvar_epi16(idx[c], s16);
  const float d = half_to_float(b->d);
  rb.corr = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(sc8)), _mm512_set1_ps(-4.0f * d));
  rb.d = _mm512_set1_ps(d);
}

enum class KType { Q2, Q3, Q4, Q5, Q6 };

template <KType kT>
struct KMicro {
  static constexpr size_t kBlockBytes = kT == KType::Q2   ? sizeof(BlockQ2_K)
                                        : kT == KType::Q3 ? sizeof(BlockQ3_K)
                                        : kT == KType::Q4 ? sizeof(BlockQ4_K)
                                        : kT == KType::Q5 ? sizeof(BlockQ5_K)
                                                          : sizeof(BlockQ6_K);
  static constexpr bool kGroups16 = kT == KType::Q2 || kT == KType::Q3 || kT == KType::Q6;
  static constexpr int64_t kKUnit = QK_K;
  static constexpr double kActBytes = 1.0 + 64.0 / QK_K + 4.0 / QK_K;  // qs + sf + d per element

  template <int R, int T>
  static void tile(const KernelArgs& a, int64_t r0, int t0, const KSpan& ks) {
    const ActK<T> act(a, t0);
    __m512i idx[4];
    for (int c = 0; c < 4; ++c) idx[c] = kGroups16 ? idx_sub16(c) : idx_sub32(c);
    __m512 acc[R][T];
#pragma GCC unroll 4
    for (int i = 0; i < R; ++i)
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t) acc[i][t] = _mm512_setzero_ps();
    const uint8_t* row0 = a.w + uint64_t(r0) * a.w_stride;
    for (int64_t b = ks.k0 / QK_K; b < ks.k1 / QK_K; ++b) {
#pragma GCC unroll 4
      for (int i = 0; i < R; ++i) {
        const uint8_t* blk = row0 + uint64_t(i) * a.w_stride + uint64_t(b) * kBlockBytes;
        if constexpr (T <= 2) {
          // Decode: the same block two tiles ahead. Rows are only a few
          // blocks long, too short for the hardware prefetcher to follow
          // R interleaved streams. (With more tokens the rows are in L2.)
          const char* pf = reinterpret_cast<const char*>(blk + uint64_t(2 * R) * a.w_stride);
          for (size_t o = 0; o < kBlockBytes; o += 64) _mm_prefetch(pf + o, _MM_HINT_T0);
        }
        RowBlock rb;
        if constexpr (kT == KType::Q2) unpack_q2(blk, rb, idx);
        else if constexpr (kT == KType::Q3) unpack_q3(blk, rb, idx);
        else if constexpr (kT == KType::Q6) unpack_q6(blk, rb, idx);
        else unpack_q45<kT == KType::Q5>(blk, rb, idx);
#pragma GCC unroll 8
        for (int t = 0; t < T; ++t) {
          const int8_t* q = act.qs[t] + b * QK_K;
          __m512i s = _mm512_setzero_si512();
#pragma GCC unroll 4
          for (int c = 0; c < 4; ++c)
            s = _mm512_dpwssd_epi32(s, _mm512_maddubs_epi16(rb.w[c], _mm512_loadu_si512(q + 64 * c)), rb.sc[c]);
          const __m512 dd = _mm512_mul_ps(rb.d, _mm512_set1_ps(act.d[t][b]));
          acc[i][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), dd, acc[i][t]);
          acc[i][t] = _mm512_fmadd_ps(rb.corr, _mm512_loadu_ps(act.sf[t] + 16 * b), acc[i][t]);
        }
      }
    }
    store_sums<R, T>(a, r0, t0, acc, ks.acc);
  }
};

}  // namespace

void kernel_q2_k(const KernelArgs& a) { drive<KMicro<KType::Q2>, kRowTile, kTokTile>(a); }
void kernel_q3_k(const KernelArgs& a) { drive<KMicro<KType::Q3>, kRowTile, kTokTile>(a); }
void kernel_q4_k(const KernelArgs& a) { drive<KMicro<KType::Q4>, kRowTile, kTokTile>(a); }
void kernel_q5_k(const KernelArgs& a) { drive<KMicro<KType::Q5>, kRowTile, kTokTile>(a); }
void kernel_q6_k(const KernelArgs& a) { drive<KMicro<KType::Q6>, kRowTile, kTokTile>(a); }

}  // namespace fish::mm::avx512
#endif
