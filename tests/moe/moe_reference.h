// A plain f64 forward of a Llama-family MoE model (qwen3moe, qwen2moe with its
// shared expert, or the Mixtral layout),
// written for the tests from the architectures'
// definitions, independent of the engine's code paths: weights dequantised
// to f32 once (the engine's dequant, the file's exact values), every product
// and sum in double. K and V are rounded to f16 as the engine's KV cache
// stores them. Routing: softmax over all experts, the k largest (equal ones:
// the lower index first), weights renormalised for qwen3moe / Mixtral, not
// for qwen2moe (hparams.h MoeGating). A dense model (no expert_count: llama,
// qwen2, qwen3) runs its ffn_gate / ffn_up / ffn_down instead.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace fish::test {

struct MoeReference {
  explicit MoeReference(const std::string& path);
  // Logits [n_vocab] of every position of tokens (positions 0..n-1, one sequence).
  std::vector<std::vector<double>> forward(const std::vector<int32_t>& tokens);
  // The last forward's hidden state of every position after the output norm
  // (the LM head's input) [n][n_embd]: what embeddings pool.
  std::vector<std::vector<double>> hidden;
  // The smallest gap, over every routing decision of the last forward, between
  // the k-th and the (k+1)-th router logit (0 for an exact tie): how close a
  // choice came to going the other way.
  double min_route_gap = 0;
  int32_t n_vocab = 0;

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

}  // namespace fish::test
