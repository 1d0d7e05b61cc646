#version 450
// The coopmat tile loader's weight decode (dequant_seg_f16.glsl) on its own,
// without cooperative matrices, so its layouts and arithmetic are tested on
// every device with 16-bit arithmetic (lavapipe included), not only where
// matmul_coopmat.comp runs. Test-only (test_vk_span_kernels).
//
// Invocation i = (row, segment s, lane h), h fastest: seg_load + seg_f16 of
// row `row`, k = 64 s, lane h, its 32 halves (a[0..3], b[0..3], tile order)
// as 16 words at YU[y_off + 16 i ..]. Span bindings and push constants
// (n_in, n_rows, y_off); a 1-D grid of ceil(n_rows · 2 · ceil(n_in / 64) / 64).
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require

layout(local_size_x = 64) in;

#include "matmul_common.glsl"
#include "dequant.glsl"
#include "dequant_seg_f16.glsl"

layout(set = 0, binding = 3) restrict buffer ArenaYU { uint YU[]; };

void main() {
  const uint n_seg = (pc.n_in + 63u) / 64u, i = gl_GlobalInvocationID.x;
  if (i >= pc.n_rows * n_seg * 2u) return;
  const uint row = i / (2u * n_seg), s = (i / 2u) % n_seg, h = i & 1u;
  f16vec4 a[4], b[4];
  seg_f16(seg_load(row, 64u * s, h), 64u * s, h, a, b);
  const uint o = pc.y_off + 16u * i;
  for (uint j = 0u; j < 4u; ++j) {
    YU[o + 2u * j] = packFloat2x16(a[j].xy), YU[o + 2u * j + 1u] = packFloat2x16(a[j].zw);
    YU[o + 8u + 2u * j] = packFloat2x16(b[j].xy), YU[o + 8u + 2u * j + 1u] = packFloat2x16(b[j].zw);
  }
}
