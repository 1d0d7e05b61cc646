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
//      5 the router of an MoE decode: y = v (the n_rows = n_expert logits of
//        each token, written through the coherent view), then the dispatch's
//        last workgroup to arrive (a counter at word sq_off, left at 0 again)
//        routes every token as moe_route.comp does (moe_common.glsl's
//        moe_route_token: softmax, top-k, renormalised where xg_off bit 16 says)
//        and writes its pairs' words (expert, weight) at word norm_off, k =
//        xg_off & 0xFFFF. The experts' gate|up then reads its pair's expert in
//        one load (moe_matvec.comp ROUTE).
// ROUTER (EPI 3 with QOUT, one token: an MoE decode's wo): the router folded
// in. Its f32 weights R [n_expert][n_rows] are binding 5 (no PAIR here). Each
// row group (the workgroup's WR = 32 rows of n = y ∘ P, before 1/rms) writes
// its partial logits Σ_r R[e][r]·n[r] at float rt_part + group·n_expert + e
// and counts itself in at word rt_cnt (left at 0 again); the last group to
// arrive sums them, times 1/rms from the Σy² partials, into the logits at
// rt_logits and routes them as EPI 5 does (pairs' words at rt_route, k and
// the renormalisation in rt_k), so the decode has no router dispatch.
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
// XB32: x is B32 rows (K-quant, Q4_0 or Q8_0 weights; matvec_units_i8.glsl).
// SLICES: the workgroup's invocations form SLICES equal slices (whole
// subgroups), slice s taking rows s·ROWS .. of the workgroup's SLICES·ROWS:
// a workgroup owns many rows (QOUT: a B32 block) while each invocation
// accumulates only ROWS of them (registers).
// NB (token groups: forwards of 2..32 rows, several sequences' decode rows):
// 0 = the decode of n_tok = NT tokens (1..4) as above. NB >= 1: a workgroup
// takes one (row group, token group) pair of the grid, the token group being
// NTT = NT·NB consecutive tokens (the last group partial); the weight unit is
// read once per workgroup (from memory once; the chunks after the first find
// it in L1) and multiplied with every token of the group, NT tokens' x at a
// time in registers (mv_unit's x arrays), the chunk's sums added into tot[]
// (RT·NTT accumulators). The token groups of one row group are neighbours in
// the grid, so they read the same weights at about the same time (L2). Tokens
// past n_tok in the last chunk read the last token's x and are not written.
// LANES (token groups only; 0: the layout above): rows across the lanes. A
// slice's sw invocations are sw / LANES lane groups, each owning ROWS rows of
// the workgroup's WR = (sw / LANES)·ROWS, its LANES lanes splitting the units
// with the other slices (lane l of slice s takes units s·LANES + l, stride
// SLICES·LANES). The invocations of a subgroup then read the same unit of x
// (LANES different ones: the loads are broadcasts, not one line per lane)
// and each its own row's weights: at 8+ tokens the x loads, not the weights,
// bound the layout above (docs/experiments/vulkan-span-batch-rows.md). The
// sums meet in shared memory (SLICES·LANES per row and token).
// Specialisation: 0 = workgroup size, 1 = ROWS, 2 = NT, 3 = EPI, 4 = XPROD, 5 = PAIR,
// 6 = QOUT, 7 = XB32, 8 = SLICES, 9 = U64 (int8 Q4_K / Q5_K: units of 64 elements,
// matvec_units_i8.glsl), 10 = NB, 11 = LANES, 12 = RL_ROWS, 13 = ROUTER.
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
layout(constant_id = 10) const uint NB = 0;
layout(constant_id = 11) const uint LANES = 0;
layout(constant_id = 12) const uint RL_ROWS = 1;  // RL: the workgroup's rows, (workgroup size / SLICES / LANES)·ROWS
layout(constant_id = 13) const bool ROUTER = false;
const uint RT = PAIR ? 2u * ROWS : ROWS;  // accumulated rows (per invocation)
const bool RL = LANES > 0u;               // rows across lanes (token groups)
const uint WR = RL ? RL_ROWS : SLICES * ROWS;  // the workgroup's rows
const uint WGS = RL ? RL_ROWS / ROWS * LANES * SLICES : 1u;  // RL: the workgroup size
const bool BATCH = NB > 0u;
const uint NTT = BATCH ? NT * NB : NT;    // the workgroup's tokens

#include "matmul_common.glsl"
// The arena once more (coherent), for what the epilogue writes beside y: the Σy²
// partials and the B32 rows.
layout(set = 0, binding = 4) coherent buffer ArenaC { float AC[]; };
layout(set = 0, binding = 4) coherent buffer ArenaCU { uint ACU[]; };

const uint NONE = 0xFFFFFFFFu;
float acc[RT * NT];  // acc[r * NT + t]
float tot[BATCH ? RT * NTT : 1u];  // BATCH: tot[r * NTT + t], t of the token group
uint tok0 = 0u;                    // BATCH: the chunk's first token
// The token whose x a unit reads as its t-th (BATCH: of the chunk; past n_tok: the last).
uint mv_tok(uint t) { return BATCH ? min(tok0 + t, pc.n_tok - 1u) : t; }
#define MV_TOK(t) mv_tok(t)
#define QB_X_SIZE (QOUT ? WR * NT : 1u)
#define QSG_SLOTS (QOUT ? WR : 1u)
#include "quant_block.glsl"
// EPI 5's routing (moe_common.glsl), its logits read through the coherent view.
#define MOE_LOGIT(i) AC[i]
#define MOE_RT_ON (EPI == 5u || ROUTER)
#define MOE_ROUTING
#include "moe_common.glsl"

#ifdef FISH_INT8
// x is int8 rows: quantize_x.comp's (x·x2 and the scale already in them) or a
// producer's B32 rows (its scale still applied here, inv_in); XPROD is off.
#include "matvec_units_i8.glsl"
#else
vec4 x4_at(uint t, uint e) {
  t = mv_tok(t);
  vec4 v = X4[(pc.x_off + t * pc.x_stride + e) >> 2];
  if (XPROD) v *= X4[(pc.x2_off + t * pc.x_stride + e) >> 2];
  return v;
}
float x_at(uint t, uint e) {
  t = mv_tok(t);
  float v = X[pc.x_off + t * pc.x_stride + e];
  if (XPROD) v *= X[pc.x2_off + t * pc.x_stride + e];
  return v;
}

#include "matvec_units.glsl"
#endif

// Per-subgroup sums (up to 32 subgroups): RT·NTT products, then NTT Σx² of the scale.
shared float part_sh[(RT + 1u) * NTT * 32u];
shared float fin_sh[WR * NTT];
shared float rl_sh[RL ? RT * NTT * WGS : 1u];  // RL: every invocation's sums, [k][invocation]

float scale[NTT], sq_in[NTT];
// The per-token scales of tokens tb .. tb + NTT - 1: 1/rms from inv_in, or this
// invocation's share of the partials (summed over the workgroup with the products).
void load_scales(uint tb, bool parts) {
  const uint lid = gl_LocalInvocationID.x, wgs = gl_WorkGroupSize.x;
  for (uint t = 0u; t < NTT; ++t) {
    const uint tk = BATCH ? min(tb + t, pc.n_tok - 1u) : t;
    scale[t] = pc.inv_in == NONE || parts ? 1.0 : X[pc.inv_in + tk];
    sq_in[t] = 0.0;
    if (parts)
      for (uint i = lid; i < pc.inv_parts; i += wgs) sq_in[t] += X[pc.inv_in + tk * pc.inv_parts + i];
  }
}

// Unit u of the rows from srow0 for the workgroup's tokens from tb.
void mv_step(uint u, uint srow0, uint tb) {
  if (!BATCH) {
    mv_unit(u, srow0);
    return;
  }
  for (uint c = 0u; c < NB; ++c) {
    tok0 = tb + c * NT;
    if (tok0 < pc.n_tok) {  // uniform: chunks past the last token cost nothing
      for (uint k = 0u; k < RT * NT; ++k) acc[k] = 0.0;
      mv_unit(u, srow0);
      for (uint r = 0u; r < RT; ++r)
        for (uint t = 0u; t < NT; ++t) tot[r * NTT + c * NT + t] += acc[r * NT + t];
    }
  }
}

#define ARRIVAL_U ACU
#include "arrival.glsl"

// One token's routing from its n_expert logits at lo (moe_route_token), its
// k pairs' words (expert, weight) written at word w. Every invocation calls it.
void route_pairs(uint lo, uint NE, uint K, bool renorm, uint w) {
  const uint lid = gl_LocalInvocationID.x;
  moe_route_token(lo, NE, K, renorm);
  if (lid < K) {
    ACU[w + 2u * lid] = rt_sel[lid];
    ACU[w + 2u * lid + 1u] = floatBitsToUint(rt_w[lid]);
  }
}

// EPI 5, after this workgroup's logits: the last workgroup to arrive routes
// every token (see the top of the file).
void route_tail() {
  if (!arrive_last(pc.sq_off, gl_NumWorkGroups.x)) return;  // uniform
  const uint K = pc.xg_off & 0xFFFFu;
  const bool renorm = (pc.xg_off & 0x10000u) != 0u;
  // (rt_sel / rt_w of token t are read before token t + 1's first barrier rewrites them.)
  for (uint t = 0u; t < pc.n_tok; ++t)
    route_pairs(pc.y_off + t * pc.y_stride, pc.n_rows, K, renorm, pc.norm_off + 2u * t * K);
  arrival_reset(pc.sq_off);  // for the next forward
}

// ROUTER, after row group g0's epilogue (its WR values of n in rt_n, the
// group's Σy² partial written through the coherent view): see the top of the
// file. Every invocation calls it (barriers inside).
shared float rt_n[ROUTER ? WR : 1u];
void router_fold(uint row0, uint g0, uint n_groups) {
  const uint lid = gl_LocalInvocationID.x, wgs = gl_WorkGroupSize.x, NE = pc.rt_n_expert;
  for (uint e = lid; e < NE; e += wgs) {
    const uint b = (e * pc.n_rows + row0) >> 2u;  // R's row e from the group's first row (n_rows % 32 == 0)
    float s = 0.0;
    for (uint j = 0u; j < WR / 4u; ++j)
      s += dot(uintBitsToFloat(WB4[b + j]), vec4(rt_n[4u * j], rt_n[4u * j + 1u], rt_n[4u * j + 2u], rt_n[4u * j + 3u]));
    AC[pc.rt_part + g0 * NE + e] = s;
  }
  if (!arrive_last(pc.rt_cnt, n_groups)) return;  // uniform
  float ss = 0.0;
  for (uint g = 0u; g < n_groups; ++g) ss += AC[pc.sq_off + g];
  const float sc = inversesqrt(ss / float(pc.n_rows) + pc.eps);
  for (uint e = lid; e < NE; e += wgs) {
    float l = 0.0;
    for (uint g = 0u; g < n_groups; ++g) l += AC[pc.rt_part + g * NE + e];
    AC[pc.rt_logits + e] = l * sc;
  }
  memoryBarrierBuffer();
  barrier();
  route_pairs(pc.rt_logits, NE, pc.rt_k & 0xFFFFu, (pc.rt_k & 0x10000u) != 0u, pc.rt_route);
  arrival_reset(pc.rt_cnt);  // for the next forward
}

void main() {
  const uint lid = gl_LocalInvocationID.x, wgs = gl_WorkGroupSize.x;
  const uint n_groups = (pc.n_rows + WR - 1u) / WR;
  const uint n_tg = BATCH ? (pc.n_tok + NTT - 1u) / NTT : 1u;  // token groups
  // This invocation's slice, its place in it, the slice's subgroups.
  const uint sw = wgs / SLICES, slice = lid / sw, sl = lid % sw;
  const uint sps = gl_NumSubgroups / SLICES;  // (the host makes sw a multiple of the subgroup size)
  const uint units = mv_units();
  const bool parts = pc.inv_in != NONE && pc.inv_parts != 0u;
  const bool qsg = QOUT && gl_SubgroupSize >= 32u;  // uniform
  if (!BATCH) load_scales(0u, parts);

  for (uint it = gl_WorkGroupID.x; it < n_groups * n_tg; it += gl_NumWorkGroups.x) {
    // The row group and the token group's first token (the token groups of a row group side by side).
    const uint g0 = BATCH ? it / n_tg : it, tb = BATCH ? (it % n_tg) * NTT : 0u;
    if (BATCH) load_scales(tb, parts);
    const uint row0 = g0 * WR;
    // The epilogue's operands: invocation lid < WR·NTT finishes (row lid / NTT,
    // token tb + lid % NTT); RL (whose WR·NTT may pass the workgroup) loads them there.
    float res = 0.0, nw = 0.0, qv = 0.0;
    if (!RL && (EPI == 1u || EPI == 3u) && lid < WR * NTT && row0 + lid / NTT < pc.n_rows && tb + lid % NTT < pc.n_tok) {
      res = Y[pc.y_off + (tb + lid % NTT) * pc.y_stride + row0 + lid / NTT];
      if (EPI == 3u) nw = P[pc.norm_off + row0 + lid / NTT];
    }
    for (uint k = 0u; k < RT * NT; ++k) acc[k] = 0.0;
    if (BATCH)
      for (uint k = 0u; k < RT * NTT; ++k) tot[k] = 0.0;
    // This invocation's rows and units: the slice's rows, units sl + i·sw;
    // RL: its lane group's rows, units slice·LANES + lane + i·SLICES·LANES.
    const uint srow0 = RL ? row0 + (sl / LANES) * ROWS : row0 + slice * ROWS;
    const uint ustride = RL ? SLICES * LANES : sw;
    uint u = RL ? slice * LANES + sl % LANES : sl;
    for (; u + ustride < units; u += 2u * ustride) {  // two units per trip: two sets of loads in flight
      mv_step(u, srow0, tb);
      mv_step(u + ustride, srow0, tb);
    }
    if (u < units) mv_step(u, srow0, tb);
    if (RL) {
      for (uint k = 0u; k < RT * NTT; ++k) rl_sh[k * wgs + lid] = BATCH ? tot[k] : acc[k];
    } else {
      for (uint k = 0u; k < RT * NTT; ++k) {
        const float s = subgroupAdd(BATCH ? tot[k] : acc[k]);
        if (subgroupElect()) part_sh[k * 32u + gl_SubgroupID] = s;
      }
    }
    if (parts) {
      for (uint t = 0u; t < NTT; ++t) {
        const float s = subgroupAdd(sq_in[t]);
        if (subgroupElect()) part_sh[(RT * NTT + t) * 32u + gl_SubgroupID] = s;
      }
    }
    barrier();
    for (uint f = lid; f < WR * NTT; f += wgs) {  // one trip unless RL
      // Row wr = f / NTT of the workgroup: slice (RL: lane group) fs's row r, its sums k = r·NTT + t.
      const uint wr = f / NTT, t = f % NTT, row = row0 + wr, fs = wr / ROWS, k = f - fs * ROWS * NTT;
      const uint tk = tb + t;  // the token
      float v = 0.0, v2 = 0.0, sc = scale[t];
      if (parts) {
        float ss = 0.0;
        for (uint i = 0u; i < gl_NumSubgroups; ++i) ss += part_sh[(RT * NTT + t) * 32u + i];
        sc = inversesqrt(ss / float(pc.n_in) + pc.eps);
      }
      if (RL) {
        // The lane group's LANES lanes in every slice.
        for (uint s = 0u; s < SLICES; ++s)
          for (uint l = 0u; l < LANES; ++l) {
            const uint inv = s * sw + fs * LANES + l;
            v += rl_sh[k * wgs + inv];
            if (PAIR) v2 += rl_sh[(ROWS * NTT + k) * wgs + inv];
          }
        if ((EPI == 1u || EPI == 3u) && row < pc.n_rows && tk < pc.n_tok) {
          res = Y[pc.y_off + tk * pc.y_stride + row];
          if (EPI == 3u) nw = P[pc.norm_off + row];
        }
      } else {
        for (uint i = fs * sps; i < (fs + 1u) * sps; ++i) {
          v += part_sh[k * 32u + i];
          if (PAIR) v2 += part_sh[(ROWS * NTT + k) * 32u + i];
        }
      }
      float sq = 0.0;
      if (row < pc.n_rows && (!BATCH || tk < pc.n_tok)) {
        v *= sc;
        const uint a = pc.y_off + tk * pc.y_stride + row;
        if (EPI == 2u) v = v / (1.0 + exp(-v));
        if (EPI == 4u) v = v / (1.0 + exp(-v)) * (v2 * sc);
        if (EPI == 1u || EPI == 3u) v += res;
        if (EPI == 5u) AC[a] = v;  // read by the last workgroup (route_tail)
        else Y[a] = v;
        if (EPI == 3u) {
          const uint xg = pc.xg_off + tk * pc.y_stride + row;
          Y[xg] = v * nw;
          sq = v * v;
        }
      }
      qv = row >= pc.n_rows ? 0.0 : EPI == 3u ? v * nw : v;
      if (QOUT && !qsg) qb_x[t * WR + wr] = qv;
      if (ROUTER) rt_n[wr] = qv;
      fin_sh[f] = sq;
    }
    if (qsg && gl_SubgroupID == 0u) q8b32_sg(vec4(qv), 1u, lid < WR, lid, pc.q_out, pc.n_rows, row0 / 32u, lid);
    barrier();
    if (EPI == 3u && lid < NTT && tb + lid < pc.n_tok) {
      float s = 0.0;
      for (uint r = 0u; r < WR; ++r) s += fin_sh[r * NTT + lid];
      AC[pc.sq_off + (tb + lid) * n_groups + g0] = s;
    }
    if (QOUT && !qsg) {  // qb_x is complete (the barrier above): this workgroup's blocks (NT = 1)
      q8b32_wg(lid, wgs, WR, pc.q_out, pc.n_rows, row0 / 32u);
      barrier();  // qb_x is reused by the next row group
    }
    if (ROUTER) {
      router_fold(row0, g0, n_groups);
      barrier();  // rt_n is reused by the next row group
    }
  }
  if (EPI == 5u) route_tail();
}
