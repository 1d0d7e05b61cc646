// B32 blocks (the span's decode format: the Q8_K rule on blocks of 32, d f32,
// sums per 16; quant_block.glsl q8b32_wg, quantize_x.comp's B32K) from
// registers, within subgroups: QOUT of the span's decode producers and
// quantize_x's B32K rows.
//
// The includer declares AC / ACU (float / uint views of the output's buffer)
// and QSG_SLOTS: the largest slot + 1 (1 where unused).
#ifndef FISH_QUANT_B32_SG
#define FISH_QUANT_B32_SG
#extension GL_KHR_shader_subgroup_basic : require
#include "exact_float.glsl"
// Each invocation holds K (1 or 4) consecutive elements,
// e0 .. e0+K-1 of the caller's (e0 a multiple of K), and a block's 32/K
// invocations are consecutive invocations of one subgroup, slots first .. first
// + 32/K - 1 with first ≡ 0 mod 32/K (the caller checks gl_SubgroupSize >= 32/K).
// No workgroup barrier: the block's maximum, packed words and sums per 16 meet
// through shared memory and subgroupBarrier, where q8b32_wg takes two
// workgroup barriers and 32 shared reads per element.
// The rule is q8b32_wg's: the block's first element of largest magnitude (its
// first in every invocation, then the first invocation's on a tie). Every
// invocation of the subgroup calls it in uniform control flow; live = false:
// no elements (a block is all live or all not), nothing read or written.
shared float qsg_m[QSG_SLOTS];
shared uint qsg_w[QSG_SLOTS];
shared int qsg_s[QSG_SLOTS];
void q8b32_sg(vec4 x, uint K, bool live, uint slot, uint q_base, uint n, uint b0, uint e0) {
  const uint L = 32u / K, first = slot - slot % L;
  float m = 0.0;
  for (uint k = 0u; k < K; ++k)
    if (abs(x[k]) > abs(m)) m = x[k];
  if (live) qsg_m[slot] = m;
  subgroupMemoryBarrierShared();
  subgroupBarrier();
  float mx = 0.0;
  if (live)
    for (uint j = 0u; j < L; ++j) {
      const float c = qsg_m[first + j];
      if (abs(c) > abs(mx)) mx = c;
    }
  float iscale, d;
  q8k_scales(mx, iscale, d);
  uint w = 0u;
  int s = 0;
  for (uint k = 0u; k < K; ++k) {
    const int q = q8k_quant(mx, iscale, x[k]);
    s += q;
    w |= (uint(q) & 0xFFu) << (8u * ((e0 + k) & 3u));
  }
  if (live) qsg_w[slot] = w, qsg_s[slot] = s;
  subgroupMemoryBarrierShared();
  subgroupBarrier();
  if (!live) return;
  if ((e0 & 3u) == 0u) {
    for (uint j = 1u; j < 4u / K; ++j) w |= qsg_w[slot + j];
    ACU[q_base + b0 * 8u + e0 / 4u] = w;
  }
  if ((e0 & 15u) == 0u) {
    for (uint j = 1u; j < 16u / K; ++j) s += qsg_s[slot + j];
    ACU[q_base + n / 4u + n / 32u + 2u * b0 + e0 / 16u] = uint(s);
  }
  if ((e0 & 31u) == 0u) AC[q_base + n / 4u + b0 + e0 / 32u] = d;
}
#endif
