// AVX2 kernels of the 32-element block types (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0)
// against X8_32 / X8_32S activations. One block is one ymm of quants in
// element order: vpmaddubsw + vpmaddwd(1) give 8 int32 partial sums, scaled by
// d_w * d_a (the dx plane holds d_a per lane) into f32 accumulators. Unsigned
// quants with an offset (Q4_0: 8, Q5_0: 16) or a min (Q4_1, Q5_1) leave a
// per-block term c_b * (d_a Σ a) that is one FMA per 8 blocks (sa plane).
// Q8_0 is signed: |w| and sign(a, w) keep vpmaddubsw exact (no offset).
#if defined(__x86_64__) || defined(_M_X64)
#include <cstring>

#include "cpu/matmul_act_views.h"
#include "cpu/matmul_avx2_common.h"
#include "quant/blocks.h"

namespace fish::mm::avx2 {
namespace {

constexpr int kRowTile = 1, kTokTile = 8;


inline float half_at(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return _cvtsh_ss(h);
}

// 16 bytes of nibbles: element j low nibble of qs[j], j + 16 the high one.
inline __m256i nibbles(const uint8_t* qs) {
  const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  const __m128i m4 = _mm_set1_epi8(0x0F);
  return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(v, 4), m4), _mm_and_si128(v, m4));
}

// 16 where bit j of the little-endian u32 at qh is set, for bytes j = 0..31.
inline __m256i bit4_of(const uint8_t* qh) {
  uint32_t h;
  std::memcpy(&h, qh, 4);
  const __m256i rep = _mm256_shuffle_epi8(_mm256_set1_epi32(int(h)),
                                          _mm256_setr_epi64x(0, 0x0101010101010101, 0x0202020202020202,
                                                             0x0303030303030303));
  const __m256i bit = _mm256_set1_epi64x(int64_t(0x8040201008040201));
  return _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(rep, bit), bit), _mm256_set1_epi8(16));
}

struct DecQ4_0 {
  static constexpr int kBytes = sizeof(BlockQ4_0);
  static constexpr bool kSigned = false;
  static float coef(const uint8_t* p) { return -8.0f * half_at(p); }
  static __m256i quants(const uint8_t* p) { return nibbles(p + 2); }
};
struct DecQ4_1 {
  static constexpr int kBytes = sizeof(BlockQ4_1);
  static constexpr bool kSigned = false;
  static float coef(const uint8_t* p) { return half_at(p + 2); }
  static __m256i quants(const uint8_t* p) { return nibbles(p + 4); }
};
struct DecQ5_0 {
  static constexpr int kBytes = sizeof(BlockQ5_0);
  static constexpr bool kSigned = false;
  static float coef(const uint8_t* p) { return -16.0f * half_at(p); }
  static __m256i quants(const uint8_t* p) { return _mm256_or_si256(nibbles(p + 6), bit4_of(p + 2)); }
};
struct DecQ5_1 {
  static constexpr int kBytes = sizeof(BlockQ5_1);
  static constexpr bool kSigned = false;
  static float coef(const uint8_t* p) { return half_at(p + 2); }
  static __m256i quants(const uint8_t* p) { return _mm256_or_si256(nibbles(p + 8), bit4_of(p + 4)); }
};
struct DecQ8_0 {
  static constexpr int kBytes = sizeof(BlockQ8_0);
  static constexpr bool kSigned = true;
  static float coef(const uint8_t*) { return 0.0f; }
  static __m256i quants(const uint8_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 2)); }
};

template <class Dec>
struct Micro32 {
  static constexpr int64_t kKUnit = 256;  // groups of 8 blocks
  static constexpr double kActBytes = 1.0 + 1.0 + 4.0 / 32;  // qs + dx + sa per element

  template <int R, int T>
  static void tile(const KernelArgs& a, int64_t r0, int t0, const KSpan& ks) {
    const Act32<T> act(a, t0);
    const int64_t nb = ks.k1 / 32;
    const __m256i ones = _mm256_set1_epi16(1);
    __m256 acc[R][T];
    for (int i = 0; i < R; ++i)
      for (int t = 0; t < T; ++t) acc[i][t] = _mm256_setzero_ps();
    const uint8_t* row0 = a.w + uint64_t(r0) * a.w_stride;
    for (int64_t g = ks.k0 / 32; g < nb; g += 8) {
      const int ng = int(min64(8, nb - g));
#pragma GCC unroll 4
      for (int i = 0; i < R; ++i) {
        const uint8_t* blk = row0 + uint64_t(i) * a.w_stride + uint64_t(g) * Dec::kBytes;
        for (int k = 0; k < ng; ++k) {
          const uint8_t* p = blk + k * Dec::kBytes;
          const __m256 d = _mm256_set1_ps(half_at(p));
          __m256i w = Dec::quants(p);
          const __m256i wabs = Dec::kSigned ? _mm256_sign_epi8(w, w) : w;
#pragma GCC unroll 8
          for (int t = 0; t < T; ++t) {
            __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(act.qs[t] + (g + k) * 32));
            if constexpr (Dec::kSigned) q = _mm256_sign_epi8(q, w);
            const __m256i s = _mm256_madd_epi16(_mm256_maddubs_epi16(wabs, q), ones);
            const __m256 dd = _mm256_mul_ps(d, _mm256_loadu_ps(act.dx[t] + (g + k) * 8));
            acc[i][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), dd, acc[i][t]);
          }
        }
        if constexpr (!Dec::kSigned) {
          alignas(32) float c[8] = {};
          for (int k = 0; k < ng; ++k) c[k] = Dec::coef(blk + k * Dec::kBytes);
          const __m256 c8 = _mm256_load_ps(c);
          const __m256i m = _mm256_cmpgt_epi32(_mm256_set1_epi32(ng), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
#pragma GCC unroll 8
          for (int t = 0; t < T; ++t)
            acc[i][t] = _mm256_fmadd_ps(c8, _mm256_maskload_ps(act.sa[t] + g, m), acc[i][t]);
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

}  // namespace fish::mm::avx2
#endif
