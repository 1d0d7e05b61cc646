// A span (stage 2): a contiguous range of decoder layers resident on the
// device with its own f16 KV cache for one sequence, run by forward() as one
// command buffer, one submit, one fence (plugin_abi.h spells out the math).
//
// Device memory (all through Memory, so bytes_resident() is exact):
//   params   f32 vectors per layer: attn_norm, ffn_norm [, bq, bk, bv, q_norm, k_norm],
//            then the head's norm
//   rope     [capacity][n_rot/2] (cos θ, sin θ), computed on the host in double
//   kv[l]    per layer K [capacity][n_head_kv][D] then V, f16: position-major, so
//            growing the capacity copies two prefixes
//   arena    ctrl block, x and the work regions for `tokens` tokens (ArenaLayout)
//   staging  host-visible ctrl + x in, x out
// The KV starts at the capacity span_create is given and grows on demand
// (reserve); forward refuses a gap or a position past the capacity.
//
// Per forward the host writes the ctrl block and x into the staging buffer and
// submits one command buffer: the steps of plan() (span_plan.cpp says which,
// per layer and forward shape), recorded by record() (span_record.cpp). A
// decode (n_tok = 1) reuses a command buffer recorded once (the position lives
// in the ctrl block, the attention grid is an indirect dispatch), so a token
// costs the host two memcpys, a submit and a fence wait.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "kernels.h"
#include "memory.h"
#include "span_kernels.h"
#include "span_plan.h"
#include "span_profile.h"
#include "weight.h"

namespace fish::vk {

// The matrices of a layer, by role (the ABI's FISH_ROLE_ATTN_Q .. FFN_DOWN).
enum LayerWeight : int { kAttnQ, kAttnK, kAttnV, kAttnOut, kFfnGate, kFfnUp, kFfnDown, kLayerWeights };
const char* layer_weight_name(int k);  // "attn_q" ...

// What span_create gets (span_abi.cpp builds it from the ABI's fish_span_desc;
// host pointers valid during the call).
struct SpanLayerIn {
  Weight* w[kLayerWeights] = {};
  const float *attn_norm = nullptr, *ffn_norm = nullptr;
  const float *bq = nullptr, *bk = nullptr, *bv = nullptr, *q_norm = nullptr, *k_norm = nullptr;
};
struct SpanIn {
  int first_layer = 0, n_layers = 0;
  int n_embd = 0, n_head = 0, n_head_kv = 0, head_dim = 0, n_ff = 0, n_ctx = 0;
  float norm_eps = 1e-5f;
  bool neox = false;
  int n_rot = 0;
  float rope_freq_base = 10000, rope_freq_scale = 1;
  const float* rope_freqs = nullptr;  // [n_rot / 2] or null
  float attn_scale = 0;               // 0: 1/sqrt(head_dim)
  std::vector<SpanLayerIn> layers;
};

// Float offsets of the arena's regions (each 256-byte aligned) for T tokens.
struct ArenaLayout {
  uint32_t tokens = 0;
  // x: [tokens][n_embd] then, for decode, the host's x·attn_norm of layer 0
  // ([n_tok][n_embd] right after the n_tok rows of x: one copy-in). xn: the
  // normalised x (rmsnorm kernel) or x·g of the next norm (matvec epilogue).
  // sq: the norm epilogues' Σy² partials, [4][n_embd].
  // xqk / xql: a matmul step's input quantised to int8 rows in blocks of 256
  // (K-quants) / 32 (Q4_0, Q8_0), MatmulKernels::q8_row_words words per token
  // (empty without int8). xq2: the second B32 rows region of the decode.
  uint32_t x = 0, xn = 0, qkv = 0, qr = 0, att = 0, g = 0, u = 0, part = 0, cnt = 0, sq = 0;
  uint32_t xqk = 0, xql = 0, xq2 = 0;
  uint32_t total = 0;  // floats
};

// Everything a span needs from its backend.
struct SpanContext {
  const Device* dev = nullptr;
  Memory* mem = nullptr;
  Pipelines* pipelines = nullptr;
  MatmulKernels* matmul = nullptr;
  SpanKernels* kernels = nullptr;
  const VkConfig* cfg = nullptr;
  LogFn log;
};

class Span {
 public:
  static constexpr uint32_t kPartSlots = 128;  // attention partials per KV head (splits × tokens)

  // Checks the description (shapes against the weights, what the kernels
  // support); throws Failure naming the field (InvalidArgument / Unsupported).
  // with_weights = false checks the shape only (span_bytes is asked before the
  // layers' weights are uploaded).
  static void validate(const SpanContext& ctx, const SpanIn& in, bool with_weights = true);
  // Bytes span_create allocates for this shape at `capacity` positions (exact:
  // the driver's sizes of the same buffers).
  static uint64_t bytes_for(const SpanContext& ctx, const SpanIn& in, int capacity);

  Span(const SpanContext& ctx, const SpanIn& in);  // throws Failure; allocates nothing on failure
  ~Span();
  Span(const Span&) = delete;
  Span& operator=(const Span&) = delete;

  // One forward: n_tok consecutive positions from pos0 of the span's sequence.
  struct Forward {
    const float* x = nullptr;  // [n_tok][n_embd], the stream entering the first layer
    int n_tok = 0, pos0 = 0;
    float* x_out = nullptr;    // the stream leaving the last layer ([n_tok][n_embd], may be x), or null
    bool logits = false;       // the head's logits of the last row (needs set_head)
  };
  // Throws Failure (Range: a gap or past the capacity; InvalidArgument; Device).
  // x_out is written only after the last submission succeeded. Returns the
  // logits ([n_vocab], host-visible, valid until the next forward) when asked
  // for, else nullptr.
  const float* forward(const Forward& f);
  // The model's head after the last layer: logits = (rmsnorm(x) ∘ norm) · headᵀ
  // (head [n_vocab][n_embd], a weight of the same backend; norm copied to the
  // parameters). nullptr detaches. Throws Failure (InvalidArgument, OutOfMemory).
  void set_head(Weight* head, const float* norm);
  void truncate(int n);  // Range when n > kv_len
  void reserve(int n);   // grows the capacity (contents kept); OutOfMemory leaves the old KV
  int kv_len() const { return kv_len_; }
  int64_t head_rows() const { return head_ ? head_->n_out : 0; }  // logits per forward
  int capacity() const { return capacity_; }
  bool uses(const Weight* w) const;
  uint64_t bytes() const;    // device bytes held (the budget heap)
  std::string describe() const;  // "span 16 layers (0..15), KV 12 of 512 positions (16 MB f16), arena 15 MB, ..."
  std::string profile();         // span part of describe(PROFILE), "" when nothing ran; resets
  // The steps a forward of n_tok tokens records (with the head: also the logits).
  SpanPlan plan(int n_tok, bool head) const;

 private:
  struct Layer {
    Weight* w[kLayerWeights] = {};
    uint32_t attn_norm = kNone, ffn_norm = kNone, bq = kNone, bk = kNone, bv = kNone, qn = kNone, kn = kNone;
    Buffer kv;
    VkDescriptorSet aux_set = VK_NULL_HANDLE;
    std::vector<VkDescriptorSet> mm_sets[kLayerWeights];  // per weight chunk
    VkDescriptorSet gu_set = VK_NULL_HANDLE;  // gate (binding 0) and up (5) as a pair, when both are one chunk
  };
  // The int8 decode of one token in B32 rows (DecodeRows::B32): the K-quant
  // matvecs read blocks of 32 that their producers write themselves, so no
  // quantise step is left in a layer. The norm epilogues of wo and down
  // always write them; the attention where head_dim is a multiple of 32; the
  // gate|up pair (one dispatch writing silu(gate)·up) where every layer's gate
  // and up are single chunks of one type. Off: a quantise step before each
  // matmul step writes the CPU's Q8_K rows.
  struct B32Decode {
    bool on = false, attention = false, pair = false;
  };
  class Planner;  // span_plan.cpp

  static ArenaLayout arena_layout(const SpanIn& in, uint32_t tokens, bool int8);
  // Tokens per submission: FISH_VK_SPAN_TOKENS, else the device's default.
  static uint32_t batch_tokens(const SpanContext& ctx);
  static std::vector<float> rope_table(const SpanIn& in, int capacity);
  void allocate_kv(int capacity, std::vector<Buffer>* out) const;
  void write_buffer(Buffer& dst, uint64_t offset, const void* src, uint64_t n);
  void write_aux_sets();
  void fill_kv(int pos0, int n);  // FISH_VK_BENCH_FILL_KV
  // One submission: tokens [pos0, pos0 + n) with x rows `x`; the result is
  // left in the readback buffer (and copied to out when given).
  void run_batch(const float* x, int n, int pos0, float* out, bool head);
  // The decode attention with narrow_heads_ query heads per workgroup at this context.
  bool narrow_attention(int n_tok, int n_kv) const;
  VkCommandBuffer recording_for(int n_tok, bool head, bool narrow);
  VkCommandBuffer fresh_command_buffer();
  VkCommandBuffer one_time_commands();  // begun, for uploads and copies; the caller ends and submits it
  void record(VkCommandBuffer cmd, const SpanPlan& plan, bool stamps);
  SpanPlan plan(int n_tok, bool head, bool narrow) const;
  SpanKernelShape attn_shape(bool narrow) const;
  VkDescriptorSet matmul_set(const WeightChunk& c, const WeightChunk& c2, const Buffer& y);
  void release_head();
  void invalidate_recordings();
  void release_all();

  SpanContext ctx_;
  SpanIn shape_;                   // layers' host pointers are not kept (cleared)
  std::vector<float> rope_freqs_;  // shape_.rope_freqs points here
  std::vector<float> norm0_;       // layer 0's attn_norm (the host applies it for decode)
  SpanKernelShape kshape_{};       // a KV group per attention workgroup
  // Decode attention up to narrow_max_kv_ positions: narrow_heads_ query heads
  // per workgroup (0: never), the group's K/V read GQ/heads times, for a
  // shorter latency; beyond, where reading K/V several times costs more, a KV
  // group per workgroup.
  uint32_t narrow_heads_ = 0;
  uint32_t narrow_max_kv_ = 0;
  int capacity_ = 0, kv_len_ = 0;
  ArenaLayout arena_{};
  std::vector<Layer> layers_;
  Buffer params_, rope_, arena_buf_, staging_, readback_;
  VkDescriptorSet copy_in_set_ = VK_NULL_HANDLE, copy_out_set_ = VK_NULL_HANDLE;
  VkDescriptorSet quant_set_ = VK_NULL_HANDLE;  // quantize_x over the arena (int8)
  bool int8_ = false;  // int8 matmuls (at creation: the arena has the int8 rows regions)
  B32Decode b32_;
  VkCommandPool pool_ = VK_NULL_HANDLE;
  VkFence fence_ = VK_NULL_HANDLE;
  // The head (set_head): its norm's slot in params_ (reserved at creation),
  // its logits (host-visible: the matvec writes them there), a descriptor set
  // per weight chunk (binding 3 = head_rb_).
  Weight* head_ = nullptr;
  uint32_t head_norm_ = kNone;
  Buffer head_rb_;
  std::vector<VkDescriptorSet> head_sets_;
  // Recorded command buffers, reused: key n_tok | kHeadKey | kNarrowKey.
  std::map<int, VkCommandBuffer> cached_;
  static constexpr int kHeadKey = 1 << 20, kNarrowKey = 1 << 21;
  VkCommandBuffer scratch_cmd_ = VK_NULL_HANDLE;  // one-time recordings (uploads, FISH_GPU_PROFILE=2)
  std::vector<VkCommandBuffer> free_cmds_;
  std::unique_ptr<SpanProfile> profile_;
};

}  // namespace fish::vk
