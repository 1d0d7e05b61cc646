#version 450
// Prompt attention on query tiles (flash attention): the causal grouped-query
// attention of a prompt chunk's rows over the f16 KV cache, each K/V row
// loaded once per tile of up to 64 query rows rather than once per token
// (span_attention.comp, which decode and rows of several sequences keep).
//
// Grid: x = query tile (BQ = 64 / GQ consecutive tokens of the chunk), y = KV
// head g. The workgroup's query rows are (token t0 + i, head h of g's group)
// at row i·GQ + h (M = BQ·GQ <= 64 used rows, the rest padding). It walks
// positions 0 .. the last token's position in tiles of BC:
//   load     the tile's K and V rows (f16, through the page table) into shared
//            memory; the next tile's are loaded into registers meanwhile
//   scores   S = Q·Kᵀ (q scaled by the softmax scale, f16), f32 sums
//   softmax  online per row (running max m, sum l); a position past the row's
//            own is masked (causal)
//   values   O = O·e^{m_old - m_new} + P·V (P rounded to f16; l sums the
//            rounded values, so O / l is a weighted mean of V rows)
// Four groups of 32 invocations own 16 rows each; in a group, invocations 2r
// and 2r+1 own row r: half of its scores (BC / 2 positions) and, of each 16-dim
// chunk of its output, 8 dims (D / 2 floats in registers). Both keep the row's
// m and l (the pair's max and sum by one shuffle).
//
// FISH_COOPMAT (tensor cores: VK_KHR_cooperative_matrix, 16 × 16 × 16 f16 →
// f32 at subgroup scope, subgroups of 32, so a group is a subgroup; BC = 32):
// S is two accumulators per group, staged through shared memory into the
// owners' registers; P·V runs two 16-dim chunks at a time, staged the same
// way. Otherwise every invocation computes its own scores and outputs with
// scalar FMAs on the same shared tiles (BC = 16 or 32, the host's choice by
// shared-memory size).
//
// Reads q from the roped rows (span_rope_store.comp: pc.q_off, pc.q_stride),
// the chunk's position pos0 and page table from the ctrl block; writes the
// output rows at pc.att_off ([n_tok][n_head·D]; HALF: as f16 for wo's
// tensor-core product, matmul_coopmat.comp XH).
// Specialisation: 0 = D (a multiple of 16), 1 = GQ (query heads per KV head,
// <= 64), 2 = KVH, 3 = BC, 4 = HALF.
#extension GL_GOOGLE_include_directive : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_shuffle : require
#ifdef FISH_COOPMAT
#extension GL_KHR_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#endif

layout(local_size_x = 128) in;
layout(constant_id = 0) const uint D = 128;
layout(constant_id = 1) const uint GQ = 4;
layout(constant_id = 2) const uint KVH = 8;
layout(constant_id = 3) const uint BC = 32;
layout(constant_id = 4) const bool HALF = false;  // output rows as f16 (half index 2 · att_off + t · QD + i)
const uint WG = 128u;
#include "span_common.glsl"

const uint KD = KVH * D;       // halves per position per K (and V)
const uint BQ = 64u / GQ;      // tokens per query tile
const uint QS4 = (D + 8u) / 4u;  // a q / K / V row in shared memory, in fours of halves (padded by 8)
const uint PS4 = (BC + 8u) / 4u; // a P row
const uint SS = BC + 4u;       // a staged row of f32 (COOPMAT)
const uint CL = BC / 2u;       // scores per invocation
const uint NCH = D / 16u;      // 16-dim output chunks
const uint KV8 = D / 8u;       // uvec4 (8 halves) per K / V row
const uint NLD = (BC * KV8 + WG - 1u) / WG;  // uvec4 loads per invocation per tile, each of K and V
const float NEG = -1.0e30;

#ifdef FISH_COOPMAT
#define H4 f16vec4
H4 to_h4(vec4 v) { return f16vec4(clamp(v, vec4(-65504.0), vec4(65504.0))); }
vec4 from_h4(H4 h) { return vec4(h); }
H4 words_h4(uvec2 w) { return f16vec4(unpackFloat2x16(w.x), unpackFloat2x16(w.y)); }
#define CM_A coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseA>
#define CM_B coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseB>
#define CM_C coopmat<float, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator>
shared float stage_sh[4u * 16u * SS];  // per group: S (16 × BC), then P·V chunks (16 × 32)
#else
#define H4 uvec2
H4 to_h4(vec4 v) { return uvec2(pack_half2_sat(v.xy), pack_half2_sat(v.zw)); }
vec4 from_h4(H4 h) { return vec4(unpackHalf2x16(h.x), unpackHalf2x16(h.y)); }
H4 words_h4(uvec2 w) { return w; }
#endif

shared H4 q_sh[64u * QS4];
shared H4 k_sh[BC * QS4];
shared H4 v_sh[BC * QS4];
shared H4 p_sh[64u * PS4];

// This invocation's share of a tile's K and V rows, loaded ahead.
uvec4 kr[NLD], vr[NLD];
void load_tile(uint j0, uint p_hi, uint pt, uint g) {
  const uint tid = gl_LocalInvocationID.x;
  for (uint u = 0u; u < NLD; ++u) {
    const uint i = min(tid + u * WG, BC * KV8 - 1u), j = min(j0 + i / KV8, p_hi);
    const uint a = (kv_row(pt, j) * KD + g * D) / 8u + i % KV8;
    kr[u] = KV4[a];
    vr[u] = KV4[a + pc.kv_cap * KD / 8u];
  }
}
void store_tile() {
  const uint tid = gl_LocalInvocationID.x;
  for (uint u = 0u; u < NLD; ++u) {
    const uint i = tid + u * WG;
    if (i < BC * KV8) {
      const uint s = (i / KV8) * QS4 + 2u * (i % KV8);
      k_sh[s] = words_h4(kr[u].xy);
      k_sh[s + 1u] = words_h4(kr[u].zw);
      v_sh[s] = words_h4(vr[u].xy);
      v_sh[s + 1u] = words_h4(vr[u].zw);
    }
  }
}

void main() {
  const uint tid = gl_LocalInvocationID.x;
  const uint g = gl_WorkGroupID.y, t0 = gl_WorkGroupID.x * BQ;
  const uint pos0 = AU[CTRL_POS0], pt = AU[CTRL_PT];
  const uint QD = KVH * GQ * D;
#ifdef FISH_COOPMAT
  const uint grp = gl_SubgroupID, lane = gl_SubgroupInvocationID;
#else
  const uint grp = tid / 32u, lane = tid % 32u;
#endif
  const uint r = lane >> 1, hf = lane & 1u, row = grp * 16u + r;
  // This row's token and head; the last position it sees.
  const uint t = t0 + row / GQ, h = row % GQ;
  const bool row_ok = row < BQ * GQ && t < pc.n_tok;
  const uint p_row = pos0 + t;
  const uint p_hi = pos0 + min(t0 + BQ, pc.n_tok) - 1u;  // the workgroup's last position

  load_tile(0u, p_hi, pt, g);
  // The queries, scaled, as f16 (padding rows and tokens past the chunk: zeros).
  for (uint i = tid; i < 64u * (D / 4u); i += WG) {
    const uint qrow = i / (D / 4u), d = 4u * (i % (D / 4u));
    const uint qt = t0 + qrow / GQ;
    vec4 q = vec4(0.0);
    if (qrow < BQ * GQ && qt < pc.n_tok) {
      const uint a = pc.q_off + qt * pc.q_stride + (g * GQ + qrow % GQ) * D + d;
      q = vec4(A[a], A[a + 1u], A[a + 2u], A[a + 3u]) * pc.scale;
    }
    q_sh[qrow * QS4 + d / 4u] = to_h4(q);
  }

  float m_run = NEG, l_run = 0.0;
  float o[NCH * 8u];
  for (uint i = 0u; i < NCH * 8u; ++i) o[i] = 0.0;

  for (uint j0 = 0u; j0 <= p_hi; j0 += BC) {
    store_tile();
    barrier();
    if (j0 + BC <= p_hi) load_tile(j0 + BC, p_hi, pt, g);  // in flight during this tile's products

    // ---- scores of this invocation's CL positions (j0 + hf·CL ..) ----
    float sv[CL];
#ifdef FISH_COOPMAT
    {
      CM_C s0 = CM_C(0.0), s1 = CM_C(0.0);
      for (uint d4 = 0u; d4 < D / 4u; d4 += 4u) {  // k16 slices, in fours of halves
        CM_A qa;
        CM_B k0, k1;
        coopMatLoad(qa, q_sh, grp * 16u * QS4 + d4, QS4, gl_CooperativeMatrixLayoutRowMajor);
        coopMatLoad(k0, k_sh, d4, QS4, gl_CooperativeMatrixLayoutColumnMajor);
        coopMatLoad(k1, k_sh, 16u * QS4 + d4, QS4, gl_CooperativeMatrixLayoutColumnMajor);
        s0 = coopMatMulAdd(qa, k0, s0);
        s1 = coopMatMulAdd(qa, k1, s1);
      }
      coopMatStore(s0, stage_sh, grp * 16u * SS, SS, gl_CooperativeMatrixLayoutRowMajor);
      coopMatStore(s1, stage_sh, grp * 16u * SS + 16u, SS, gl_CooperativeMatrixLayoutRowMajor);
      subgroupMemoryBarrierShared();
      subgroupBarrier();
      for (uint c = 0u; c < CL; ++c) sv[c] = stage_sh[(grp * 16u + r) * SS + hf * CL + c];
      subgroupBarrier();  // every lane has its scores before the stage is reused
    }
#else
    for (uint c = 0u; c < CL; ++c) sv[c] = 0.0;
    for (uint d4 = 0u; d4 < D / 4u; ++d4) {
      const vec4 q = from_h4(q_sh[row * QS4 + d4]);
      for (uint c = 0u; c < CL; ++c) sv[c] += dot(q, from_h4(k_sh[(hf * CL + c) * QS4 + d4]));
    }
#endif

    // ---- online softmax over the row's BC positions (the pair's halves) ----
    float mx = NEG;
    for (uint c = 0u; c < CL; ++c) {
      if (!row_ok || j0 + hf * CL + c > p_row) sv[c] = NEG;
      mx = max(mx, sv[c]);
    }
    mx = max(mx, subgroupShuffleXor(mx, 1u));
    const float m_new = max(m_run, mx), corr = exp(m_run - m_new);
    float ps = 0.0;
    for (uint c = 0u; c < CL; c += 4u) {
      vec4 p = row_ok ? exp(vec4(sv[c], sv[c + 1u], sv[c + 2u], sv[c + 3u]) - m_new) : vec4(0.0);
      const H4 ph = to_h4(p);
      p_sh[row * PS4 + (hf * CL + c) / 4u] = ph;
      p = from_h4(ph);
      ps += (p.x + p.y) + (p.z + p.w);
    }
    ps += subgroupShuffleXor(ps, 1u);
    l_run = l_run * corr + ps;
    m_run = m_new;
    for (uint i = 0u; i < NCH * 8u; ++i) o[i] *= corr;
    subgroupMemoryBarrierShared();
    subgroupBarrier();  // the row's P (written by the pair; the group's, COOPMAT) is visible

    // ---- O += P·V ----
#ifdef FISH_COOPMAT
    {
      CM_A pa0, pa1;
      coopMatLoad(pa0, p_sh, grp * 16u * PS4, PS4, gl_CooperativeMatrixLayoutRowMajor);
      coopMatLoad(pa1, p_sh, grp * 16u * PS4 + 4u, PS4, gl_CooperativeMatrixLayoutRowMajor);
      for (uint ch = 0u; ch < NCH; ch += 2u) {
        const bool two = ch + 1u < NCH;  // uniform
        CM_B v0, v1;
        CM_C c0 = CM_C(0.0), c1 = CM_C(0.0);
        coopMatLoad(v0, v_sh, ch * 4u, QS4, gl_CooperativeMatrixLayoutRowMajor);
        coopMatLoad(v1, v_sh, 16u * QS4 + ch * 4u, QS4, gl_CooperativeMatrixLayoutRowMajor);
        c0 = coopMatMulAdd(pa0, v0, c0);
        c0 = coopMatMulAdd(pa1, v1, c0);
        coopMatStore(c0, stage_sh, grp * 16u * SS, SS, gl_CooperativeMatrixLayoutRowMajor);
        if (two) {
          coopMatLoad(v0, v_sh, (ch + 1u) * 4u, QS4, gl_CooperativeMatrixLayoutRowMajor);
          coopMatLoad(v1, v_sh, 16u * QS4 + (ch + 1u) * 4u, QS4, gl_CooperativeMatrixLayoutRowMajor);
          c1 = coopMatMulAdd(pa0, v0, c1);
          c1 = coopMatMulAdd(pa1, v1, c1);
          coopMatStore(c1, stage_sh, grp * 16u * SS + 16u, SS, gl_CooperativeMatrixLayoutRowMajor);
        }
        subgroupMemoryBarrierShared();
        subgroupBarrier();
        for (uint e = 0u; e < 8u; ++e) o[ch * 8u + e] += stage_sh[(grp * 16u + r) * SS + hf * 8u + e];
        if (two)
          for (uint e = 0u; e < 8u; ++e) o[(ch + 1u) * 8u + e] += stage_sh[(grp * 16u + r) * SS + 16u + hf * 8u + e];
        subgroupBarrier();
      }
    }
#else
    for (uint c4 = 0u; c4 < BC / 4u; ++c4) {
      const vec4 p = from_h4(p_sh[row * PS4 + c4]);
      for (uint k = 0u; k < 4u; ++k) {
        const uint vrow = (4u * c4 + k) * QS4 + hf * 2u;
        for (uint ch = 0u; ch < NCH; ++ch) {
          const vec4 va = from_h4(v_sh[vrow + ch * 4u]), vb = from_h4(v_sh[vrow + ch * 4u + 1u]);
          for (uint e = 0u; e < 4u; ++e) {
            o[ch * 8u + e] += p[k] * va[e];
            o[ch * 8u + 4u + e] += p[k] * vb[e];
          }
        }
      }
    }
#endif
    barrier();  // the tile's K / V (and P) are rewritten next
  }

  if (!row_ok) return;
  const float inv = 1.0 / l_run;
  const uint a = t * QD + (g * GQ + h) * D + hf * 8u;
  if (HALF) {  // a is even (D a multiple of 16): four words of two halves per chunk
    for (uint ch = 0u; ch < NCH; ++ch)
      for (uint e = 0u; e < 8u; e += 2u) {
        const vec2 v = vec2(o[ch * 8u + e], o[ch * 8u + e + 1u]) * inv;
        AU[pc.att_off + ((a + ch * 16u + e) >> 1u)] = pack_half2_sat(v);
      }
  } else {
    for (uint ch = 0u; ch < NCH; ++ch)
      for (uint e = 0u; e < 8u; ++e) A[pc.att_off + a + ch * 16u + e] = o[ch * 8u + e] * inv;
  }
}
