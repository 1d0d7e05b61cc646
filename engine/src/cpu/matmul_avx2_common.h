// Shared by the *_avx2.cpp and *_avxvnni.cpp files only (compiled with AVX2 +
// FMA + F16C, the latter also AVX-VNNI): the kernel declarations of the two
// families and their helpers. Everything with a
// body has internal linkage, so no AVX2 code can be merged into baseline files.
#pragma once
#include <immintrin.h>

#include <cstdint>

#include "cpu/avx2_math.h"
#include "cpu/matmul_drive.h"
#include "cpu/matmul_kernels.h"

// The AVX2 + AVX-VNNI family's strip kernels (its others are AVX2's).
namespace fish::mm::avxvnni {
void kernel_q4_k_s16(const KernelArgs& a);
void kernel_q5_k_s16(const KernelArgs& a);
void kernel_q6_k_s16(const KernelArgs& a);
void kernel_q4_0_s16(const KernelArgs& a);
void kernel_q4_1_s16(const KernelArgs& a);
void kernel_q5_0_s16(const KernelArgs& a);
void kernel_q5_1_s16(const KernelArgs& a);
void kernel_q8_0_s16(const KernelArgs& a);
}  // namespace fish::mm::avxvnni

namespace fish::mm::avx2 {

void kernel_f32(const KernelArgs& a);
void kernel_f16(const KernelArgs& a);
void kernel_bf16(const KernelArgs& a);
void kernel_q4_0(const KernelArgs& a);
void kernel_q4_1(const KernelArgs& a);
void kernel_q5_0(const KernelArgs& a);
void kernel_q5_1(const KernelArgs& a);
void kernel_q8_0(const KernelArgs& a);
void kernel_q2_k(const KernelArgs& a);
void kernel_q3_k(const KernelArgs& a);
void kernel_q4_k(const KernelArgs& a);
void kernel_q5_k(const KernelArgs& a);
void kernel_q6_k(const KernelArgs& a);
// 16-row strips (prepare_weight; matmul_strip_ymm.h): X8_KS activations (K-quants), X8_32 (Q4_0, Q5_0, Q8_0), X8_32S (Q4_1, Q5_1).
void kernel_q4_k_s16(const KernelArgs& a);
void kernel_q5_k_s16(const KernelArgs& a);
void kernel_q6_k_s16(const KernelArgs& a);
void kernel_q4_0_s16(const KernelArgs& a);
void kernel_q4_1_s16(const KernelArgs& a);
void kernel_q5_0_s16(const KernelArgs& a);
void kernel_q5_1_s16(const KernelArgs& a);
void kernel_q8_0_s16(const KernelArgs& a);

// Quantiser of the X8_32, X8_32S, X8_K and X8_KS layouts.
void quantize(ActLayout l, const float* x, int64_t n_in, uint8_t* dst);

namespace {

inline int hsum8_epi32(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(1, 0, 3, 2)));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(2, 3, 0, 1)));
  return _mm_cvtsi128_si32(s);
}

template <int R, int T>
inline void store_sums(const KernelArgs& a, int64_t r0, int t0, const __m256 (&acc)[R][T], bool add) {
  for (int i = 0; i < R; ++i)
    for (int t = 0; t < T; ++t) {
      float& y = a.y[(t0 + t) * a.ldy + r0 + i];
      const float v = avx2_hsum8(acc[i][t]);
      y = add ? y + v : v;
    }
}

}  // namespace
}  // namespace fish::mm::avx2
