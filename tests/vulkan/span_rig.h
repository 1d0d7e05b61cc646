// A bench for the span's kernels one at a time (tests and benchmarks): device
// buffers standing in for a span's arena, one layer's KV pool, its parameters,
// the RoPE table and the page tables (an identity table at word 0: pool
// page i holds positions 64·i.., so K [cap][KD] then V at kv_cap·KD is the
// plain layout; a test may put others), a descriptor set binding them as
// span_common.glsl expects, and synchronous runs of recorded dispatches. Alongside: the CPU
// references of each kernel (double accumulation), for the tests to compare to.
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

#include "backend.h"

namespace fish::vktest {

class SpanRig {
 public:
  // Sizes in 4-byte words. Throws vk::Failure.
  SpanRig(vk::VulkanBackend& be, uint64_t arena_words, uint64_t kv_words, uint64_t param_words, uint64_t rope_words);
  ~SpanRig();
  SpanRig(const SpanRig&) = delete;
  SpanRig& operator=(const SpanRig&) = delete;

  vk::Buffer& arena() { return arena_; }
  vk::Buffer& kv() { return kv_; }
  vk::Buffer& params() { return params_; }
  vk::Buffer& rope() { return rope_; }
  vk::Buffer& page_tables() { return pt_; }
  static constexpr uint32_t kPtWords = 4096;  // identity entries at creation
  VkDescriptorSet aux_set() const { return aux_set_; }
  // A span-matmul set for a weight chunk: {chunk, arena, params, arena, arena,
  // second} (second: a pair's other weight; the chunk again when null).
  VkDescriptorSet matmul_set(const vk::WeightChunk& c, const vk::WeightChunk* second = nullptr);

  // Words at word offset `off` of b.
  void put(vk::Buffer& b, uint64_t off, const void* words, uint64_t n_words);
  void put(vk::Buffer& b, uint64_t off, const std::vector<float>& v) { put(b, off, v.data(), v.size()); }
  void put(vk::Buffer& b, uint64_t off, const std::vector<uint32_t>& v) { put(b, off, v.data(), v.size()); }
  std::vector<float> get(vk::Buffer& b, uint64_t off, uint64_t n_words);
  std::vector<uint32_t> get_words(vk::Buffer& b, uint64_t off, uint64_t n_words);

  // Records rec into a fresh command buffer (with a compute barrier before it),
  // submits and waits. Returns the device seconds of rec when profiling is on.
  double run(const std::function<void(VkCommandBuffer)>& rec);

 private:
  vk::VulkanBackend& be_;
  vk::Buffer arena_, kv_, params_, rope_, pt_;
  VkDescriptorSet aux_set_ = VK_NULL_HANDLE;
  std::vector<VkDescriptorSet> mm_sets_;
};

// ---- CPU references -------------------------------------------------------------------
// f16 rounding as the kernels store the KV cache.
float round_f16(float v);
// The RoPE table the span uploads: [n_pos][n_rot/2] (cos, sin), θ = p·base^(-2i/n_rot)/ff_i·scale.
std::vector<float> rope_table(int n_pos, int n_rot, double base, double scale, const float* freqs);
// y = x / sqrt(mean(x²) + eps) · w over n elements.
void ref_rmsnorm(const float* x, const float* w, float* y, int n, float eps);
// One head vector of d floats: + bias (may be null), q/k norm (w may be null), RoPE at pos, × scale.
void ref_prep_head(float* v, int d, const float* bias, const float* norm_w, float eps, const float* rope, int pos,
                   int n_rot, bool neox, float scale);
// Causal GQA attention of one token's n_head query heads (already prepared and
// scaled) over positions 0..n_kv-1 of K, V ([pos][n_head_kv][d], f32 values).
void ref_attention(const float* q, const float* k, const float* v, int n_kv, int n_head, int n_head_kv, int d,
                   float* out);

}  // namespace fish::vktest
