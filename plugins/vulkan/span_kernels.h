// The span's own kernels (shaders/span_*.comp) and their recording: rmsnorm,
// q/k preparation + KV store, attention, and the copy kernel that moves x in
// and out. The projections are MatmulKernels'
// span variants (kernels.h: record_span).
#pragma once
#include <cstdint>

#include "pipelines.h"

namespace fish::vk {

constexpr uint32_t kNone = 0xFFFFFFFFu;  // an absent optional parameter vector

// The ctrl block at the start of the arena (uint words), rewritten by the
// copy-in kernel every forward (shaders/span_common.glsl CTRL_*).
namespace ctrl {
constexpr uint32_t kAttnArgs = 0;   // 0..2: the attention dispatch's indirect grid (n_head_kv, splits, n_tok)
constexpr uint32_t kPos0 = 4;
constexpr uint32_t kSplits = 5;
constexpr uint32_t kSplitLen = 6;
constexpr uint32_t kPt = 7;         // one sequence's forward: its page table's word index in binding 5
constexpr uint32_t kInvAttn = 16;   // 16..19: 1/rms of x for layer 0's attention norm, per token (the host's)
constexpr uint32_t kWords = 64;     // 256 bytes
}  // namespace ctrl

// Push constants of every auxiliary span kernel (SpanParams in span_common.glsl).
struct SpanPush {
  uint32_t n_tok = 0, n_embd = 0, x_off = 0, y_off = 0, norm_off = kNone;
  float eps = 0;
  uint32_t q_off = 0, q_stride = 0, k_off = 0, v_off = 0, qr_off = 0, kv_cap = 0, att_off = 0, part_off = 0,
           cnt_off = 0;
  uint32_t bq_off = kNone, bk_off = kNone, bv_off = kNone, qn_off = kNone, kn_off = kNone;
  float scale = 1;
  uint32_t n_rot = 0, neox = 0, n_head = 0;
  uint32_t q8_out = kNone, q8_stride = 0;  // attention: its output as B32 rows too (QOUT), or none
  // Rows of several sequences (rope_store / attention `multi`): word index of
  // the rows' (position, page table word index) pairs; rmsnorm `gather`: of its row list.
  uint32_t meta_off = 0;
};
static_assert(sizeof(SpanPush) == 108);

// Shape constants the attention and RoPE kernels are specialised on.
struct SpanKernelShape {
  uint32_t head_dim = 0, group = 0, n_head_kv = 0;
  // Query heads per attention workgroup (divides group; 0: group, one
  // workgroup per KV head).
  uint32_t wg_heads = 0;
  // Prompt attention on query tiles (span_attention_tiles.comp): K/V positions
  // per tile (16 or 32; 0: the per-token kernel) and whether on cooperative matrices.
  uint32_t tile_bc = 0;
  bool tile_coop = false;
  uint32_t heads_per_wg() const { return wg_heads ? wg_heads : group; }
  uint32_t attn_groups() const { return n_head_kv * group / heads_per_wg(); }  // workgroups per (token, split)
};

class SpanKernels {
 public:
  static constexpr uint32_t kAttnWg = 128;   // span_attention.comp's workgroup (positions per tile)
  static constexpr uint32_t kRopeWg = 64;    // span_rope_store.comp's

  SpanKernels(const Device& dev, Pipelines& pipelines);

  // Bindings: 0 arena, 1 layer KV pool, 2 params, 3 RoPE table, 4 arena (coherent), 5 page tables.
  const Layout& aux_layout() const { return *aux_; }
  // Bindings: 0 source, 1 destination (copy_u4).
  const Layout& copy_layout() const { return *copy_; }

  // Shared memory the attention kernel needs for this shape (bytes).
  static uint32_t attention_shared_bytes(const SpanKernelShape& s);

  // The prompt attention's query tiles for this shape on this device: sets
  // s.tile_bc / s.tile_coop (coop: cooperative matrices wanted and listed),
  // or leaves tile_bc 0 where the per-token kernel must do (a head size not a
  // multiple of 16, more than 64 query heads per KV head, no subgroup shuffle,
  // too little shared memory).
  void choose_tiles(SpanKernelShape& s, bool coop) const;
  // Shared memory of span_attention_tiles.comp (bytes) for head size D and BC positions per tile.
  static uint32_t tiles_shared_bytes(uint32_t D, uint32_t bc, bool coop);
  static constexpr uint32_t kTileRows = 64;  // query rows (tokens x heads of a KV group) per workgroup

  // gather: output row t normalises input row (the row list at pc.meta_off)[t].
  // half: the output as f16 rows (for matmul_coopmat.comp XH; n_embd even).
  void rmsnorm(VkCommandBuffer cmd, VkDescriptorSet set, const SpanPush& pc, bool gather = false, bool half = false);
  // multi: rows of several sequences (positions and page tables from the row table at pc.meta_off).
  void rope_store(VkCommandBuffer cmd, VkDescriptorSet set, const SpanPush& pc, const SpanKernelShape& s,
                  bool multi = false);
  // Grid from the ctrl block (indirect): arena = the buffer holding it.
  // fused: decode of one token (q/k/v arrive raw, the new K/V is stored here);
  // pc.q8_out set: the output also as B32 rows; multi: as rope_store's (never fused).
  void attention(VkCommandBuffer cmd, VkDescriptorSet set, const SpanPush& pc, const SpanKernelShape& s, bool fused,
                 VkBuffer arena, bool multi = false);
  // A prompt chunk's attention (rows of one sequence at pos0 + t, the cache
  // holding them) on query tiles: s.tile_bc must be set; grid n_tok / (64 /
  // group) x n_head_kv. half: the output rows as f16 (for wo's XH product).
  void attention_tiles(VkCommandBuffer cmd, VkDescriptorSet set, const SpanPush& pc, const SpanKernelShape& s,
                       bool half = false);
  // dst[i] = src[i], n16 16-byte words, through the SMs.
  void copy(VkCommandBuffer cmd, VkDescriptorSet set, uint32_t n16);

  // Creates the pipelines of a shape now (the first forward is not slowed by compilation).
  // b32_out: the decode attention's B32 output rows; multi: also the kernels of
  // forwards with rows of several sequences.
  void warm_up(const SpanKernelShape& s, bool b32_out, bool multi = false);

  // The attention loads a tile's V rows after its scores in the decode
  // attention with heads of >= 128 dims, where rows loaded with the K row
  // would hold 64 registers through the K phase; elsewhere with the K row,
  // their latency overlapping the query's preparation (span_attention.comp VLATE).
  static bool v_rows_late(const SpanKernelShape& s, bool fused) { return fused && s.head_dim >= 128; }

 private:
  void bind(VkCommandBuffer cmd, VkPipeline p, const Layout& l, VkDescriptorSet set, const void* pc, uint32_t bytes);
  VkPipeline attention_pipeline(const SpanKernelShape& s, bool fused, bool b32_out, bool multi);
  VkPipeline tiles_pipeline(const SpanKernelShape& s, bool half);

  const Device& dev_;
  Pipelines& pipelines_;
  const Layout* aux_;
  const Layout* copy_;
};

}  // namespace fish::vk
