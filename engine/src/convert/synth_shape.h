// The model shapes `fish synth` can make: the exact hyper-parameters of real
// Llama-family checkpoints, dense and mixture-of-experts (and "tiny" ones, test models).
#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace fish::convert {

struct SynthShape {
  const char* id;     // "llama-1b"
  const char* arch;   // general.architecture: "llama", "qwen2", "qwen3"
  const char* model;  // the real model it mirrors, for general.name
  int n_embd, n_layer, n_head, n_head_kv, head_dim, n_ff, n_vocab, n_ctx;
  float rope_base, rms_eps;
  bool tied;      // no output.weight: token_embd is also the output projection
  bool qkv_bias;  // attn_q/k/v.bias (Qwen2)
  bool qk_norm;   // attn_q_norm/attn_k_norm [head_dim] (Qwen3)
  // Llama 3.1-style rope scaling, stored as a rope_freqs.weight tensor
  // [head_dim/2]; factor 0 = none.
  float rope_scale_factor, rope_low_freq_factor, rope_high_freq_factor;
  int rope_orig_ctx;
  // Mixture of experts (n_expert > 0): every layer's FFN is ffn_gate_inp (the
  // router, kept F32 as llama.cpp's quantiser does) and the stacked
  // ffn_{gate,up,down}_exps of n_ff_expert rows; "llama" with experts is Mixtral.
  int n_expert = 0, n_expert_used = 0, n_ff_expert = 0;
  // qwen2moe's shared expert (ffn_{gate,up,down}_shexp of n_ff_shexp rows and
  // its sigmoid gate ffn_gate_inp_shexp [n_embd]); 0: none.
  int n_ff_shexp = 0;
};

// nullptr for an unknown id.
const SynthShape* find_synth_shape(std::string_view id);
std::vector<std::string> synth_shape_ids();

// The per-frequency divisors of Llama 3.1's rope scaling, as llama.cpp's
// converter stores them in rope_freqs.weight: for each of the head_dim/2 rotary
// frequencies f_i = base^(-2i/head_dim), with wavelength w = 2π/f_i:
// 1 when w < orig_ctx/high, `factor` when w > orig_ctx/low, and between them
// 1 / ((1 - s)/factor + s) with s = (orig_ctx/w - low) / (high - low).
std::vector<float> llama3_rope_factors(int head_dim, float base, float factor, float low, float high, int orig_ctx);

}  // namespace fish::convert
