// Causal multi-head attention over an f16 KV cache (GQA), f32 arithmetic.
#pragma once
#include <cstdint>
#include <vector>

namespace fish {

class ThreadPool;

struct AttentionArgs {
  const float* q = nullptr;      // [n_tok, n_head * head_dim], RoPE applied
  int32_t n_tok = 0;
  int32_t pos0 = 0;              // position of token 0; token t sees positions 0..pos0+t
  const uint16_t* k = nullptr;   // f16 [positions, kv_stride]: position p's keys at k + p*kv_stride
  const uint16_t* v = nullptr;   // f16, same layout
  int64_t kv_stride = 0;         // elements between positions (n_head_kv * head_dim)
  int32_t n_head = 0, n_head_kv = 0, head_dim = 0;
  float scale = 1.0f;            // applied to q·k (1/sqrt(head_dim))
  float* out = nullptr;          // [n_tok, n_head * head_dim]
};

// Per-thread score buffers, grown on demand (no allocation once warm).
struct AttentionScratch {
  std::vector<std::vector<float>> scores;
};

void attention(ThreadPool& pool, const AttentionArgs& a, AttentionScratch& scratch);

// One (token, head): out[hd] = softmax(scale · K q) · V over n_kv positions.
// Exposed for tests; `scores` holds n_kv floats.
using AttentionHeadFn = void (*)(const float* q, const uint16_t* k, const uint16_t* v, int64_t stride, int32_t n_kv,
                                 int32_t hd, float scale, float* out, float* scores);
void attention_head_scalar(const float* q, const uint16_t* k, const uint16_t* v, int64_t stride, int32_t n_kv,
                           int32_t hd, float scale, float* out, float* scores);
// The fastest variant this CPU runs (AVX2+F16C or scalar).
AttentionHeadFn attention_head_best();

}  // namespace fish
