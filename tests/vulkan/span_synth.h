// Synthetic span layers for the fish_vulkan span tests, with each
// architecture's features (llama-3 frequency factors; qwen2 biases, NeoX
// RoPE, one KV head; qwen3 q/k norms with head_dim != n_embd / n_head;
// partial rotary dims; F32 / Q8_0 / Q4_K weights; MoE layers: router, expert
// stacks, optional shared expert), their plugin-ABI description
// (fish_span_desc by role), and the reference plugin (plain C++,
// f32 math, f32 KV: plugins/reference) loaded through the ABI to compare with.
#pragma once
#include <array>
#include <memory>
#include <string>
#include <vector>

#include "fish/plugin_abi.h"
#include "vk_test_util.h"

namespace fish::vktest {

struct SynthShape {
  const char* name;
  int E, H, KVH, D, F, L, n_rot;
  uint32_t rope;  // FISH_ROPE_*
  float base;
  bool freqs, biases, qk_norm;
  GgmlType type;
  // MoE (n_expert > 0; F is then unused): experts, used per token, rows of an
  // expert's gate/up, of the shared expert's (0: none), renormalised gating.
  int n_expert = 0, n_used = 0, FE = 0, FS = 0;
  bool gating_norm = false;
};
extern const SynthShape kSynthShapes[4];  // llama3 F32, qwen2 Q8_0, qwen3 F32, llama Q4_K partial rotary
// qwen3moe-like 8x2 renormalised F32, qwen2moe-like 6x3 + shared expert Q8_0, mixtral-like 8x2 Q4_K (E 256),
// qwen3moe-like 128x8 renormalised Q8_0 (Qwen3-30B-A3B's routing)
extern const SynthShape kSynthMoeShapes[4];

// A layer's matrices by slot: the dense ones, then MoE's (fish::vk::kLayerWeights' order).
enum SynthSlot { kSlotQ, kSlotK, kSlotV, kSlotO, kSlotGate, kSlotUp, kSlotDown, kSlotRouter, kSlotGateExps,
                 kSlotUpExps, kSlotDownExps, kSlotGateSh, kSlotUpSh, kSlotDownSh, kSynthSlots };
using LayerWeights = std::array<fish_weight*, kSynthSlots>;

struct Synth {
  SynthShape v;
  // [layer][SynthSlot]: a layer's matrices; a slot the layer lacks is empty
  // (no data). Expert stacks hold n_expert matrices of n_out rows one after another.
  std::vector<std::array<Matrix, kSynthSlots>> w;
  std::vector<std::vector<float>> attn_norm, ffn_norm, bq, bk, bv, qn, kn, shexp_gate;
  std::vector<float> freqs;
  Matrix head;                  // [vocab 96][E]
  std::vector<float> head_norm;
};
Synth make_synth(const SynthShape& v, uint64_t seed);
// Matrices in slot k (n_expert for the expert stacks, else 1).
int n_mat_of(const Synth& s, int k);


// The ABI description of s's layers with the given weight handles ([layer][slot]).
struct SpanDescription {
  fish_arch arch{};
  std::vector<fish_layer_tensor> tensors;
  std::vector<fish_span_layer> layers;
  fish_span_desc desc{};
};
std::unique_ptr<SpanDescription> describe_span(const Synth& s, int n_ctx, const std::vector<LayerWeights>& w,
                                               int n_seq = 1);

// A span of one plugin or the other, driven the same way.
class TestSpan {
 public:
  virtual ~TestSpan() = default;
  // x [n_tok][E] in and out (the stream leaving the last layer); logits: the
  // last row's (n_vocab), when not null and a head is attached. Sequence 0.
  void forward(float* x, int n_tok, int pos0, float* logits = nullptr);
  // Rows of any sequences: row t of sequence seq[t] at pos[t]; logits
  // [rows with want[t] != 0][n_vocab] in row order (want may be null: none).
  virtual void forward_rows(float* x, int n_tok, const int32_t* seq, const int32_t* pos, const uint8_t* want,
                            float* logits) = 0;
  void truncate(int n) { truncate_seq(0, n); }
  virtual void truncate_seq(int seq, int n) = 0;
  virtual void copy(int src, int dst, int p0, int p1) = 0;
  virtual void reserve(int n) = 0;
  int kv_len() { return kv_len_seq(0); }
  virtual int kv_len_seq(int seq) = 0;
  virtual void set_head(const Synth& s) = 0;
};

// The reference plugin's span of s (REQUIREs every step).
std::unique_ptr<TestSpan> reference_span(const Synth& s, int n_ctx, int n_seq = 1);
// fish_vulkan's, through VulkanBackend with cfg and the ABI description
// (span_abi.cpp); nullptr when no device opens (skip_reason() says why).
std::unique_ptr<TestSpan> vulkan_span(const Synth& s, int n_ctx, const vk::VkConfig& cfg, int n_seq = 1);
// The fish_vulkan backend and span behind a vulkan_span (profile, describe).
vk::VulkanBackend& backend_of(TestSpan& t);
vk::Span& span_of(TestSpan& t);

}  // namespace fish::vktest
