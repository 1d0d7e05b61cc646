#include "model/hparams.h"

#include <algorithm>
#include <cmath>

#include "common/error.h"
#include "gguf/gguf_file.h"

namespace fish {

const char* arch_name(Arch a) {
  switch (a) {
    case Arch::Llama: return "llama";
    case Arch::Qwen2: return "qwen2";
    case Arch::Qwen3: return "qwen3";
    case Arch::Qwen2Moe: return "qwen2moe";
    case Arch::Qwen3Moe: return "qwen3moe";
  }
  return "?";
}

const char* gating_name(MoeGating g) {
  return g == MoeGating::SoftmaxTopK ? "softmax-topk" : "softmax-topk-norm";
}

namespace {

int32_t req_i32(const gguf::File& f, const std::string& key) {
  const gguf::Value* v = f.find(key);
  if (!v) throw Error(f.path() + ": metadata '" + key + "' is missing");
  if (v->type == gguf::ValueType::ARRAY)
    throw Error(f.path() + ": metadata '" + key + "': per-layer values (an array) are not supported");
  auto u = f.get_u32(key);
  if (!u || *u == 0 || *u > (1u << 30)) throw Error(f.path() + ": metadata '" + key + "': invalid value");
  return int32_t(*u);
}

int32_t opt_i32(const gguf::File& f, const std::string& key, int32_t dflt) {
  return f.find(key) ? req_i32(f, key) : dflt;
}

}  // namespace

Hparams Hparams::from_gguf(const gguf::File& f) {
  Hparams h;
  auto arch = f.get_str("general.architecture");
  if (!arch) throw Error(f.path() + ": metadata 'general.architecture' is missing");
  h.arch_name = std::string(*arch);
  if (h.arch_name == "llama") h.arch = Arch::Llama;
  else if (h.arch_name == "qwen2") h.arch = Arch::Qwen2;
  else if (h.arch_name == "qwen3") h.arch = Arch::Qwen3;
  else if (h.arch_name == "qwen2moe") h.arch = Arch::Qwen2Moe;
  else if (h.arch_name == "qwen3moe") h.arch = Arch::Qwen3Moe;
  else
    throw Error(f.path() + ": unsupported architecture '" + h.arch_name +
                "' (supported: llama (and Mixtral), qwen2, qwen3, qwen2moe, qwen3moe)");
  if (auto n = f.get_str("general.name")) h.name = std::string(*n);
  const std::string p = h.arch_name + ".";

  h.n_layer = req_i32(f, p + "block_count");
  // Every layer has at least 9 tensors (2 norms, q/k/v/o, gate/up/down): a
  // larger count cannot be this file's, and would size allocations by it.
  if (uint64_t(h.n_layer) * 9 > f.tensors().size())
    throw Error(f.path() + ": metadata '" + p + "block_count' = " + std::to_string(h.n_layer) + ", but the file holds " +
                std::to_string(f.tensors().size()) + " tensors (a layer has at least 9)");
  h.n_embd = req_i32(f, p + "embedding_length");
  // MoE files may leave out the dense width (the experts have their own).
  h.n_ff = h.arch == Arch::Qwen2Moe || h.arch == Arch::Qwen3Moe ? opt_i32(f, p + "feed_forward_length", 1)
                                                                 : req_i32(f, p + "feed_forward_length");
  h.n_head = req_i32(f, p + "attention.head_count");
  h.n_head_kv = opt_i32(f, p + "attention.head_count_kv", h.n_head);
  h.n_ctx_train = opt_i32(f, p + "context_length", 2048);
  if (h.n_embd % h.n_head != 0 && !f.find(p + "attention.key_length"))
    throw Error(f.path() + ": embedding_length " + std::to_string(h.n_embd) + " is not a multiple of head_count " +
                std::to_string(h.n_head) + " and attention.key_length is missing");
  h.head_dim = opt_i32(f, p + "attention.key_length", h.n_embd / h.n_head);
  const int32_t v_len = opt_i32(f, p + "attention.value_length", h.head_dim);
  if (v_len != h.head_dim)
    throw Error(f.path() + ": attention.value_length " + std::to_string(v_len) + " differs from key_length " +
                std::to_string(h.head_dim) + " (not supported)");
  if (h.n_head % h.n_head_kv != 0)
    throw Error(f.path() + ": head_count " + std::to_string(h.n_head) + " is not a multiple of head_count_kv " +
                std::to_string(h.n_head_kv));
  // q_dim() = head_count * key_length sizes q, wo and the attention's rows in
  // int32: a product past 2^30 cannot be a real model's and would overflow.
  if (int64_t(h.n_head) * h.head_dim > (int64_t(1) << 30))
    throw Error(f.path() + ": metadata '" + p + "attention.head_count' = " + std::to_string(h.n_head) +
                " times key_length " + std::to_string(h.head_dim) + " exceeds 2^30");
  h.n_rot = opt_i32(f, p + "rope.dimension_count", h.head_dim);
  if (h.n_rot > h.head_dim || h.n_rot % 2)
    throw Error(f.path() + ": rope.dimension_count " + std::to_string(h.n_rot) + " is invalid for head size " +
                std::to_string(h.head_dim));
  if (auto e = f.get_f64(p + "attention.layer_norm_rms_epsilon")) h.rms_eps = float(*e);
  if (auto b = f.get_f64(p + "rope.freq_base")) h.rope_freq_base = float(*b);
  if (!(h.rms_eps > 0) || !(h.rope_freq_base > 0)) throw Error(f.path() + ": invalid rms epsilon or rope.freq_base");

  // Linear RoPE scaling (rope.scaling.type = linear); Llama-3 scaling comes as
  // the rope_freqs.weight tensor instead. YaRN and others are refused.
  std::string scaling;
  if (auto s = f.get_str(p + "rope.scaling.type")) scaling = std::string(*s);
  double factor = 1.0;
  if (auto fa = f.get_f64(p + "rope.scaling.factor")) factor = *fa;
  else if (auto lin = f.get_f64(p + "rope.scale_linear")) { factor = *lin; scaling = "linear"; }
  if (scaling == "linear" && factor > 0 && factor != 1.0) h.rope_freq_scale = float(1.0 / factor);
  else if (!scaling.empty() && scaling != "none" && scaling != "linear" && factor != 1.0)
    throw Error(f.path() + ": rope.scaling.type '" + scaling + "' is not supported");

  h.rope_type = h.arch == Arch::Llama ? RopeType::Normal : RopeType::NeoX;
  h.has_qkv_bias = h.arch == Arch::Qwen2 || h.arch == Arch::Qwen2Moe;
  h.has_qk_norm = h.arch == Arch::Qwen3 || h.arch == Arch::Qwen3Moe;

  // Experts: qwen2moe / qwen3moe always, llama when expert_count > 0 (Mixtral;
  // its experts are feed_forward_length wide). Dense qwen2 / qwen3 have none.
  const bool moe_arch = h.arch == Arch::Qwen2Moe || h.arch == Arch::Qwen3Moe;
  if (moe_arch || (h.arch == Arch::Llama && f.find(p + "expert_count"))) {
    h.n_expert = req_i32(f, p + "expert_count");
    h.n_expert_used = req_i32(f, p + "expert_used_count");
    if (h.n_expert_used > h.n_expert)
      throw Error(f.path() + ": metadata '" + p + "expert_used_count' = " + std::to_string(h.n_expert_used) +
                  " exceeds expert_count " + std::to_string(h.n_expert));
    if (h.n_expert > 4096)
      throw Error(f.path() + ": metadata '" + p + "expert_count' = " + std::to_string(h.n_expert) +
                  ": more than 4096 experts is not supported");
    // Without expert_feed_forward_length the experts are n_ff / n_expert_used
    // wide (llama.cpp's rule for qwen moe files that lack the key).
    h.n_ff_expert = h.arch == Arch::Llama ? h.n_ff
                                          : opt_i32(f, p + "expert_feed_forward_length",
                                                    std::max(1, h.n_ff / h.n_expert_used));
    if (h.arch == Arch::Qwen2Moe) h.n_ff_shexp = opt_i32(f, p + "expert_shared_feed_forward_length", 0);
    h.gating = h.arch == Arch::Qwen2Moe ? MoeGating::SoftmaxTopK : MoeGating::SoftmaxTopKNorm;
  }

  if (auto v = f.get_u32(p + "vocab_size")) {
    if (*v == 0 || *v > (1u << 30))
      throw Error(f.path() + ": metadata '" + p + "vocab_size' = " + std::to_string(*v) + ": expected 1 .. 2^30");
    h.n_vocab = int32_t(*v);
  } else if (auto* toks = f.get_arr("tokenizer.ggml.tokens")) {
    if (toks->size == 0 || toks->size > (1u << 30))
      throw Error(f.path() + ": metadata 'tokenizer.ggml.tokens' holds " + std::to_string(toks->size) +
                  " tokens: expected 1 .. 2^30");
    h.n_vocab = int32_t(toks->size);
  }
  // The vocabulary is token_embd's rows too; an empty one would divide by zero later.
  if (const gguf::TensorInfo* te = f.tensor("token_embd.weight"); te && te->n_dims >= 2 && te->ne[1] == 0)
    throw Error(f.path() + ": tensor 'token_embd.weight' has shape " + te->shape_str() + ": the vocabulary is empty");
  return h;
}

}  // namespace fish
