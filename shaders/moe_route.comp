#version 450
// MoE routing on the device (plugin_abi.h's MoE FFN), in two phases:
//   ROWS, a workgroup per token t (grid-stride): r = softmax(router logits
//     [n_expert] at x_off + t·x_stride), the k largest (equal logits: the lower
//     expert index first), weights r_e or r_e / Σ chosen r (flags & 1). The
//     logits stay in registers (4 per invocation); top-k is k rounds of a
//     workgroup argmax (subgroup max, then the lowest index holding it, then
//     across subgroups in shared memory), each round excluding the chosen.
//   GROUP, one workgroup: the pairs grouped by expert as moe_common.glsl lays
//     out: a count per expert (shared atomics: their order does not matter),
//     the prefix over the active experts (a scan over the invocations, 4
//     experts each), and each active expert's pairs listed in pair order.
//     Tokens go in chunks of 32, a bit per token in a word per expert; an
//     expert is chosen at most once per token, so a pair's place in its
//     expert's list is the expert's pairs in earlier chunks plus the bits
//     below its token. No atomics decide an order: the words are deterministic.
// Specialisation 0 = PHASES: 1 ROWS, 2 GROUP, 3 both in one workgroup (a
// decode of a few rows: one dispatch). Sizes: n_expert <= 512, k <= 16 (the host checks).
#extension GL_GOOGLE_include_directive : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
layout(local_size_x = 128) in;
layout(constant_id = 0) const uint PHASES = 3;

layout(set = 0, binding = 1) readonly buffer ArenaX { float X[]; };
layout(set = 0, binding = 4) coherent buffer ArenaC { uint AC[]; };
layout(push_constant) uniform MoeParams {
  uint n_in, n_rows, n_tok, x_stride, x_off, y_stride, y_off, inv_in;
  float eps;
  uint x2_off, norm_off, xg_off, sq_off, inv_parts, q_out, q_stride;
  uint route_off, n_expert, k, flags;
} pc;
#include "moe_common.glsl"

const uint WG = 128u, PER = 4u;  // experts per invocation: n_expert <= WG·PER
const uint NONE = 0xFFFFFFFFu;
const uint CHUNK = 32u;          // tokens per list chunk (bits of a word)

// ROWS: per subgroup, double-buffered by round parity (one barrier per round).
shared float red_v[2][WG];
shared uint red_i[2][WG];
// GROUP
shared uint cnt_sh[WG * PER];   // pairs per expert
shared uint off_sh[WG * PER];   // the expert's first list entry
shared uint run_sh[WG * PER];   // its pairs listed in earlier chunks
shared uint mask_sh[WG * PER];  // this chunk's tokens that chose it (bit t - c0)
shared uvec2 scan_sh[2][WG];

// Workgroup reductions through the subgroups (fixed order: deterministic).
float wg_max(float v, uint buf) {
  v = subgroupMax(v);
  if (subgroupElect()) red_v[buf][gl_SubgroupID] = v;
  barrier();
  float m = red_v[buf][0];
  for (uint i = 1u; i < gl_NumSubgroups; ++i) m = max(m, red_v[buf][i]);
  return m;
}
float wg_sum(float v, uint buf) {
  v = subgroupAdd(v);
  if (subgroupElect()) red_v[buf][gl_SubgroupID] = v;
  barrier();
  float s = 0.0;
  for (uint i = 0u; i < gl_NumSubgroups; ++i) s += red_v[buf][i];
  return s;
}

void route_row(uint t) {
  const uint lid = gl_LocalInvocationID.x, NE = pc.n_expert, K = pc.k;
  const uint lo = pc.x_off + t * pc.x_stride;
  const float NEG_INF = uintBitsToFloat(0xFF800000u);
  float l[PER];
  uint avail = 0u;  // bit i: expert lid + i·WG exists and is not chosen yet
  float mx = NEG_INF;
  for (uint i = 0u; i < PER; ++i) {
    const uint e = lid + i * WG;
    l[i] = e < NE ? X[lo + e] : NEG_INF;
    if (isnan(l[i])) l[i] = NEG_INF;  // a NaN logit loses every comparison: the ids stay valid experts
    if (e < NE) avail |= 1u << i, mx = max(mx, l[i]);
  }
  mx = wg_max(mx, 0u);
  float s = 0.0;
  for (uint i = 0u; i < PER; ++i)
    if ((avail & (1u << i)) != 0u) s += exp(l[i] - mx);
  const float sum = wg_sum(s, 1u);
  uint my_e = NONE;  // invocation j < k: the j-th chosen expert
  float my_l = 0.0, chosen_sum = 0.0;
  for (uint j = 0u; j < K; ++j) {
    // This invocation's best: the largest available logit, the lower index on ties.
    uint bi = NONE;
    float bv = NEG_INF;
    for (uint i = 0u; i < PER; ++i)
      if ((avail & (1u << i)) != 0u && (bi == NONE || l[i] > bv)) bi = lid + i * WG, bv = l[i];
    const float sm = subgroupMax(bi != NONE ? bv : NEG_INF);
    const uint si = subgroupMin(bi != NONE && bv == sm ? bi : NONE);
    const uint buf = j & 1u;
    if (subgroupElect()) red_v[buf][gl_SubgroupID] = sm, red_i[buf][gl_SubgroupID] = si;
    barrier();
    uint best = NONE;
    float bl = 0.0;
    for (uint g = 0u; g < gl_NumSubgroups; ++g) {
      const uint gi = red_i[buf][g];
      const float gv = red_v[buf][g];
      if (gi != NONE && (best == NONE || gv > bl || (gv == bl && gi < best))) best = gi, bl = gv;
    }
    if (best % WG == lid) avail &= ~(1u << (best / WG));
    if (lid == j) my_e = best, my_l = bl;
    chosen_sum += exp(bl - mx);
  }
  if (lid < K) {
    const float r = exp(my_l - mx);
    AC[pc.route_off + 2u * (t * K + lid)] = my_e;
    AC[pc.route_off + 2u * (t * K + lid) + 1u] = floatBitsToUint((pc.flags & 1u) != 0u ? r / chosen_sum : r / sum);
  }
  barrier();  // red_v / red_i are reused by the next row
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
  if ((PHASES & 1u) != 0u)
    for (uint t = gl_WorkGroupID.x; t < pc.n_tok; t += gl_NumWorkGroups.x) route_row(t);
  if ((PHASES & 3u) == 3u) {  // this workgroup wrote every row's pairs
    memoryBarrierBuffer();
    barrier();
  }
  if ((PHASES & 2u) != 0u) group();
}
