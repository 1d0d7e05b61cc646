// F32 / F16 / BF16 rows <-> f32. These sit on the hot path of F16 models and of
// GPU plugins uploading through the host services, so the half conversion is
// branch-free (a select instead of fp16.h's branches) and the loops vectorise
// with baseline SSE2.
#include <cstring>

#include "common/fp16.h"
#include "quant/quant_kernels.h"

namespace fish::qk {

void dequant_f32(const void* src, float* dst, int64_t n) {
  std::memcpy(dst, src, size_t(n) * sizeof(float));
}

// Half h = sign | e (5 bits) | m (10 bits). Placing e|m at bits 13..27 of a
// float gives 2^(e-127) * 1.m for e > 0 and m * 2^-136 for e == 0 (a float
// subnormal); one multiply by 2^112 turns both into the half's value exactly.
// Only e == 31 (inf/NaN) needs a different answer: exponent all ones.
void dequant_f16(const void* src, float* __restrict dst, int64_t n) {
  const uint16_t* __restrict h = static_cast<const uint16_t*>(src);
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t em = h[i] & 0x7fffu;
    const uint32_t sign = uint32_t(h[i] & 0x8000u) << 16;
    const float scaled = fp32_from_bits(em << 13) * 0x1p112f;
    const uint32_t finite = fp32_to_bits(scaled);
    const uint32_t special = 0x7f800000u | (em << 13);
    dst[i] = fp32_from_bits(sign | (em >= 0x7c00u ? special : finite));
  }
}

void dequant_bf16(const void* src, float* __restrict dst, int64_t n) {
  const uint16_t* __restrict h = static_cast<const uint16_t*>(src);
  for (int64_t i = 0; i < n; ++i) dst[i] = fp32_from_bits(uint32_t(h[i]) << 16);
}

void quantize_f32(const float* src, void* dst, int64_t n) {
  std::memcpy(dst, src, size_t(n) * sizeof(float));
}

void quantize_f16(const float* __restrict src, void* dst, int64_t n) {
  uint16_t* __restrict h = static_cast<uint16_t*>(dst);
  for (int64_t i = 0; i < n; ++i) h[i] = fp32_to_fp16(src[i]);
}

void quantize_bf16(const float* __restrict src, void* dst, int64_t n) {
  uint16_t* __restrict h = static_cast<uint16_t*>(dst);
  for (int64_t i = 0; i < n; ++i) h[i] = fp32_to_bf16(src[i]);
}

}  // namespace fish::qk
