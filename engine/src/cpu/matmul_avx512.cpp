// The AVX-512 VNNI kernel family: its table, and the quantisers of the SIMD
// activation layouts (X8_32, X8_32S, X8_K, X8_KS). They produce the same int8 values
// and scales as ggml's Q8_0 / Q8_1 / Q8_K reference quantisers bit for bit
// (same operations in the same f32 precision and rounding), so the SIMD and the
// scalar kernels see identical integers.
#include "cpu/matmul_kernels.h"

#if defined(__x86_64__) || defined(_M_X64)
#include <cstring>

#include "common/ggml_type.h"
#include "cpu/matmul_avx512_common.h"

namespace fish::mm {
namespace avx512 {
namespace {

// roundf(v): to nearest, ties away from zero (exact: v - trunc(v) is exact).
inline __m512 round_half_away(__m512 v) {
  const __m512 t = _mm512_roundscale_ps(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
  const __m512 f = _mm512_sub_ps(v, t);
  const __mmask16 up = _mm512_cmp_ps_mask(_mm512_abs_ps(f), _mm512_set1_ps(0.5f), _CMP_GE_OQ);
  const __m512 one = _mm512_or_ps(_mm512_set1_ps(1.0f), _mm512_and_ps(v, _mm512_set1_ps(-0.0f)));
  return _mm512_mask_add_ps(t, up, t, one);
}

// q within [-127, 127]: a no-op for finite activations (|x| <= amax), but a
// NaN converts to INT32_MIN, and the strip layout's scalar sums of such a
// group would overflow (UB; found by the fuzz target: tests/fuzz/regressions/
// nan-norm-kstrip.gguf).
inline __m512i clamp127(__m512i q) {
  return _mm512_max_epi32(_mm512_min_epi32(q, _mm512_set1_epi32(127)), _mm512_set1_epi32(-127));
}

inline float f16_round(float v) { return _cvtsh_ss(_cvtss_sh(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)); }

// Q8_0 values per 32-block: d = amax / 127, q = roundf(x * (1 / d)); the kernels
// get d rounded to f16 as ggml stores it. kS: sa as Q8_1's f16 s = f16(d Σ q).
template <bool kS>
void quantize_x8_32(const float* x, int64_t n, uint8_t* dst) {
  const X8_32Planes p = x8_32_planes(n);
  int8_t* qs = reinterpret_cast<int8_t*>(dst);
  float* dx = reinterpret_cast<float*>(dst + p.dx);
  float* sa = reinterpret_cast<float*>(dst + p.sa);
  int32_t* bs = reinterpret_cast<int32_t*>(dst + p.bs);
  const int64_t nb = n / 32;
  for (int64_t b = 0; b < nb; ++b) {
    const __m512 v0 = _mm512_loadu_ps(x + 32 * b), v1 = _mm512_loadu_ps(x + 32 * b + 16);
    const float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(v0), _mm512_abs_ps(v1)));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    const __m512 vid = _mm512_set1_ps(id);
    // clamp127: a NaN would make the block sum (bs, the strips' offset term) overflow.
    const __m512i q0 = clamp127(_mm512_cvttps_epi32(round_half_away(_mm512_mul_ps(v0, vid))));
    const __m512i q1 = clamp127(_mm512_cvttps_epi32(round_half_away(_mm512_mul_ps(v1, vid))));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(qs + 32 * b), _mm512_cvtepi32_epi8(q0));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(qs + 32 * b + 16), _mm512_cvtepi32_epi8(q1));
    const int sum = _mm512_reduce_add_epi32(_mm512_add_epi32(q0, q1));
    const float dr = f16_round(d);
    _mm256_storeu_ps(dx + 8 * b, _mm256_set1_ps(dr));
    sa[b] = kS ? f16_round(float(sum) * d) : dr * float(sum);
    bs[b] = sum;
  }
  // Zero the padding: kernels may read a half-used last pair of blocks.
  std::memset(qs + n, 0, p.dx - uint64_t(n));
  std::memset(reinterpret_cast<uint8_t*>(dx + 8 * nb), 0, p.sa - p.dx - uint64_t(nb) * 32);
  std::memset(reinterpret_cast<uint8_t*>(sa + nb), 0, p.bs - p.sa - uint64_t(nb) * 4);
  std::memset(reinterpret_cast<uint8_t*>(bs + nb), 0, p.total - p.bs - uint64_t(nb) * 4);
}

// Q8_K values per 256-block: the first element of largest magnitude, max,
// maps to -127: iscale = -127 / max, q = min(127, nearest-even(iscale x)),
// d = 1 / iscale. X8_K: sf[g] = d * (sum of the 16 q of group g). X8_KS
// (kStrip): bs32 = int16 sums of the 32-groups, nb16 = -32 * the 16-group sums.
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
    __m512 vmax = _mm512_setzero_ps();
    for (int k = 0; k < 16; ++k) vmax = _mm512_max_ps(vmax, _mm512_abs_ps(_mm512_loadu_ps(xb + 16 * k)));
    const float amax = _mm512_reduce_max_ps(vmax);
    if (amax == 0.0f) {
      std::memset(qs + QK_K * b, 0, QK_K);
      dp[b] = 0.0f;
      if constexpr (kStrip) {
        std::memset(bs32 + 8 * b, 0, 16);
        _mm512_storeu_si512(nb16 + 16 * b, _mm512_setzero_si512());
      } else {
        _mm512_storeu_ps(sf + 16 * b, _mm512_setzero_ps());
      }
      continue;
    }
    float max = 0.0f;
    const __m512 va = _mm512_set1_ps(amax);
    for (int k = 0; k < 16; ++k) {
      const __mmask16 m = _mm512_cmp_ps_mask(_mm512_abs_ps(_mm512_loadu_ps(xb + 16 * k)), va, _CMP_EQ_OQ);
      if (m) {
        max = xb[16 * k + __builtin_ctz(m)];
        break;
      }
    }
    const float iscale = -127.0f / max;
    const __m512 vis = _mm512_set1_ps(iscale);
    alignas(64) int32_t sums[16];
    for (int k = 0; k < 16; ++k) {
      const __m512i q = clamp127(_mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(xb + 16 * k), vis)));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(qs + QK_K * b + 16 * k), _mm512_cvtepi32_epi8(q));
      sums[k] = _mm512_reduce_add_epi32(q);
    }
    const float d = 1.0f / iscale;
    dp[b] = d;
    const __m512i s16 = _mm512_load_si512(sums);
    if constexpr (kStrip) {
      for (int j = 0; j < 8; ++j) bs32[8 * b + j] = int16_t(sums[2 * j] + sums[2 * j + 1]);
      _mm512_storeu_si512(nb16 + 16 * b, _mm512_mullo_epi32(s16, _mm512_set1_epi32(-32)));
    } else {
      _mm512_storeu_ps(sf + 16 * b, _mm512_mul_ps(_mm512_cvtepi32_ps(s16), _mm512_set1_ps(d)));
    }
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

}  // namespace avx512

const KernelFamily* family_avx512() {
  static const KernelFamily f = [] {
    KernelFamily k{};
    k.name = "avx512-vnni";
    auto set = [&](WType t, KernelFn fn, ActLayout l) { k.entry[int(t)] = {fn, l}; };
    set(WType::F32, avx512::kernel_f32, ActLayout::F32);
    set(WType::F16, avx512::kernel_f16, ActLayout::F32);
    set(WType::BF16, avx512::kernel_bf16, ActLayout::F32);
    set(WType::Q4_0, avx512::kernel_q4_0, ActLayout::X8_32);
    set(WType::Q4_1, avx512::kernel_q4_1, ActLayout::X8_32S);
    set(WType::Q5_0, avx512::kernel_q5_0, ActLayout::X8_32);
    set(WType::Q5_1, avx512::kernel_q5_1, ActLayout::X8_32S);
    set(WType::Q8_0, avx512::kernel_q8_0, ActLayout::X8_32);
    set(WType::Q2_K, avx512::kernel_q2_k, ActLayout::X8_K);
    set(WType::Q3_K, avx512::kernel_q3_k, ActLayout::X8_K);
    set(WType::Q4_K, avx512::kernel_q4_k, ActLayout::X8_K);
    set(WType::Q5_K, avx512::kernel_q5_k, ActLayout::X8_K);
    set(WType::Q6_K, avx512::kernel_q6_k, ActLayout::X8_K);
    set(WType::Q4_K_S16, avx512::kernel_q4_k_s16, ActLayout::X8_KS);
    set(WType::Q5_K_S16, avx512::kernel_q5_k_s16, ActLayout::X8_KS);
    set(WType::Q6_K_S16, avx512::kernel_q6_k_s16, ActLayout::X8_KS);
    set(WType::Q4_0_S16, avx512::kernel_q4_0_s16, ActLayout::X8_32);
    set(WType::Q4_1_S16, avx512::kernel_q4_1_s16, ActLayout::X8_32S);
    set(WType::Q5_0_S16, avx512::kernel_q5_0_s16, ActLayout::X8_32);
    set(WType::Q5_1_S16, avx512::kernel_q5_1_s16, ActLayout::X8_32S);
    set(WType::Q8_0_S16, avx512::kernel_q8_0_s16, ActLayout::X8_32);
    k.quantize = avx512::quantize;
    return k;
  }();
  return &f;
}

}  // namespace fish::mm

#else
namespace fish::mm {
const KernelFamily* family_avx512() { return nullptr; }
}  // namespace fish::mm
#endif
