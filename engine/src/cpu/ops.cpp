#include "cpu/ops.h"

#include <cmath>

#include "cpu/cpu_features.h"

namespace fish {

void rmsnorm(const float* x, const float* w, float* y, int64_t n, float eps) {
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += double(x[i]) * double(x[i]);
  const float mean = float(sum / double(n));
  const float scale = 1.0f / std::sqrt(mean + eps);
  if (w)
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] * scale * w[i];
  else
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] * scale;
}

void silu_mul_avx2(const float* gate, const float* up, float* out, int64_t n);

namespace {
void silu_mul_scalar(const float* gate, const float* up, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float g = gate[i];
    out[i] = g / (1.0f + std::exp(-g)) * up[i];
  }
}
}  // namespace

void silu_mul(const float* gate, const float* up, float* out, int64_t n) {
#if defined(__x86_64__)
  static const auto fn = [] {
    const CpuFeatures& f = cpu_features();
    return f.avx2 && f.fma ? &silu_mul_avx2 : &silu_mul_scalar;
  }();
  fn(gate, up, out, n);
#else
  silu_mul_scalar(gate, up, out, n);
#endif
}

void add_inplace(float* y, const float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += x[i];
}

void rope_angles(int32_t pos, int32_t n_rot, float freq_base, float freq_scale, const float* freq_factors,
                 float* cs) {
  const float theta_scale = std::pow(freq_base, -2.0f / float(n_rot));
  float theta = float(pos);
  for (int32_t i = 0; i < n_rot / 2; ++i) {
    const float ff = freq_factors ? freq_factors[i] : 1.0f;
    const float t = freq_scale * (theta / ff);
    cs[2 * i] = std::cos(t);
    cs[2 * i + 1] = std::sin(t);
    theta *= theta_scale;
  }
}

void rope_apply(float* x, int32_t n_heads, int32_t head_dim, int32_t n_rot, RopeType type, const float* cs) {
  const int32_t half = n_rot / 2;
  for (int32_t h = 0; h < n_heads; ++h) {
    float* v = x + int64_t(h) * head_dim;
    for (int32_t i = 0; i < half; ++i) {
      const float c = cs[2 * i], s = cs[2 * i + 1];
      const int32_t a = type == RopeType::NeoX ? i : 2 * i;
      const int32_t b = type == RopeType::NeoX ? i + half : 2 * i + 1;
      const float x0 = v[a], x1 = v[b];
      v[a] = x0 * c - x1 * s;
      v[b] = x0 * s + x1 * c;
    }
  }
}

}  // namespace fish
