#version 450
// The MoE layer's sum into the residual stream, one workgroup per token t:
//   x[t] += Σ_j d[t·k + j]  (+ sigmoid(n[t] · shexp_gate) · sh[t] with a shared expert)
// d: moe_matvec.comp's down rows, already weighted; n: the layer's normalised
// FFN input; sh: the shared expert's down projection. Fixed order: deterministic.
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
layout(local_size_x = 64) in;

layout(set = 0, binding = 1) readonly restrict buffer ArenaX { float X[]; };
layout(set = 0, binding = 2) readonly restrict buffer ParamsF { float P[]; };
layout(set = 0, binding = 3) restrict buffer ArenaY { float Y[]; };
// n_in = n_embd; x_off: d rows [n_tok·k][n_in]; y_off: x [n_tok][n_in]; x2_off: sh [n_tok][n_in];
// xg_off: n [n_tok][n_in]; norm_off: the shared expert's gate vector in P, or 0xFFFFFFFF: none.
layout(push_constant) uniform MoeParams {
  uint n_in, n_rows, n_tok, x_stride, x_off, y_stride, y_off, inv_in;
  float eps;
  uint x2_off, norm_off, xg_off, sq_off, inv_parts, q_out, q_stride;
  uint rt_part, rt_logits, rt_route, rt_cnt, rt_n_expert, rt_k;  // (matvec_span.comp's ROUTER)
  uint route_off, n_expert, k, flags;
} pc;

shared float red_sh[64];

void main() {
  const uint t = gl_WorkGroupID.x, lid = gl_LocalInvocationID.x, E = pc.n_in;
  float gate = 0.0;
  const bool shared_expert = pc.norm_off != 0xFFFFFFFFu;
  if (shared_expert) {
    float d = 0.0;
    for (uint i = lid; i < E; i += gl_WorkGroupSize.x) d += X[pc.xg_off + t * E + i] * P[pc.norm_off + i];
    d = subgroupAdd(d);
    if (subgroupElect()) red_sh[gl_SubgroupID] = d;
    barrier();
    float dot = 0.0;
    for (uint i = 0u; i < gl_NumSubgroups; ++i) dot += red_sh[i];
    gate = 1.0 / (1.0 + exp(-dot));
  }
  for (uint i = lid; i < E; i += gl_WorkGroupSize.x) {
    float v = 0.0;
    for (uint j = 0u; j < pc.k; ++j) v += X[pc.x_off + (t * pc.k + j) * E + i];
    if (shared_expert) v += gate * X[pc.x2_off + t * E + i];
    Y[pc.y_off + t * E + i] += v;
  }
}
