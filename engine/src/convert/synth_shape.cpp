#include "convert/synth_shape.h"

#include <cmath>
#include <numbers>

namespace fish::convert {

namespace {
// id, arch, model, n_embd, n_layer, n_head, n_head_kv, head_dim, n_ff, n_vocab, n_ctx,
// rope_base, rms_eps, tied, qkv_bias, qk_norm, rope scaling (factor, low, high, orig ctx)
// [, n_expert, n_expert_used, n_ff_expert[, n_ff_shexp]]
constexpr SynthShape kShapes[] = {
    {"tiny", "llama", "tiny", 256, 4, 8, 4, 32, 768, 4096, 2048, 10000.f, 1e-5f, false, false, false, 0, 0, 0, 0},
    {"llama-1b", "llama", "Llama 3.2 1B", 2048, 16, 32, 8, 64, 8192, 128256, 131072, 500000.f, 1e-5f, true, false,
     false, 32.f, 1.f, 4.f, 8192},
    {"llama-8b", "llama", "Llama 3.1 8B", 4096, 32, 32, 8, 128, 14336, 128256, 131072, 500000.f, 1e-5f, false, false,
     false, 8.f, 1.f, 4.f, 8192},
    {"qwen2-0.5b", "qwen2", "Qwen2.5 0.5B", 896, 24, 14, 2, 64, 4864, 151936, 32768, 1000000.f, 1e-6f, true, true,
     false, 0, 0, 0, 0},
    {"qwen3-0.6b", "qwen3", "Qwen3 0.6B", 1024, 28, 16, 8, 128, 3072, 151936, 40960, 1000000.f, 1e-6f, true, false,
     true, 0, 0, 0, 0},
    // Small stand-ins with each architecture's features, for tests: Llama-3 rope
    // scaling + tied embeddings, Qwen2 biases, Qwen3 q/k norms with head_dim != n_embd/n_head.
    {"tiny-llama3", "llama", "tiny Llama 3", 256, 3, 8, 2, 32, 512, 4096, 4096, 500000.f, 1e-5f, true, false, false,
     8.f, 1.f, 4.f, 1024},
    {"tiny-qwen2", "qwen2", "tiny Qwen2", 256, 3, 4, 2, 64, 512, 4096, 4096, 1000000.f, 1e-6f, true, true, false, 0, 0,
     0, 0},
    {"tiny-qwen3", "qwen3", "tiny Qwen3", 256, 3, 4, 2, 128, 512, 4096, 4096, 1000000.f, 1e-6f, true, false, true, 0, 0,
     0, 0},
    // Mixture of experts. Qwen3-30B-A3B (its config.json: 48 layers, hidden
    // 2048, 32 / 4 heads of 128, moe_intermediate_size 768, 128 experts, 8 per
    // token, intermediate_size 6144 as feed_forward_length, untied) and
    // Mixtral 8x7B (32 layers, hidden 4096, 32 / 8 heads, 8 experts of 14336,
    // 2 per token, vocabulary 32000); the tiny ones have their layouts.
    {"qwen3-30b-a3b", "qwen3moe", "Qwen3 30B-A3B", 2048, 48, 32, 4, 128, 6144, 151936, 40960, 1000000.f, 1e-6f, false,
     false, true, 0, 0, 0, 0, 128, 8, 768},
    {"mixtral-8x7b", "llama", "Mixtral 8x7B", 4096, 32, 32, 8, 128, 14336, 32000, 32768, 1000000.f, 1e-5f, false, false,
     false, 0, 0, 0, 0, 8, 2, 14336},
    {"tiny-qwen3moe", "qwen3moe", "tiny Qwen3 MoE", 256, 4, 4, 2, 64, 768, 4096, 4096, 1000000.f, 1e-6f, false, false,
     true, 0, 0, 0, 0, 8, 2, 256},
    {"tiny-qwen2moe", "qwen2moe", "tiny Qwen2 MoE", 256, 4, 4, 4, 64, 768, 4096, 4096, 1000000.f, 1e-6f, false, true,
     false, 0, 0, 0, 0, 8, 2, 256, 512},
    {"tiny-mixtral", "llama", "tiny Mixtral", 256, 4, 8, 4, 32, 256, 4096, 4096, 1000000.f, 1e-5f, false, false, false,
     0, 0, 0, 0, 8, 2, 256},
};
}  // namespace

const SynthShape* find_synth_shape(std::string_view id) {
  for (auto& s : kShapes)
    if (id == s.id) return &s;
  return nullptr;
}

std::vector<std::string> synth_shape_ids() {
  std::vector<std::string> v;
  for (auto& s : kShapes) v.emplace_back(s.id);
  return v;
}

std::vector<float> llama3_rope_factors(int head_dim, float base, float factor, float low, float high, int orig_ctx) {
  const double low_wavelen = double(orig_ctx) / low;    // longer than this: fully scaled
  const double high_wavelen = double(orig_ctx) / high;  // shorter than this: untouched
  std::vector<float> out;
  for (int i = 0; i < head_dim; i += 2) {
    // The frequency in f32, as the converter computes it.
    const float freq = 1.0f / std::pow(base, float(i) / float(head_dim));
    const double wavelen = 2.0 * std::numbers::pi / double(freq);
    if (wavelen < high_wavelen) {
      out.push_back(1.0f);
    } else if (wavelen > low_wavelen) {
      out.push_back(factor);
    } else {
      const double s = (double(orig_ctx) / wavelen - low) / (high - low);
      out.push_back(float(1.0 / ((1.0 - s) / factor + s)));
    }
  }
  return out;
}

}  // namespace fish::convert
