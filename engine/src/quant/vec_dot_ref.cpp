// Scalar reference dot products: one weight row · one activation row already in
// vec_dot_type(weight). The arithmetic is ggml's CPU one: per block an exact
// integer sum of q_w · q_a (with the block's integer scales applied inside the
// sum for the K-quants), then one float multiply by the block's float scales,
// accumulated in float across blocks. F32/F16/BF16 multiply in float and sum
// in double. Plain on purpose: every SIMD kernel is tested against this.
#include <cstring>

#include "common/fp16.h"
#include "quant/blocks.h"
#include "quant/k_scales.h"
#include "quant/quant_kernels.h"

namespace fish::qk {
namespace {

// Level of element j (0..31) of a 32-block: low nibble of qs[j] for j < 16,
// high nibble of qs[j - 16] otherwise; Q5's fifth bit is bit j of qh.
inline int nib32(const uint8_t* qs, int j) { return j < 16 ? (qs[j] & 15) : (qs[j - 16] >> 4); }
inline int bit5(const uint8_t* qh, int j) {
  uint32_t h;
  std::memcpy(&h, qh, 4);
  return int((h >> j) & 1u) << 4;
}

float dot_q4_0(int64_t nb, const BlockQ4_0* x, const BlockQ8_0* y) {
  float sum = 0.0f;
  for (int64_t i = 0; i < nb; ++i) {
    int isum = 0;
    for (int j = 0; j < 32; ++j) isum += (nib32(x[i].qs, j) - 8) * y[i].qs[j];
    sum += float(isum) * fp16_to_fp32(x[i].d) * fp16_to_fp32(y[i].d);
  }
  return sum;
}

// Q4_1 / Q5_1: Σ (d_x q + m_x) d_y a = d_x d_y Σ q a + m_x (d_y Σ a), and
// d_y Σ a is the activation block's stored s.
float dot_q4_1(int64_t nb, const BlockQ4_1* x, const BlockQ8_1* y) {
  float sum = 0.0f;
  for (int64_t i = 0; i < nb; ++i) {
    int isum = 0;
    for (int j = 0; j < 32; ++j) isum += nib32(x[i].qs, j) * y[i].qs[j];
    sum += fp16_to_fp32(x[i].d) * fp16_to_fp32(y[i].d) * float(isum) +
           fp16_to_fp32(x[i].m) * fp16_to_fp32(y[i].s);
  }
  return sum;
}

float dot_q5_0(int64_t nb, const BlockQ5_0* x, const BlockQ8_0* y) {
  float sum = 0.0f;
  for (int64_t i = 0; i < nb; ++i) {
    int isum = 0;
    for (int j = 0; j < 32; ++j) isum += ((nib32(x[i].qs, j) | bit5(x[i].qh, j)) - 16) * y[i].qs[j];
    sum += float(isum) * fp16_to_fp32(x[i].d) * fp16_to_fp32(y[i].d);
  }
  return sum;
}

float dot_q5_1(int64_t nb, const BlockQ5_1* x, const BlockQ8_1* y) {
  float sum = 0.0f;
  for (int64_t i = 0; i < nb; ++i) {
    int isum = 0;
    for (int j = 0; j < 32; ++j) isum += (nib32(x[i].qs, j) | bit5(x[i].qh, j)) * y[i].qs[j];
    sum += fp16_to_fp32(x[i].d) * fp16_to_fp32(y[i].d) * float(isum) +
           fp16_to_fp32(x[i].m) * fp16_to_fp32(y[i].s);
  }
  return sum;
}

float dot_q8_0(int64_t nb, const BlockQ8_0* x, const BlockQ8_0* y) {
  float sum = 0.0f;
  for (int64_t i = 0; i < nb; ++i) {
    int isum = 0;
    for (int j = 0; j < 32; ++j) isum += x[i].qs[j] * y[i].qs[j];
    sum += float(isum) * (fp16_to_fp32(x[i].d) * fp16_to_fp32(y[i].d));
  }
  return sum;
}

// Q2_K: d·Σ_g sc_g Σ q a − dmin·Σ_g m_g·bsum_g (groups of 16).
float dot_q2_k(int64_t nb, const BlockQ2_K* x, const BlockQ8_K* y) {
  float sum = 0.0f;
  for (int64_t i = 0; i < nb; ++i) {
    int isum = 0, msum = 0;
    for (int g = 0; g < 16; ++g) {
      const int half = g / 8, s = (g / 2) % 4, l0 = (g % 2) * 16;
      const uint8_t* q = x[i].qs + 32 * half + l0;
      const int8_t* a = y[i].qs + 16 * g;
      int gs = 0;
      for (int l = 0; l < 16; ++l) gs += ((q[l] >> (2 * s)) & 3) * a[l];
      isum += (x[i].scales[g] & 15) * gs;
      msum += (x[i].scales[g] >> 4) * y[i].bsums[g];
    }
    sum += y[i].d * fp16_to_fp32(x[i].d) * float(isum) - y[i].d * fp16_to_fp32(x[i].dmin) * float(msum);
  }
  return sum;
}

// Q3_K: d·Σ_g sc_g Σ (q − 4·!hbit) a.
float dot_q3_k(int64_t nb, const BlockQ3_K* x, const BlockQ8_K* y) {
  float sum = 0.0f;
  for (int64_t i = 0; i < nb; ++i) {
    int8_t sc[16];
    unpack_scales_q3_k(x[i].scales, sc);
    int isum = 0;
    for (int g = 0; g < 16; ++g) {
      const int half = g / 8, s = (g / 2) % 4, l0 = (g % 2) * 16;
      const uint8_t* q = x[i].qs + 32 * half + l0;
      const uint8_t* hm = x[i].hmask + l0;
      const int8_t* a = y[i].qs + 16 * g;
      int gs = 0;
      for (int l = 0; l < 16; ++l) {
        const int v = int((q[l] >> (2 * s)) & 3) - (((hm[l] >> (4 * half + s)) & 1) ? 0 : 4);
        gs += v * a[l];
      }
      isum += sc[g] * gs;
    }
    sum += fp16_to_fp32(x[i].d) * y[i].d * float(isum);
  }
  return sum;
}

// Q4_K / Q5_K: d·Σ_j sc_j Σ q a − dmin·Σ_j m_j (bsum_2j + bsum_2j+1) (groups of 32).
template <bool kFive, typename Block>
float dot_q45_k(int64_t nb, const Block* x, const BlockQ8_K* y) {
  float sum = 0.0f;
  for (int64_t i = 0; i < nb; ++i) {
    uint8_t sc[8], m[8];
    unpack_scale_min_k4(x[i].scales, sc, m);
    int isum = 0, msum = 0;
    for (int j = 0; j < 8; ++j) {
      const int c = j / 2, hi = j % 2;  // chunk of 64, low/high nibble
      const uint8_t* q = x[i].qs + 32 * c;
      const int8_t* a = y[i].qs + 32 * j;
      int gs = 0;
      for (int l = 0; l < 32; ++l) {
        int v = hi ? (q[l] >> 4) : (q[l] & 15);
        if constexpr (kFive) v |= ((x[i].qh[l] >> j) & 1) << 4;
        gs += v * a[l];
      }
      isum += sc[j] * gs;
      msum += m[j] * (y[i].bsums[2 * j] + y[i].bsums[2 * j + 1]);
    }
    sum += fp16_to_fp32(x[i].d) * y[i].d * float(isum) - fp16_to_fp32(x[i].dmin) * y[i].d * float(msum);
  }
  return sum;
}

// FQ3 (fish's 3-bit device layout): as Q4_K with codes 0..7 from the A/B/C words.
float dot_fq3(int64_t nb, const BlockFQ3* x, const BlockQ8_K* y) {
  float sum = 0.0f;
  for (int64_t i = 0; i < nb; ++i) {
    uint8_t sc[8], m[8];
    unpack_scale_min_k4(x[i].scales, sc, m);
    int isum = 0, msum = 0;
    for (int j = 0; j < 8; ++j) {
      uint8_t q[FQ3_GROUP];
      fq3_group_codes(x[i].qs + 12 * j, q);
      const int8_t* a = y[i].qs + 32 * j;
      int gs = 0;
      for (int l = 0; l < 32; ++l) gs += int(q[l]) * a[l];
      isum += sc[j] * gs;
      msum += m[j] * (y[i].bsums[2 * j] + y[i].bsums[2 * j + 1]);
    }
    sum += fp16_to_fp32(x[i].d) * y[i].d * float(isum) - fp16_to_fp32(x[i].dmin) * y[i].d * float(msum);
  }
  return sum;
}

// Q6_K: d·Σ_g sc_g Σ (q − 32) a (groups of 16).
float dot_q6_k(int64_t nb, const BlockQ6_K* x, const BlockQ8_K* y) {
  float sum = 0.0f;
  for (int64_t i = 0; i < nb; ++i) {
    int isum = 0;
    for (int h = 0; h < 2; ++h) {
      for (int r = 0; r < 4; ++r) {
        const uint8_t* lo = x[i].ql + 64 * h + 32 * (r & 1);
        const uint8_t* qh = x[i].qh + 32 * h;
        const int8_t* a = y[i].qs + 128 * h + 32 * r;
        int gs[2] = {0, 0};
        for (int l = 0; l < 32; ++l) {
          const int q = ((lo[l] >> (4 * (r >> 1))) & 15) | (((qh[l] >> (2 * r)) & 3) << 4);
          gs[l / 16] += (q - 32) * a[l];
        }
        isum += x[i].scales[8 * h + 2 * r] * gs[0] + x[i].scales[8 * h + 2 * r + 1] * gs[1];
      }
    }
    sum += fp16_to_fp32(x[i].d) * y[i].d * float(isum);
  }
  return sum;
}

float dot_q8_k(int64_t nb, const BlockQ8_K* x, const BlockQ8_K* y) {
  float sum = 0.0f;
  for (int64_t i = 0; i < nb; ++i) {
    int isum = 0;
    for (int j = 0; j < QK_K; ++j) isum += x[i].qs[j] * y[i].qs[j];
    sum += x[i].d * y[i].d * float(isum);
  }
  return sum;
}

template <typename Conv>
float dot_float(int64_t n, const uint16_t* x, const uint16_t* y, Conv conv) {
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += double(conv(x[i]) * conv(y[i]));
  return float(sum);
}

}  // namespace

// Called by quant.cpp once the type and length are validated; n in elements.
float vec_dot_ref_unchecked(GgmlType t, int64_t n, const void* w, const void* a) {
  const int64_t nb32 = n / 32, nbk = n / QK_K;
  switch (t) {
    case GgmlType::F32: {
      const float* x = static_cast<const float*>(w);
      const float* y = static_cast<const float*>(a);
      double sum = 0.0;
      for (int64_t i = 0; i < n; ++i) sum += double(x[i] * y[i]);
      return float(sum);
    }
    case GgmlType::F16:
      return dot_float(n, static_cast<const uint16_t*>(w), static_cast<const uint16_t*>(a), fp16_to_fp32);
    case GgmlType::BF16:
      return dot_float(n, static_cast<const uint16_t*>(w), static_cast<const uint16_t*>(a), bf16_to_fp32);
    case GgmlType::Q4_0:
      return dot_q4_0(nb32, static_cast<const BlockQ4_0*>(w), static_cast<const BlockQ8_0*>(a));
    case GgmlType::Q4_1:
      return dot_q4_1(nb32, static_cast<const BlockQ4_1*>(w), static_cast<const BlockQ8_1*>(a));
    case GgmlType::Q5_0:
      return dot_q5_0(nb32, static_cast<const BlockQ5_0*>(w), static_cast<const BlockQ8_0*>(a));
    case GgmlType::Q5_1:
      return dot_q5_1(nb32, static_cast<const BlockQ5_1*>(w), static_cast<const BlockQ8_1*>(a));
    case GgmlType::Q8_0:
      return dot_q8_0(nb32, static_cast<const BlockQ8_0*>(w), static_cast<const BlockQ8_0*>(a));
    case GgmlType::Q2_K:
      return dot_q2_k(nbk, static_cast<const BlockQ2_K*>(w), static_cast<const BlockQ8_K*>(a));
    case GgmlType::Q3_K:
      return dot_q3_k(nbk, static_cast<const BlockQ3_K*>(w), static_cast<const BlockQ8_K*>(a));
    case GgmlType::Q4_K:
      return dot_q45_k<false>(nbk, static_cast<const BlockQ4_K*>(w), static_cast<const BlockQ8_K*>(a));
    case GgmlType::Q5_K:
      return dot_q45_k<true>(nbk, static_cast<const BlockQ5_K*>(w), static_cast<const BlockQ8_K*>(a));
    case GgmlType::Q6_K:
      return dot_q6_k(nbk, static_cast<const BlockQ6_K*>(w), static_cast<const BlockQ8_K*>(a));
    case GgmlType::Q8_K:
      return dot_q8_k(nbk, static_cast<const BlockQ8_K*>(w), static_cast<const BlockQ8_K*>(a));
    case GgmlType::FQ3:
      return dot_fq3(nbk, static_cast<const BlockFQ3*>(w), static_cast<const BlockQ8_K*>(a));
    default:
      return 0.0f;  // unreachable: quant.cpp rejects every other type first
  }
}

}  // namespace fish::qk
