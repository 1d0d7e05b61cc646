// The span's own kernels (shaders/span_*.comp) and their recording: rmsnorm,
// element-wise add / act·mul, q/k preparation + KV store, attention, and the
// copy kernel that moves x in and out. The projections are MatmulKernels'
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
constexpr uint32_t kNormCount = 8;  // arrival counter of the matvecs' norm epilogue (0 between dispatches)
constexpr uint32_t kInvAttn = 16;   // 16..19: 1/rms of x for the attention norm, per token (layer 0: the host's)
constexpr uint32_t kInvFfn = 20;    // 20..23: 1/rms for the FFN norm, per token
constexpr uint32_t kWords = 64;     // 256 bytes
}  // namespace ctrl

// Push constants of every auxiliary span kernel (SpanParams in span_common.glsl).
struct SpanPush {
  uint32_t n_tok = 0, n_embd = 0, x_off = 0, y_off = 0, count = 0, norm_off = kNone;
  float eps = 0;
  uint32_t q_off = 0, q_stride = 0, k_off = 0, v_off = 0, qr_off = 0, kv_cap = 0, att_off = 0, part_off = 0,
           cnt_off = 0;
  uint32_t bq_off = kNone, bk_off = kNone, bv_off = kNone, qn_off = kNone, kn_off = kNone;
  float scale = 1;
  uint32_t n_rot = 0, neox = 0, n_head = 0;
  uint32_t q8_out = kNone, q8_stride = 0;  // attention: its output as int8 rows too (QOUT), or none
  uint32_t q8_cnt = 0;                     // QOUT: arrival counters (G·head_dim < 256)
};
static_assert(sizeof(SpanPush) == 112);

// Shape constants the attention and RoPE kernels are specialised on.
struct SpanKernelShape {
  uint32_t head_dim = 0, group = 0, n_head_kv = 0;
  // Query heads per attention workgroup (divides group; 0: group, one
  // workgroup per KV head). FISH_VK_ATTN_HEADS.
  uint32_t wg_heads = 0;
  uint32_t heads_per_wg() const { return wg_heads ? wg_heads : group; }
  uint32_t attn_groups() const { return n_head_kv * group / heads_per_wg(); }  // workgroups per (token, split)
};

class SpanKernels {
 public:
  static constexpr uint32_t kAttnWg = 128;   // span_attention.comp's workgroup (positions per tile)
  static constexpr uint32_t kRopeWg = 64;    // span_rope_store.comp's

  SpanKernels(const Device& dev, Pipelines& pipelines);

  // Bindings: 0 arena, 1 layer KV, 2 params, 3 RoPE table, 4 arena (coherent).
  const Layout& aux_layout() const { return *aux_; }
  // Bindings: 0 source, 1 destination (copy_u4).
  const Layout& copy_layout() const { return *copy_; }

  // Shared memory the attention kernel needs for this shape (bytes).
  static uint32_t attention_shared_bytes(const SpanKernelShape& s);

  void rmsnorm(VkCommandBuffer cmd, VkDescriptorSet set, const SpanPush& pc);
  void add(VkCommandBuffer cmd, VkDescriptorSet set, const SpanPush& pc);      // a += b over pc.count
  void act_mul(VkCommandBuffer cmd, VkDescriptorSet set, const SpanPush& pc);  // a = silu(a)·b
  void rope_store(VkCommandBuffer cmd, VkDescriptorSet set, const SpanPush& pc, const SpanKernelShape& s);
  // Grid from the ctrl block (indirect): arena = the buffer holding it.
  // pc.q8_out set: the output also as Q8_K rows, or (b32) as B32 rows.
  void attention(VkCommandBuffer cmd, VkDescriptorSet set, const SpanPush& pc, const SpanKernelShape& s, bool fused,
                 VkBuffer arena, bool b32 = false);
  // dst[i] = src[i], n16 16-byte words, through the SMs.
  void copy(VkCommandBuffer cmd, VkDescriptorSet set, uint32_t n16);

  // Creates the pipelines of a shape now (the first forward is not slowed by compilation).
  // qout: the attention's QOUT (0 none, 1 Q8_K rows, 2 B32 rows).
  void warm_up(const SpanKernelShape& s, uint32_t qout);

  // FISH_VK_ATTN_VLATE: the attention loads a tile's V rows after its
  // scores (1) or with its K rows (0); -1: after them in the decode (fused)
  // attention with heads of >= 128 dims, where the early V rows hold 64
  // registers through the K phase (span_attention.comp VLATE; H200: 8B +2-3%
  // decode, the 1B's 64-dim heads 0.5-2% slower; prefill not measured).
  void set_attn_vlate(int mode) { vlate_ = mode; }
  // FISH_VK_SPAN_QSG: B32 output rows quantised within subgroups (QOUT 3,
  // quant_b32_sg.glsl q8b32_sg) or by the workgroup (QOUT 2, q8b32_wg).
  void set_b32_subgroups(bool on) { b32_sg_ = on; }
  uint32_t b32_qout() const { return b32_sg_ ? 3u : 2u; }
  bool attn_vlate(const SpanKernelShape& s, bool fused) const {
    return vlate_ < 0 ? fused && s.head_dim >= 128 : vlate_ != 0;
  }

 private:
  void bind(VkCommandBuffer cmd, VkPipeline p, const Layout& l, VkDescriptorSet set, const void* pc, uint32_t bytes);

  const Device& dev_;
  Pipelines& pipelines_;
  const Layout* aux_;
  const Layout* copy_;
  int vlate_ = -1;
  bool b32_sg_ = true;
};

}  // namespace fish::vk
