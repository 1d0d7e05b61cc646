// The AVX2 (+FMA, F16C) kernel family: its table, and the quantisers of the
// SIMD activation layouts (X8_32, X8_32S, X8_K, X8_KS), bit-identical to ggml's Q8_0 /
// Q8_1 / Q8_K reference quantisers (same f32 operations and rounding).
#include "cpu/matmul_kernels.h"

#if defined(__x86_64__) || defined(_M_X64)
#include <cstring>

#include "common/ggml_type.h"
#include "cpu/matmul_avx2_common.h"

namespace fish::mm {
namespace avx2 {
namespace {

inline __m256 abs8(__m256 v) { return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), v); }

inline float hmax8(__m256 v) {
  return avx2_hreduce8(v, [](__m128 a, __m128 b) { return _mm_max_ps(a, b); });
}

// roundf: nearest, ties away from zero (v - trunc(v) is exact).
inline __m256 round_half_away(__m256 v) {
  const __m256 t = _mm256_round_ps(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
  const __m256 up = _mm256_cmp_ps(abs8(_mm256_sub_ps(v, t)), _mm256_set1_ps(0.5f), _CMP_GE_OQ);
  const __m256 one = _mm256_or_ps(_mm256_set1_ps(1.0f), _mm256_and_ps(v, _mm256_set1_ps(-0.0f)));
  return _mm256_add_ps(t, _mm256_and_ps(up, one));
}

inline float f16_round(float v) { return _cvtsh_ss(_cvtss_sh(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)); }

// q within [-127, 127]: a no-op for finite activations (|x| <= amax), but a
// NaN converts to INT32_MIN and the block / group sums would overflow (as
// clamp127 of the AVX-512 family).
inline __m256i clamp127(__m256i q) {
  return _mm256_max_epi32(_mm256_min_epi32(q, _mm256_set1_epi32(127)), _mm256_set1_epi32(-127));
}

// 32 int32 (values within int8) -> 32 bytes in order.
inline __m256i pack32(__m256i q0, __m256i q1, __m256i q2, __m256i q3) {
  const __m256i c = _mm256_packs_epi16(_mm256_packs_epi32(q0, q1), _mm256_packs_epi32(q2, q3));
  return _mm256_permutevar8x32_epi32(c, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

template <bool kS>
void quantize_x8_32(const float* x, int64_t n, uint8_t* dst) {
  const X8_32Planes p = x8_32_planes(n);
  int8_t* qs = reinterpret_cast<int8_t*>(dst);
  float* dx = reinterpret_cast<float*>(dst + p.dx);
  float* sa = reinterpret_cast<float*>(dst + p.sa);
  int32_t* bs = reinterpret_cast<int32_t*>(dst + p.bs);
  const int64_t nb = n / 32;
  for (int64_t b = 0; b < nb; ++b) {
    __m256 v[4];
    __m256 vmax = _mm256_setzero_ps();
    for (int k = 0; k < 4; ++k) {
      v[k] = _mm256_loadu_ps(x + 32 * b + 8 * k);
      vmax = _mm256_max_ps(vmax, abs8(v[k]));
    }
    const float d = hmax8(vmax) / 127.0f;
    const __m256 vid = _mm256_set1_ps(d != 0.0f ? 1.0f / d : 0.0f);
    __m256i q[4];
    for (int k = 0; k < 4; ++k) q[k] = clamp127(_mm256_cvttps_epi32(round_half_away(_mm256_mul_ps(v[k], vid))));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(qs + 32 * b), pack32(q[0], q[1], q[2], q[3]));
    const int sum = hsum8_epi32(_mm256_add_epi32(_mm256_add_epi32(q[0], q[1]), _mm256_add_epi32(q[2], q[3])));
    const float dr = f16_round(d);
    _mm256_storeu_ps(dx + 8 * b, _mm256_set1_ps(dr));
    sa[b] = kS ? f16_round(float(sum) * d) : dr * float(sum);
    bs[b] = sum;
  }
  std::memset(qs + n, 0, p.dx - uint64_t(n));
  std::memset(reinterpret_cast<uint8_t*>(dx + 8 * nb), 0, p.sa - p.dx - uint64_t(nb) * 32);
  std::memset(reinterpret_cast<uint8_t*>(sa + nb), 0, p.bs - p.sa - uint64_t(nb) * 4);
  std::memset(reinterpret_cast<uint8_t*>(bs + nb), 0, p.total - p.bs - uint64_t(nb) * 4);
}

// X8_K: sf[g] = d * the 16-group sums. X8_KS (kStrip): bs32 = int16 sums of
// the 32-groups, nb16 = -32 * the 16-group sums (as the AVX-512 family's).
template <bool kStrip>
void quantize_x8_k(const float* x, int64_t n, uint8_t* dst) {
  const X8_KPlanes p = x8_k_planes(n);
  const X8_KSPlanes ps = x8_ks_planes(n);
  int8_t* qs = reinterpret_cast<int8_t*>(dst);
  float* dp = reinterpret_cast<float*>(dst + (kStrip ? ps.d : p.d));
  float* sf = reinterpret_cast<float*>(dst + p.sf);
  int16_t* bs32 = reinterpret_cast<int16_t*>(dst + ps.bs32);
  int32_t* nb16 = reinterpret_cast<int32_t*>(dst + ps.nb16);
  const int64_t nb = n / QK_K;
  for (int64_t b = 0; b < nb; ++b) {
    const float* xb = x + QK_K * b;
    __m256 vmax = _mm256_setzero_ps();
    for (int k = 0; k < 32; ++k) vmax = _mm256_max_ps(vmax, abs8(_mm256_loadu_ps(xb + 8 * k)));
    const float amax = hmax8(vmax);
    if (amax == 0.0f) {
      std::memset(qs + QK_K * b, 0, QK_K);
      dp[b] = 0.0f;
      if constexpr (kStrip) {
        std::memset(bs32 + 8 * b, 0, 16);
        std::memset(nb16 + 16 * b, 0, 64);
      } else {
        std::memset(sf + 16 * b, 0, 64);
      }
      continue;
    }
    float max = 0.0f;
    const __m256 va = _mm256_set1_ps(amax);
    for (int k = 0; k < 32; ++k) {
      const int m = _mm256_movemask_ps(_mm256_cmp_ps(abs8(_mm256_loadu_ps(xb + 8 * k)), va, _CMP_EQ_OQ));
      if (m) {
        max = xb[8 * k + __builtin_ctz(unsigned(m))];
        break;
      }
    }
    const float iscale = -127.0f / max;
    const float d = 1.0f / iscale;
    const __m256 vis = _mm256_set1_ps(iscale);
    for (int g = 0; g < 16; g += 2) {
      __m256i q[4];
      // The upper clamp is Q8_K's rule (q = min(127, ...)); the lower one only catches a NaN.
      for (int k = 0; k < 4; ++k)
        q[k] = clamp127(_mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(xb + 16 * g + 8 * k), vis)));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(qs + QK_K * b + 16 * g), pack32(q[0], q[1], q[2], q[3]));
      const int s0 = hsum8_epi32(_mm256_add_epi32(q[0], q[1])), s1 = hsum8_epi32(_mm256_add_epi32(q[2], q[3]));
      if constexpr (kStrip) {
        bs32[8 * b + g / 2] = int16_t(s0 + s1);
        nb16[16 * b + g] = -32 * s0;
        nb16[16 * b + g + 1] = -32 * s1;
      } else {
        sf[16 * b + g] = d * float(s0);
        sf[16 * b + g + 1] = d * float(s1);
      }
    }
    dp[b] = d;
  }
  if constexpr (kStrip) std::memset(reinterpret_cast<uint8_t*>(dp + nb), 0, ps.bs32 - ps.d - uint64_t(nb) * 4);
  else std::memset(reinterpret_cast<uint8_t*>(dp + nb), 0, p.sf - p.d - uint64_t(nb) * 4);
}

}  // namespace

void quantize(ActLayout l, const float* x, int64_t n_in, uint8_t* dst) {
  switch (l) {
    case ActLayout::X8_32: quantize_x8_32<false>(x, n_in, dst); return;
    case ActLayout::X8_32S: quantize_x8_32<true>(x, n_in, dst); return;
    case ActLayout::X8_K: quantize_x8_k<false>(x, n_in, dst); return;
    case ActLayout::X8_KS: quantize_x8_k<true>(x, n_in, dst); return;
    default: quantize_act_scalar(l, x, n_in, dst); return;
  }
}

}  // namespace avx2

const KernelFamily* family_avx2() {
  static const KernelFamily f = [] {
    KernelFamily k{};
    k.name = "avx2";
    auto set = [&](WType t, KernelFn fn, ActLayout l) { k.entry[int(t)] = {fn, l}; };
    set(WType::F32, avx2::kernel_f32, ActLayout::F32);
    set(WType::F16, avx2::kernel_f16, ActLayout::F32);
    set(WType::BF16, avx2::kernel_bf16, ActLayout::F32);
    set(WType::Q4_0, avx2::kernel_q4_0, ActLayout::X8_32);
    set(WType::Q4_1, avx2::kernel_q4_1, ActLayout::X8_32S);
    set(WType::Q5_0, avx2::kernel_q5_0, ActLayout::X8_32);
    set(WType::Q5_1, avx2::kernel_q5_1, ActLayout::X8_32S);
    set(WType::Q8_0, avx2::kernel_q8_0, ActLayout::X8_32);
    set(WType::Q2_K, avx2::kernel_q2_k, ActLayout::X8_K);
    set(WType::Q3_K, avx2::kernel_q3_k, ActLayout::X8_K);
    set(WType::Q4_K, avx2::kernel_q4_k, ActLayout::X8_K);
    set(WType::Q5_K, avx2::kernel_q5_k, ActLayout::X8_K);
    set(WType::Q6_K, avx2::kernel_q6_k, ActLayout::X8_K);
    set(WType::Q4_K_S16, avx2::kernel_q4_k_s16, ActLayout::X8_KS);
    set(WType::Q5_K_S16, avx2::kernel_q5_k_s16, ActLayout::X8_KS);
    set(WType::Q6_K_S16, avx2::kernel_q6_k_s16, ActLayout::X8_KS);
    set(WType::Q4_0_S16, avx2::kernel_q4_0_s16, ActLayout::X8_32);
    set(WType::Q4_1_S16, avx2::kernel_q4_1_s16, ActLayout::X8_32S);
    set(WType::Q5_0_S16, avx2::kernel_q5_0_s16, ActLayout::X8_32);
    set(WType::Q5_1_S16, avx2::kernel_q5_1_s16, ActLayout::X8_32S);
    set(WType::Q8_0_S16, avx2::kernel_q8_0_s16, ActLayout::X8_32);
    k.quantize = avx2::quantize;
    return k;
  }();
  return &f;
}

const KernelFamily* family_avxvnni() {
  static const KernelFamily f = [] {
    KernelFamily k = *family_avx2();
    k.name = "avx2-vnni";
    auto set = [&](WType t, KernelFn fn, ActLayout l) { k.entry[int(t)] = {fn, l}; };
    set(WType::Q4_K_S16, avxvnni::kernel_q4_k_s16, ActLayout::X8_KS);
    set(WType::Q5_K_S16, avxvnni::kernel_q5_k_s16, ActLayout::X8_KS);
    set(WType::Q6_K_S16, avxvnni::kernel_q6_k_s16, ActLayout::X8_KS);
    set(WType::Q4_0_S16, avxvnni::kernel_q4_0_s16, ActLayout::X8_32);
    set(WType::Q4_1_S16, avxvnni::kernel_q4_1_s16, ActLayout::X8_32S);
    set(WType::Q5_0_S16, avxvnni::kernel_q5_0_s16, ActLayout::X8_32);
    set(WType::Q5_1_S16, avxvnni::kernel_q5_1_s16, ActLayout::X8_32S);
    set(WType::Q8_0_S16, avxvnni::kernel_q8_0_s16, ActLayout::X8_32);
    return k;
  }();
  return &f;
}

}  // namespace fish::mm

#else
namespace fish::mm {
const KernelFamily* family_avx2() { return nullptr; }
const KernelFamily* family_avxvnni() { return nullptr; }
}  // namespace fish::mm
#endif
