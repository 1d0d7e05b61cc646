#version 450
// Tiled matrix product on cooperative matrices (tensor cores; prefill, n_tok > 4):
// y[t][r] = Σ_i W[r][i] · x[t][i], as matmul_tiled.comp computes it, with the
// multiply-accumulate in 16 × 16 × 16 f16 → f32 cooperative matrices
// (VK_KHR_cooperative_matrix; the host uses these modules only on a device
// that lists that shape at subgroup scope and runs subgroups of 32).
//
// Product: Yᵀ (rows × tokens) = W (rows × k) · Xᵀ (k × tokens). A workgroup of
// 256 invocations (8 subgroups of 32) owns a BM = 128 rows × BN tokens tile
// (BN = 64; 128 with WIDE: half the dequantisation per product, for grids
// that stay large enough; 32 with NARROW: twice the workgroups, for grids too
// small to fill the device) and walks k in steps of BK = 64:
//   - every invocation dequantises 32 weights (dequant_seg_f16.glsl: row tid / 2,
//     half tid % 2 of the step's 64; Q4_K / Q5_K with one header and one qs load;
//     the raw words are loaded a step ahead and decoded in f16 at the store)
//     and loads BN / 4 x values (vec4 where aligned: the 16 invocations of a
//     token row take its step's 64 values, so a subgroup's load reads two rows'
//     256 contiguous bytes), into registers, one step ahead of the multiply
//     (the loads of step s+1 overlap the products of s);
//   - the step's tiles go to shared memory as f16 (in fours), W row-major
//     [BM][BK], x token-major [BN][BK] (= Xᵀ column-major), rows padded by 8
//     halves so the fragment loads spread over the banks;
//   - subgroup s multiplies the 32 rows × BN / 2 tokens at (s % 4, s / 4):
//     four (eight with WIDE, two with NARROW) accumulators, four k16 slices per step. The
//     accumulators are named variables: as an array (indexed in loops) the
//     8B's prefill ran at half the speed (docs/experiments/vulkan-coopmat-prefill.md).
// Epilogue: each accumulator goes through a 16 × 16 f32 staging area of the
// subgroup (column-major: a token's 16 rows are adjacent) and every lane
// writes 8 of its elements to y with EPI (span: 0 store, 1 add: the residual,
// 2 silu: the gate, 4 y = y · v: up onto silu(gate), so the down reads one
// vector). x values beyond f16's range are clamped to ±65504.
//
// Span halves (the prefill's producers write f16 rows for it, half the bytes
// of the x tile, which was 30-35% of a product's time with f32 x):
//   XH: x is f16, half index 2 · x_off + t · x_stride + k (x_stride in halves),
//       loaded 4 halves (8 bytes) at a time where aligned;
//   OH (with EPI 4): y = Y · v goes as f16 to half index xg_off + (float index
//       of y) (xg_off: the host's delta to the halves' region), rows in pairs.
// The halves are rounded as the x tile rounds f32 x, so XH changes no product.
//
// FISH_MOE (tcm_<T>, with FISH_SPAN): one MoE expert's product over its pairs,
// as matmul_tiled.comp's FISH_MOE (tlm_<T>) computes it: an expert per z =
// active-expert slot (a slot past n_active, or a token tile past the expert's
// pair count, returns at once), weight rows offset by e · n_rows in the stacked
// weight, tile token j = the expert's pair p = list[first + j], x row p / k
// (GATE_UP) or p, y row p; EPI 2 silu, 4 y = y · v, 5 v · w_p (the pair's
// routing weight). f32 x only (no XPROD, XH or OH).
//
// Compile-time: TYPE_<T> (dequant.glsl), FISH_SPAN (the span's bindings,
// XPROD: x := x ∘ x2 on load), FISH_MOE. Specialisation: WIDE (constant 4), NARROW (5),
// span: EPI 0, XPROD 1, XH 2, OH 3; MoE: EPI 0, GATE_UP 1.
// Grid: x = row tiles, y = token tiles (MoE: z = expert slots).
#extension GL_GOOGLE_include_directive : require
#extension GL_KHR_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require

layout(local_size_x = 256) in;

#include "matmul_common.glsl"
#include "dequant.glsl"
#include "dequant_seg_f16.glsl"

layout(constant_id = 4) const bool WIDE = false;
layout(constant_id = 5) const bool NARROW = false;
const uint BN = WIDE ? 128u : NARROW ? 32u : 64u;  // tokens per tile
const uint BN_MAX = 128u;
#if defined(FISH_SPAN) && !defined(FISH_MOE)
layout(constant_id = 0) const uint EPI = 0;
layout(constant_id = 1) const bool XPROD = false;
layout(constant_id = 2) const bool XH = false;
layout(constant_id = 3) const bool OH = false;
layout(set = 0, binding = 1) readonly restrict buffer ArenaXU { uint XU[]; };
layout(set = 0, binding = 1) readonly restrict buffer ArenaXU2 { uvec2 XU2[]; };
layout(set = 0, binding = 3) restrict buffer ArenaYU { uint YU[]; };
// The half at half index i of the arena, as the low 16 bits.
uint xh_at(uint i) { return (XU[i >> 1u] >> ((i & 1u) * 16u)) & 0xFFFFu; }
// Halves 4i .. 4i + 3.
uvec2 xh4_at(uint i) { return XU2[i]; }
// OH: y = Y · v of rows a, a + 1 (if two) as one word of halves.
void store_half_pair(uint a, float v0, float v1, bool two) {
  const vec2 v = vec2(Y[a] * v0, two ? Y[a + 1u] * v1 : 0.0);
  YU[(pc.xg_off + a) >> 1u] = packFloat2x16(f16vec2(clamp(v, vec2(-65504.0), vec2(65504.0))));
}
float x_load(uint a) { return XPROD ? X[a] * X[pc.x2_off - pc.x_off + a] : X[a]; }
// a: a multiple of 4 (x_vec).
#define X2_ALIGN pc.x2_off
#define XPROD_VEC(a) (XPROD ? X4[(a) >> 2u] * X4[(pc.x2_off - pc.x_off + (a)) >> 2u] : X4[(a) >> 2u])
void store_y(uint a, float v) {
  if (EPI == 2u) v = v / (1.0 + exp(-v));
  if (EPI == 1u) Y[a] += v;
  else if (EPI == 4u) Y[a] = Y[a] * v;
  else Y[a] = v;
}
#else
// f32 x as it is (stage 1, an MoE chunk's experts): no x ∘ x2, no f16 rows.
const bool XH = false, OH = false;
uint xh_at(uint i) { return 0u; }
uvec2 xh4_at(uint i) { return uvec2(0u); }
void store_half_pair(uint a, float v0, float v1, bool two) {}
float x_load(uint a) { return X[a]; }
#define XPROD_VEC(a) X4[(a) >> 2u]
#define X2_ALIGN 0u
#endif
#ifdef FISH_MOE
layout(constant_id = 0) const uint EPI = 0;
layout(constant_id = 1) const bool GATE_UP = false;
layout(set = 0, binding = 4) readonly buffer ArenaR { uint AR[]; };
#include "moe_common.glsl"
uint moe_list0 = 0u;  // the expert's first list entry
uint moe_pair(uint t) { return AR[moe_list0 + t]; }
// The x row of tile token t (< the expert's pair count).
uint x_row(uint t) { const uint p = moe_pair(t); return GATE_UP ? p / pc.k : p; }
// y at row r of tile token t: pair p's row.
void store_out(uint r, uint t, float v) {
  const uint p = moe_pair(t), a = pc.y_off + p * pc.y_stride + r;
  if (EPI == 2u) v = v / (1.0 + exp(-v));
  if (EPI == 4u) v *= Y[a];
  if (EPI == 5u) v *= uintBitsToFloat(AR[pc.route_off + 2u * p + 1u]);
  Y[a] = v;
}
#else
#ifndef FISH_SPAN
void store_y(uint a, float v) { Y[a] = v; }
#endif
void store_out(uint r, uint t, float v) { store_y(pc.y_off + t * pc.y_stride + r, v); }
#endif
uint n_tok_g = 0u;  // tokens of this tile's product: pc.n_tok, or the expert's pairs (FISH_MOE)

const uint BM = 128u, BK = 64u;
const uint LD4 = (BK + 8u) / 4u;            // padded row of both tiles, in f16vec4 (72 halves)
const uint WN = BN / 2u;                    // tokens per subgroup
const uint XROWS = BN / 16u;                // x rows (tokens) per invocation and step: 4 (8 WIDE, 2 NARROW)

shared f16vec4 w_sh[BM * LD4];
shared f16vec4 x_sh[BN_MAX * LD4];
shared float stage_sh[8u * 256u];  // per subgroup: one 16 × 16 accumulator, column-major

#define CM_A coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseA>
#define CM_B coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseB>
#define CM_C coopmat<float, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator>

// One 16 × 16 accumulator (rows r0.., tokens t0..) through the subgroup's
// staging area into y: every lane writes 256 / subgroup-size elements.
void write_out(CM_C c, uint r0, uint t0) {
  const uint st = gl_SubgroupID * 256u;
  coopMatStore(c, stage_sh, st, 16, gl_CooperativeMatrixLayoutColumnMajor);
  subgroupMemoryBarrierShared();
  subgroupBarrier();
  if (OH) {  // rows r, r + 1 of a token: one word of two halves
    for (uint e = 2u * gl_SubgroupInvocationID; e < 256u; e += 2u * gl_SubgroupSize) {
      const uint r = r0 + (e & 15u), t = t0 + (e >> 4u);
      if (r >= pc.n_rows || t >= n_tok_g) continue;
      store_half_pair(pc.y_off + t * pc.y_stride + r, stage_sh[st + e], stage_sh[st + e + 1u], r + 1u < pc.n_rows);
    }
  } else {
    for (uint e = gl_SubgroupInvocationID; e < 256u; e += gl_SubgroupSize) {
      const uint r = r0 + (e & 15u), t = t0 + (e >> 4u);
      if (r < pc.n_rows && t < n_tok_g) store_out(r, t, stage_sh[st + e]);
    }
  }
  subgroupBarrier();
}

void main() {
  const uint tid = gl_LocalInvocationID.x;
  const uint row_base = gl_WorkGroupID.x * BM, tok_base = gl_WorkGroupID.y * BN;
  // Loader roles. Weights: row tid / 2 (clamped: rows past n_rows are never
  // written), half h of the step (k 16h.. and 32 + 16h..). x: values
  // 4 · (tid % 16) .. + 3 of the step for tokens tid / 16 + 16 i (i < XROWS);
  // tokens past n_tok load zeros.
  const uint w_r = tid >> 1u, h = tid & 1u;
#ifdef FISH_MOE
  const uint G = moe_group(pc.route_off, pc.n_tok * pc.k), s = gl_WorkGroupID.z;
  if (s >= AR[G]) return;  // uniform: no expert in this slot
  const uint e = AR[G + 1u + s];
  moe_list0 = moe_list(G, pc.n_expert) + AR[G + 1u + pc.n_expert + s];
  n_tok_g = AR[G + 2u + pc.n_expert + s] - AR[G + 1u + pc.n_expert + s];
  if (tok_base >= n_tok_g) return;  // uniform: past the expert's pairs
  const uint w_row = e * pc.n_rows + min(row_base + w_r, pc.n_rows - 1u);
#else
  n_tok_g = pc.n_tok;
  const uint w_row = min(row_base + w_r, pc.n_rows - 1u);
#endif
  const uint x_c = tid & 15u, x_t0 = tid >> 4u;
#ifdef FISH_MOE
  // The x rows this invocation loads (tokens x_t0 + 16 i; past the tile's tokens: unused).
  uint xrow[BN_MAX / 16u];
  for (uint i = 0u; i < XROWS; ++i) {
    const uint t = tok_base + x_t0 + 16u * i;
    xrow[i] = t < n_tok_g ? x_row(t) : 0u;
  }
#define XROW(i, t) xrow[i]
#else
#define XROW(i, t) (t)
#endif
  // vec4 loads of x where its rows are 16-byte aligned and hold whole steps.
  // XH: 8-byte loads where every row's halves start at a multiple of 4.
  const bool x_vec = XH ? ((pc.x_off & 1u) | (pc.x_stride & 3u)) == 0u && (pc.n_in % BK) == 0u
                        : ((pc.x_off | pc.x_stride | X2_ALIGN) & 3u) == 0u && (pc.n_in % BK) == 0u;

  // Subgroup tile: rows sm * 32 .., tokens sn * WN ...
  const uint sg = gl_SubgroupID, sm = sg & 3u, sn = sg >> 2u;
  // The accumulators as plain variables (an array of them may live in local
  // memory); c02 .. c13 only with WIDE, c01 / c11 not with NARROW.
  CM_C c00 = CM_C(0.0), c01 = CM_C(0.0), c10 = CM_C(0.0), c11 = CM_C(0.0);
  CM_C c02 = CM_C(0.0), c03 = CM_C(0.0), c12 = CM_C(0.0), c13 = CM_C(0.0);

  SegRaw wraw;  // the weights of the step in flight (seg_load: raw words for the K-quants)
  vec4 xr[BN_MAX / 16u];
  uvec2 xq[BN_MAX / 16u];  // XH: four halves
  // One step's loads into registers (weights as seg_load leaves them, x as f32 or halves).
  #define LOAD_STEP(k0)                                                              \
    wraw = seg_load(w_row, (k0), h);                                                 \
    for (uint i = 0u; i < XROWS; ++i) {                                              \
      const uint t = tok_base + x_t0 + 16u * i, k = (k0) + 4u * x_c;                 \
      const uint xb = pc.x_off + XROW(i, t) * pc.x_stride;                           \
      if (XH) {                                                                      \
        const uint hb = 2u * pc.x_off + XROW(i, t) * pc.x_stride + k;                \
        if (t >= n_tok_g) xq[i] = uvec2(0u);                                         \
        else if (x_vec) xq[i] = xh4_at(hb >> 2u);                                       \
        else xq[i] = uvec2((k < pc.n_in ? xh_at(hb) : 0u) | (k + 1u < pc.n_in ? xh_at(hb + 1u) << 16u : 0u), \
                           (k + 2u < pc.n_in ? xh_at(hb + 2u) : 0u) | (k + 3u < pc.n_in ? xh_at(hb + 3u) << 16u : 0u)); \
      } else if (t >= n_tok_g) xr[i] = vec4(0.0);                                    \
      else if (x_vec) xr[i] = XPROD_VEC(xb + k);                                     \
      else xr[i] = vec4(k < pc.n_in ? x_load(xb + k) : 0.0, k + 1u < pc.n_in ? x_load(xb + k + 1u) : 0.0, \
                        k + 2u < pc.n_in ? x_load(xb + k + 2u) : 0.0, k + 3u < pc.n_in ? x_load(xb + k + 3u) : 0.0); \
    }
  LOAD_STEP(0u)

  for (uint k0 = 0u; k0 < pc.n_in; k0 += BK) {
    {
      f16vec4 wa[4], wb[4];
      seg_f16(wraw, k0, h, wa, wb);
      for (uint j = 0u; j < 4u; ++j) w_sh[w_r * LD4 + 4u * h + j] = wa[j], w_sh[w_r * LD4 + 8u + 4u * h + j] = wb[j];
    }
    for (uint i = 0u; i < XROWS; ++i)
      x_sh[(x_t0 + 16u * i) * LD4 + x_c] = XH ? halves_f16(xq[i]) : to_f16(xr[i]);
    barrier();
    const uint k1 = k0 + BK;
    if (k1 < pc.n_in) {  // the next step's loads, in flight during the products
      LOAD_STEP(k1)
    }
    for (uint kk = 0u; kk < BK / 4u; kk += 4u) {  // k16 slices, in f16vec4 units
      CM_A a0, a1;
      CM_B b0;
      coopMatLoad(a0, w_sh, (sm * 32u) * LD4 + kk, LD4, gl_CooperativeMatrixLayoutRowMajor);
      coopMatLoad(a1, w_sh, (sm * 32u + 16u) * LD4 + kk, LD4, gl_CooperativeMatrixLayoutRowMajor);
      coopMatLoad(b0, x_sh, (sn * WN) * LD4 + kk, LD4, gl_CooperativeMatrixLayoutColumnMajor);
      c00 = coopMatMulAdd(a0, b0, c00);
      c10 = coopMatMulAdd(a1, b0, c10);
      if (!NARROW) {
        CM_B b1;
        coopMatLoad(b1, x_sh, (sn * WN + 16u) * LD4 + kk, LD4, gl_CooperativeMatrixLayoutColumnMajor);
        c01 = coopMatMulAdd(a0, b1, c01);
        c11 = coopMatMulAdd(a1, b1, c11);
      }
      if (WIDE) {
        CM_B b2, b3;
        coopMatLoad(b2, x_sh, (sn * WN + 32u) * LD4 + kk, LD4, gl_CooperativeMatrixLayoutColumnMajor);
        coopMatLoad(b3, x_sh, (sn * WN + 48u) * LD4 + kk, LD4, gl_CooperativeMatrixLayoutColumnMajor);
        c02 = coopMatMulAdd(a0, b2, c02);
        c03 = coopMatMulAdd(a0, b3, c03);
        c12 = coopMatMulAdd(a1, b2, c12);
        c13 = coopMatMulAdd(a1, b3, c13);
      }
    }
    barrier();
  }

  // Epilogue: accumulator cij holds rows sm * 32 + i * 16 .., tokens sn * WN + j * 16 ...
  const uint r0 = row_base + sm * 32u, t0 = tok_base + sn * WN;
  write_out(c00, r0, t0);
  write_out(c10, r0 + 16u, t0);
  if (!NARROW) {
    write_out(c01, r0, t0 + 16u);
    write_out(c11, r0 + 16u, t0 + 16u);
  }
  if (WIDE) {
    write_out(c02, r0, t0 + 32u);
    write_out(c03, r0, t0 + 48u);
    write_out(c12, r0 + 16u, t0 + 32u);
    write_out(c13, r0 + 16u, t0 + 48u);
  }
}
