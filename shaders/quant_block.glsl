// The span's B32 activation rows (int8 decode of one token: K-quant weights
// read x in blocks of 32, and a producer that owns 32 consecutive outputs
// quantises them itself, with no counter and no wait): the Q8_K rule on 32
// elements (signed maximum, the first on a magnitude tie; iscale = -127 / max;
// q = min(127, nearest-even(iscale · x)); d = 1 / iscale; an all-zero block:
// q = 0, d = 0), quantize_x.comp's B32K mode bit for bit. Row at word q_base
// (n elements):
//   qs int8 [n] (n/4 words) | d f32 [n/32] | sums int32 [n/16]
//
// q8b32_wg, by the workgroup: the elements 0 .. n_el-1 of qb_x (complete and
// visible: the caller's barrier), block k = elements 32k .. 32k+31, become
// block b0 + k of the row. Every invocation of the workgroup calls it (a
// barrier inside); each takes elements and finds its block's extremes itself,
// from shared memory. quant_b32_sg.glsl's q8b32_sg does the same from
// registers within a subgroup; the producers use it where their subgroups
// hold whole blocks, this elsewhere.
//
// The includer declares, before including: QB_X_SIZE (floats of the staging
// array qb_x, declared here), QSG_SLOTS (quant_b32_sg.glsl) and AC / ACU, the
// output's buffer as coherent float / uint views.
#include "exact_float.glsl"

shared float qb_x[QB_X_SIZE];
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
