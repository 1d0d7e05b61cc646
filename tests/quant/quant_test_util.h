// Helpers shared by the quant tests and the quantiser benchmark: deterministic
// Gaussian data, error measures, and plain round-to-nearest K-quant baselines
// (what a quantiser without a scale search would give, in the same format).
#pragma once
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "common/fp16.h"
#include "common/ggml_type.h"
#include "quant/quant.h"

namespace fish::test {

inline std::vector<float> gaussian(size_t n, uint32_t seed, float sigma = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, sigma);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

// sqrt(Σ (a - b)²) / sqrt(Σ a²), in double.
inline double rel_rms(const float* a, const float* b, size_t n) {
  double num = 0, den = 0;
  for (size_t i = 0; i < n; ++i) {
    const double d = double(a[i]) - double(b[i]);
    num += d * d;
    den += double(a[i]) * double(a[i]);
  }
  return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

inline size_t row_bytes(GgmlType t, int64_t n) { return size_t(*ggml_row_bytes(uint32_t(t), n)); }

// quantize_row then dequant_row of x (n elements) in type t.
inline std::vector<float> round_trip(GgmlType t, const std::vector<float>& x) {
  std::vector<uint8_t> q(row_bytes(t, int64_t(x.size())));
  quantize_row(t, x.data(), q.data(), int64_t(x.size()));
  std::vector<float> y(x.size());
  dequant_row(t, q.data(), y.data(), int64_t(x.size()));
  return y;
}

inline int rtn(float v) { return int(std::nearbyint(v)); }
inline int clampi(int v, int lo, int hi) { return v < lo ? lo : (v > hi ? hi : v); }

// Baseline Q4_K / Q5_K (nmax 15 / 31): per 32-group min/max grid
// (scale = (max - min) / nmax, min clipped to <= 0), 6-bit scales and mins under
// f16 super-scales, every value rounded to the nearest level. Returns the
// values such a block decodes to.
inline std::vector<float> rtn_affine_k(const std::vector<float>& x, int nmax) {
  std::vector<float> y(x.size());
  for (size_t b = 0; b < x.size(); b += 256) {
    float scale[8], mn[8], max_s = 0, max_m = 0;
    for (int j = 0; j < 8; ++j) {
      float lo = 0, hi = x[b + 32 * j];
      for (int i = 0; i < 32; ++i) {
        lo = std::min(lo, x[b + 32 * j + i]);
        hi = std::max(hi, x[b + 32 * j + i]);
      }
      scale[j] = (hi - lo) / float(nmax);
      mn[j] = -lo;
      max_s = std::max(max_s, scale[j]);
      max_m = std::max(max_m, mn[j]);
    }
    const float d = fp16_to_fp32(fp32_to_fp16(max_s / 63)), dm = fp16_to_fp32(fp32_to_fp16(max_m / 63));
    for (int j = 0; j < 8; ++j) {
      const int sc = d > 0 ? clampi(rtn(scale[j] / d), 0, 63) : 0;
      const int m = dm > 0 ? clampi(rtn(mn[j] / dm), 0, 63) : 0;
      for (int i = 0; i < 32; ++i) {
        const float v = x[b + 32 * j + i];
        const int q = sc ? clampi(rtn((v + dm * float(m)) / (d * float(sc))), 0, nmax) : 0;
        y[b + 32 * j + i] = d * float(sc) * float(q) - dm * float(m);
      }
    }
  }
  return y;
}

// Baseline Q6_K: per 16-group scale = max|x| / 31.5 ... the plain grid
// (largest-magnitude value on the -32 end), int8 scales under an f16 super-scale,
// every value rounded to the nearest level.
inline std::vector<float> rtn_q6_k(const std::vector<float>& x) {
  std::vector<float> y(x.size());
  for (size_t b = 0; b < x.size(); b += 256) {
    float scale[16], max_s = 0, max_abs = 0;
    for (int j = 0; j < 16; ++j) {
      float mx = 0, amx = 0;
      for (int i = 0; i < 16; ++i) {
        const float v = x[b + 16 * j + i];
        if (std::fabs(v) > amx) { amx = std::fabs(v); mx = v; }
      }
      scale[j] = mx / -32.0f;
      if (std::fabs(scale[j]) > max_abs) { max_abs = std::fabs(scale[j]); max_s = scale[j]; }
    }
    const float d = fp16_to_fp32(fp32_to_fp16(max_s / -128.0f));
    for (int j = 0; j < 16; ++j) {
      const int sc = d != 0 ? clampi(rtn(scale[j] / d), -128, 127) : 0;
      for (int i = 0; i < 16; ++i) {
        const float v = x[b + 16 * j + i];
        const int q = sc ? clampi(rtn(v / (d * float(sc))), -32, 31) : 0;
        y[b + 16 * j + i] = d * float(sc) * float(q);
      }
    }
  }
  return y;
}

}  // namespace fish::test
