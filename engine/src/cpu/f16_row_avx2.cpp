// f32 -> f16 rows with F16C (f16_row.h), eight at a time; only called after a
// cpuid check. Replaces fp16.h's branchy scalar conversion in the KV store,
// whose mispredicted rounding branches cost ~6% of a 0.6B's CPU prompt.
//
// vcvtps2ph with an immediate rounding of nearest-even (not MXCSR's mode) is
// the IEEE conversion, and equals fp32_to_fp16 for every non-NaN float (all
// 2^32 bit patterns compared: rounding ties, overflow to inf from 65520,
// half subnormals, zeros, infinities; float subnormals go to ±0 either way,
// with or without DAZ). NaNs differ: the instruction keeps the top payload
// bits, fp32_to_fp16 gives sign | 0x7e00. So NaN lanes are first replaced by
// the float quiet NaN of the same sign (0x7fc00000), which converts to
// exactly that.
#include <immintrin.h>

#include <cstdint>

#include "common/fp16.h"

namespace fish {

namespace {
inline __m128i to_half8(__m256 v) {
  const __m256 nan = _mm256_cmp_ps(v, v, _CMP_UNORD_Q);
  const __m256 qnan = _mm256_or_ps(_mm256_and_ps(v, _mm256_set1_ps(-0.0f)),
                                   _mm256_castsi256_ps(_mm256_set1_epi32(0x7fc00000)));
  return _mm256_cvtps_ph(_mm256_blendv_ps(v, qnan, nan), _MM_FROUND_TO_NEAREST_INT);
}
}  // namespace

void fp32_to_fp16_row_f16c(const float* x, uint16_t* y, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m128i a = to_half8(_mm256_loadu_ps(x + i)), b = to_half8(_mm256_loadu_ps(x + i + 8));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(y + i), a);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(y + i + 8), b);
  }
  for (; i + 8 <= n; i += 8) _mm_storeu_si128(reinterpret_cast<__m128i*>(y + i), to_half8(_mm256_loadu_ps(x + i)));
  for (; i < n; ++i) y[i] = fp32_to_fp16(x[i]);  // the same bits, so the tail may be scalar
}

}  // namespace fish
