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

struct AttentionBlock;
using AttentionBlockFn = void (*)(const AttentionBlock& b, const KvView& kv, int32_t hd, float scale, float* scores);

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
  // The block variant (attention_block_variant); null: attention_block_best().
  AttentionBlockFn block = nullptr;
};

// Per-thread score buffers and the driver's lists of blocks, grown on demand
// (no allocation once warm).
struct AttentionScratch {
  std::vector<std::vector<float>> scores;
  std::vector<int32_t> runs, chunks;
};

void attention(ThreadPool& pool, const AttentionArgs& a, AttentionScratch& scratch);

// A block of query rows over one KV head: n_tok consecutive tokens of one
// sequence (token i sees positions 0..n_kv0 + i - 1) × n_heads query heads of
// that KV head. Token i's head h: q + i·q_stride + h·hd, out likewise.
constexpr int32_t kMaxBlockRows = 64;  // n_tok · n_heads
struct AttentionBlock {
  const float* q = nullptr;
  int64_t q_stride = 0;
  float* out = nullptr;
  int64_t out_stride = 0;
  int32_t n_tok = 1, n_heads = 1, n_kv0 = 1;
};
// A block of more than kMaxBlockRows rows as two halves (by tokens, else by
// heads), each run through `fn`; false (nothing run) for a block that fits.
// The halves give the same bits: rows are independent.
inline bool split_large_block(const AttentionBlock& b, const KvView& kv, int32_t hd, float scale, float* scores,
                              AttentionBlockFn fn) {
  if (b.n_tok * b.n_heads <= kMaxBlockRows) return false;
  AttentionBlock x = b, y = b;
  if (b.n_tok > 1) {
    x.n_tok = b.n_tok / 2, y.n_tok = b.n_tok - x.n_tok;
    y.q += x.n_tok * b.q_stride, y.out += x.n_tok * b.out_stride, y.n_kv0 += x.n_tok;
  } else {
    x.n_heads = b.n_heads / 2, y.n_heads = b.n_heads - x.n_heads;
    y.q += int64_t(x.n_heads) * hd, y.out += int64_t(x.n_heads) * hd;
  }
  fn(x, kv, hd, scale, scores);
  fn(y, kv, hd, scale, scores);
  return true;
}
// out = softmax(scale · K q) · V for every row of b. `scores` holds n_tok ·
// n_heads · (n_kv0 + n_tok - 1) floats. A row's result is the same bits
// whatever block it is computed in (the driver forms blocks by the work there is).
void attention_block_scalar(const AttentionBlock& b, const KvView& kv, int32_t hd, float scale, float* scores);
// The variants by name, null where this CPU (or build) lacks what one needs:
//   "scalar"  a row at a time;
//   "avx2"    AVX2 + FMA + F16C: the rows share each K/V row's loads, by blocks
//             of positions held in L1, and run their FMA chains side by side;
//   "avx512"  AVX-512 F/BW/VL/DQ + VNNI (the AVX-512 matmul kernels' set): a
//             block of many rows (a prompt) takes each tile of positions' K
//             (transposed) and V converted to f32 once into L1, two small
//             matrix products over all its rows; a few rows (decode) read the
//             f16 cache directly, prefetched (attention_avx512.cpp).
// Each keeps the property above for itself; different variants differ in rounding.
AttentionBlockFn attention_block_variant(const char* name);
// The fastest variant this CPU runs: avx512, else avx2, else scalar.
AttentionBlockFn attention_block_best();

}  // namespace fish
