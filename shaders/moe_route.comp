#version 450
// MoE routing on the device (plugin_abi.h's MoE FFN), one workgroup:
//   per token t: r = softmax(router logits [n_expert] at x_off + t·x_stride),
//   the k largest (equal logits: the lower expert index first), weights r_e
//   or r_e / Σ chosen r (flags & 1); then the pairs grouped by expert: a count
//   per expert, the prefix over the active ones, and each active expert's
//   pairs listed in pair order (deterministic: no atomics), as moe_common.glsl lays out.
// Sizes: n_expert <= 512, k <= 16 (the host checks).
#extension GL_GOOGLE_include_directive : require
layout(local_size_x = 256) in;

layout(set = 0, binding = 1) readonly buffer ArenaX { float X[]; };
layout(set = 0, binding = 4) coherent buffer ArenaC { uint AC[]; };
layout(push_constant) uniform MoeParams {
  uint n_in, n_rows, n_tok, x_stride, x_off, y_stride, y_off, inv_in;
  float eps;
  uint x2_off, norm_off, xg_off, sq_off, inv_parts, q_out, q_stride;
  uint route_off, n_expert, k, flags;
} pc;
#include "moe_common.glsl"

shared uint cnt_sh[512];
shared uint act_sh[512];
shared uint off_sh[513];
shared uint n_act_sh;

void main() {
  const uint lid = gl_LocalInvocationID.x, NE = pc.n_expert, K = pc.k, P = pc.n_tok * K;
  const uint R = pc.route_off, G = moe_group(R, P);
  for (uint t = lid; t < pc.n_tok; t += gl_WorkGroupSize.x) {
    const uint lo = pc.x_off + t * pc.x_stride;
    float mx = X[lo];
    for (uint e = 1u; e < NE; ++e) mx = max(mx, X[lo + e]);
    float sum = 0.0;
    for (uint e = 0u; e < NE; ++e) sum += exp(X[lo + e] - mx);
    uint chosen[16];
    float chosen_sum = 0.0;
    for (uint j = 0u; j < K; ++j) {
      uint best = 0xFFFFFFFFu;
      float bl = 0.0;
      for (uint e = 0u; e < NE; ++e) {
        bool taken = false;
        for (uint i = 0u; i < j; ++i) taken = taken || chosen[i] == e;
        const float l = X[lo + e];
        if (!taken && (best == 0xFFFFFFFFu || l > bl)) {  // strict: an equal logit keeps the lower index
          best = e;
          bl = l;
        }
      }
      chosen[j] = best;
      chosen_sum += exp(bl - mx);
    }
    for (uint j = 0u; j < K; ++j) {
      const float r = exp(X[lo + chosen[j]] - mx);
      AC[R + 2u * (t * K + j)] = chosen[j];
      AC[R + 2u * (t * K + j) + 1u] = floatBitsToUint((pc.flags & 1u) != 0u ? r / chosen_sum : r / sum);
    }
  }
  memoryBarrierBuffer();
  barrier();
  for (uint e = lid; e < NE; e += gl_WorkGroupSize.x) {
    uint c = 0u;
    for (uint p = 0u; p < P; ++p) c += AC[R + 2u * p] == e ? 1u : 0u;
    cnt_sh[e] = c;
  }
  barrier();
  if (lid == 0u) {
    uint n = 0u, run = 0u;
    for (uint e = 0u; e < NE; ++e) {
      if (cnt_sh[e] == 0u) continue;
      act_sh[n] = e;
      off_sh[n] = run;
      AC[G + 1u + n] = e;
      AC[G + 1u + NE + n] = run;
      run += cnt_sh[e];
      ++n;
    }
    off_sh[n] = run;
    AC[G + 1u + NE + n] = run;
    AC[G] = n;
    n_act_sh = n;
  }
  barrier();
  const uint L = moe_list(G, NE);
  for (uint s = lid; s < n_act_sh; s += gl_WorkGroupSize.x) {
    const uint e = act_sh[s];
    uint at = off_sh[s];
    for (uint p = 0u; p < P; ++p)
      if (AC[R + 2u * p] == e) AC[L + at++] = p;
  }
}
