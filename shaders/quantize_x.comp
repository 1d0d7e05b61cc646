#version 450
// Activations to int8 for the int8 matvec (matvec.comp / matvec_span.comp with
// FISH_INT8), bit for bit as fish's CPU quantises them for the same f32 input
// (engine/src/quant/quantize_legacy.cpp, cpu/matmul_avx*.cpp):
//   BS 256 (Q8_K, for the K-quants): max = the element of largest magnitude
//     with its sign (the first one on ties), iscale = -127 / max,
//     q = min(127, nearest-even(iscale · x)), d = 1 / iscale (f32); all-zero
//     block: q = 0, d = 0.
//   BS 32 (Q8_0, for Q4_0 / Q8_0): d = amax / 127, id = 1 / d (0 if d = 0),
//     q = nearest, ties away from zero (x · id); d is kept rounded to f16.
//   B32K (BS 32): the span's B32 format for K-quant weights in decode
//     (quant_block.glsl q8b32_wg): the Q8_K rule on blocks of 32, d f32,
//     sums over groups of 16.
// Every division is correctly rounded (Vulkan only promises 2.5 ulp).
//
// Input x'[t][i] = x[t][i] (· x2[t][i] with XPROD) (· s_t: the 1/rms of the
// fused rmsnorm, from inv_in or reduced from the producer's partials).
// Output, per token t at word q_off + t · q_stride of the same buffer:
//   qs   int8 [n]  as n/4 words (element 4w + k in byte k of word w)
//   d    f32  [n/BS]
//   sums int32 [n/SG]  Σ q over groups of SG (16 for BS 256, 32 for BS 32):
//        the K-quants' mins and Q6_K's -32, Q4_0's -8 use them.
// One workgroup of 64 invocations per (256 elements, token): invocation i owns
// elements 4i .. 4i+3 of the chunk; blocks reduce through shared memory, or
// (B32K where gl_SubgroupSize >= 8) within subgroups, without workgroup barriers
// (quant_b32_sg.glsl, the same words).
#extension GL_GOOGLE_include_directive : require
layout(local_size_x = 64) in;
layout(constant_id = 0) const uint BS = 256;  // 256 (Q8_K) or 32 (Q8_0)
layout(constant_id = 1) const bool XPROD = false;
layout(constant_id = 2) const bool B32K = false;  // with BS 32
const bool KRULE = BS == 256u || B32K;             // the Q8_K rule
const uint SG = KRULE ? 16u : 32u;

layout(set = 0, binding = 0) buffer BufF { float F[]; };
layout(set = 0, binding = 0) buffer BufU { uint U[]; };

layout(push_constant) uniform QuantParams {
  uint n;          // elements per token row (a multiple of BS)
  uint n_tok;
  uint x_off;      // float index of x[0][0]
  uint x_stride;   // floats between token rows of x (and x2)
  uint x2_off;     // XPROD: float index of x2[0][0]
  uint inv_in;     // 0xFFFFFFFF: no scale; else float index of the per-token scales
  uint inv_parts;  // 0: inv_in holds 1/rms per token; k: [n_tok][k] Σx² partials
  float eps;       // with inv_parts: 1/rms = 1/sqrt(Σ/n + eps)
  uint q_off;      // word index of the output's token 0
  uint q_stride;   // words between token rows of the output
} pc;

#include "int8_common.glsl"
#define AC F
#define ACU U
#define QSG_SLOTS (B32K ? 64u : 1u)
#include "quant_b32_sg.glsl"

shared float hi_sh[64], lo_sh[64];
shared int sum_sh[64];
shared float x_sh[256];
shared float scale_sh;

void main() {
  const uint i = gl_LocalInvocationID.x, t = gl_WorkGroupID.y;
  const uint e = gl_WorkGroupID.x * 256u + 4u * i;
  const bool live = e < pc.n;

  // The per-token scale (the same value in every workgroup of the token).
  if (pc.inv_in != 0xFFFFFFFFu) {
    if (pc.inv_parts == 0u) {
      if (i == 0u) scale_sh = F[pc.inv_in + t];
    } else {
      float s = 0.0;
      for (uint k = i; k < pc.inv_parts; k += 64u) s += F[pc.inv_in + t * pc.inv_parts + k];
      hi_sh[i] = s;
      barrier();
      for (uint k = 32u; k > 0u; k >>= 1u) {
        if (i < k) hi_sh[i] += hi_sh[i + k];
        barrier();
      }
      if (i == 0u) scale_sh = inversesqrt(hi_sh[0] / float(pc.n) + pc.eps);
    }
    barrier();
  }
  precise vec4 v = vec4(0.0);
  if (live) {
    const uint a = pc.x_off + t * pc.x_stride + e;
    v = vec4(F[a], F[a + 1u], F[a + 2u], F[a + 3u]);
    if (XPROD) {
      const uint b = pc.x2_off + t * pc.x_stride + e;
      v *= vec4(F[b], F[b + 1u], F[b + 2u], F[b + 3u]);
    }
    if (pc.inv_in != 0xFFFFFFFFu) v *= scale_sh;
  }
  if (B32K && gl_SubgroupSize >= 8u) {  // uniform
    q8b32_sg(v, 4u, live, i, pc.q_off + t * pc.q_stride, pc.n, 0u, e);
    return;
  }
  x_sh[4u * i] = v.x, x_sh[4u * i + 1u] = v.y, x_sh[4u * i + 2u] = v.z, x_sh[4u * i + 3u] = v.w;

  // Block reduction over the T = BS/4 invocations of a block: the largest and
  // smallest element (0 included: NaN never wins a comparison, as on the CPU).
  const uint T = BS / 4u;
  float h = 0.0, l = 0.0;
  for (uint k = 0u; k < 4u; ++k) {
    h = v[k] > h ? v[k] : h;
    l = v[k] < l ? v[k] : l;
  }
  hi_sh[i] = h, lo_sh[i] = l;
  barrier();
  for (uint s = T / 2u; s > 0u; s >>= 1u) {
    if ((i & (T - 1u)) < s) {
      hi_sh[i] = hi_sh[i + s] > hi_sh[i] ? hi_sh[i + s] : hi_sh[i];
      lo_sh[i] = lo_sh[i + s] < lo_sh[i] ? lo_sh[i + s] : lo_sh[i];
    }
    barrier();
  }
  const uint b0 = i & ~(T - 1u);  // first invocation of this block
  const float hi = hi_sh[b0], lo = lo_sh[b0];

  ivec4 q = ivec4(0);
  float d = 0.0;
  if (KRULE) {
    // A tie in magnitude: the first element of the block that reaches it (a scan, rare).
    float mx = q8k_signed_max(hi, lo), iscale;
    if (q8k_tie(hi, lo))
      for (uint k = 4u * b0; k < 4u * b0 + BS; ++k)
        if (abs(x_sh[k]) == hi) { mx = x_sh[k]; break; }
    q8k_scales(mx, iscale, d);
    for (uint k = 0u; k < 4u; ++k) q[k] = q8k_quant(mx, iscale, v[k]);
  } else {
    const float amax = hi >= -lo ? hi : -lo;  // +0 for an all-zero block (as the CPU), never -0
    d = div_rn(amax, 127.0);
    const float id = d != 0.0 ? div_rn(1.0, d) : 0.0;
    for (uint k = 0u; k < 4u; ++k) {
      precise float p = v[k] * id;
      q[k] = int(round_half_away(p));
    }
    d = f16_round(d);
  }

  // Sums over groups of SG elements (SG/4 invocations).
  sum_sh[i] = q.x + q.y + q.z + q.w;
  barrier();
  for (uint s = SG / 8u; s > 0u; s >>= 1u) {
    if ((i & (SG / 4u - 1u)) < s) sum_sh[i] += sum_sh[i + s];
    barrier();
  }
  if (!live) return;
  const uint base = pc.q_off + t * pc.q_stride;
  U[base + e / 4u] = (uint(q.x) & 0xFFu) | ((uint(q.y) & 0xFFu) << 8) | ((uint(q.z) & 0xFFu) << 16) | (uint(q.w) << 24);
  if ((i & (T - 1u)) == 0u) F[base + pc.n / 4u + e / BS] = d;
  if ((i & (SG / 4u - 1u)) == 0u) U[base + pc.n / 4u + pc.n / BS + e / SG] = uint(sum_sh[i]);
}
