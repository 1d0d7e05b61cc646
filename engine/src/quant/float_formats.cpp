// F32 / F16 / BF16 rows <-> f32. These sit on the hot path of F16 models and of
// GPU plugins uploading through the host services, so the half conversions are
// branch-free (selects instead of fp16.h's branches) and the loops vectorise
// with baseline SSE2.
#include <cstring>

#include "common/fp16.h"
#include "quant/quant_kernels.h"

namespace fish::qk {

void dequant_f32(const void* src, float* dst, int64_t n) {
  std::memcpy(dst, src, size_t(n) * sizeof(float));
}

namespace {

// All-ones when c, else 0: selects written as masks, which the vectoriser
// takes (a ?: between two computed values became a branch).
inline uint32_t mask_if(bool c) { return 0u - uint32_t(c); }
inline uint32_t select(uint32_t m, uint32_t a, uint32_t b) { return (a & m) | (b & ~m); }

// f32 -> half bits, round to nearest even, branch-free (equal to fp16.h's
// fp32_to_fp16 for every input; tested).
inline uint16_t half_bits(float f) {
  const uint32_t x = fp32_to_bits(f);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t a = x & 0x7fffffffu;
  // Normal halves (|f| in [2^-14, 65536)): re-bias the exponent from 127 to
  // 15 and round away the 13 low mantissa bits to nearest even; a carry out
  // of the mantissa bumps the exponent, up to 0x7c00 (inf) from 65520 on.
  const uint32_t normal = (a - (112u << 23) + 0xfffu + ((a >> 13) & 1u)) >> 13;
  // Subnormal halves (|f| < 2^-14): in 0.5 + |f| the float's last mantissa
  // bit is worth 2^-24, the half subnormal step, so the FPU does the rounding
  // and the low bits are the half's mantissa (0x400 if it rounds up to 2^-14).
  const uint32_t sub = fp32_to_bits(fp32_from_bits(a) + 0.5f) - 0x3f000000u;
  const uint32_t special = select(mask_if(a > 0x7f800000u), 0x7e00u, 0x7c00u);  // NaN (quiet) / inf
  uint32_t r = select(mask_if(a < 0x38800000u), sub, normal);
  r = select(mask_if(a >= 0x47800000u), special, r);
  return uint16_t(sign | r);
}

}  // namespace

// Half h = sign | e (5 bits) | m (10 bits). Placing e|m at bits 13..27 of a
// float gives 2^(e-127) * 1.m for e > 0 and m * 2^-136 for e == 0 (a float
// subnormal); one multiply by 2^112 turns both into the half's value exactly.
// Only e == 31 (inf/NaN) needs a different answer: exponent all ones.
void dequant_f16(const void* src, float* __restrict dst, int64_t n) {
  const uint16_t* __restrict h = static_cast<const uint16_t*>(src);
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t em = h[i] & 0x7fffu;
    const uint32_t sign = uint32_t(h[i] & 0x8000u) << 16;
    const uint32_t finite = fp32_to_bits(fp32_from_bits(em << 13) * 0x1p112f);
    const uint32_t special = 0x7f800000u | (em << 13);
    dst[i] = fp32_from_bits(sign | select(mask_if(em >= 0x7c00u), special, finite));
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
  for (int64_t i = 0; i < n; ++i) h[i] = half_bits(src[i]);
}

void quantize_bf16(const float* __restrict src, void* dst, int64_t n) {
  uint16_t* __restrict h = static_cast<uint16_t*>(dst);
  for (int64_t i = 0; i < n; ++i) h[i] = fp32_to_bf16(src[i]);
}

}  // namespace fish::qk
