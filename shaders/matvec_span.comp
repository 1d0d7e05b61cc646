#version 450
// The span's matrix-vector products (decode, n_tok <= 4):
//   y[t][r] = epi(s_t · Σ_i W[r][i] · x'[t][i]),  x' = x, or x ∘ x2 (XPROD: silu(gate)·up),
// s_t = the per-token scale at inv_in (1/rms of x's rmsnorm, computed by the
// step that produced x; the norm weights are already multiplied into x).
//
// One WORKGROUP per group of ROWS rows (grid-stride over groups): its
// invocations split the rows' units (K) and reduce through subgroupAdd plus
// shared memory. A span puts a barrier after every step, so what counts is a
// single dispatch's time: many short workgroups end together, where one
// subgroup per row group (matvec.comp, tuned for back-to-back products) leaves
// a long tail (H200: 41 -> ~22 us for the 8B's ffn_down).
//
// EPI: 0 y = v, 1 y += v (residual), 2 y = silu(v) (gate),
//      3 y += v, then for the NEXT rmsnorm: xg = y ∘ P[norm_off..], Σy² per
//        (token, row group) into sq, and the last workgroup to finish (an
//        arrival counter) turns the partials into 1/rms at inv_out. The next
//        matvec then reads xg with s_t = that 1/rms: no norm pass of its own.
// Specialisation: 0 = workgroup size, 1 = ROWS, 2 = NT, 3 = EPI, 4 = XPROD.
#extension GL_GOOGLE_include_directive : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint ROWS = 1;
layout(constant_id = 2) const uint NT = 1;
layout(constant_id = 3) const uint EPI = 0;
layout(constant_id = 4) const bool XPROD = false;

#include "matmul_common.glsl"
// The arena once more, coherent: partials one workgroup reads after others wrote them.
layout(set = 0, binding = 4) coherent buffer ArenaC { float AC[]; };
layout(set = 0, binding = 4) coherent buffer ArenaCU { uint ACU[]; };

const uint NONE = 0xFFFFFFFFu;
float acc[ROWS * NT];  // acc[r * NT + t]

vec4 x4_at(uint t, uint e) {
  vec4 v = X4[(pc.x_off + t * pc.x_stride + e) >> 2];
  if (XPROD) v *= X4[(pc.x2_off + t * pc.x_stride + e) >> 2];
  return v;
}
float x_at(uint t, uint e) {
  float v = X[pc.x_off + t * pc.x_stride + e];
  if (XPROD) v *= X[pc.x2_off + t * pc.x_stride + e];
  return v;
}

#include "matvec_units.glsl"

shared float part_sh[ROWS * NT * 32u];  // per-subgroup sums (up to 32 subgroups)
shared float fin_sh[ROWS * NT];
shared uint last_sh;

void main() {
  const uint lid = gl_LocalInvocationID.x, wgs = gl_WorkGroupSize.x;
  const uint n_groups = (pc.n_rows + ROWS - 1u) / ROWS;
  const uint units = mv_units();
  float scale[NT];
  for (uint t = 0u; t < NT; ++t) scale[t] = pc.inv_in == NONE ? 1.0 : X[pc.inv_in + t];

  for (uint g0 = gl_WorkGroupID.x; g0 < n_groups; g0 += gl_NumWorkGroups.x) {
    const uint row0 = g0 * ROWS;
    for (uint k = 0u; k < ROWS * NT; ++k) acc[k] = 0.0;
    uint u = lid;
    for (; u + wgs < units; u += 2u * wgs) {  // two units per trip: two sets of loads in flight
      mv_unit(u, row0);
      mv_unit(u + wgs, row0);
    }
    if (u < units) mv_unit(u, row0);
    for (uint k = 0u; k < ROWS * NT; ++k) {
      const float s = subgroupAdd(acc[k]);
      if (subgroupElect()) part_sh[k * 32u + gl_SubgroupID] = s;
    }
    barrier();
    if (lid < ROWS * NT) {
      const uint r = lid / NT, t = lid % NT, row = row0 + r;
      float v = 0.0;
      for (uint i = 0u; i < gl_NumSubgroups; ++i) v += part_sh[lid * 32u + i];
      float sq = 0.0;
      if (row < pc.n_rows) {
        v *= scale[t];
        const uint a = pc.y_off + t * pc.y_stride + row;
        if (EPI == 2u) v = v / (1.0 + exp(-v));
        if (EPI == 1u || EPI == 3u) v += Y[a];
        Y[a] = v;
        if (EPI == 3u) {
          Y[pc.xg_off + t * pc.y_stride + row] = v * P[pc.norm_off + row];
          sq = v * v;
        }
      }
      fin_sh[lid] = sq;
    }
    barrier();
    if (EPI == 3u && lid < NT) {
      float s = 0.0;
      for (uint r = 0u; r < ROWS; ++r) s += fin_sh[r * NT + lid];
      AC[pc.sq_off + lid * n_groups + g0] = s;
    }
  }
  if (EPI != 3u) return;

  // ---- the last workgroup to finish: Σy² over all row groups -> 1/rms ----
  memoryBarrierBuffer();
  barrier();
  if (lid == 0u) last_sh = atomicAdd(ACU[pc.cnt], 1u) == gl_NumWorkGroups.x - 1u ? 1u : 0u;
  barrier();
  if (last_sh == 0u) return;
  memoryBarrierBuffer();
  for (uint t = 0u; t < NT; ++t) {
    float s = 0.0;
    for (uint g = lid; g < n_groups; g += wgs) s += AC[pc.sq_off + t * n_groups + g];
    s = subgroupAdd(s);
    if (subgroupElect()) part_sh[gl_SubgroupID] = s;
    barrier();
    if (lid == 0u) {
      float tot = 0.0;
      for (uint i = 0u; i < gl_NumSubgroups; ++i) tot += part_sh[i];
      AC[pc.inv_out + t] = inversesqrt(tot / float(pc.n_rows) + pc.eps);
    }
    barrier();
  }
  if (lid == 0u) ACU[pc.cnt] = 0u;
}
