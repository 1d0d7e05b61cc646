#version 450
// Matrix-vector products for decode (n_tok <= 4): y[t][r] = Σ_i W[r][i] · x[t][i].
//
// Work split: a "team" (one subgroup, or the whole workgroup without subgroup
// arithmetic) owns ROWS consecutive rows at a time. Its lanes walk the row in
// "units" (a unit is a type-specific piece of one block: 32 weights for the
// quantised types, see matvec_units.glsl), lane l taking units l, l + team,
// l + 2·team, ... so that neighbouring lanes read neighbouring bytes. Each lane
// keeps ROWS × NT partial sums in registers; x values are loaded once per unit
// and reused for the ROWS rows. At the end one subgroupAdd per partial sum: no
// shared memory on the subgroup path.
//
// The row-group loop strides by the whole grid, so the result is correct for any
// dispatch size and any subgroup size the driver picks.
//
// Compile-time: TYPE_<T> (F32, F16, Q4_0, Q8_0, Q4_K, Q5_K, Q6_K); FISH_NO_SUBGROUP
// for devices without subgroup arithmetic in compute shaders.
// Specialisation constants: 0 = workgroup size, 1 = ROWS, 2 = NT (tokens, 1..4).

#extension GL_GOOGLE_include_directive : require
#ifndef FISH_NO_SUBGROUP
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#endif

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint ROWS = 1;
layout(constant_id = 2) const uint NT = 1;

#include "matmul_common.glsl"

float acc[ROWS * NT];  // acc[r * NT + t]: partial sum of row row0 + r, token t

#ifdef FISH_SPAN
// Span variant: fusions that save a dispatch and a barrier each.
//   NORM   y = rmsnorm(x)·g · Wᵀ computed as (Σ_i W_ri x_i g_i) / rms(x): x is
//          multiplied by g (P[norm_off..]) as it is loaded, Σx² is accumulated on
//          the side from the same loads (each team reads the whole of x exactly
//          once per row group), and 1/rms scales the result. Needs the aligned
//          unit paths (host: n_in % 8 == 0).
//   XPROD  x := x ∘ x2 on load (the down projection's silu(gate)·up).
//   EPI    0: y = s, 1: y += s (residual add), 2: y = silu(s) (the gate).
layout(constant_id = 3) const bool NORM = false;
layout(constant_id = 4) const uint EPI = 0;
layout(constant_id = 5) const bool XPROD = false;
float ss[NT];  // NORM: Σx² of token t over the units this lane loaded
vec4 x4_at(uint t, uint e) {
  vec4 v = X4[(pc.x_off + t * pc.x_stride + e) >> 2];
  if (XPROD) v *= X4[(pc.x2_off + t * pc.x_stride + e) >> 2];
  if (NORM) {
    ss[t] += dot(v, v);
    v *= P4[(pc.norm_off + e) >> 2];
  }
  return v;
}
float x_at(uint t, uint e) {
  float v = X[pc.x_off + t * pc.x_stride + e];
  if (XPROD) v *= X[pc.x2_off + t * pc.x_stride + e];
  return v;
}
void store_y(uint t, uint row, float v) {
  const uint a = pc.y_off + t * pc.y_stride + row;
  if (EPI == 2u) v = v / (1.0 + exp(-v));
  if (EPI == 1u) Y[a] += v;
  else Y[a] = v;
}
#else
void store_y(uint t, uint row, float v) { Y[pc.y_off + t * pc.y_stride + row] = v; }
#endif

#include "matvec_units.glsl"

#ifdef FISH_NO_SUBGROUP
shared float red[1024];
#endif

void main() {
  const uint n_groups = (pc.n_rows + ROWS - 1u) / ROWS;
#ifdef FISH_NO_SUBGROUP
  const uint lane = gl_LocalInvocationID.x, team_size = gl_WorkGroupSize.x;
  const uint team = 0u, teams = 1u;
#else
  const uint lane = gl_SubgroupInvocationID, team_size = gl_SubgroupSize;
  const uint team = gl_SubgroupID, teams = gl_NumSubgroups;
#endif
  const uint n_wg = gl_NumWorkGroups.x * gl_NumWorkGroups.y;
  const uint wg = gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x;
  const uint units = mv_units();

  // Uniform over the workgroup (barriers of the fallback live inside).
  for (uint g0 = wg * teams; g0 < n_groups; g0 += n_wg * teams) {
    const uint row0 = (g0 + team) * ROWS;
    for (uint k = 0u; k < ROWS * NT; ++k) acc[k] = 0.0;
#ifdef FISH_SPAN
    for (uint t = 0u; t < NT; ++t) ss[t] = 0.0;
#endif
    if (row0 < pc.n_rows) {
      uint u = lane;
      // Two units per trip so that two sets of loads are in flight per lane.
      for (; u + team_size < units; u += 2u * team_size) {
        mv_unit(u, row0);
        mv_unit(u + team_size, row0);
      }
      if (u < units) mv_unit(u, row0);
    }
#ifdef FISH_NO_SUBGROUP
    for (uint k = 0u; k < ROWS * NT; ++k) {
      red[lane] = acc[k];
      barrier();
      for (uint s = team_size / 2u; s > 0u; s >>= 1u) {
        if (lane < s) red[lane] += red[lane + s];
        barrier();
      }
      const uint r = k / NT, t = k % NT;
      if (lane == 0u && row0 + r < pc.n_rows) store_y(t, row0 + r, red[0]);
      barrier();
    }
#else
    if (row0 < pc.n_rows) {
#ifdef FISH_SPAN
      float inv[NT];
      for (uint t = 0u; t < NT; ++t) inv[t] = NORM ? inversesqrt(subgroupAdd(ss[t]) / float(pc.n_in) + pc.eps) : 1.0;
#endif
      for (uint k = 0u; k < ROWS * NT; ++k) {
        const float s = subgroupAdd(acc[k]);
        const uint r = k / NT, t = k % NT;
#ifdef FISH_SPAN
        if (lane == k % team_size && row0 + r < pc.n_rows) store_y(t, row0 + r, s * inv[t]);
#else
        if (lane == k % team_size && row0 + r < pc.n_rows) store_y(t, row0 + r, s);
#endif
      }
    }
#endif
  }
}
