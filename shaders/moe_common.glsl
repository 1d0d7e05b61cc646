// The routing words of an MoE layer in the span's arena, written by
// moe_route.comp and read by moe_matvec.comp / moe_combine.comp. For P =
// n_tok · k (token, slot) pairs, pair p = t·k + j (token t's j-th expert):
//   R + 2p, R + 2p + 1          expert id, weight (f32 bits) of pair p
//   G = R + 2P: G + 0           n_active: experts chosen by at least one pair
//   G + 1 + s                   the s-th active expert (ascending id), s < n_expert
//   G + 1 + n_expert + s        its first entry in the list (s <= n_active: the end)
//   G + 2 + 2·n_expert + i      the list: pairs grouped by expert, each group in pair order
// 3P + 2·n_expert + 2 words in all (moe_route_words() in plugins/vulkan/moe_kernels.h).
uint moe_group(uint route_off, uint n_pairs) { return route_off + 2u * n_pairs; }
uint moe_list(uint g, uint n_expert) { return g + 2u + 2u * n_expert; }

#ifdef MOE_ROUTING
// One token's routing, by the whole workgroup (>= 32 invocations; every
// invocation calls it): softmax over the n_expert router logits at float index
// lo of X, the k largest (equal logits: the lower expert first; NaN counts as
// -inf, so the ids stay valid experts). Leaves rt_sel[j] = the j-th chosen
// expert and rt_w[j] = its weight, r_e / Σ_all r or, with renorm, r_e / Σ_chosen r.
// An expert's place is counted (how many logits beat it), not found in k
// rounds of a workgroup argmax: four barriers whatever k is, and the count
// reads the logits four at a time. The sums have a fixed order for any
// workgroup size (32 strided partials, then in order), so moe_route.comp and
// a decode's router tail (matvec_span.comp EPI 5) agree bit for bit.
// With renorm the sum over every expert is not computed: the k chosen
// logits alone give the weights.
// MOE_LOGIT(i): how the logit at float index i is read (X: written by an
// earlier dispatch; matvec_span.comp's router tail: the coherent view, since
// this dispatch's other workgroups wrote them). MOE_RT_ON: whether the
// shared arrays take their full size (a spec-constant expression in a kernel
// where only some variants route).
#ifndef MOE_LOGIT
#define MOE_LOGIT(i) X[i]
#endif
#ifndef MOE_RT_ON
#define MOE_RT_ON true
#endif
shared vec4 rt_l4[MOE_RT_ON ? 128u : 1u];  // the logits in fours (NaN and the padding past n_expert: -inf)
shared uint rt_sel[MOE_RT_ON ? 16u : 1u];
shared float rt_w[MOE_RT_ON ? 16u : 1u];
shared float rt_part[MOE_RT_ON ? 32u : 1u];

float rt_logit(uint e) { return rt_l4[e >> 2u][e & 3u]; }

void moe_route_token(uint lo, uint NE, uint K, bool renorm) {
  const uint lid = gl_LocalInvocationID.x, wgs = gl_WorkGroupSize.x, NQ = (NE + 3u) >> 2u;
  const float NEG_INF = uintBitsToFloat(0xFF800000u);
  for (uint q = lid; q < NQ; q += wgs) {
    vec4 v4;
    for (uint c = 0u; c < 4u; ++c) {
      const float v = 4u * q + c < NE ? MOE_LOGIT(lo + 4u * q + c) : NEG_INF;
      v4[c] = isnan(v) ? NEG_INF : v;
    }
    rt_l4[q] = v4;
  }
  barrier();
  for (uint e = lid; e < NE; e += wgs) {
    const float v = rt_logit(e);
    uint above = 0u;
    for (uint q = 0u; q < NQ; ++q) {  // padding: -inf at indices past e, never above
      const vec4 u = rt_l4[q];
      const uvec4 i = uvec4(4u * q) + uvec4(0u, 1u, 2u, 3u);
      const uvec4 a = uvec4(greaterThan(u, vec4(v))) | (uvec4(equal(u, vec4(v))) & uvec4(lessThan(i, uvec4(e))));
      above += a.x + a.y + a.z + a.w;
    }
    if (above < K) rt_sel[above] = e;
  }
  barrier();
  const float mx = rt_logit(rt_sel[0]);
  if (!renorm) {
    if (lid < 32u) {
      float s = 0.0;
      for (uint e = lid; e < NE; e += 32u) s += exp(rt_logit(e) - mx);
      rt_part[lid] = s;
    }
    barrier();
  }
  if (lid == 0u) {
    float sum = 0.0, chosen = 0.0;
    if (!renorm)
      for (uint i = 0u; i < 32u; ++i) sum += rt_part[i];
    for (uint j = 0u; j < K; ++j) chosen += exp(rt_logit(rt_sel[j]) - mx);
    const float den = renorm ? chosen : sum;
    for (uint j = 0u; j < K; ++j) rt_w[j] = exp(rt_logit(rt_sel[j]) - mx) / den;
  }
  barrier();
}
#endif
