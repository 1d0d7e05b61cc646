// Hparams: the hyper-parameters of a Llama-family decoder, read from GGUF
// metadata under the architecture's prefix ("llama.", "qwen2.", "qwen3.",
// "qwen2moe.", "qwen3moe."). Mixture-of-experts models: qwen2moe, qwen3moe
// and Mixtral ("llama" with llama.expert_count > 0); see MoeRouting.
#pragma once
#include <cstdint>
#include <string>

#include "common/rope_type.h"

namespace fish {

namespace gguf { class File; }

enum class Arch { Llama, Qwen2, Qwen3, Qwen2Moe, Qwen3Moe };

// How an MoE layer weighs its experts (the plugin ABI's FISH_GATING_*): the
// router's logits go through a softmax over all n_expert experts, the
// n_expert_used largest probabilities are chosen (ties: the lower expert index
// first), and their weights are the probabilities themselves (SoftmaxTopK) or
// those renormalised to sum to 1 (SoftmaxTopKNorm). Per architecture
// (Hugging Face transformers' modelling code):
//  - Mixtral (MixtralSparseMoeBlock): softmax over all, top-k, then divided by
//    the chosen sum; the same as a softmax over the k chosen logits: Norm.
//  - qwen3moe (Qwen3MoeSparseMoeBlock, norm_topk_prob = true in every released
//    Qwen3 MoE config): softmax, top-k, renormalised: Norm.
//  - qwen2moe (Qwen2MoeSparseMoeBlock, norm_topk_prob = false in
//    Qwen1.5-MoE-A2.7B): softmax, top-k, not renormalised; plus a shared expert
//    whose output is scaled by sigmoid(x · ffn_gate_inp_shexp): TopK.
enum class MoeGating { SoftmaxTopK = 0, SoftmaxTopKNorm = 1 };

struct Hparams {
  Arch arch = Arch::Llama;
  std::string arch_name;  // as in general.architecture
  std::string name;       // general.name
  int32_t n_vocab = 0;
  int32_t n_ctx_train = 0;
  int32_t n_embd = 0;
  int32_t n_layer = 0;
  int32_t n_head = 0;
  int32_t n_head_kv = 0;
  int32_t head_dim = 0;   // attention.key_length (== value_length), default n_embd / n_head
  int32_t n_ff = 0;
  int32_t n_rot = 0;      // rope.dimension_count, default head_dim
  float rms_eps = 1e-5f;
  float rope_freq_base = 10000.0f;
  float rope_freq_scale = 1.0f;  // 1 / rope.scaling.factor for linear scaling
  RopeType rope_type = RopeType::Normal;
  bool has_qkv_bias = false;     // qwen2
  bool has_qk_norm = false;      // qwen3, qwen3moe
  // Mixture of experts (n_expert > 0): every layer's FFN is n_expert experts
  // of n_ff_expert rows, n_expert_used of them per token; qwen2moe adds a
  // shared expert of n_ff_shexp rows. n_ff is then unused by the layers.
  int32_t n_expert = 0;
  int32_t n_expert_used = 0;
  int32_t n_ff_expert = 0;
  int32_t n_ff_shexp = 0;
  MoeGating gating = MoeGating::SoftmaxTopKNorm;
  bool moe() const { return n_expert > 0; }

  int32_t q_dim() const { return n_head * head_dim; }
  int32_t kv_dim() const { return n_head_kv * head_dim; }

  // Throws fish::Error naming the file and key for a missing/invalid value or
  // an unsupported architecture.
  static Hparams from_gguf(const gguf::File& f);
};

const char* arch_name(Arch a);
const char* gating_name(MoeGating g);  // "softmax-topk", "softmax-topk-norm"

}  // namespace fish
