// AVX2 kernels of the K-quants (Q2_K .. Q6_K) against X8_K activations (int8 values
// of Q8_K). Per weight row, 256-block and 64-element step: two ymm of unsigned
// quants (element order) and their int16 sub-block scales; per token
// vpmaddubsw (u8 x s8 -> s16 pairs; quants < 64 and |a| <= 127, so no
// saturation) and vpmaddwd by the scales, summed in int32 over the block, then
// one FMA with d_w * d_a and two for the min / offset term (dotted with the
// activation's d_a * bsum per 16-group, as in the AVX-512 kernels).
#if defined(__x86_64__) || defined(_M_X64)
#include <cstring>

#include "cpu/matmul_avx2_common.h"
#include "quant/blocks.h"

namespace fish::mm::avx2 {
namespace {

constexpr int kRowTile = 1, kTokTile = 4;

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

// One 64-element step: quants of elements 64j .. 64j+31 (lo) and +32 .. +63
// (hi), and the int16 scale of each element pair.
struct Step {
  __m256i lo, hi, s_lo, s_hi;
};

// Q4_K / Q5_K: the 8 six-bit scales (bytes 0..7) and mins (8..15).
inline void k4_scales_mins(const uint8_t* s, uint8_t* out) {
  uint32_t a0, a1, a2;
  std::memcpy(&a0, s, 4);
  std::memcpy(&a1, s + 4, 4);
  std::memcpy(&a2, s + 8, 4);
  const uint32_t v[4] = {a0 & 0x3f3f3f3fu, (a2 & 0x0f0f0f0fu) | ((a0 >> 2) & 0x30303030u), a1 & 0x3f3f3f3fu,
                         ((a2 >> 4) & 0x0f0f0f0fu) | ((a1 >> 2) & 0x30303030u)};
  std::memcpy(out, v, 16);
}

template <bool kQ5>
struct RowQ45 {
  static constexpr size_t kBytes = kQ5 ? sizeof(BlockQ5_K) : sizeof(BlockQ4_K);
  const uint8_t* qs;
  __m256i qh;
  alignas(16) uint8_t sm[16];
  float d, dmin;

  explicit RowQ45(const uint8_t* blk) {
    const auto* head = reinterpret_cast<const BlockQ4_K*>(blk);
    qs = kQ5 ? reinterpret_cast<const BlockQ5_K*>(blk)->qs : head->qs;
    qh = kQ5 ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(reinterpret_cast<const BlockQ5_K*>(blk)->qh))
             : _mm256_setzero_si256();
    k4_scales_mins(head->scales, sm);
    d = half_to_float(head->d);
    dmin = half_to_float(head->dmin);
  }
  // qs[32j + l]: element 64j + l (low nibble), 64j + 32 + l (high); Q5_K adds
  // 16 for bit 2j (lo) / 2j + 1 (hi) of qh[l].
  template <int J>
  Step step() const {
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs + 32 * J));
    Step s;
    s.lo = _mm256_and_si256(v, m4);
    s.hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
    if constexpr (kQ5) {
      // Bit k of each byte to bit 4 (16-bit shifts: the mask keeps only bits of the same byte).
      const __m256i b4 = _mm256_set1_epi8(0x10);
      constexpr int k0 = 2 * J, k1 = 2 * J + 1;
      const __m256i h0 = k0 <= 4 ? _mm256_slli_epi16(qh, 4 - k0) : _mm256_srli_epi16(qh, k0 - 4);
      const __m256i h1 = k1 <= 4 ? _mm256_slli_epi16(qh, 4 - k1) : _mm256_srli_epi16(qh, k1 - 4);
      s.lo = _mm256_or_si256(s.lo, _mm256_and_si256(h0, b4));
      s.hi = _mm256_or_si256(s.hi, _mm256_and_si256(h1, b4));
    }
    s.s_lo = _mm256_set1_epi16(sm[2 * J]);
    s.s_hi = _mm256_set1_epi16(sm[2 * J + 1]);
    return s;
  }
  // Coefficients of d_a * bsum per 16-group g: -dmin * min[g / 2].
  void corr(__m256& c0, __m256& c1) const {
    const __m256i m = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(sm + 8)));
    const __m256 nd = _mm256_set1_ps(-dmin);
    c0 = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_permutevar8x32_epi32(m, _mm256_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3))), nd);
    c1 = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_permutevar8x32_epi32(m, _mm256_setr_epi32(4, 4, 5, 5, 6, 6, 7, 7))), nd);
  }
};

// The int16-pair scale vectors of a step over 16-groups: int32 lanes
// (s | s << 16) of scales 8h .. 8h + 7; lo covers groups 8h + 4p + {0, 1},
// hi 8h + 4p + {2, 3} (h = J / 2, p = J % 2).
template <int J>
inline void scales16(const int8_t* sc16, Step& s) {
  constexpr int h = J / 2, g = 4 * (J % 2);
  const __m256i s32 = _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(sc16 + 8 * h)));
  const __m256i dup = _mm256_or_si256(_mm256_and_si256(s32, _mm256_set1_epi32(0xFFFF)), _mm256_slli_epi32(s32, 16));
  s.s_lo = _mm256_permutevar8x32_epi32(dup, _mm256_setr_epi32(g, g, g, g, g + 1, g + 1, g + 1, g + 1));
  s.s_hi = _mm256_permutevar8x32_epi32(dup, _mm256_setr_epi32(g + 2, g + 2, g + 2, g + 2, g + 3, g + 3, g + 3, g + 3));
}

struct RowQ6 {
  static constexpr size_t kBytes = sizeof(BlockQ6_K);
  const BlockQ6_K* b;
  float d;
  explicit RowQ6(const uint8_t* blk) : b(reinterpret_cast<const BlockQ6_K*>(blk)), d(half_to_float(b->d)) {}

  // Step J: half h = J / 2; J even: elements 128h + 0..63, odd: 128h + 64..127.
  // Element 128h + 32k + l: nibble of ql[64h + l + 32(k & 1)] (low for k < 2),
  // bits 2k, 2k+1 of qh[32h + l]. Groups of 16 use scales[e / 16].
  template <int J>
  Step step() const {
    constexpr int h = J / 2, part = J % 2;
    const __m256i m4 = _mm256_set1_epi8(0x0F), m30 = _mm256_set1_epi8(0x30);
    const __m256i A = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b->ql + 64 * h));
    const __m256i B = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b->ql + 64 * h + 32));
    const __m256i H = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b->qh + 32 * h));
    Step s;
    if constexpr (part == 0) {
      s.lo = _mm256_or_si256(_mm256_and_si256(A, m4), _mm256_and_si256(_mm256_slli_epi16(H, 4), m30));
      s.hi = _mm256_or_si256(_mm256_and_si256(B, m4), _mm256_and_si256(_mm256_slli_epi16(H, 2), m30));
    } else {
      s.lo = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(A, 4), m4), _mm256_and_si256(H, m30));
      s.hi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(B, 4), m4),
                             _mm256_and_si256(_mm256_srli_epi16(H, 2), m30));
    }
    scales16<J>(b->scales, s);
    return s;
  }
  // x = d sc (q - 32): coefficient -32 d sc[g] of d_a * bsum_g.
  void corr(__m256& c0, __m256& c1) const {
    const __m128i sc = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b->scales));
    const __m256 k = _mm256_set1_ps(-32.0f * d);
    c0 = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(sc)), k);
    c1 = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_unpackhi_epi64(sc, sc))), k);
  }
};

// Q2_K / Q3_K: element 128h + 32j + l = bits 2j of qs[32h + l]; step J covers
// j = 2p (lo) and 2p + 1 (hi) of half h. Q3_K keeps u = q + 4 (0..7) unsigned:
// +4 where bit 4h + j of hmask[l] is set, the -4 going to the correction.
template <bool kQ3>
struct RowQ23 {
  static constexpr size_t kBytes = kQ3 ? sizeof(BlockQ3_K) : sizeof(BlockQ2_K);
  const uint8_t* qs;
  const uint8_t* hmask;
  alignas(16) int8_t sc[16];  // signed scales (Q2_K: the low nibbles)
  alignas(16) int8_t mn[16];  // Q2_K mins (high nibbles)
  float d, dmin;

  explicit RowQ23(const uint8_t* blk) {
    if constexpr (kQ3) {
      const auto* b = reinterpret_cast<const BlockQ3_K*>(blk);
      qs = b->qs;
      hmask = b->hmask;
      uint32_t a0, a1, a2;
      std::memcpy(&a0, b->scales, 4);
      std::memcpy(&a1, b->scales + 4, 4);
      std::memcpy(&a2, b->scales + 8, 4);
      const uint32_t k4 = 0x0f0f0f0fu, k2 = 0x03030303u;
      const uint32_t u[4] = {(a0 & k4) | ((a2 & k2) << 4), (a1 & k4) | (((a2 >> 2) & k2) << 4),
                             ((a0 >> 4) & k4) | (((a2 >> 4) & k2) << 4), ((a1 >> 4) & k4) | (((a2 >> 6) & k2) << 4)};
      const __m128i v = _mm_sub_epi8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(u)), _mm_set1_epi8(32));
      _mm_store_si128(reinterpret_cast<__m128i*>(sc), v);
      d = half_to_float(b->d);
      dmin = 0.0f;
    } else {
      const auto* b = reinterpret_cast<const BlockQ2_K*>(blk);
      qs = b->qs;
      hmask = nullptr;
      const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b->scales));
      const __m128i m4 = _mm_set1_epi8(0x0F);
      _mm_store_si128(reinterpret_cast<__m128i*>(sc), _mm_and_si128(v, m4));
      _mm_store_si128(reinterpret_cast<__m128i*>(mn), _mm_and_si128(_mm_srli_epi16(v, 4), m4));
      d = half_to_float(b->d);
      dmin = half_to_float(b->dmin);
    }
  }
  template <int J>
  Step step() const {
    constexpr int h = J / 2, p = J % 2;
    const __m256i m3 = _mm256_set1_epi8(3);
    const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs + 32 * h));
    Step s;
    s.lo = _mm256_and_si256(_mm256_srli_epi16(v, 4 * p), m3);
    s.hi = _mm256_and_si256(_mm256_srli_epi16(v, 4 * p + 2), m3);
    if constexpr (kQ3) {
      const __m256i hm = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(hmask));
      const __m256i b0 = _mm256_set1_epi8(char(1 << (4 * h + 2 * p))), b1 = _mm256_set1_epi8(char(1 << (4 * h + 2 * p + 1)));
      const __m256i four = _mm256_set1_epi8(4);
      s.lo = _mm256_add_epi8(s.lo, _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(hm, b0), b0), four));
      s.hi = _mm256_add_epi8(s.hi, _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(hm, b1), b1), four));
    }
    scales16<J>(sc, s);
    return s;
  }
  // Q2_K: -dmin m[g]; Q3_K: -4 d sc[g] (coefficients of d_a bsum_g).
  void corr(__m256& c0, __m256& c1) const {
    const __m128i v = _mm_load_si128(reinterpret_cast<const __m128i*>(kQ3 ? sc : mn));
    const __m256 k = _mm256_set1_ps(kQ3 ? -4.0f * d : -dmin);
    c0 = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(v)), k);
    c1 = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_unpackhi_epi64(v, v))), k);
  }
};

template <class Row>
struct KMicro {
  template <int J, int T>
  static void step(const Row& row, const int8_t* const* q, __m256i (&acc)[T]) {
    const Step s = row.template step<J>();
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      const __m256i a0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q[t] + 64 * J));
      const __m256i a1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q[t] + 64 * J + 32));
      const __m256i p = _mm256_add_epi32(_mm256_madd_epi16(_mm256_maddubs_epi16(s.lo, a0), s.s_lo),
                                         _mm256_madd_epi16(_mm256_maddubs_epi16(s.hi, a1), s.s_hi));
      acc[t] = _mm256_add_epi32(acc[t], p);
    }
  }

  static constexpr int64_t kKUnit = QK_K;
  static constexpr double kActBytes = 1.0 + 64.0 / QK_K + 4.0 / QK_K;  // qs + sf + d per element

  template <int R, int T>
  static void tile(const KernelArgs& a, int64_t r0, int t0, const KSpan& ks) {
    const ActK<T> act(a, t0);
    __m256 acc[R][T];
    for (int i = 0; i < R; ++i)
      for (int t = 0; t < T; ++t) acc[i][t] = _mm256_setzero_ps();
    const uint8_t* row0 = a.w + uint64_t(r0) * a.w_stride;
    for (int64_t b = ks.k0 / QK_K; b < ks.k1 / QK_K; ++b) {
      const int8_t* q[T];
      for (int t = 0; t < T; ++t) q[t] = act.qs[t] + b * QK_K;
#pragma GCC unroll 4
      for (int i = 0; i < R; ++i) {
        const Row row(row0 + uint64_t(i) * a.w_stride + uint64_t(b) * Row::kBytes);
        __m256i isum[T];
        for (int t = 0; t < T; ++t) isum[t] = _mm256_setzero_si256();
        step<0, T>(row, q, isum);
        step<1, T>(row, q, isum);
        step<2, T>(row, q, isum);
        step<3, T>(row, q, isum);
        __m256 c0, c1;
        row.corr(c0, c1);
        const __m256 d = _mm256_set1_ps(row.d);
#pragma GCC unroll 8
        for (int t = 0; t < T; ++t) {
          const __m256 dd = _mm256_mul_ps(d, _mm256_set1_ps(act.d[t][b]));
          __m256 v = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[t]), dd, acc[i][t]);
          v = _mm256_fmadd_ps(c0, _mm256_loadu_ps(act.sf[t] + 16 * b), v);
          acc[i][t] = _mm256_fmadd_ps(c1, _mm256_loadu_ps(act.sf[t] + 16 * b + 8), v);
        }
      }
    }
    store_sums<R, T>(a, r0, t0, acc, ks.acc);
  }
};

}  // namespace

void kernel_q2_k(const KernelArgs& a) { drive<KMicro<RowQ23<false>>, kRowTile, kTokTile>(a); }
void kernel_q3_k(const KernelArgs& a) { drive<KMicro<RowQ23<true>>, kRowTile, kTokTile>(a); }
void kernel_q4_k(const KernelArgs& a) { drive<KMicro<RowQ45<false>>, kRowTile, kTokTile>(a); }
void kernel_q5_k(const KernelArgs& a) { drive<KMicro<RowQ45<true>>, kRowTile, kTokTile>(a); }
void kernel_q6_k(const KernelArgs& a) { drive<KMicro<RowQ6>, kRowTile, kTokTile>(a); }

}  // namespace fish::mm::avx2
#endif
