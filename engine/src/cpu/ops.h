// Element-wise and row-wise operations of a Llama-family layer, f32, computed as
// llama.cpp's CPU path does them (sums of squares in double; silu's e^x by a
// vector polynomial on AVX2 CPUs, within a few ulp of expf).
#pragma once
#include <cstdint>

#include "common/rope_type.h"

namespace fish {

// y[i] = x[i] / sqrt(mean(x²) + eps) * w[i]   (w may be null: no weight). n elements; y may alias x.
void rmsnorm(const float* x, const float* w, float* y, int64_t n, float eps);

// out[i] = silu(gate[i]) * up[i]; out may alias gate (or up). AVX2 + FMA:
// ops_avx2.cpp (a few ulp from the scalar form), else expf per element.
void silu_mul(const float* gate, const float* up, float* out, int64_t n);

// y[i] += x[i]
void add_inplace(float* y, const float* x, int64_t n);

// RoPE angles for one position: cs[2i] = cos θ_i, cs[2i+1] = sin θ_i for
// i < n_rot/2, θ_i = freq_scale · pos · base^(-2i/n_rot) / freq_factors[i]
// (the power accumulated in float, as ggml does).
void rope_angles(int32_t pos, int32_t n_rot, float freq_base, float freq_scale, const float* freq_factors,
                 float* cs);

// Rotates n_heads heads of head_dim values at x (head h at x + h*head_dim) with
// the angles from rope_angles. Normal: pairs (2i, 2i+1); NeoX: (i, i + n_rot/2).
void rope_apply(float* x, int32_t n_heads, int32_t head_dim, int32_t n_rot, RopeType type, const float* cs);

}  // namespace fish
