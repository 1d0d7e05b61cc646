// f32 -> Q4_0 (weights) and the int8 activation formats Q8_0, Q8_1, Q8_K.
//
// The activation formats round exactly as ggml's reference quantisers do, so
// that fish's dot products see the same integers as llama.cpp's:
//  - Q8_0 / Q8_1: d = amax / 127 (f32), id = 1 / d (0 when d == 0),
//    q = roundf(x * id) (ties away from zero); d is stored as f16 afterwards.
//    Q8_1 also stores s = f16(d * Σ q) (d the f32 value, not the f16 one).
//  - Q8_K: `max` is the element of largest magnitude with its sign;
//    iscale = -127 / max, q = min(127, nearest-even(iscale * x)),
//    d = 1 / iscale (f32, so negative when max > 0), bsums[g] = Σ of q over the
//    16 elements of group g.
//  - Q4_0: d = max / -8 with `max` signed as for Q8_K, q = min(15, trunc(x / d
//    + 8.5)); the largest-magnitude element lands on q = 0 exactly.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "common/fp16.h"
#include "quant/blocks.h"
#include "quant/quant_kernels.h"
#include "quant/rounding.h"

namespace fish::qk {
namespace {

// n is a multiple of 8; eight independent lanes so the loop becomes SIMD.
// NaN never wins a comparison, so it is ignored.
float abs_max(const float* x, int n) {
  float al[8] = {};
  for (int j = 0; j < n; j += 8) {
    for (int k = 0; k < 8; ++k) {
      const float a = std::fabs(x[j + k]);
      al[k] = a > al[k] ? a : al[k];
    }
  }
  float amax = 0.0f;
  for (int k = 0; k < 8; ++k) amax = al[k] > amax ? al[k] : amax;
  return amax;
}

// The element of largest magnitude, with its sign: the first one on ties, as
// a scan keeping the first strict maximum finds. The largest and smallest
// elements decide it unless they tie in magnitude (rare, or all zero): only
// then is the row scanned. 0 when every element is 0 (or NaN).
// n is a multiple of 8; eight independent lanes so the loop becomes SIMD.
float signed_abs_max(const float* x, int n) {
  float hl[8] = {}, ll[8] = {};
  for (int j = 0; j < n; j += 8) {
    for (int k = 0; k < 8; ++k) {
      hl[k] = x[j + k] > hl[k] ? x[j + k] : hl[k];
      ll[k] = x[j + k] < ll[k] ? x[j + k] : ll[k];
    }
  }
  float hi = 0.0f, lo = 0.0f;
  for (int k = 0; k < 8; ++k) {
    hi = hl[k] > hi ? hl[k] : hi;
    lo = ll[k] < lo ? ll[k] : lo;
  }
  if (hi != -lo) return hi > -lo ? hi : lo;
  for (int j = 0; j < n; ++j)
    if (std::fabs(x[j]) == hi) return x[j];
  return 0.0f;
}

// trunc(v + 8.5) capped at 15. v + 8.5 lies in [0.5, 16.5] for finite input;
// the clamp keeps the cast defined for anything else (NaN -> 0).
int q4_0_level(float v) {
  float t = v + 8.5f;
  if (!(t >= 0.0f)) t = 0.0f;
  if (!(t <= 15.0f)) t = 15.0f;
  return int(t);
}

}  // namespace

void quantize_q4_0(const float* __restrict x, void* dst, int64_t nb) {
  BlockQ4_0* b = static_cast<BlockQ4_0*>(dst);
  for (int64_t i = 0; i < nb; ++i, x += QK4_0) {
    const float d = signed_abs_max(x, QK4_0) / -8.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    b[i].d = fp32_to_fp16(d);
    for (int j = 0; j < 16; ++j) {
      b[i].qs[j] = uint8_t(q4_0_level(x[j] * id) | (q4_0_level(x[j + 16] * id) << 4));
    }
  }
}

void quantize_q8_0(const float* __restrict x, void* dst, int64_t nb) {
  BlockQ8_0* b = static_cast<BlockQ8_0*>(dst);
  for (int64_t i = 0; i < nb; ++i, x += QK8_0) {
    const float d = abs_max(x, QK8_0) / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    b[i].d = fp32_to_fp16(d);
    for (int j = 0; j < QK8_0; ++j) b[i].qs[j] = int8_t(round_half_away(x[j] * id));
  }
}

void quantize_q8_1(const float* __restrict x, void* dst, int64_t nb) {
  BlockQ8_1* b = static_cast<BlockQ8_1*>(dst);
  for (int64_t i = 0; i < nb; ++i, x += QK8_1) {
    const float d = abs_max(x, QK8_1) / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    int sum = 0;
    for (int j = 0; j < QK8_1; ++j) {
      const int q = round_half_away(x[j] * id);
      b[i].qs[j] = int8_t(q);
      sum += int8_t(q);
    }
    b[i].d = fp32_to_fp16(d);
    b[i].s = fp32_to_fp16(float(sum) * d);
  }
}

void quantize_q8_k(const float* __restrict x, void* dst, int64_t nb) {
  BlockQ8_K* b = static_cast<BlockQ8_K*>(dst);
  for (int64_t i = 0; i < nb; ++i, x += QK_K) {
    const float max = signed_abs_max(x, QK_K);
    if (max == 0.0f) {
      std::memset(&b[i], 0, sizeof(BlockQ8_K));
      continue;
    }
    const float iscale = -127.0f / max;
    for (int j = 0; j < QK_K; ++j) b[i].qs[j] = int8_t(std::min(127, round_half_even(iscale * x[j])));
    for (int g = 0; g < QK_K / 16; ++g) {
      int sum = 0;
      for (int l = 0; l < 16; ++l) sum += b[i].qs[16 * g + l];
      b[i].bsums[g] = int16_t(sum);
    }
    b[i].d = 1.0f / iscale;
  }
}

}  // namespace fish::qk
