// The ABI's span description and batch into fish_vulkan's (see span_abi.h).
#include "span_abi.h"

#include <string>

namespace fish::vk {
namespace {

[[noreturn]] void invalid(const std::string& why) { throw Failure(FailKind::InvalidArgument, why); }
[[noreturn]] void unsupported(const std::string& why) { throw Failure(FailKind::Unsupported, "fish_vulkan: " + why); }

std::string role_name(uint32_t role) {
  static const char* names[] = {nullptr,           "ATTN_NORM",       "ATTN_Q",          "ATTN_K",
                                "ATTN_V",          "ATTN_OUT",        "ATTN_Q_BIAS",     "ATTN_K_BIAS",
                                "ATTN_V_BIAS",     "ATTN_Q_NORM",     "ATTN_K_NORM",     "FFN_NORM",
                                "FFN_GATE",        "FFN_UP",          "FFN_DOWN",        "FFN_ROUTER",
                                "FFN_GATE_EXPS",   "FFN_UP_EXPS",     "FFN_DOWN_EXPS",   "FFN_GATE_SHEXP",
                                "FFN_UP_SHEXP",    "FFN_DOWN_SHEXP",  "FFN_SHEXP_GATE"};
  return role < sizeof(names) / sizeof(names[0]) && names[role] ? std::string("FISH_ROLE_") + names[role]
                                                                 : "role " + std::to_string(role);
}

// The arch block's fields, 0 where the host's struct ends before them (their default).
struct Arch {
  uint32_t norm = 0, activation = 0, rope = 0, gating = 0;
  float norm_eps = 0, rope_freq_base = 0, rope_freq_scale = 0, attn_scale = 0;
  int32_t n_rot = 0, n_expert = 0, n_expert_used = 0, n_ff_expert = 0, n_ff_shexp = 0;
  const float* rope_freqs = nullptr;
};

Arch read_arch(const fish_arch* a) {
  if (!a || a->struct_size < sizeof(uint32_t)) invalid("span: no architecture block (fish_span_desc.arch)");
  Arch r;
#define FISH_READ(field) \
  if (FISH_STRUCT_HAS(a, fish_arch, field)) r.field = a->field
  FISH_READ(norm);
  FISH_READ(norm_eps);
  FISH_READ(activation);
  FISH_READ(rope);
  FISH_READ(n_rot);
  FISH_READ(rope_freq_base);
  FISH_READ(rope_freq_scale);
  FISH_READ(rope_freqs);
  FISH_READ(attn_scale);
  FISH_READ(n_expert);
  FISH_READ(gating);
  FISH_READ(n_expert_used);
  FISH_READ(n_ff_expert);
  FISH_READ(n_ff_shexp);
#undef FISH_READ
  return r;
}

// A vector role's data (span_bytes may leave it out: then only its presence counts).
const float* vector_of(const fish_layer_tensor* t, int64_t n, bool with_weights, const std::string& where) {
  static const float kPresent = 0;  // span_bytes: the role is there, its values are not needed
  if (t->n != n) invalid(where + " has " + std::to_string(t->n) + " values, the span needs " + std::to_string(n));
  if (t->data) return t->data;
  if (with_weights) invalid(where + " has no data");
  return &kPresent;
}

}  // namespace

SpanIn span_in_from_abi(const fish_span_desc* d, bool with_weights) {
  if (!d || !FISH_STRUCT_HAS(d, fish_span_desc, layers) || !d->layers || d->n_layers < 1 || d->n_layers > 100000)
    invalid("span: missing or short span description (or no layers)");
  if (d->n_seq < 1) invalid("span: n_seq " + std::to_string(d->n_seq) + " (must be >= 1)");
  const Arch a = read_arch(d->arch);
  if (a.norm != FISH_NORM_RMS) unsupported("norm kind " + std::to_string(a.norm) + " (it runs FISH_NORM_RMS)");
  if (a.activation != FISH_ACT_SILU)
    unsupported("activation " + std::to_string(a.activation) + " (it runs FISH_ACT_SILU)");
  if (a.rope != FISH_ROPE_NORMAL && a.rope != FISH_ROPE_NEOX)
    unsupported("RoPE kind " + std::to_string(a.rope) + " (it runs FISH_ROPE_NORMAL and FISH_ROPE_NEOX)");
  if (a.gating != FISH_GATING_SOFTMAX_TOPK && a.gating != FISH_GATING_SOFTMAX_TOPK_NORM)
    unsupported("gating " + std::to_string(a.gating) + " is not a gating it knows");
  if (a.n_expert < 0 || a.n_ff_shexp < 0 || (a.n_expert == 0 && a.n_ff_shexp != 0))
    invalid("span: n_expert " + std::to_string(a.n_expert) + " / n_ff_shexp " + std::to_string(a.n_ff_shexp) +
            ": a shared expert needs experts, neither may be negative");
  if (a.n_expert > 0 && (a.n_expert_used < 1 || a.n_expert_used > a.n_expert || a.n_ff_expert < 1))
    invalid("span: MoE needs 1 <= n_expert_used (" + std::to_string(a.n_expert_used) + ") <= n_expert (" +
            std::to_string(a.n_expert) + ") and n_ff_expert (" + std::to_string(a.n_ff_expert) + ") >= 1");

  SpanIn in;
  in.first_layer = d->first_layer;
  in.n_layers = d->n_layers;
  in.n_embd = d->n_embd;
  in.n_head = d->n_head;
  in.n_head_kv = d->n_head_kv;
  in.head_dim = d->head_dim;
  in.n_ff = d->n_ff;
  in.n_ctx = d->n_ctx;
  in.n_seq = d->n_seq;
  in.norm_eps = a.norm_eps;
  in.neox = a.rope == FISH_ROPE_NEOX;
  in.n_rot = a.n_rot;
  in.rope_freq_base = a.rope_freq_base;
  in.rope_freq_scale = a.rope_freq_scale;
  in.rope_freqs = a.rope_freqs;
  in.attn_scale = a.attn_scale;
  in.n_expert = a.n_expert;
  in.n_expert_used = a.n_expert > 0 ? a.n_expert_used : 0;
  in.n_ff_expert = a.n_expert > 0 ? a.n_ff_expert : 0;
  in.n_ff_shexp = a.n_ff_shexp;
  in.gating_norm = a.gating == FISH_GATING_SOFTMAX_TOPK_NORM;
  const int64_t E = d->n_embd, QD = int64_t(d->n_head) * d->head_dim, KD = int64_t(d->n_head_kv) * d->head_dim;
  for (int i = 0; i < d->n_layers; ++i) {
    const std::string lw = "span: layer " + std::to_string(d->first_layer + i);
    const fish_span_layer* l = FISH_ARRAY_AT(fish_span_layer, d->layers, i);
    if (!FISH_STRUCT_HAS(l, fish_span_layer, tensors) || (l->n_tensors > 0 && !l->tensors))
      invalid(lw + ": missing or short layer description");
    SpanLayerIn L;
    uint32_t seen = 0;  // bit per role
    for (uint32_t j = 0; j < l->n_tensors; ++j) {
      const fish_layer_tensor* t = FISH_ARRAY_AT(fish_layer_tensor, l->tensors, j);
      if (!FISH_STRUCT_HAS(t, fish_layer_tensor, n)) invalid(lw + ": a short tensor description");
      const std::string where = lw + " " + role_name(t->role);
      if (t->role < FISH_ROLE_ATTN_NORM || t->role > FISH_ROLE_FFN_SHEXP_GATE)
        unsupported(where.substr(6) + " is not a role it knows");
      const bool moe_role = t->role >= FISH_ROLE_FFN_ROUTER, shexp_role = t->role >= FISH_ROLE_FFN_GATE_SHEXP;
      const bool dense_role = t->role >= FISH_ROLE_FFN_GATE && t->role <= FISH_ROLE_FFN_DOWN;
      if ((moe_role && in.n_expert == 0) || (shexp_role && in.n_ff_shexp == 0) || (dense_role && in.n_expert > 0))
        invalid(where + " in a span with n_expert " + std::to_string(in.n_expert) + ", n_ff_shexp " +
                std::to_string(in.n_ff_shexp));
      if (seen & (1u << t->role)) invalid(where + " is given twice");
      seen |= 1u << t->role;
      auto weight = [&](int k) {
        if (!t->weight && with_weights) invalid(where + " has no weight");
        L.w[k] = reinterpret_cast<Weight*>(t->weight);
      };
      switch (t->role) {
        case FISH_ROLE_ATTN_NORM: L.attn_norm = vector_of(t, E, with_weights, where); break;
        case FISH_ROLE_ATTN_Q: weight(kAttnQ); break;
        case FISH_ROLE_ATTN_K: weight(kAttnK); break;
        case FISH_ROLE_ATTN_V: weight(kAttnV); break;
        case FISH_ROLE_ATTN_OUT: weight(kAttnOut); break;
        case FISH_ROLE_ATTN_Q_BIAS: L.bq = vector_of(t, QD, with_weights, where); break;
        case FISH_ROLE_ATTN_K_BIAS: L.bk = vector_of(t, KD, with_weights, where); break;
        case FISH_ROLE_ATTN_V_BIAS: L.bv = vector_of(t, KD, with_weights, where); break;
        case FISH_ROLE_ATTN_Q_NORM: L.q_norm = vector_of(t, d->head_dim, with_weights, where); break;
        case FISH_ROLE_ATTN_K_NORM: L.k_norm = vector_of(t, d->head_dim, with_weights, where); break;
        case FISH_ROLE_FFN_NORM: L.ffn_norm = vector_of(t, E, with_weights, where); break;
        case FISH_ROLE_FFN_GATE: weight(kFfnGate); break;
        case FISH_ROLE_FFN_UP: weight(kFfnUp); break;
        case FISH_ROLE_FFN_DOWN: weight(kFfnDown); break;
        case FISH_ROLE_FFN_ROUTER: weight(kFfnRouter); break;
        case FISH_ROLE_FFN_GATE_EXPS: weight(kGateExps); break;
        case FISH_ROLE_FFN_UP_EXPS: weight(kUpExps); break;
        case FISH_ROLE_FFN_DOWN_EXPS: weight(kDownExps); break;
        case FISH_ROLE_FFN_GATE_SHEXP: weight(kGateShexp); break;
        case FISH_ROLE_FFN_UP_SHEXP: weight(kUpShexp); break;
        case FISH_ROLE_FFN_DOWN_SHEXP: weight(kDownShexp); break;
        case FISH_ROLE_FFN_SHEXP_GATE: L.shexp_gate = vector_of(t, E, with_weights, where); break;
      }
    }
    if (!L.attn_norm || !L.ffn_norm) invalid(lw + ": FISH_ROLE_ATTN_NORM / FISH_ROLE_FFN_NORM missing");
    if (in.n_ff_shexp > 0 && !L.shexp_gate) invalid(lw + ": FISH_ROLE_FFN_SHEXP_GATE missing (a shared expert)");
    in.layers.push_back(L);
  }
  return in;
}

Span::Forward forward_from_abi(const fish_span_batch* b) {
  if (!b || !FISH_STRUCT_HAS(b, fish_span_batch, logits_view)) invalid("span_forward: missing or short batch");
  const uint32_t known = FISH_FORWARD_X_OUT | FISH_FORWARD_LOGITS_VIEW;
  if (b->flags & ~known) unsupported("span_forward: flags " + std::to_string(b->flags & ~known) + " are not flags it knows");
  if (b->n_tok < 1 || !b->x || !b->pos) invalid("span_forward: needs n_tok >= 1, x and pos");
  bool wanted = false;
  for (int t = 0; t < b->n_tok && b->logits_rows && !wanted; ++t) wanted = b->logits_rows[t] != 0;
  if (wanted && !(b->flags & FISH_FORWARD_LOGITS_VIEW) && !b->logits)
    invalid("span_forward: logits wanted, but no logits buffer and no FISH_FORWARD_LOGITS_VIEW");
  Span::Forward f;
  f.x = b->x;
  f.n_tok = b->n_tok;
  f.seq = b->seq;
  f.pos = b->pos;
  f.pos0 = b->pos[0];
  f.x_out = (b->flags & FISH_FORWARD_X_OUT) ? b->x : nullptr;
  f.logits_rows = wanted ? b->logits_rows : nullptr;
  return f;
}

}  // namespace fish::vk
