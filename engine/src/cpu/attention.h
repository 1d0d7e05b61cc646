// Causal multi-head attention over an f16 KV cache (GQA), f32 arithmetic.
// The cache may be one array of positions or pages of 2^page_shift positions
// (model/kv_cache.h): position j of a head lives at
//   pages[j >> page_shift] + (j & (2^page_shift - 1)) * stride + head_offset.
#pragma once
#include <cstdint>
#include <vector>

namespace fish {

class ThreadPool;

// Where one head's keys and values are: page tables (one array: a table of one
// page with page_shift 31), the stride between positions and the head's offset.
struct KvView {
  const uint16_t* const* k = nullptr;
  const uint16_t* const* v = nullptr;
  int32_t page_shift = 31;
  int64_t stride = 0;
  int64_t off = 0;
  const uint16_t* key(int32_t j) const { return k[j >> page_shift] + (j & ((int64_t(1) << page_shift) - 1)) * stride + off; }
  const uint16_t* value(int32_t j) const { return v[j >> page_shift] + (j & ((int64_t(1) << page_shift) - 1)) * stride + off; }
};

// One row of a batch over several sequences: its sequence's page tables and
// its position (it sees positions 0..pos of that sequence).
struct AttentionRow {
  const uint16_t* const* k_pages = nullptr;
  const uint16_t* const* v_pages = nullptr;
  int32_t pos = 0;
};

struct AttentionArgs {
  const float* q = nullptr;      // [n_tok, n_head * head_dim], RoPE applied
  int32_t n_tok = 0;
  // Either rows (paged, one per token, any sequences) ...
  const AttentionRow* rows = nullptr;
  int32_t page_shift = 31;
  // ... or one array: token t at position pos0 + t sees positions 0..pos0+t.
  int32_t pos0 = 0;
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

// The n_heads query heads of one KV head at one token (q, out: n_heads head
// vectors of hd, one after another): out_i[hd] = softmax(scale · K q_i) · V
// over positions 0..n_kv-1. `scores` holds n_heads · n_kv floats. A head's
// result is the same bits however many heads are computed with it (the
// driver groups them by the work available).
using AttentionHeadsFn = void (*)(const float* q, int32_t n_heads, const KvView& kv, int32_t n_kv, int32_t hd,
                                  float scale, float* out, float* scores);
void attention_heads_scalar(const float* q, int32_t n_heads, const KvView& kv, int32_t n_kv, int32_t hd, float scale,
                            float* out, float* scores);
// The fastest variant this CPU runs (AVX2+F16C: the heads share each K/V row's
// loads and run their FMA chains side by side; else scalar).
AttentionHeadsFn attention_heads_best();

}  // namespace fish
