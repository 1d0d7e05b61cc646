// AVX-512 VNNI kernels of the 32-element block types (Q4_0, Q4_1, Q5_0, Q5_1,
// Q8_0) against X8_32 / X8_32S activations (int8 values of Q8_0 / Q8_1).
//
// Two weight blocks are unpacked into one zmm of unsigned bytes in element
// order (Q8_0's signed bytes are offset by 128), so one vpdpbusd gives 8 int32
// partial sums per block. Those are scaled per lane by d_w * d_a (the
// activation's dx plane holds d_a once per lane) and accumulated in f32. What
// the unsigned form leaves out is a per-block constant times the activation
// sum: x = (q - off) d  =>  Σ x a = d d_a Σ q a - off d (d_a Σ a), and for the
// types with a min, x = q d + m  =>  + m (d_a Σ a). The activation's sa plane
// holds d_a Σ a, so that term is one FMA per 8 blocks.
#if defined(__x86_64__) || defined(_M_X64)
#include <cstring>

#include "cpu/matmul_act_views.h"
#include "cpu/matmul_avx512_common.h"
#include "quant/blocks.h"

namespace fish::mm::avx512 {
namespace {

constexpr int kRowTile = 4, kTokTile = 4;


// Low and high nibbles of 16 bytes of two blocks into elements 0..31 of each:
// [qs0 | qs1] -> [lo0 lo1 hi0 hi1] -> lanes 0 2 1 3 = [lo0 hi0 lo1 hi1].
inline __m512i nibbles_2blocks(const uint8_t* qs0, const uint8_t* qs1, bool two) {
  const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs0));
  const __m128i b = two ? _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs1)) : _mm_setzero_si128();
  const __m256i ab = _mm256_inserti128_si256(_mm256_castsi128_si256(a), b, 1);
  const __m512i z = _mm512_and_si512(_mm512_inserti64x4(_mm512_castsi256_si512(ab), _mm256_srli_epi16(ab, 4), 1),
                                     _mm512_set1_epi8(0x0F));
  return _mm512_shuffle_i64x2(z, z, _MM_SHUFFLE(3, 1, 2, 0));
}

inline uint64_t qh_2blocks(const uint8_t* qh0, const uint8_t* qh1, bool two) {
  uint32_t h0 = 0, h1 = 0;
  std::memcpy(&h0, qh0, 4);
  if (two) std::memcpy(&h1, qh1, 4);
  return uint64_t(h0) | uint64_t(h1) << 32;
}

// Decoders: the block size, where d (and m) sit, and the unsigned quants of
// blocks p and p + 1 (the second absent when !two) in element order.
struct DecQ4_0 {
  static constexpr int kBytes = sizeof(BlockQ4_0);
  static constexpr bool kMin = false;
  static constexpr float kOff = 8.0f;
  static __m512i quants(const uint8_t* p, bool two) { return nibbles_2blocks(p + 2, p + kBytes + 2, two); }
};
struct DecQ4_1 {
  static constexpr int kBytes = sizeof(BlockQ4_1);
  static constexpr bool kMin = true;
  [[maybe_unused]] static constexpr float kOff = 0.0f;  // with a min (kMin), no offset is read
  static __m512i quants(const uint8_t* p, bool two) { return nibbles_2blocks(p + 4, p + kBytes + 4, two); }
};
struct DecQ5_0 {
  static constexpr int kBytes = sizeof(BlockQ5_0);
  static constexpr bool kMin = false;
  static constexpr float kOff = 16.0f;
  static __m512i quants(const uint8_t* p, bool two) {
    const __m512i lo = nibbles_2blocks(p + 6, p + kBytes + 6, two);
    const __mmask64 k = _cvtu64_mask64(qh_2blocks(p + 2, p + kBytes + 2, two));
    return _mm512_mask_add_epi8(lo, k, lo, _mm512_set1_epi8(16));
  }
};
struct DecQ5_1 {
  static constexpr int kBytes = sizeof(BlockQ5_1);
  static constexpr bool kMin = true;
  [[maybe_unused]] static constexpr float kOff = 0.0f;  // with a min (kMin), no offset is read
  static __m512i quants(const uint8_t* p, bool two) {
    const __m512i lo = nibbles_2blocks(p + 8, p + kBytes + 8, two);
    const __mmask64 k = _cvtu64_mask64(qh_2blocks(p + 4, p + kBytes + 4, two));
    return _mm512_mask_add_epi8(lo, k, lo, _mm512_set1_epi8(16));
  }
};
struct DecQ8_0 {
  static constexpr int kBytes = sizeof(BlockQ8_0);
  static constexpr bool kMin = false;
  static constexpr float kOff = 128.0f;
  static __m512i quants(const uint8_t* p, bool two) {
    const __m256i flip = _mm256_set1_epi8(char(0x80));
    const __m256i a = _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 2)), flip);
    const __m256i b = two ? _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + kBytes + 2)), flip)
                          : _mm256_setzero_si256();
    return _mm512_inserti64x4(_mm512_castsi256_si512(a), b, 1);
  }
};

// Groups of up to 8 blocks (256 elements): per row, d (and m) of the group by
// one gather of the blocks' first 4 bytes, then 4 pairs of blocks.
template <class Dec>
struct Micro32 {
  static constexpr int64_t kKUnit = 256;  // groups of 8 blocks
  static constexpr double kActBytes = 1.0 + 1.0 + 4.0 / 32;  // qs + dx + sa per element

  template <int R, int T>
  static void tile(const KernelArgs& a, int64_t r0, int t0, const KSpan& ks) {
    const Act32<T> act(a, t0);
    const int64_t nb = ks.k1 / 32;
    const __m256i gidx = _mm256_mullo_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), _mm256_set1_epi32(Dec::kBytes));
    __m512i pidx[4];
    for (int p = 0; p < 4; ++p)
      pidx[p] = _mm512_inserti64x4(_mm512_set1_epi32(2 * p), _mm256_set1_epi32(2 * p + 1), 1);
    __m512 acc[R][T];
#pragma GCC unroll 4
    for (int i = 0; i < R; ++i)
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t) acc[i][t] = _mm512_setzero_ps();
    const uint8_t* row0 = a.w + uint64_t(r0) * a.w_stride;
    for (int64_t g = ks.k0 / 32; g < nb; g += 8) {
      const int ng = int(min64(8, nb - g));
      const __mmask8 gmask = __mmask8((1u << ng) - 1);
      const int npairs = (ng + 1) / 2;
#pragma GCC unroll 4
      for (int i = 0; i < R; ++i) {
        const uint8_t* blk = row0 + uint64_t(i) * a.w_stride + uint64_t(g) * Dec::kBytes;
        if constexpr (T <= 2) {  // decode: the same group two row tiles ahead (see the K-quant kernels)
          const char* pf = reinterpret_cast<const char*>(blk + uint64_t(2 * R) * a.w_stride);
          for (int o = 0; o < 8 * Dec::kBytes; o += 64) _mm_prefetch(pf + o, _MM_HINT_T0);
        }
        const __m256i head = _mm256_mmask_i32gather_epi32(_mm256_setzero_si256(), gmask, gidx, blk, 1);
        const __m256 d8 = _mm256_cvtph_ps(_mm256_cvtepi32_epi16(head));
        __m256 c8;  // coefficient of d_a Σ a per block
        if constexpr (Dec::kMin) c8 = _mm256_cvtph_ps(_mm256_cvtepi32_epi16(_mm256_srli_epi32(head, 16)));
        else c8 = _mm256_mul_ps(d8, _mm256_set1_ps(-Dec::kOff));
        const __m512 d16 = _mm512_castps256_ps512(d8);
        __m512i w[4] = {};
        __m512 dw[4] = {};
#pragma GCC unroll 4
        for (int p = 0; p < 4; ++p) {
          if (p < npairs) {
            w[p] = Dec::quants(blk + 2 * p * Dec::kBytes, 2 * p + 1 < ng);
            dw[p] = _mm512_permutexvar_ps(pidx[p], d16);
          }
        }
#pragma GCC unroll 8
        for (int t = 0; t < T; ++t) {
          const int8_t* q = act.qs[t] + g * 32;
          const float* dx = act.dx[t] + g * 8;
#pragma GCC unroll 4
          for (int p = 0; p < 4; ++p) {
            if (p < npairs) {
              const __m512i s = _mm512_dpbusd_epi32(_mm512_setzero_si512(), w[p], _mm512_loadu_si512(q + 64 * p));
              const __m512 dd = _mm512_mul_ps(dw[p], _mm512_loadu_ps(dx + 16 * p));
              acc[i][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), dd, acc[i][t]);
            }
          }
          const __m256 sa = _mm256_maskz_loadu_ps(gmask, act.sa[t] + g);
          acc[i][t] = _mm512_fmadd_ps(_mm512_zextps256_ps512(c8), _mm512_zextps256_ps512(sa), acc[i][t]);
        }
      }
    }
    store_sums<R, T>(a, r0, t0, acc, ks.acc);
  }
};

}  // namespace

void kernel_q4_0(const KernelArgs& a) { drive<Micro32<DecQ4_0>, kRowTile, kTokTile>(a); }
void kernel_q4_1(const KernelArgs& a) { drive<Micro32<DecQ4_1>, kRowTile, kTokTile>(a); }
void kernel_q5_0(const KernelArgs& a) { drive<Micro32<DecQ5_0>, kRowTile, kTokTile>(a); }
void kernel_q5_1(const KernelArgs& a) { drive<Micro32<DecQ5_1>, kRowTile, kTokTile>(a); }
void kernel_q8_0(const KernelArgs& a) { drive<Micro32<DecQ8_0>, kRowTile, kTokTile>(a); }

}  // namespace fish::mm::avx512
#endif
