// The affine K super-block fit (see affine_block.h); Q4_K, Q5_K (quantize_k.cpp)
// and FQ3 (fq3.cpp) pack its levels each in their own bit layout.
#include "quant/affine_block.h"

#include <algorithm>
#include <cmath>

#include "common/fp16.h"
#include "quant/k_scales.h"
#include "quant/rounding.h"

namespace fish::qk {
namespace {

constexpr int kGroup = 32;
constexpr int kGroups = QK_K / kGroup;  // 8

int clampi(int v, int lo, int hi) { return v < lo ? lo : (v > hi ? hi : v); }

// Error weights of a group: rms + |x| (large weights matter more to a matmul
// than small ones, without letting the largest dominate), or all 1.
void group_weights(const float* x, bool weighted, float* w) {
  if (!weighted) {
    std::fill(w, w + kGroup, 1.0f);
    return;
  }
  float sum_x2 = 0.0f;
  for (int i = 0; i < kGroup; ++i) sum_x2 += x[i] * x[i];
  const float rms = std::sqrt(sum_x2 / kGroup);
  for (int i = 0; i < kGroup; ++i) w[i] = rms + std::fabs(x[i]);
}

// Levels of x on the stored grid d·sc·q − dmin·m (nearest, clamped to 0..nmax),
// computed with the decoder's f32 products.
void round_to_grid(const float* x, int nmax, float scale, float off, uint8_t* L) {
  if (!(scale > 0)) {
    std::fill(L, L + kGroup, uint8_t(0));
    return;
  }
  const float inv = 1.0f / scale, fmax = float(nmax);
  for (int i = 0; i < kGroup; ++i) {
    float v = round_even_f((x[i] + off) * inv);
    v = v < 0.0f ? 0.0f : (v > fmax ? fmax : v);
    L[i] = uint8_t(v);
  }
}

}  // namespace

void quantize_affine_block(const float* x, const AffineParams& p, AffineBlock& out) {
  float scale[kGroups], min[kGroups];
  float w[QK_K];
  float max_scale = 0.0f, max_min = 0.0f;
  for (int j = 0; j < kGroups; ++j) {
    group_weights(x + kGroup * j, p.weighted, w + kGroup * j);
    const AffineFit f = fit_affine(x + kGroup * j, w + kGroup * j, kGroup, p.nmax, p.grid, out.L + kGroup * j);
    scale[j] = f.scale;
    min[j] = f.min;
    max_scale = std::max(max_scale, f.scale);
    max_min = std::max(max_min, f.min);
  }

  out.d = fp32_to_fp16(max_scale / 63.0f);
  out.dmin = fp32_to_fp16(max_min / 63.0f);
  const float d = fp16_to_fp32(out.d), dmin = fp16_to_fp32(out.dmin);
  uint8_t sc[kGroups], m[kGroups];
  for (int j = 0; j < kGroups; ++j) {
    int s = d > 0 ? clampi(round_half_even(scale[j] / d), 0, 63) : 0;
    int mm = dmin > 0 ? clampi(round_half_even(min[j] / dmin), 0, 63) : 0;
    if (p.pick_neighbours)
      pick_stored_scale_min(x + kGroup * j, w + kGroup * j, kGroup, p.nmax, d, dmin, s, mm, out.L + kGroup * j);
    else
      round_to_grid(x + kGroup * j, p.nmax, d * float(s), dmin * float(mm), out.L + kGroup * j);
    sc[j] = uint8_t(s);
    m[j] = uint8_t(mm);
  }
  pack_scale_min_k4(sc, m, out.scales);
}

}  // namespace fish::qk
