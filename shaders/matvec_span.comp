#version 450
// The span's matrix-vector products (decode, n_tok <= 4):
//   y[t][r] = epi(s_t · Σ_i W[r][i] · x'[t][i]),  x' = x, or x ∘ x2 (XPROD: silu(gate)·up),
// s_t = the per-token scale of x: the 1/rms of x's rmsnorm (the norm weights
// are already multiplied into x), read from inv_in, or computed here from the
// producer's Σx² partials (inv_parts > 0), or 1.
//
// One WORKGROUP per group of ROWS rows (grid-stride over groups): its
// invocations split the rows' units (K) and reduce through subgroupAdd plus
// shared memory. A span puts a barrier after every step, so what counts is a
// single dispatch's time: many short workgroups end together, where one
// subgroup per row group (matvec.comp, tuned for back-to-back products) leaves
// a long tail. ROWS (1..16) trades
// workgroups for x reuse: x is loaded once per unit for all ROWS rows.
//
// PAIR: two matrices of the same shape (binding 0: gate, binding 5: up) in one
// dispatch, RT = 2·ROWS accumulated rows (rows r of both), x loaded once for
// both; EPI 4 writes silu(s·gate)·(s·up), so the down projection reads one vector.
//
// EPI: 0 y = v, 1 y += v (residual), 2 y = silu(v) (gate), 4 (PAIR) y = silu(v_a)·v_b,
//      3 y += v, then for the NEXT rmsnorm: xg = y ∘ P[norm_off..] and Σy² per
//        (token, row group) into sq ([NT][row groups]), which the consumers
//        reduce to 1/rms themselves (inv_parts).
// The residual y and the norm weights of EPI 1/3 are loaded before the main
// loop, so their latency hides behind the weights'.
// FISH_INT8: the int8 variant (see matvec_units_i8.glsl).
// QOUT (int8 decode of one token, EPI 3 / 4): the output the next matvec reads
// (EPI 3: y ∘ P, EPI 4: silu·up) is also written as the span's B32 rows
// (blocks of 32, quant_block.glsl) at q_out, so no quantise step and barrier
// follow. The workgroup's rows (SLICES·ROWS) are 32 and n_rows a multiple of
// 32: each workgroup owns a whole block and quantises it itself, within the
// epilogue's subgroup where one holds the block (gl_SubgroupSize >= 32:
// quant_b32_sg.glsl), else by the workgroup (q8b32_wg). EPI 3 quantises y ∘ P
// before the norm's 1/rms is known: the consumer applies that per-token scale
// to its sums (inv_in), as with f32 x.
// XB32: x is B32 rows (K-quant weights; matvec_units_i8.glsl).
// SLICES: the workgroup's invocations form SLICES equal slices (whole
// subgroups), slice s taking rows s·ROWS .. of the workgroup's SLICES·ROWS:
// a workgroup owns many rows (QOUT: a B32 block) while each invocation
// accumulates only ROWS of them (registers).
// Specialisation: 0 = workgroup size, 1 = ROWS, 2 = NT, 3 = EPI, 4 = XPROD, 5 = PAIR,
// 6 = QOUT, 7 = XB32, 8 = SLICES, 9 = U64 (int8 Q4_K / Q5_K: units of 64 elements,
// matvec_units_i8.glsl).
#extension GL_GOOGLE_include_directive : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint ROWS = 1;
layout(constant_id = 2) const uint NT = 1;
layout(constant_id = 3) const uint EPI = 0;
layout(constant_id = 4) const bool XPROD = false;
layout(constant_id = 5) const bool PAIR = false;
layout(constant_id = 6) const bool QOUT = false;
#define FISH_XB32
layout(constant_id = 7) const bool XB32 = false;
layout(constant_id = 8) const uint SLICES = 1;
#define FISH_U64
layout(constant_id = 9) const bool U64 = false;
const uint RT = PAIR ? 2u * ROWS : ROWS;  // accumulated rows (per invocation)
const uint WR = SLICES * ROWS;            // the workgroup's rows

#include "matmul_common.glsl"
// The arena once more (coherent), for what the epilogue writes beside y: the Σy²
// partials and the B32 rows.
layout(set = 0, binding = 4) coherent buffer ArenaC { float AC[]; };
layout(set = 0, binding = 4) coherent buffer ArenaCU { uint ACU[]; };

const uint NONE = 0xFFFFFFFFu;
float acc[RT * NT];  // acc[r * NT + t]
#define QB_X_SIZE (QOUT ? WR * NT : 1u)
#define QSG_SLOTS (QOUT ? WR : 1u)
#include "quant_block.glsl"

#ifdef FISH_INT8
// x is int8 rows: quantize_x.comp's (x·x2 and the scale already in them) or a
// producer's B32 rows (its scale still applied here, inv_in); XPROD is off.
#include "matvec_units_i8.glsl"
#else
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
#endif

// Per-subgroup sums (up to 32 subgroups): RT·NT products, then NT Σx² of the scale.
shared float part_sh[(RT + 1u) * NT * 32u];
shared float fin_sh[WR * NT];

void main() {
  const uint lid = gl_LocalInvocationID.x, wgs = gl_WorkGroupSize.x;
  const uint n_groups = (pc.n_rows + WR - 1u) / WR;
  // This invocation's slice, its place in it, the slice's subgroups.
  const uint sw = wgs / SLICES, slice = lid / sw, sl = lid % sw;
  const uint sps = gl_NumSubgroups / SLICES;  // (the host makes sw a multiple of the subgroup size)
  const uint units = mv_units();
  const bool parts = pc.inv_in != NONE && pc.inv_parts != 0u;
  const bool qsg = QOUT && gl_SubgroupSize >= 32u;  // uniform
  // The scale: 1/rms from inv_in, or this invocation's share of the partials
  // (summed over the workgroup with the products below).
  float scale[NT], sq_in[NT];
  for (uint t = 0u; t < NT; ++t) {
    scale[t] = pc.inv_in == NONE || parts ? 1.0 : X[pc.inv_in + t];
    sq_in[t] = 0.0;
    if (parts)
      for (uint i = lid; i < pc.inv_parts; i += wgs) sq_in[t] += X[pc.inv_in + t * pc.inv_parts + i];
  }

  for (uint g0 = gl_WorkGroupID.x; g0 < n_groups; g0 += gl_NumWorkGroups.x) {
    const uint row0 = g0 * WR;
    // The epilogue's operands: invocation lid < WR·NT finishes (row lid / NT, token lid % NT).
    float res = 0.0, nw = 0.0, qv = 0.0;
    if ((EPI == 1u || EPI == 3u) && lid < WR * NT && row0 + lid / NT < pc.n_rows) {
      res = Y[pc.y_off + (lid % NT) * pc.y_stride + row0 + lid / NT];
      if (EPI == 3u) nw = P[pc.norm_off + row0 + lid / NT];
    }
    for (uint k = 0u; k < RT * NT; ++k) acc[k] = 0.0;
    const uint srow0 = row0 + slice * ROWS;  // this slice's rows
    uint u = sl;
    for (; u + sw < units; u += 2u * sw) {  // two units per trip: two sets of loads in flight
      mv_unit(u, srow0);
      mv_unit(u + sw, srow0);
    }
    if (u < units) mv_unit(u, srow0);
    for (uint k = 0u; k < RT * NT; ++k) {
      const float s = subgroupAdd(acc[k]);
      if (subgroupElect()) part_sh[k * 32u + gl_SubgroupID] = s;
    }
    if (parts) {
      for (uint t = 0u; t < NT; ++t) {
        const float s = subgroupAdd(sq_in[t]);
        if (subgroupElect()) part_sh[(RT * NT + t) * 32u + gl_SubgroupID] = s;
      }
    }
    barrier();
    if (lid < WR * NT) {
      // Row wr = lid / NT of the workgroup: slice fs's row r, its sums k = r·NT + t.
      const uint wr = lid / NT, t = lid % NT, row = row0 + wr, fs = wr / ROWS, k = lid - fs * ROWS * NT;
      float v = 0.0, v2 = 0.0, sc = scale[t];
      if (parts) {
        float ss = 0.0;
        for (uint i = 0u; i < gl_NumSubgroups; ++i) ss += part_sh[(RT * NT + t) * 32u + i];
        sc = inversesqrt(ss / float(pc.n_in) + pc.eps);
      }
      for (uint i = fs * sps; i < (fs + 1u) * sps; ++i) {
        v += part_sh[k * 32u + i];
        if (PAIR) v2 += part_sh[(ROWS * NT + k) * 32u + i];
      }
      float sq = 0.0;
      if (row < pc.n_rows) {
        v *= sc;
        const uint a = pc.y_off + t * pc.y_stride + row;
        if (EPI == 2u) v = v / (1.0 + exp(-v));
        if (EPI == 4u) v = v / (1.0 + exp(-v)) * (v2 * sc);
        if (EPI == 1u || EPI == 3u) v += res;
        Y[a] = v;
        if (EPI == 3u) {
          const uint xg = pc.xg_off + t * pc.y_stride + row;
          Y[xg] = v * nw;
          sq = v * v;
        }
      }
      qv = row >= pc.n_rows ? 0.0 : EPI == 3u ? v * nw : v;
      if (QOUT && !qsg) qb_x[t * WR + wr] = qv;
      fin_sh[lid] = sq;
    }
    if (qsg && gl_SubgroupID == 0u) q8b32_sg(vec4(qv), 1u, lid < WR, lid, pc.q_out, pc.n_rows, row0 / 32u, lid);
    barrier();
    if (EPI == 3u && lid < NT) {
      float s = 0.0;
      for (uint r = 0u; r < WR; ++r) s += fin_sh[r * NT + lid];
      AC[pc.sq_off + lid * n_groups + g0] = s;
    }
    if (QOUT && !qsg) {  // qb_x is complete (the barrier above): this workgroup's blocks (NT = 1)
      q8b32_wg(lid, wgs, WR, pc.q_out, pc.n_rows, row0 / 32u);
      barrier();  // qb_x is reused by the next row group
    }
  }
}
