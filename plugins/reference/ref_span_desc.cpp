#include "ref_span_desc.h"

#include <string>

#include "host.h"
#include "ref_backend.h"

namespace fish::reference {

namespace {

const char* role_name(uint32_t role) {
  switch (role) {
    case FISH_ROLE_ATTN_NORM: return "attn_norm";
    case FISH_ROLE_ATTN_Q: return "attn_q";
    case FISH_ROLE_ATTN_K: return "attn_k";
    case FISH_ROLE_ATTN_V: return "attn_v";
    case FISH_ROLE_ATTN_OUT: return "attn_output";
    case FISH_ROLE_ATTN_Q_BIAS: return "attn_q bias";
    case FISH_ROLE_ATTN_K_BIAS: return "attn_k bias";
    case FISH_ROLE_ATTN_V_BIAS: return "attn_v bias";
    case FISH_ROLE_ATTN_Q_NORM: return "attn_q_norm";
    case FISH_ROLE_ATTN_K_NORM: return "attn_k_norm";
    case FISH_ROLE_FFN_NORM: return "ffn_norm";
    case FISH_ROLE_FFN_GATE: return "ffn_gate";
    case FISH_ROLE_FFN_UP: return "ffn_up";
    case FISH_ROLE_FFN_DOWN: return "ffn_down";
    case FISH_ROLE_FFN_ROUTER: return "ffn_router (MoE)";
    case FISH_ROLE_FFN_GATE_EXPS: return "ffn_gate_exps (MoE)";
    case FISH_ROLE_FFN_UP_EXPS: return "ffn_up_exps (MoE)";
    case FISH_ROLE_FFN_DOWN_EXPS: return "ffn_down_exps (MoE)";
    case FISH_ROLE_FFN_GATE_SHEXP: return "ffn_gate_shexp (MoE)";
    case FISH_ROLE_FFN_UP_SHEXP: return "ffn_up_shexp (MoE)";
    case FISH_ROLE_FFN_DOWN_SHEXP: return "ffn_down_shexp (MoE)";
    case FISH_ROLE_FFN_SHEXP_GATE: return "ffn_shexp_gate (MoE)";
    default: return nullptr;
  }
}

// The fish_arch block; fields past its struct_size read as 0, their default.
void read_arch(const fish_arch* a, const std::string& where, SpanIn& in) {
  if (!a || !FISH_STRUCT_HAS(a, fish_arch, norm_eps))
    fail(FISH_E_INVALID_ARGUMENT, where + ": the architecture block (arch) is missing or too short");
  const uint32_t norm = a->norm;
  const uint32_t act = FISH_STRUCT_HAS(a, fish_arch, activation) ? a->activation : 0u;
  const uint32_t rope = FISH_STRUCT_HAS(a, fish_arch, rope) ? a->rope : 0u;
  const int32_t n_expert = FISH_STRUCT_HAS(a, fish_arch, n_expert) ? a->n_expert : 0;
  const int32_t n_used = FISH_STRUCT_HAS(a, fish_arch, n_expert_used) ? a->n_expert_used : 0;
  const uint32_t gating = FISH_STRUCT_HAS(a, fish_arch, gating) ? a->gating : 0u;
  const int32_t n_ff_exp = FISH_STRUCT_HAS(a, fish_arch, n_ff_expert) ? a->n_ff_expert : 0;
  const int32_t n_shexp = FISH_STRUCT_HAS(a, fish_arch, n_ff_shexp) ? a->n_ff_shexp : 0;
  if (norm != FISH_NORM_RMS)
    fail(FISH_E_UNSUPPORTED, where + ": norm kind " + std::to_string(norm) + " is not implemented (RMS only)");
  if (act != FISH_ACT_SILU)
    fail(FISH_E_UNSUPPORTED, where + ": activation " + std::to_string(act) + " is not implemented (SiLU only)");
  if (rope != FISH_ROPE_NORMAL && rope != FISH_ROPE_NEOX)
    fail(FISH_E_UNSUPPORTED, where + ": RoPE kind " + std::to_string(rope) + " is not implemented (normal, NeoX)");
#ifdef FISH_REFERENCE_NO_MOE
  // Test builds only (tests/plugin): a plugin without MoE refuses such spans.
  if (n_expert != 0)
    fail(FISH_E_UNSUPPORTED, where + ": MoE (n_expert " + std::to_string(n_expert) + ") is not implemented by this build");
#endif
  if (gating != FISH_GATING_SOFTMAX_TOPK && gating != FISH_GATING_SOFTMAX_TOPK_NORM)
    fail(FISH_E_UNSUPPORTED, where + ": gating " + std::to_string(gating) + " is not implemented (softmax top-k, normalised or not)");
  if (n_expert < 0 || n_shexp < 0 || (n_expert == 0 && n_shexp != 0))
    fail(FISH_E_INVALID_ARGUMENT, where + ": n_expert " + std::to_string(n_expert) + " / n_ff_shexp " +
                                      std::to_string(n_shexp) + ": a shared expert needs experts, neither may be negative");
  if (n_expert > 0 && (n_used < 1 || n_used > n_expert || n_ff_exp < 1))
    fail(FISH_E_INVALID_ARGUMENT, where + ": MoE needs 1 <= n_expert_used (" + std::to_string(n_used) + ") <= n_expert (" +
                                      std::to_string(n_expert) + ") and n_ff_expert (" + std::to_string(n_ff_exp) + ") >= 1");
  in.n_expert = n_expert;
  in.n_expert_used = n_expert > 0 ? n_used : 0;
  in.gating = gating;
  in.n_ff_expert = n_expert > 0 ? n_ff_exp : 0;
  in.n_ff_shexp = n_shexp;
  in.norm_eps = a->norm_eps;
  in.rope = rope;
  in.n_rot = FISH_STRUCT_HAS(a, fish_arch, n_rot) ? a->n_rot : 0;
  in.rope_base = FISH_STRUCT_HAS(a, fish_arch, rope_freq_base) ? a->rope_freq_base : 0.0f;
  in.rope_scale = FISH_STRUCT_HAS(a, fish_arch, rope_freq_scale) ? a->rope_freq_scale : 0.0f;
  in.rope_freqs = FISH_STRUCT_HAS(a, fish_arch, rope_freqs) ? a->rope_freqs : nullptr;
  in.attn_scale = FISH_STRUCT_HAS(a, fish_arch, attn_scale) ? a->attn_scale : 0.0f;
  if (!(in.norm_eps > 0.0f) || !(in.rope_base > 0.0f) || !(in.rope_scale > 0.0f))
    fail(FISH_E_INVALID_ARGUMENT, where + ": norm_eps, rope_freq_base and rope_freq_scale must be > 0");
}

// One layer's tensors by role.
LayerIn read_layer(const Backend& be, const fish_span_layer* l, const SpanIn& in, const std::string& where,
                   bool need_weights) {
  if (!FISH_STRUCT_HAS(l, fish_span_layer, tensors) || (l->n_tensors > 0 && !l->tensors))
    fail(FISH_E_INVALID_ARGUMENT, where + ": the layer description is too short or has no tensors");
  if (l->n_tensors > 0 && !FISH_STRUCT_HAS(l->tensors, fish_layer_tensor, n))
    fail(FISH_E_INVALID_ARGUMENT, where + ": fish_layer_tensor.struct_size " +
                                      std::to_string(l->tensors->struct_size) + " is too small");
  const int64_t E = in.n_embd, QD = int64_t(in.n_head) * in.head_dim, KD = int64_t(in.n_head_kv) * in.head_dim;
  LayerIn L;
  bool seen[FISH_ROLE_FFN_SHEXP_GATE + 1] = {};
  for (uint32_t j = 0; j < l->n_tensors; ++j) {
    const fish_layer_tensor* t = FISH_ARRAY_AT(fish_layer_tensor, l->tensors, j);
    const char* name = role_name(t->role);
    if (!name) fail(FISH_E_UNSUPPORTED, where + ": tensor role " + std::to_string(t->role) + " is not one fish_reference knows");
    const bool moe_role = t->role >= FISH_ROLE_FFN_ROUTER, shexp_role = t->role >= FISH_ROLE_FFN_GATE_SHEXP;
    const bool dense_role = t->role >= FISH_ROLE_FFN_GATE && t->role <= FISH_ROLE_FFN_DOWN;
    if ((moe_role && in.n_expert == 0) || (shexp_role && in.n_ff_shexp == 0) || (dense_role && in.n_expert > 0))
      fail(FISH_E_INVALID_ARGUMENT, where + ": tensor role " + name + " in a span with n_expert " +
                                        std::to_string(in.n_expert) + ", n_ff_shexp " + std::to_string(in.n_ff_shexp));
#ifdef FISH_REFERENCE_NO_QK_NORM
    // Test builds only (tests/plugin): a plugin without qwen3's q/k norms refuses them.
    if (t->role == FISH_ROLE_ATTN_Q_NORM || t->role == FISH_ROLE_ATTN_K_NORM)
      fail(FISH_E_UNSUPPORTED, where + ": tensor role " + std::to_string(t->role) + " (" + name +
                                   ") is not implemented by this build");
#endif
    if (seen[t->role]) fail(FISH_E_INVALID_ARGUMENT, where + ": role " + name + " given twice");
    seen[t->role] = true;
    const std::string what = where + " " + name;
    // A matrix role: an uploaded weight of the right shape (n_mat matrices).
    auto matrix = [&](Weight*& slot, int64_t n_out, int64_t n_in, int64_t n_mat = 1) {
      if (!t->weight) {
        if (need_weights) fail(FISH_E_INVALID_ARGUMENT, what + ": no weight");
        return;
      }
      Weight* w = be.weight(t->weight);
      if (w->n_out != n_out || w->n_in != n_in || w->n_mat != n_mat)
        fail(FISH_E_INVALID_ARGUMENT, what + " (" + w->name + ") is " + std::to_string(w->n_mat) + " x [" +
                                          std::to_string(w->n_out) + " x " + std::to_string(w->n_in) +
                                          "], the span needs " + std::to_string(n_mat) + " x [" + std::to_string(n_out) +
                                          " x " + std::to_string(n_in) + "]");
      slot = w;
    };
    // A vector role: n floats.
    auto vector = [&](const float*& slot, int64_t n) {
      if (!t->data || t->n != n)
        fail(FISH_E_INVALID_ARGUMENT, what + ": needs " + std::to_string(n) + " floats, got " +
                                          std::to_string(t->n) + (t->data ? "" : " and no data"));
      slot = t->data;
    };
    switch (t->role) {
      case FISH_ROLE_ATTN_NORM: vector(L.attn_norm, E); break;
      case FISH_ROLE_ATTN_Q: matrix(L.wq, QD, E); break;
      case FISH_ROLE_ATTN_K: matrix(L.wk, KD, E); break;
      case FISH_ROLE_ATTN_V: matrix(L.wv, KD, E); break;
      case FISH_ROLE_ATTN_OUT: matrix(L.wo, E, QD); break;
      case FISH_ROLE_ATTN_Q_BIAS: vector(L.bq, QD); break;
      case FISH_ROLE_ATTN_K_BIAS: vector(L.bk, KD); break;
      case FISH_ROLE_ATTN_V_BIAS: vector(L.bv, KD); break;
      case FISH_ROLE_ATTN_Q_NORM: vector(L.q_norm, in.head_dim); break;
      case FISH_ROLE_ATTN_K_NORM: vector(L.k_norm, in.head_dim); break;
      case FISH_ROLE_FFN_NORM: vector(L.ffn_norm, E); break;
      case FISH_ROLE_FFN_GATE: matrix(L.gate, in.n_ff, E); break;
      case FISH_ROLE_FFN_UP: matrix(L.up, in.n_ff, E); break;
      case FISH_ROLE_FFN_DOWN: matrix(L.down, E, in.n_ff); break;
      case FISH_ROLE_FFN_ROUTER: matrix(L.router, in.n_expert, E); break;
      case FISH_ROLE_FFN_GATE_EXPS: matrix(L.gate_exps, in.n_ff_expert, E, in.n_expert); break;
      case FISH_ROLE_FFN_UP_EXPS: matrix(L.up_exps, in.n_ff_expert, E, in.n_expert); break;
      case FISH_ROLE_FFN_DOWN_EXPS: matrix(L.down_exps, E, in.n_ff_expert, in.n_expert); break;
      case FISH_ROLE_FFN_GATE_SHEXP: matrix(L.gate_shexp, in.n_ff_shexp, E); break;
      case FISH_ROLE_FFN_UP_SHEXP: matrix(L.up_shexp, in.n_ff_shexp, E); break;
      case FISH_ROLE_FFN_DOWN_SHEXP: matrix(L.down_shexp, E, in.n_ff_shexp); break;
      case FISH_ROLE_FFN_SHEXP_GATE: vector(L.shexp_gate, E); break;
      default: break;
    }
  }
  // Every layer needs these (the FFN's by kind: dense, MoE, MoE with a shared
  // expert); the biases come as a set of three, the q/k norms as a pair.
  std::vector<uint32_t> required = {FISH_ROLE_ATTN_NORM, FISH_ROLE_ATTN_Q, FISH_ROLE_ATTN_K,
                                    FISH_ROLE_ATTN_V,    FISH_ROLE_ATTN_OUT, FISH_ROLE_FFN_NORM};
  if (in.n_expert == 0) required.insert(required.end(), {FISH_ROLE_FFN_GATE, FISH_ROLE_FFN_UP, FISH_ROLE_FFN_DOWN});
  else required.insert(required.end(), {FISH_ROLE_FFN_ROUTER, FISH_ROLE_FFN_GATE_EXPS, FISH_ROLE_FFN_UP_EXPS, FISH_ROLE_FFN_DOWN_EXPS});
  if (in.n_ff_shexp > 0)
    required.insert(required.end(), {FISH_ROLE_FFN_GATE_SHEXP, FISH_ROLE_FFN_UP_SHEXP, FISH_ROLE_FFN_DOWN_SHEXP,
                                     FISH_ROLE_FFN_SHEXP_GATE});
  for (uint32_t r : required)
    if (!seen[r]) fail(FISH_E_INVALID_ARGUMENT, where + ": no " + role_name(r) + " tensor");
  if (seen[FISH_ROLE_ATTN_Q_BIAS] != seen[FISH_ROLE_ATTN_K_BIAS] || seen[FISH_ROLE_ATTN_Q_BIAS] != seen[FISH_ROLE_ATTN_V_BIAS])
    fail(FISH_E_INVALID_ARGUMENT, where + ": the q, k and v biases come together or not at all");
  if (seen[FISH_ROLE_ATTN_Q_NORM] != seen[FISH_ROLE_ATTN_K_NORM])
    fail(FISH_E_INVALID_ARGUMENT, where + ": attn_q_norm and attn_k_norm come together or not at all");
  return L;
}

}  // namespace

SpanIn read_span_desc(const Backend& be, const fish_span_desc* d, bool need_weights) {
  if (!d || !FISH_STRUCT_HAS(d, fish_span_desc, layers))
    fail(FISH_E_INVALID_ARGUMENT, "span: the span description is missing or too short");
  SpanIn in;
  const std::string where = "span (layers " + std::to_string(d->first_layer) + ".." +
                            std::to_string(d->first_layer + d->n_layers - 1) + ")";
  if (d->n_layers < 1 || d->n_embd < 1 || d->n_head < 1 || d->n_head_kv < 1 || d->head_dim < 1 || d->n_ctx < 1 ||
      d->n_seq < 1 || !d->layers)
    fail(FISH_E_INVALID_ARGUMENT,
         where + ": n_layers, n_embd, n_head, n_head_kv, head_dim, n_ctx, n_seq must be >= 1, layers given");
  if (d->n_head % d->n_head_kv != 0)
    fail(FISH_E_INVALID_ARGUMENT, where + ": n_head " + std::to_string(d->n_head) + " is not a multiple of n_head_kv " +
                                      std::to_string(d->n_head_kv));
#ifdef FISH_REFERENCE_MAX_SEQ
  // Test builds only (tests/plugin): a plugin that holds fewer sequences per span
  // refuses more, as the ABI asks of a plugin that does not implement something.
  if (d->n_seq > FISH_REFERENCE_MAX_SEQ)
    fail(FISH_E_UNSUPPORTED, where + ": " + std::to_string(d->n_seq) + " sequences per span (this build holds " +
                                 std::to_string(FISH_REFERENCE_MAX_SEQ) + ")");
#endif
  in.first_layer = d->first_layer;
  in.n_layers = d->n_layers;
  in.n_embd = d->n_embd;
  in.n_head = d->n_head;
  in.n_head_kv = d->n_head_kv;
  in.head_dim = d->head_dim;
  in.n_ff = d->n_ff;
  in.n_ctx = d->n_ctx;
  in.n_seq = d->n_seq;
  read_arch(d->arch, where, in);  // first: a MoE span (n_ff 0) is read as such
  if (in.n_expert == 0 && d->n_ff < 1)
    fail(FISH_E_INVALID_ARGUMENT, where + ": n_ff " + std::to_string(d->n_ff) + " must be >= 1 (a dense FFN)");
  if (in.n_rot < 0 || in.n_rot % 2 != 0 || in.n_rot > in.head_dim)
    fail(FISH_E_INVALID_ARGUMENT, where + ": n_rot " + std::to_string(in.n_rot) + " must be even and <= head_dim");
  if (!FISH_STRUCT_HAS(d->layers, fish_span_layer, tensors))
    fail(FISH_E_INVALID_ARGUMENT, where + ": fish_span_layer.struct_size " + std::to_string(d->layers->struct_size) +
                                      " is too small");
  for (int i = 0; i < d->n_layers; ++i)
    in.layers.push_back(read_layer(be, FISH_ARRAY_AT(fish_span_layer, d->layers, i), in,
                                   "span layer " + std::to_string(d->first_layer + i), need_weights));
  return in;
}

}  // namespace fish::reference
