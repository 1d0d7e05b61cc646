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
// Compile-time: TYPE_<T> (F32, F16, Q4_0, Q8_0, Q4_K, Q5_K, Q6_K, FQ3); FISH_NO_SUBGROUP
// for devices without subgroup arithmetic in compute shaders; FISH_INT8: x is
// quantize_x.comp's int8 blocks and the products integer dot products
// (matvec_units_i8.glsl; Q4_0, Q8_0, Q4_K, Q5_K, Q6_K, FQ3).
// Specialisation constants: 0 = workgroup size, 1 = ROWS, 2 = NT (tokens, 1..4).
// (The span's variant, with one workgroup per row group, is matvec_span.comp.)

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

void store_y(uint t, uint row, float v) { Y[pc.y_off + t * pc.y_stride + row] = v; }

#ifdef FISH_INT8
#include "matvec_units_i8.glsl"  // x: int8 blocks from quantize_x.comp
#else
#include "matvec_units.glsl"
#endif

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
      for (uint k = 0u; k < ROWS * NT; ++k) {
        const float s = subgroupAdd(acc[k]);
        const uint r = k / NT, t = k % NT;
        if (lane == k % team_size && row0 + r < pc.n_rows) store_y(t, row0 + r, s);
      }
    }
#endif
  }
}
