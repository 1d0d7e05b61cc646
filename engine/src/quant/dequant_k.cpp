// The 256-element K-quant super-blocks -> f32 (Q2_K, Q3_K, Q4_K, Q5_K, Q6_K,
// Q8_K). Where the low bits of element e live (facts of ggml's layout):
//  - Q2_K / Q3_K: the 256 values are two halves of 128; in half h, 2-bit field
//    s (bits 2s..2s+1) of qs[32h + l] is element 128h + 32s + l (l < 32). Q3_K's
//    third bit of element 128h + 32s + l is bit (4h + s) of hmask[l]; a clear bit
//    means "subtract 4". Scales cover 16 elements each (16 per super-block).
//  - Q4_K / Q5_K: four chunks of 64; qs[32c + l] holds element 64c + l in its low
//    nibble and 64c + 32 + l in its high nibble. Q5_K's fifth bit of element
//    64c + l is bit 2c of qh[l], of element 64c + 32 + l bit 2c + 1. One
//    scale/min pair per 32 elements.
//  - Q6_K: two halves of 128; in half h, ql[64h + l] (l < 64) holds element
//    128h + l (low nibble) and 128h + 64 + l (high nibble); qh[32h + l] (l < 32)
//    holds the top two bits of elements 128h + l, +32, +64, +96 at bits 0, 2, 4,
//    6. One int8 scale per 16 elements; values are d * scale * (q - 32).
#include "common/fp16.h"
#include "quant/blocks.h"
#include "quant/k_scales.h"
#include "quant/quant_kernels.h"

namespace fish::qk {

void dequant_q2_k(const void* src, float* __restrict dst, int64_t nb) {
  const BlockQ2_K* b = static_cast<const BlockQ2_K*>(src);
  for (int64_t i = 0; i < nb; ++i) {
    const float d = fp16_to_fp32(b[i].d);
    const float dmin = fp16_to_fp32(b[i].dmin);
    for (int g = 0; g < 16; ++g) {  // group g: elements 16g .. 16g+15
      const int half = g / 8, s = (g / 2) % 4, l0 = (g % 2) * 16;
      const float dl = d * float(b[i].scales[g] & 15);
      const float ml = dmin * float(b[i].scales[g] >> 4);
      const uint8_t* q = b[i].qs + 32 * half + l0;
      for (int l = 0; l < 16; ++l) dst[l] = dl * float((q[l] >> (2 * s)) & 3) - ml;
      dst += 16;
    }
  }
}

void dequant_q3_k(const void* src, float* __restrict dst, int64_t nb) {
  const BlockQ3_K* b = static_cast<const BlockQ3_K*>(src);
  for (int64_t i = 0; i < nb; ++i) {
    const float d = fp16_to_fp32(b[i].d);
    int8_t sc[16];
    unpack_scales_q3_k(b[i].scales, sc);
    for (int g = 0; g < 16; ++g) {
      const int half = g / 8, s = (g / 2) % 4, l0 = (g % 2) * 16;
      const float dl = d * float(sc[g]);
      const uint8_t* q = b[i].qs + 32 * half + l0;
      const uint8_t* hm = b[i].hmask + l0;
      const int hbit = 4 * half + s;
      for (int l = 0; l < 16; ++l) {
        const int v = int((q[l] >> (2 * s)) & 3) - (((hm[l] >> hbit) & 1) ? 0 : 4);
        dst[l] = dl * float(v);
      }
      dst += 16;
    }
  }
}

void dequant_q4_k(const void* src, float* __restrict dst, int64_t nb) {
  const BlockQ4_K* b = static_cast<const BlockQ4_K*>(src);
  for (int64_t i = 0; i < nb; ++i) {
    const float d = fp16_to_fp32(b[i].d);
    const float dmin = fp16_to_fp32(b[i].dmin);
    uint8_t sc[8], m[8];
    unpack_scale_min_k4(b[i].scales, sc, m);
    for (int c = 0; c < 4; ++c) {
      const uint8_t* q = b[i].qs + 32 * c;
      const float d1 = d * float(sc[2 * c]), m1 = dmin * float(m[2 * c]);
      const float d2 = d * float(sc[2 * c + 1]), m2 = dmin * float(m[2 * c + 1]);
      for (int l = 0; l < 32; ++l) dst[l] = d1 * float(q[l] & 15) - m1;
      for (int l = 0; l < 32; ++l) dst[32 + l] = d2 * float(q[l] >> 4) - m2;
      dst += 64;
    }
  }
}

void dequant_q5_k(const void* src, float* __restrict dst, int64_t nb) {
  const BlockQ5_K* b = static_cast<const BlockQ5_K*>(src);
  for (int64_t i = 0; i < nb; ++i) {
    const float d = fp16_to_fp32(b[i].d);
    const float dmin = fp16_to_fp32(b[i].dmin);
    uint8_t sc[8], m[8];
    unpack_scale_min_k4(b[i].scales, sc, m);
    const uint8_t* qh = b[i].qh;
    for (int c = 0; c < 4; ++c) {
      const uint8_t* q = b[i].qs + 32 * c;
      const float d1 = d * float(sc[2 * c]), m1 = dmin * float(m[2 * c]);
      const float d2 = d * float(sc[2 * c + 1]), m2 = dmin * float(m[2 * c + 1]);
      const int sh1 = 2 * c, sh2 = 2 * c + 1;
      for (int l = 0; l < 32; ++l) dst[l] = d1 * float((q[l] & 15) | (((qh[l] >> sh1) & 1) << 4)) - m1;
      for (int l = 0; l < 32; ++l) dst[32 + l] = d2 * float((q[l] >> 4) | (((qh[l] >> sh2) & 1) << 4)) - m2;
      dst += 64;
    }
  }
}

void dequant_q6_k(const void* src, float* __restrict dst, int64_t nb) {
  const BlockQ6_K* b = static_cast<const BlockQ6_K*>(src);
  for (int64_t i = 0; i < nb; ++i) {
    const float d = fp16_to_fp32(b[i].d);
    for (int h = 0; h < 2; ++h) {
      const uint8_t* ql = b[i].ql + 64 * h;
      const uint8_t* qh = b[i].qh + 32 * h;
      const int8_t* sc = b[i].scales + 8 * h;
      // quarter r (0..3) of this half: elements 128h + 32r + l, l < 32;
      // low nibble from ql[l + 32 (r & 1)] (>> 4 when r >= 2), top bits at 2r.
      for (int r = 0; r < 4; ++r) {
        const uint8_t* lo = ql + 32 * (r & 1);
        const int nshift = (r >> 1) * 4;
        const float d0 = d * float(sc[2 * r]), d1 = d * float(sc[2 * r + 1]);
        for (int l = 0; l < 32; ++l) {
          const int q = ((lo[l] >> nshift) & 15) | (((qh[l] >> (2 * r)) & 3) << 4);
          dst[32 * r + l] = (l < 16 ? d0 : d1) * float(q - 32);
        }
      }
      dst += 128;
    }
  }
}

void dequant_q8_k(const void* src, float* __restrict dst, int64_t nb) {
  const BlockQ8_K* b = static_cast<const BlockQ8_K*>(src);
  for (int64_t i = 0; i < nb; ++i, dst += QK_K) {
    const float d = b[i].d;
    for (int j = 0; j < QK_K; ++j) dst[j] = d * float(b[i].qs[j]);
  }
}

}  // namespace fish::qk
