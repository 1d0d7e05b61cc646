#version 450
// rmsnorm for the span's prefill path: y[t] = x[t] / sqrt(mean(x[t]²) + eps) · w,
// x, y: [n_tok][n_embd] regions of the arena, w = P[norm_off ..]. One workgroup
// per token row. (Decode folds the norm into the next matvec instead.)
// GATHER (the head's rows): output row t is input row AU[pc.meta_off + t].
// HALF (for the tensor-core products, matmul_coopmat.comp XH): y as f16 rows,
// half index 2 · y_off + t · n_embd + i (n_embd even), clamped to ±65504 as
// that kernel's x tile rounds f32 x.
#extension GL_GOOGLE_include_directive : require

layout(local_size_x = 256) in;
layout(constant_id = 0) const bool GATHER = false;
layout(constant_id = 1) const bool HALF = false;
#include "span_common.glsl"

shared float red[256];

void main() {
  const uint tid = gl_LocalInvocationID.x, t = gl_WorkGroupID.x;
  const uint xb = pc.x_off + (GATHER ? AU[pc.meta_off + t] : t) * pc.n_embd, yb = pc.y_off + t * pc.n_embd;
  float s = 0.0;
  for (uint i = tid; i < pc.n_embd; i += 256u) s += A[xb + i] * A[xb + i];
  red[tid] = s;
  barrier();
  for (uint w = 128u; w > 0u; w >>= 1) {
    if (tid < w) red[tid] += red[tid + w];
    barrier();
  }
  const float inv = inversesqrt(red[0] / float(pc.n_embd) + pc.eps);
  if (HALF) {
    const uint hb = pc.y_off + t * (pc.n_embd >> 1u);
    for (uint i = 2u * tid; i < pc.n_embd; i += 512u) {
      const vec2 v = vec2(A[xb + i], A[xb + i + 1u]) * inv * vec2(P[pc.norm_off + i], P[pc.norm_off + i + 1u]);
      AU[hb + (i >> 1u)] = pack_half2_sat(v);
    }
  } else {
    for (uint i = tid; i < pc.n_embd; i += 256u) A[yb + i] = A[xb + i] * inv * P[pc.norm_off + i];
  }
}
