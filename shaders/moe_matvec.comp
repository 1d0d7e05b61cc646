#version 450
// The MoE experts' products over the pairs grouped by expert (moe_common.glsl),
// reading only the chosen experts' rows of a stacked weight (n_expert matrices
// of n_rows rows, GGUF layout, one after another):
//   PAIR (gate|up, binding 0 / 5):  h[p][r] = silu(n[t]·gate_e[r]) · (n[t]·up_e[r])
//   else (down):                    d[p][r] = w_p · (h[p]·down_e[r])
// for every pair p = t·k + j routed to expert e, w_p its routing weight.
// Grid: x = row groups of ROWS rows (grid-stride), y = active-expert slot s (a
// slot past n_active returns at once). A workgroup takes its expert's pairs NT
// at a time: its ROWS rows are read from memory once per chunk and from cache
// for the next NT pairs, so a prefill reads each expert's weights once, a
// decode (NT = 1, n_tok·k pairs) only the k experts' rows.
// f32 x (the normalised FFN input, or h); the per-type units are
// matvec_units.glsl's, their row index offset by the expert (FISH_MOE in
// matvec_weights.glsl). FISH_INT8 (mvmi_<T>, K-quants): x is int8 B32 rows
// instead (quant_block.glsl; matvec_units_i8.glsl's units, XB32), a row per
// token (PAIR) or pair, x_stride words apart; everything else as above.
// Specialisation: 0 = workgroup size, 1 = ROWS, 2 = NT, 3 = PAIR, 4 = SUM,
// 5 = NEXT, 6 = ROUTE, 7 = SLICES, 8 = QOUT.
//
// ROUTE (gate|up of a decode, NT = 1, flags MoePush::kPairs): grid y = pair p
// = t·k + j, its expert read from the pair's words, which the router matvec's
// last workgroup wrote (matvec_span.comp EPI 5); no grouped lists.
// SLICES (ROUTE): the workgroup's invocations form SLICES equal slices (whole
// subgroups), slice s taking row group G·SLICES + s as a workgroup of one
// slice would. QOUT (ROUTE, SLICES·ROWS = 32, n_rows a multiple of 32): h is
// also written as the span's B32 rows (quant_block.glsl), pair p's row at word
// q_out + p·q_stride: each workgroup quantises its own block of 32 rows, so the
// down reads int8 rows (mvmi_<T> SUM) with no quantise step between.
//
// Scale (gate|up of a decode whose norms are epilogues): with inv_in != NONE,
// x is n·norm without 1/rms, and inv_in holds each token's [inv_parts] Σx²
// partials (the producer's row groups): the sums are multiplied by 1/rms =
// 1/sqrt(Σ/n_in + eps) of the pair's token, reduced here with the products.
//
// SUM (down of a decode: NT = 1, not PAIR), the layer's sum folded in:
//   x[t][r] += Σ_j w_j · (h[t·k + j] · down_{e_j}[r])  (+ sigmoid(n[t]·g) · sh[t][r] with a shared expert)
// Grid: x = row groups (grid-stride), y = token t. The invocations take the
// (pair j, unit u) items of the token's k pairs, so a row group reads all k
// experts' rows at full width (n_in = n_ff_expert has few units per row); each
// item's sums are scaled by its pair's weight before the workgroup's reduction,
// and one invocation per row adds the total to x (no atomics: deterministic).
// y_off / y_stride: x; x2_off: sh [n_tok][n_rows]; xg_off: n [n_tok][n_rows];
// norm_off: the shared expert's gate vector in P, or 0xFFFFFFFF: none.
// NEXT (SUM without a shared expert): the next rmsnorm as matvec_span.comp's
// EPI 3: x_new ∘ P[norm_off + row] into xg_off (stride n_rows) and per row
// group g0 Σ x_new² at sq_off + t · row groups + g0, which the next layer's
// (or the head's) consumers reduce to 1/rms themselves.
// QOUT with SUM (NEXT, one token, n_rows a multiple of 32): x_new ∘ P is
// also written as the span's B32 rows at q_out, for the next layer's q/k/v
// (no quantise step between). A B32 block spans 32 / ROWS row groups of
// different workgroups: each writes its x_new ∘ P through the coherent view
// and counts itself in at word cnt_off + block; the block's last to arrive
// reads the 32 values back, quantises them (quant_block.glsl) and leaves its
// counter at 0 for the next dispatch.
#extension GL_GOOGLE_include_directive : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint ROWS = 4;
layout(constant_id = 2) const uint NT = 1;
layout(constant_id = 3) const bool PAIR = false;
layout(constant_id = 4) const bool SUM = false;
layout(constant_id = 5) const bool NEXT = false;
layout(constant_id = 6) const bool ROUTE = false;
layout(constant_id = 7) const uint SLICES = 1;
layout(constant_id = 8) const bool QOUT = false;
const uint RT = PAIR ? 2u * ROWS : ROWS;

#define FISH_MOE
#include "matmul_common.glsl"
layout(set = 0, binding = 4) readonly buffer ArenaR { uint AR[]; };
#include "moe_common.glsl"
// QOUT's B32 rows go through y's binding (this workgroup's own block: no coherence needed).
layout(set = 0, binding = 3) restrict buffer ArenaYU { uint YU[]; };
// SUM's QOUT: x_new ∘ P and the arrival counters, seen by other workgroups.
layout(set = 0, binding = 4) coherent buffer ArenaC { float AC4[]; };
layout(set = 0, binding = 4) coherent buffer ArenaCU { uint ACU4[]; };
#define AC Y
#define ACU YU
#define QB_X_SIZE (QOUT ? 32u : 1u)
#define QSG_SLOTS (QOUT ? 32u : 1u)
#include "quant_block.glsl"

float acc[RT * NT];  // acc[r * NT + t]
uint moe_xb[NT];     // float index of each of the chunk's NT x rows
uint moe_tok[NT];    // the row (token or pair) of each of the chunk's NT x rows

#ifdef FISH_INT8
// mvmi_<T> (K-quants, a decode's gate|up): x is the span's B32 rows (wo's QOUT:
// n·ffn_norm before 1/rms, which the scale below applies), x_stride words apart.
#define FISH_XB32
const bool XB32 = true;
#define MV_TOK(t) moe_tok[t]
#include "matvec_units_i8.glsl"
#else
vec4 x4_at(uint t, uint e) { return X4[(moe_xb[t] + e) >> 2]; }
float x_at(uint t, uint e) { return X[moe_xb[t] + e]; }
#include "matvec_units.glsl"
#endif

shared float part_sh[(RT + 1u) * NT * 32u];  // the products' sums, then the scale's Σx²
shared float gate_sh[32];
#define ARRIVAL_U ACU4
#include "arrival.glsl"

// SUM's QOUT, after a row group's x_new ∘ P (see the top of the file): the
// block's last workgroup to arrive writes the block's B32 words. Every
// invocation calls it (barriers inside); one token.
void sum_rows(uint row0) {
  const uint lid = gl_LocalInvocationID.x, blk = row0 / 32u;
  if (!arrive_last(pc.cnt_off + blk, 32u / ROWS)) return;  // uniform
  if (lid < 32u) qb_x[lid] = AC4[pc.xg_off + blk * 32u + lid];
  barrier();
  if (gl_SubgroupSize >= 32u) {  // uniform
    if (gl_SubgroupID == 0u) q8b32_sg(vec4(lid < 32u ? qb_x[lid] : 0.0), 1u, lid < 32u, lid, pc.q_out, pc.n_rows, blk, lid);
  } else {
    q8b32_wg(lid, gl_WorkGroupSize.x, 32u, pc.q_out, pc.n_rows, blk);
  }
  arrival_reset(pc.cnt_off + blk);  // for the next dispatch
}

// SUM: see the top of the file.
void main_sum() {
  const uint lid = gl_LocalInvocationID.x, wgs = gl_WorkGroupSize.x;
  const uint K = pc.k, t = gl_WorkGroupID.y, E = pc.n_rows;
  float gate = 0.0;
  const bool shared_expert = !NEXT && pc.norm_off != 0xFFFFFFFFu;
  if (shared_expert) {
    float d = 0.0;
    for (uint i = lid; i < E; i += wgs) d += X[pc.xg_off + t * E + i] * P[pc.norm_off + i];
    d = subgroupAdd(d);
    if (subgroupElect()) gate_sh[gl_SubgroupID] = d;
    barrier();
    float dot = 0.0;
    for (uint i = 0u; i < gl_NumSubgroups; ++i) dot += gate_sh[i];
    gate = 1.0 / (1.0 + exp(-dot));
  }
  const uint n_groups = (pc.n_rows + ROWS - 1u) / ROWS;
  const uint units = mv_units(), items = K * units;
  for (uint g0 = gl_WorkGroupID.x; g0 < n_groups; g0 += gl_NumWorkGroups.x) {
    const uint row0 = g0 * ROWS;
    float tot[ROWS];
    for (uint r = 0u; r < ROWS; ++r) tot[r] = 0.0;
    for (uint q = lid; q < items; q += wgs) {
      const uint j = q / units, p = t * K + j;
      moe_row0 = AR[pc.route_off + 2u * p] * pc.n_rows;
      moe_xb[0] = pc.x_off + p * pc.x_stride, moe_tok[0] = p;
      for (uint r = 0u; r < ROWS; ++r) acc[r] = 0.0;
      mv_unit(q - j * units, row0);
      const float w = uintBitsToFloat(AR[pc.route_off + 2u * p + 1u]);
      for (uint r = 0u; r < ROWS; ++r) tot[r] += w * acc[r];
    }
    for (uint r = 0u; r < ROWS; ++r) {
      const float v = subgroupAdd(tot[r]);
      if (subgroupElect()) part_sh[r * 32u + gl_SubgroupID] = v;
    }
    barrier();
    float sq = 0.0;
    if (lid < ROWS && row0 + lid < pc.n_rows) {
      const uint row = row0 + lid;
      float v = 0.0;
      for (uint i = 0u; i < gl_NumSubgroups; ++i) v += part_sh[lid * 32u + i];
      if (shared_expert) v += gate * X[pc.x2_off + t * E + row];
      const uint a = pc.y_off + t * pc.y_stride + row;
      v += Y[a];
      Y[a] = v;
      if (NEXT) {
        if (QOUT) AC4[pc.xg_off + row] = v * P[pc.norm_off + row];  // read back by sum_rows
        else Y[pc.xg_off + t * E + row] = v * P[pc.norm_off + row];
        sq = v * v;
      }
    }
    if (NEXT && gl_SubgroupID == 0u) {  // ROWS <= the subgroup size: the row group's rows are subgroup 0's first lanes
      const float s = subgroupAdd(sq);
      if (subgroupElect()) Y[pc.sq_off + t * n_groups + g0] = s;
    }
    if (QOUT) sum_rows(row0);
    barrier();  // part_sh (and qb_x) are reused by the next row group
  }
}

void main() {
  if (SUM) {
    main_sum();
    return;
  }
  const uint lid = gl_LocalInvocationID.x, wgs = gl_WorkGroupSize.x;
  const uint K = pc.k, NE = pc.n_expert, P = pc.n_tok * K;
  const uint G = moe_group(pc.route_off, P), L = moe_list(G, NE);
  const uint s = gl_WorkGroupID.y;
  uint e, p0, p1;
  if (ROUTE) {  // s is the pair t·k + j
    e = AR[pc.route_off + 2u * s], p0 = s, p1 = s + 1u;
  } else {
    // The four words are read together (s < min(n_expert, P): within the routing
    // words even past n_active), then the slot is checked: one memory latency, not two.
    const uint n_act = AR[G];
    e = AR[G + 1u + s], p0 = AR[G + 1u + NE + s], p1 = AR[G + 2u + NE + s];
    if (s >= n_act) return;  // uniform: the workgroup's slot has no expert
  }
  moe_row0 = e * pc.n_rows;
  const uint n_groups = (pc.n_rows + ROWS - 1u) / ROWS, wg_groups = (n_groups + SLICES - 1u) / SLICES;
  const uint sw = wgs / SLICES, sl = lid % sw, slice = lid / sw, sgs = gl_NumSubgroups / SLICES;
  const uint units = mv_units();
  const bool scaled = pc.inv_in != 0xFFFFFFFFu && pc.inv_parts != 0u;
  for (uint G = gl_WorkGroupID.x; G < wg_groups; G += gl_NumWorkGroups.x) {
    const uint row0 = (G * SLICES + slice) * ROWS;  // past n_rows: reads the last row, writes nothing
    for (uint b = p0; b < p1; b += NT) {
      uint pr[NT];
      for (uint t = 0u; t < NT; ++t) {
        pr[t] = ROUTE ? b : AR[L + min(b + t, p1 - 1u)];  // past the group's end: its last pair again (not written)
        moe_tok[t] = PAIR ? pr[t] / K : pr[t];
        moe_xb[t] = pc.x_off + moe_tok[t] * pc.x_stride;
      }
      for (uint k = 0u; k < RT * NT; ++k) acc[k] = 0.0;
      for (uint u = sl; u < units; u += sw) mv_unit(u, row0);
      for (uint k = 0u; k < RT * NT; ++k) {
        const float v = subgroupAdd(acc[k]);
        if (subgroupElect()) part_sh[k * 32u + gl_SubgroupID] = v;
      }
      if (scaled) {  // each chunk token's Σx² from the producer's partials
        for (uint t = 0u; t < NT; ++t) {
          const uint tk = PAIR ? pr[t] / K : pr[t];
          float ss = 0.0;
          for (uint i = lid; i < pc.inv_parts; i += wgs) ss += X[pc.inv_in + tk * pc.inv_parts + i];
          ss = subgroupAdd(ss);
          if (subgroupElect()) part_sh[(RT * NT + t) * 32u + gl_SubgroupID] = ss;
        }
      }
      barrier();
      if (lid < SLICES * ROWS * NT) {  // slice s's rows: its own subgroups' sums, every subgroup's Σx²
        const uint s = lid / (ROWS * NT), r = lid / NT % ROWS, t = lid % NT, row = (G * SLICES + s) * ROWS + r;
        float v = 0.0;
        if (row < pc.n_rows && b + t < p1) {
          float v2 = 0.0, ss = 0.0;
          for (uint i = s * sgs; i < (s + 1u) * sgs; ++i) {
            v += part_sh[(r * NT + t) * 32u + i];
            if (PAIR) v2 += part_sh[((ROWS + r) * NT + t) * 32u + i];
          }
          for (uint i = 0u; scaled && i < gl_NumSubgroups; ++i) ss += part_sh[(RT * NT + t) * 32u + i];
          if (scaled) {
            const float sc = inversesqrt(ss / float(pc.n_in) + pc.eps);
            v *= sc, v2 *= sc;
          }
          if (PAIR) v = v / (1.0 + exp(-v)) * v2;
          else v *= uintBitsToFloat(AR[pc.route_off + 2u * pr[t] + 1u]);
          Y[pc.y_off + pr[t] * pc.y_stride + row] = v;
        }
        if (QOUT) qb_x[lid] = v;  // NT = 1: element lid of the workgroup's block
      }
      barrier();  // part_sh is reused by the next chunk; QOUT: qb_x is complete
      if (QOUT) {
        const uint q_base = pc.q_out + pr[0] * pc.q_stride;
        if (gl_SubgroupSize >= 32u) {  // uniform
          if (gl_SubgroupID == 0u) q8b32_sg(vec4(lid < 32u ? qb_x[lid] : 0.0), 1u, lid < 32u, lid, q_base, pc.n_rows, G, lid);
        } else {
          q8b32_wg(lid, wgs, 32u, q_base, pc.n_rows, G);
        }
        barrier();  // qb_x is reused by the next row group
      }
    }
  }
}
