// One block of 256 activations to Q8_K int8 (the format quantize_x.comp writes
// with BS 256, bit for bit the same for the same f32 input), done by one
// subgroup inside a producer: the span's decode steps quantise their output for
// the next matvec themselves instead of a quantize_x dispatch + barrier
// (matvec_span.comp: the last workgroup to finish a block's rows;
// span_attention.comp: the workgroup that writes a KV group's G·D outputs).
//
// No barriers and no shared memory of its own, so the producer's tail grows by
// little: lane i owns the groups of 16 elements i, i + S, ... (S = the subgroup
// size, >= 4; lanes past 16 idle), the block's extremes come from subgroupMax /
// subgroupMin, the sums per 16 stay within a lane.
//
// The includer declares, before including: QB_X_SIZE (floats of the shared
// staging array qb_x, which this file declares), QSG_SLOTS (quant_b32_sg.glsl)
// and AC / ACU, the arena as
// coherent float / uint views (the output's buffer). The whole subgroup calls
// q8k_block_sg in uniform control flow; the block's values are qb_x[src ..
// src+255] (sh) or AC[src .. src+255], visible to it. Output row at word
// q_base (n elements per row, block b of n/256):
//   qs int8 [n] (n/4 words) | d f32 [n/256] | sums int32 [n/16]
#include "exact_float.glsl"

shared float qb_x[QB_X_SIZE];

void q8k_block_sg(bool sh, uint src, uint q_base, uint n, uint b) {
  const uint lane = gl_SubgroupInvocationID, S = gl_SubgroupSize;
  float v[4][16];
  // The largest and smallest element, 0 included (NaN never wins a comparison, as on the CPU).
  float h = 0.0, l = 0.0;
  for (uint k = 0u; k < 4u; ++k) {
    if (k * S >= 16u) break;
    const uint g = lane + k * S;
    for (uint j = 0u; j < 16u; ++j) {
      float x = 0.0;
      if (g < 16u) x = sh ? qb_x[src + 16u * g + j] : AC[src + 16u * g + j];
      v[k][j] = x;
      h = x > h ? x : h;
      l = x < l ? x : l;
    }
  }
  const float hi = subgroupMax(h), lo = subgroupMin(l);
  // A tie in magnitude: the first element that reaches it (its sign from the lane that holds it).
  float mx = q8k_signed_max(hi, lo);
  if (q8k_tie(hi, lo)) {
    uint first = 0xFFFFFFFFu;
    bool neg = false;
    for (uint k = 0u; k < 4u; ++k) {
      if (k * S >= 16u) break;
      const uint g = lane + k * S;
      for (uint j = 0u; j < 16u; ++j)
        if (g < 16u && abs(v[k][j]) == hi && 16u * g + j < first) first = 16u * g + j, neg = v[k][j] < 0.0;
    }
    const uint f = subgroupMin(first);
    mx = subgroupMin(first == f ? (neg ? 0u : 1u) : 2u) == 0u ? -hi : hi;
  }
  float iscale, d;
  q8k_scales(mx, iscale, d);
  for (uint k = 0u; k < 4u; ++k) {
    if (k * S >= 16u) break;
    const uint g = lane + k * S;
    if (g >= 16u) continue;
    uint w[4] = uint[4](0u, 0u, 0u, 0u);
    int s = 0;
    for (uint j = 0u; j < 16u; ++j) {
      const int q = q8k_quant(mx, iscale, v[k][j]);
      s += q;
      w[j >> 2] |= (uint(q) & 0xFFu) << (8u * (j & 3u));
    }
    const uint o = q_base + b * 64u + 4u * g;
    ACU[o] = w[0], ACU[o + 1u] = w[1], ACU[o + 2u] = w[2], ACU[o + 3u] = w[3];
    ACU[q_base + n / 4u + n / 256u + b * 16u + g] = uint(s);
  }
  if (lane == 0u) AC[q_base + n / 4u + b] = d;
}

// Blocks of 32 activations in the span's B32 format (decode with
// FISH_VK_SPAN_QFOLD bit 8: K-quant weights read x in blocks of 32, so a
// producer workgroup that owns 32 consecutive outputs quantises them itself,
// with no counter and no wait): the Q8_K rule on 32 elements (signed maximum,
// the first on a magnitude tie; iscale = -127 / max; q = min(127,
// nearest-even(iscale · x)); d = 1 / iscale; an all-zero block: q = 0, d = 0),
// quantize_x.comp's B32K mode bit for bit. Row at word q_base (n elements):
//   qs int8 [n] (n/4 words) | d f32 [n/32] | sums int32 [n/16]
// The elements 0 .. n_el-1 of qb_x (complete and visible: the caller's
// barrier), block k = elements 32k .. 32k+31, become block b0 + k of the row.
// Every invocation of the workgroup calls it (a barrier inside). Each
// invocation takes elements and finds its block's extremes itself, from
// shared memory: no subgroup operations (measured faster on the H200 than a
// subgroup per block, plugins/vulkan/README.md).
shared int qb_q[QB_X_SIZE];
void q8b32_wg(uint tid, uint nthreads, uint n_el, uint q_base, uint n, uint b0) {
  for (uint e = tid; e < n_el; e += nthreads) {
    const uint e0 = e & ~31u;
    float hi = 0.0, lo = 0.0;
    for (uint j = 0u; j < 32u; ++j) {
      const float x = qb_x[e0 + j];
      hi = x > hi ? x : hi;
      lo = x < lo ? x : lo;
    }
    float mx = q8k_signed_max(hi, lo), iscale, d;
    if (q8k_tie(hi, lo))
      for (uint j = 0u; j < 32u; ++j)
        if (abs(qb_x[e0 + j]) == hi) { mx = qb_x[e0 + j]; break; }
    q8k_scales(mx, iscale, d);
    qb_q[e] = q8k_quant(mx, iscale, qb_x[e]);
    if ((e & 31u) == 0u) AC[q_base + n / 4u + b0 + e / 32u] = d;
  }
  barrier();
  for (uint e = tid; e < n_el; e += nthreads) {
    if ((e & 3u) == 0u)
      ACU[q_base + b0 * 8u + e / 4u] = (uint(qb_q[e]) & 0xFFu) | ((uint(qb_q[e + 1u]) & 0xFFu) << 8) |
                                      ((uint(qb_q[e + 2u]) & 0xFFu) << 16) | (uint(qb_q[e + 3u]) << 24);
    if ((e & 15u) == 0u) {
      int s = 0;
      for (uint j = 0u; j < 16u; ++j) s += qb_q[e + j];
      ACU[q_base + n / 4u + n / 32u + 2u * b0 + e / 16u] = uint(s);
    }
  }
}

#include "quant_b32_sg.glsl"
