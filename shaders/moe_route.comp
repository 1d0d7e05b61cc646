#version 450
// MoE routing on the device (plugin_abi.h's MoE FFN), in two phases:
//   ROWS, a workgroup per token t (grid-stride): r = softmax(router logits
//     [n_expert] at x_off + t·x_stride), the k largest (equal logits: the lower
//     expert index first), weights r_e or r_e / Σ chosen r (flags & 1):
//     moe_common.glsl's moe_route_token, which a decode's router tail shares.
//   GROUP, one workgroup: the pairs grouped by expert as moe_common.glsl lays
//     out: a count per expert (shared atomics: their order does not matter),
//     the prefix over the active experts (a scan over the invocations, 4
//     experts each), and each active expert's pairs listed in pair order.
//     Tokens go in chunks of 32, a bit per token in a word per expert; an
//     expert is chosen at most once per token, so a pair's place in its
//     expert's list is the expert's pairs in earlier chunks plus the bits
//     below its token. No atomics decide an order: the words are deterministic.
// Specialisation 0 = PHASES: 1 ROWS, 2 GROUP (the host puts a barrier between
// them). A decode routes in its router matvec's last workgroup instead (matvec_span.comp EPI 5). Sizes: n_expert <= 512, k <= 16 (the host checks).
#extension GL_GOOGLE_include_directive : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
layout(local_size_x = 128) in;
layout(constant_id = 0) const uint PHASES = 1;

layout(set = 0, binding = 1) readonly buffer ArenaX { float X[]; };
layout(set = 0, binding = 4) coherent buffer ArenaC { uint AC[]; };
layout(push_constant) uniform MoeParams {
  uint n_in, n_rows, n_tok, x_stride, x_off, y_stride, y_off, inv_in;
  float eps;
  uint x2_off, norm_off, xg_off, sq_off, inv_parts, q_out, q_stride;
  uint rt_part, rt_logits, rt_route, rt_cnt, rt_n_expert, rt_k;  // (matvec_span.comp's ROUTER)
  uint route_off, n_expert, k, flags;
} pc;
#define MOE_ROUTING
#include "moe_common.glsl"

const uint WG = 128u, PER = 4u;  // experts per invocation: n_expert <= WG·PER
const uint CHUNK = 32u;          // tokens per list chunk (bits of a word)

// GROUP
shared uint cnt_sh[WG * PER];   // pairs per expert
shared uint off_sh[WG * PER];   // the expert's first list entry
shared uint run_sh[WG * PER];   // its pairs listed in earlier chunks
shared uint mask_sh[WG * PER];  // this chunk's tokens that chose it (bit t - c0)
shared uvec2 scan_sh[2][WG];

void route_row(uint t) {
  moe_route_token(pc.x_off + t * pc.x_stride, pc.n_expert, pc.k, (pc.flags & 1u) != 0u);
  const uint lid = gl_LocalInvocationID.x;
  if (lid < pc.k) {
    AC[pc.route_off + 2u * (t * pc.k + lid)] = rt_sel[lid];
    AC[pc.route_off + 2u * (t * pc.k + lid) + 1u] = floatBitsToUint(rt_w[lid]);
  }
}

void group() {
  const uint lid = gl_LocalInvocationID.x, NE = pc.n_expert, K = pc.k, P = pc.n_tok * K;
  const uint R = pc.route_off, G = moe_group(R, P), L = moe_list(G, NE);
  for (uint e = lid; e < NE; e += WG) cnt_sh[e] = 0u, run_sh[e] = 0u, mask_sh[e] = 0u;
  barrier();
  for (uint p = lid; p < P; p += WG) atomicAdd(cnt_sh[AC[R + 2u * p]], 1u);
  barrier();
  // The prefix over experts lid·PER .. +PER-1: (active experts, pairs) before them.
  uvec2 own = uvec2(0u);
  for (uint i = 0u; i < PER; ++i) {
    const uint e = lid * PER + i;
    if (e < NE) own += uvec2(cnt_sh[e] > 0u ? 1u : 0u, cnt_sh[e]);
  }
  scan_sh[0][lid] = own;
  barrier();
  uint src = 0u;
  for (uint d = 1u; d < WG; d <<= 1u) {  // inclusive scan (Hillis-Steele)
    uvec2 v = scan_sh[src][lid];
    if (lid >= d) v += scan_sh[src][lid - d];
    scan_sh[src ^ 1u][lid] = v;
    src ^= 1u;
    barrier();
  }
  const uvec2 inc = scan_sh[src][lid];
  uint n = inc.x - own.x, run = inc.y - own.y;
  for (uint i = 0u; i < PER; ++i) {
    const uint e = lid * PER + i;
    if (e >= NE || cnt_sh[e] == 0u) continue;
    AC[G + 1u + n] = e;
    AC[G + 1u + NE + n] = run;
    off_sh[e] = run;
    run += cnt_sh[e];
    ++n;
  }
  if (lid == WG - 1u) {
    AC[G] = inc.x;
    AC[G + 1u + NE + inc.x] = inc.y;
  }
  barrier();
  for (uint c0 = 0u; c0 < pc.n_tok; c0 += CHUNK) {
    const uint q_end = min(CHUNK, pc.n_tok - c0) * K, p0 = c0 * K;
    for (uint q = lid; q < q_end; q += WG) atomicOr(mask_sh[AC[R + 2u * (p0 + q)]], 1u << (q / K));
    barrier();
    for (uint q = lid; q < q_end; q += WG) {
      const uint e = AC[R + 2u * (p0 + q)];
      AC[L + off_sh[e] + run_sh[e] + bitCount(mask_sh[e] & ((1u << (q / K)) - 1u))] = p0 + q;
    }
    barrier();
    for (uint e = lid; e < NE; e += WG) run_sh[e] += bitCount(mask_sh[e]), mask_sh[e] = 0u;
    barrier();
  }
}

void main() {
  if (PHASES == 1u)
    for (uint t = gl_WorkGroupID.x; t < pc.n_tok; t += gl_NumWorkGroups.x) route_row(t);
  else
    group();
}
