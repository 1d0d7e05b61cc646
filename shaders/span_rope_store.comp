#version 450
// q/k preparation and KV store for n_tok tokens (prefill, and 2..4 tokens;
// the decode of one token does this inside span_attention.comp).
// Grid: x = token t (position pos0 + t), y = head: y < n_head is query head y
// (raw q + bq, q_norm, RoPE -> qr rows), y >= n_head is KV head g = y - n_head
// (raw k + bk, k_norm, RoPE -> K cache; raw v + bv -> V cache), both stored as
// f16 at the token's position.
// MULTI: the rows are of several sequences: each row's position and its
// sequence's page table come from the row table (span_common.glsl).
// Specialisation: 0 = D (head_dim, a multiple of 4), 1 = KVH (n_head_kv), 2 = MULTI.
#extension GL_GOOGLE_include_directive : require

layout(local_size_x = 64) in;
layout(constant_id = 0) const uint D = 128;
layout(constant_id = 1) const uint KVH = 8;
layout(constant_id = 2) const bool MULTI = false;
const uint WG = 64u;
#include "span_common.glsl"

shared float prep_sh[D];
shared float prep_inv[1];
vec2 prep_rope(uint pos, uint i) { return R[pos * (pc.n_rot >> 1) + i]; }
#include "span_prep.glsl"

float bias(uint off, uint i) { return off == NONE ? 0.0 : P[off + i]; }

void main() {
  const uint tid = gl_LocalInvocationID.x, t = gl_WorkGroupID.x, hd = gl_WorkGroupID.y;
  const uint pos = MULTI ? row_pos(t) : AU[CTRL_POS0] + t;
  const uint pt = MULTI ? row_pt(t) : AU[CTRL_PT];
  const uint KD = KVH * D;
  const uint row = t * pc.q_stride;
  if (hd < pc.n_head) {
    for (uint d = tid; d < D; d += WG) prep_sh[d] = A[pc.q_off + row + hd * D + d] + bias(pc.bq_off, hd * D + d);
    prep_finish(1u, pc.qn_off, pos, 1.0);
    for (uint d = tid; d < D; d += WG) A[pc.qr_off + t * pc.n_head * D + hd * D + d] = prep_sh[d];
  } else {
    const uint g = hd - pc.n_head;
    for (uint d = tid; d < D; d += WG) prep_sh[d] = A[pc.k_off + row + g * D + d] + bias(pc.bk_off, g * D + d);
    prep_finish(1u, pc.kn_off, pos, 1.0);
    const uint r = kv_row(pt, pos);
    const uint kw = (r * KD + g * D) >> 1, vw = ((pc.kv_cap + r) * KD + g * D) >> 1;
    for (uint i = tid; i < D / 2u; i += WG) {
      KV[kw + i] = packHalf2x16(vec2(prep_sh[2u * i], prep_sh[2u * i + 1u]));
      const uint d = 2u * i, vb = pc.v_off + row + g * D;
      KV[vw + i] = packHalf2x16(vec2(A[vb + d] + bias(pc.bv_off, g * D + d), A[vb + d + 1u] + bias(pc.bv_off, g * D + d + 1u)));
    }
  }
}
