// AVX2 kernels of the float weight types (F32, F16, BF16) against f32
// activations: 8 weights per step widened to f32 (vcvtph2ps, or a 16-bit
// shift for BF16), one FMA per token of the tile; the tail of a row of any
// length goes through a zero-padded copy.
#if defined(__x86_64__) || defined(_M_X64)
#include <cstring>

#include "cpu/matmul_avx2_common.h"

namespace fish::mm::avx2 {
namespace {

constexpr int kRowTile = 2, kTokTile = 4;

struct LoadF32 {
  static constexpr int kBytes = 4;
  static __m256 load(const uint8_t* p) { return _mm256_loadu_ps(reinterpret_cast<const float*>(p)); }
};
struct LoadF16 {
  static constexpr int kBytes = 2;
  static __m256 load(const uint8_t* p) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }
};
struct LoadBF16 {
  static constexpr int kBytes = 2;
  static __m256 load(const uint8_t* p) {
    const __m256i v = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
  }
};

template <class L>
struct FloatMicro {
  static constexpr int64_t kKUnit = 8;
  static constexpr double kActBytes = 4.0;

  template <int R, int T>
  static void tile(const KernelArgs& a, int64_t r0, int t0, const KSpan& ks) {
    const int64_t n = ks.k1;
    const uint8_t* w = a.w + uint64_t(r0) * a.w_stride;
    const float* x[T];
    for (int t = 0; t < T; ++t) x[t] = reinterpret_cast<const float*>(a.act + uint64_t(t0 + t) * a.act_stride);
    __m256 acc[R][T];
    for (int i = 0; i < R; ++i)
      for (int t = 0; t < T; ++t) acc[i][t] = _mm256_setzero_ps();
    int64_t k = ks.k0;
    for (; k + 8 <= n; k += 8) {
#pragma GCC unroll 4
      for (int i = 0; i < R; ++i) {
        const __m256 wv = L::load(w + uint64_t(i) * a.w_stride + uint64_t(k) * L::kBytes);
#pragma GCC unroll 8
        for (int t = 0; t < T; ++t) acc[i][t] = _mm256_fmadd_ps(wv, _mm256_loadu_ps(x[t] + k), acc[i][t]);
      }
    }
    if (k < n) {
      const int rest = int(n - k);
      alignas(32) uint8_t wt[32] = {};
      alignas(32) float xt[8] = {};
      for (int i = 0; i < R; ++i) {
        std::memcpy(wt, w + uint64_t(i) * a.w_stride + uint64_t(k) * L::kBytes, size_t(rest) * L::kBytes);
        const __m256 wv = L::load(wt);
        for (int t = 0; t < T; ++t) {
          std::memcpy(xt, x[t] + k, size_t(rest) * 4);
          acc[i][t] = _mm256_fmadd_ps(wv, _mm256_load_ps(xt), acc[i][t]);
        }
      }
    }
    store_sums<R, T>(a, r0, t0, acc, ks.acc);
  }
};

}  // namespace

void kernel_f32(const KernelArgs& a) { drive<FloatMicro<LoadF32>, kRowTile, kTokTile>(a); }
void kernel_f16(const KernelArgs& a) { drive<FloatMicro<LoadF16>, kRowTile, kTokTile>(a); }
void kernel_bf16(const KernelArgs& a) { drive<FloatMicro<LoadBF16>, kRowTile, kTokTile>(a); }

}  // namespace fish::mm::avx2
#endif
