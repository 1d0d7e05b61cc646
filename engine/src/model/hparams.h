// Hparams: the hyper-parameters of a Llama-family decoder, read from GGUF
// metadata under the architecture's prefix ("llama.", "qwen2.", "qwen3.").
#pragma once
#include <cstdint>
#include <string>

#include "common/rope_type.h"

namespace fish {

namespace gguf { class File; }

enum class Arch { Llama, Qwen2, Qwen3 };

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
  bool has_qk_norm = false;      // qwen3

  int32_t q_dim() const { return n_head * head_dim; }
  int32_t kv_dim() const { return n_head_kv * head_dim; }

  // Throws fish::Error naming the file and key for a missing/invalid value or
  // an unsupported architecture.
  static Hparams from_gguf(const gguf::File& f);
};

const char* arch_name(Arch a);

}  // namespace fish
