// Reading a span description (fish_span_desc, plugin_abi.h): the shape, the
// architecture block (fish_arch) and each layer's tensors by role. Everything
// is checked here, before anything is allocated:
//   - a role, an enum value or a feature this plugin does not implement (an
//     unknown role, norm or gating) is FISH_E_UNSUPPORTED with a message naming it,
//     so the host runs those layers itself;
//   - a malformed description (a missing tensor, a wrong shape, a role twice)
//     is FISH_E_INVALID_ARGUMENT naming the layer and the field.
#pragma once
#include <cstdint>
#include <vector>

#include "fish/plugin_abi.h"

namespace fish::reference {

class Backend;
struct Weight;

// One layer's tensors. The matrices are the backend's weights (null while the
// host only sizes the span: span_bytes); the vectors point into the host's
// description (valid during the call only: the span copies them).
struct LayerIn {
  Weight *wq = nullptr, *wk = nullptr, *wv = nullptr, *wo = nullptr;
  Weight *gate = nullptr, *up = nullptr, *down = nullptr;
  const float *attn_norm = nullptr, *ffn_norm = nullptr;
  const float *bq = nullptr, *bk = nullptr, *bv = nullptr;  // optional (qwen2)
  const float *q_norm = nullptr, *k_norm = nullptr;          // optional (qwen3)
  // MoE (n_expert > 0) instead of gate/up/down: the router [n_expert, n_embd],
  // the experts (n_mat = n_expert stacks), the shared expert (n_ff_shexp > 0).
  Weight *router = nullptr, *gate_exps = nullptr, *up_exps = nullptr, *down_exps = nullptr;
  Weight *gate_shexp = nullptr, *up_shexp = nullptr, *down_shexp = nullptr;
  const float* shexp_gate = nullptr;  // [n_embd], with the shared expert
};

struct SpanIn {
  int first_layer = 0, n_layers = 0;
  int n_embd = 0, n_head = 0, n_head_kv = 0, head_dim = 0, n_ff = 0;
  int n_ctx = 0;  // positions per sequence to reserve
  int n_seq = 1;
  // fish_arch (FISH_NORM_RMS and FISH_ACT_SILU are all this plugin runs)
  float norm_eps = 1e-5f;
  uint32_t rope = FISH_ROPE_NORMAL;
  int n_rot = 0;
  float rope_base = 10000.0f, rope_scale = 1.0f;
  const float* rope_freqs = nullptr;  // [n_rot / 2] or null
  float attn_scale = 0.0f;            // 0: 1/sqrt(head_dim)
  int n_expert = 0, n_expert_used = 0;  // 0: a dense FFN
  uint32_t gating = FISH_GATING_SOFTMAX_TOPK;
  int n_ff_expert = 0, n_ff_shexp = 0;
  std::vector<LayerIn> layers;
};

// Throws Failure. need_weights: every matrix must be a weight of `be` with the
// shape its role needs (span_create); without it a NULL weight is accepted
// (span_bytes, which the host may call before it uploads anything).
SpanIn read_span_desc(const Backend& be, const fish_span_desc* d, bool need_weights);

}  // namespace fish::reference
