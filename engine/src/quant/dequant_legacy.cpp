// The 32-element block formats -> f32 (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q8_1).
// Element order inside a block: byte j of qs holds element j in its low nibble
// and element j + 16 in its high nibble; Q5's fifth bit of element j is bit j of
// the little-endian u32 qh.
#include <cstring>

#include "common/fp16.h"
#include "quant/blocks.h"
#include "quant/quant_kernels.h"

namespace fish::qk {

void dequant_q4_0(const void* src, float* __restrict dst, int64_t nb) {
  const BlockQ4_0* b = static_cast<const BlockQ4_0*>(src);
  for (int64_t i = 0; i < nb; ++i, dst += QK4_0) {
    const float d = fp16_to_fp32(b[i].d);
    for (int j = 0; j < 16; ++j) {
      dst[j] = float(int(b[i].qs[j] & 15) - 8) * d;
      dst[j + 16] = float(int(b[i].qs[j] >> 4) - 8) * d;
    }
  }
}

void dequant_q4_1(const void* src, float* __restrict dst, int64_t nb) {
  const BlockQ4_1* b = static_cast<const BlockQ4_1*>(src);
  for (int64_t i = 0; i < nb; ++i, dst += QK4_1) {
    const float d = fp16_to_fp32(b[i].d);
    const float m = fp16_to_fp32(b[i].m);
    for (int j = 0; j < 16; ++j) {
      dst[j] = float(b[i].qs[j] & 15) * d + m;
      dst[j + 16] = float(b[i].qs[j] >> 4) * d + m;
    }
  }
}

void dequant_q5_0(const void* src, float* __restrict dst, int64_t nb) {
  const BlockQ5_0* b = static_cast<const BlockQ5_0*>(src);
  for (int64_t i = 0; i < nb; ++i, dst += QK5_0) {
    const float d = fp16_to_fp32(b[i].d);
    uint32_t qh;
    std::memcpy(&qh, b[i].qh, 4);
    for (int j = 0; j < 16; ++j) {
      const int lo = (b[i].qs[j] & 15) | int(((qh >> j) & 1u) << 4);
      const int hi = (b[i].qs[j] >> 4) | int(((qh >> (j + 16)) & 1u) << 4);
      dst[j] = float(lo - 16) * d;
      dst[j + 16] = float(hi - 16) * d;
    }
  }
}

void dequant_q5_1(const void* src, float* __restrict dst, int64_t nb) {
  const BlockQ5_1* b = static_cast<const BlockQ5_1*>(src);
  for (int64_t i = 0; i < nb; ++i, dst += QK5_1) {
    const float d = fp16_to_fp32(b[i].d);
    const float m = fp16_to_fp32(b[i].m);
    uint32_t qh;
    std::memcpy(&qh, b[i].qh, 4);
    for (int j = 0; j < 16; ++j) {
      const int lo = (b[i].qs[j] & 15) | int(((qh >> j) & 1u) << 4);
      const int hi = (b[i].qs[j] >> 4) | int(((qh >> (j + 16)) & 1u) << 4);
      dst[j] = float(lo) * d + m;
      dst[j + 16] = float(hi) * d + m;
    }
  }
}

void dequant_q8_0(const void* src, float* __restrict dst, int64_t nb) {
  const BlockQ8_0* b = static_cast<const BlockQ8_0*>(src);
  for (int64_t i = 0; i < nb; ++i, dst += QK8_0) {
    const float d = fp16_to_fp32(b[i].d);
    for (int j = 0; j < QK8_0; ++j) dst[j] = float(b[i].qs[j]) * d;
  }
}

// Q8_1 is an activation format; decoding it serves tests and debugging.
void dequant_q8_1(const void* src, float* __restrict dst, int64_t nb) {
  const BlockQ8_1* b = static_cast<const BlockQ8_1*>(src);
  for (int64_t i = 0; i < nb; ++i, dst += QK8_1) {
    const float d = fp16_to_fp32(b[i].d);
    for (int j = 0; j < QK8_1; ++j) dst[j] = float(b[i].qs[j]) * d;
  }
}

}  // namespace fish::qk
