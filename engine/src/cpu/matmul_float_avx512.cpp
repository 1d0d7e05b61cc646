// AVX-512 kernels of the float weight types (F32, F16, BF16) against f32
// activations: 16 weights per step widened to f32 (vcvtph2ps for F16, a
// 16-bit shift for BF16, both exact), one FMA per token of the tile. Rows of
// any length: the tail is a masked step.
#if defined(__x86_64__) || defined(_M_X64)
#include "cpu/matmul_avx512_common.h"

namespace fish::mm::avx512 {
namespace {

constexpr int kRowTile = 4, kTokTile = 4;

struct LoadF32 {
  static constexpr int kBytes = 4;
  static __m512 load(const uint8_t* p) { return _mm512_loadu_ps(p); }
  static __m512 load_tail(const uint8_t* p, __mmask16 m) { return _mm512_maskz_loadu_ps(m, p); }
};
struct LoadF16 {
  static constexpr int kBytes = 2;
  static __m512 load(const uint8_t* p) { return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))); }
  static __m512 load_tail(const uint8_t* p, __mmask16 m) { return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, p)); }
};
struct LoadBF16 {
  static constexpr int kBytes = 2;
  static __m512 widen(__m256i h) { return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16)); }
  static __m512 load(const uint8_t* p) { return widen(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))); }
  static __m512 load_tail(const uint8_t* p, __mmask16 m) { return widen(_mm256_maskz_loadu_epi16(m, p)); }
};

template <class L>
struct FloatMicro {
  static constexpr int64_t kKUnit = 16;
  static constexpr double kActBytes = 4.0;

  template <int R, int T>
  static void tile(const KernelArgs& a, int64_t r0, int t0, const KSpan& ks) {
    const int64_t n = ks.k1;
    const uint8_t* w = a.w + uint64_t(r0) * a.w_stride;
    const float* x[T];
    for (int t = 0; t < T; ++t) x[t] = reinterpret_cast<const float*>(a.act + uint64_t(t0 + t) * a.act_stride);
    __m512 acc[R][T];
#pragma GCC unroll 4
    for (int i = 0; i < R; ++i)
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t) acc[i][t] = _mm512_setzero_ps();
    int64_t k = ks.k0;
    for (; k + 16 <= n; k += 16) {
#pragma GCC unroll 4
      for (int i = 0; i < R; ++i) {
        const uint8_t* wp = w + uint64_t(i) * a.w_stride + uint64_t(k) * L::kBytes;
        if constexpr (T <= 2)  // decode: the same place two row tiles ahead
          if ((k * L::kBytes) % 64 == 0) _mm_prefetch(reinterpret_cast<const char*>(wp + uint64_t(2 * R) * a.w_stride), _MM_HINT_T0);
        const __m512 wv = L::load(wp);
#pragma GCC unroll 8
        for (int t = 0; t < T; ++t) acc[i][t] = _mm512_fmadd_ps(wv, _mm512_loadu_ps(x[t] + k), acc[i][t]);
      }
    }
    if (k < n) {
      const __mmask16 m = __mmask16((1u << (n - k)) - 1);
#pragma GCC unroll 4
      for (int i = 0; i < R; ++i) {
        const __m512 wv = L::load_tail(w + uint64_t(i) * a.w_stride + uint64_t(k) * L::kBytes, m);
#pragma GCC unroll 8
        for (int t = 0; t < T; ++t) acc[i][t] = _mm512_fmadd_ps(wv, _mm512_maskz_loadu_ps(m, x[t] + k), acc[i][t]);
      }
    }
    store_sums<R, T>(a, r0, t0, acc, ks.acc);
  }
};

}  // namespace

void kernel_f32(const KernelArgs& a) { drive<FloatMicro<LoadF32>, kRowTile, kTokTile>(a); }
void kernel_f16(const KernelArgs& a) { drive<FloatMicro<LoadF16>, kRowTile, kTokTile>(a); }
void kernel_bf16(const KernelArgs& a) { drive<FloatMicro<LoadBF16>, kRowTile, kTokTile>(a); }

}  // namespace fish::mm::avx512
#endif
