#version 450
// Element-wise steps of the span's unfused decode path (FISH_VK_SPAN_FUSE=0,
// which exists to measure what each step costs; the default path folds both
// into matvec epilogues/prologues):
//   OP 0  add      a[i] += b[i]               (residual: x += o)
//   OP 1  act·mul  a[i] = silu(a[i]) · b[i]   (gate, up)
// a = A[x_off ..], b = A[y_off ..], i < count.
#extension GL_GOOGLE_include_directive : require

layout(local_size_x = 256) in;
layout(constant_id = 0) const uint OP = 0;
#include "span_common.glsl"

void main() {
  const uint stride = gl_NumWorkGroups.x * 256u;
  for (uint i = gl_GlobalInvocationID.x; i < pc.count; i += stride) {
    const float a = A[pc.x_off + i], b = A[pc.y_off + i];
    A[pc.x_off + i] = OP == 0u ? a + b : a / (1.0 + exp(-a)) * b;
  }
}
