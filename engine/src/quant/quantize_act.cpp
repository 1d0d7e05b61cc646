// Q8_0 / Q8_1 activations the way llama.cpp's x86 CPU path quantises them at
// run time: d = amax/127 stored as f16, values multiplied by 127/amax (not by
// 1/d) and rounded to nearest, ties to even. The reference quantisers in
// quantize_legacy.cpp (1/d and roundf) remain for weights.
#include "quant/blocks.h"
#include "quant/quant.h"
#include "quant/rounding.h"
#include "common/fp16.h"

#include <cmath>

namespace fish {

namespace {

inline float block_amax(const float* x, int n) {
  float m = 0.0f;
  for (int j = 0; j < n; ++j) m = std::fmax(m, std::fabs(x[j]));
  return m;
}

void act_q8_0(const float* __restrict x, void* dst, int64_t n) {
  BlockQ8_0* b = static_cast<BlockQ8_0*>(dst);
  for (int64_t i = 0; i < n / QK8_0; ++i, x += QK8_0) {
    const float amax = block_amax(x, QK8_0);
    const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
    b[i].d = fp32_to_fp16(amax / 127.0f);
    for (int j = 0; j < QK8_0; ++j) b[i].qs[j] = int8_t(round_half_even(x[j] * id));
  }
}

void act_q8_1(const float* __restrict x, void* dst, int64_t n) {
  BlockQ8_1* b = static_cast<BlockQ8_1*>(dst);
  for (int64_t i = 0; i < n / QK8_1; ++i, x += QK8_1) {
    const float amax = block_amax(x, QK8_1);
    const float d = amax / 127.0f;
    const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
    int sum = 0;
    for (int j = 0; j < QK8_1; ++j) {
      const int q = round_half_even(x[j] * id);
      b[i].qs[j] = int8_t(q);
      sum += q;
    }
    b[i].d = fp32_to_fp16(d);
    b[i].s = fp32_to_fp16(d * float(sum));
  }
}

}  // namespace

QuantizeRowFn quantize_act_row_fn(GgmlType t) {
  switch (t) {
    case GgmlType::Q8_0: return &act_q8_0;
    case GgmlType::Q8_1: return &act_q8_1;
    default: return quantize_row_fn(t);
  }
}

}  // namespace fish
