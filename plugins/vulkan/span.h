// A span (stage 2): a contiguous range of decoder layers resident on the
// device with its own f16 KV cache, run by span_forward as one command buffer,
// one submit, one fence (plugin_abi.h spells out the math).
//
// Device memory (all through Memory, so bytes_resident() is exact):
//   params   f32 vectors per layer: attn_norm, ffn_norm [, bq, bk, bv, q_norm, k_norm]
//   rope     [capacity][n_rot/2] (cos θ, sin θ), computed on the host in double
//   kv[l]    per layer K [capacity][n_head_kv][D] then V, f16: position-major, so
//            growing the capacity copies two prefixes
//   arena    ctrl block, x and the work regions for `tokens` tokens (ArenaLayout)
//   staging  host-visible ctrl + x in, x out
// The KV starts at the capacity span_create is given and grows on demand
// (reserve); forward refuses a gap or a position past the capacity.
//
// Per forward the host writes the ctrl block and x into the staging buffer and
// submits one command buffer: copy in, per layer the steps below, copy out.
// Decode (n_tok = 1) reuses a command buffer recorded once (the position lives
// in the ctrl block, the attention grid is an indirect dispatch), so a token
// costs the host two memcpys, a submit and a fence wait. Per layer (decode):
//   q|k|v matvecs with the attention rmsnorm folded in → barrier →
//   attention (q/k bias + norm + RoPE, KV store, split context, combine; one
//     query head per workgroup up to 2048 positions, a KV group beyond) → barrier →
//   wo matvec + residual add → barrier →
//   gate (silu) | up matvecs with the FFN rmsnorm folded in → barrier →
//   down matvec on silu(gate)·up + residual add → barrier
// With a head attached (set_head, ABI 1.1) the last layer's down epilogue
// hands it the output norm, and the forward ends with quantise x → the head's
// matvec, which writes the logits straight into host-visible memory.
// With int8 activations each matvec step is preceded by a quantize_x step
// (+ barrier), unless FISH_VK_SPAN_QFOLD lets its producer write the int8
// rows itself (Mode::fold, span_record.cpp; in Q8_K rows measured no faster;
// in B32 rows, kFold32, +6-8% on the H200's 8B, the default since 2026-11-30
// though no longer the CPU's int8 arithmetic: plugins/vulkan/README.md).
// Prefill (n_tok > 4) uses separate rmsnorm and RoPE/KV-store kernels and the
// tiled matmuls; every token of the submission is one chunk (the work regions
// hold `tokens` tokens; larger n_tok is split into several submissions).
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "kernels.h"
#include "memory.h"
#include "span_kernels.h"

namespace fish::vk {

struct Weight;
struct WeightChunk;

// What span_create gets (the ABI's fish_span_desc, host pointers valid during the call).
struct SpanLayerIn {
  Weight* w[7] = {};  // wq wk wv wo gate up down
  const float *attn_norm = nullptr, *ffn_norm = nullptr;
  const float *bq = nullptr, *bk = nullptr, *bv = nullptr, *q_norm = nullptr, *k_norm = nullptr;
};
struct SpanIn {
  int first_layer = 0, n_layers = 0;
  int n_embd = 0, n_head = 0, n_head_kv = 0, head_dim = 0, n_ff = 0, n_ctx = 0;
  float rms_eps = 1e-5f;
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
  // sq: Σy² partials of the norm epilogue, [4][n_embd].
  // xqk / xql: a matmul step's input quantised to int8 rows (FISH_VK_INT8) in
  // blocks of 256 (K-quants) / 32 (Q4_0, Q8_0), MatmulKernels::q8_row_words
  // words per token (empty without int8). xq2: a second Q8_K region for
  // decode (4 tokens), qcnt: per-256-block arrival counters (the producers'
  // quantisation, Span::Mode::fold_quant).
  uint32_t x = 0, xn = 0, qkv = 0, qr = 0, att = 0, o = 0, g = 0, u = 0, part = 0, cnt = 0, sq = 0;
  uint32_t xqk = 0, xql = 0, xq2 = 0, qcnt = 0;
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

  // x: [n_tok, n_embd] in/out. Throws Failure (Range: gap / capacity; Device).
  // x is written only after the last submission succeeded. logits (ABI 1.1,
  // needs set_head): also the head's output for the last token, [n_vocab],
  // computed in the same submission as the layers (written on success only).
  void forward(float* x, int n_tok, int pos0, float* logits = nullptr);
  // span_forward_logits_view (ABI 1.2): forward with the head, the logits left
  // where the head's matvec wrote them (host-visible), valid until the next forward.
  const float* forward_view(float* x, int n_tok, int pos0);
  // The model's head after the last layer: logits = (rmsnorm(x) ∘ norm) · headᵀ
  // (head [n_vocab][n_embd], a weight of the same backend; norm copied to the
  // parameters). nullptr detaches. Throws Failure (InvalidArgument, OutOfMemory).
  void set_head(Weight* head, const float* norm);
  void truncate(int n);  // Range when n > kv_len
  void reserve(int n);   // grows the capacity (contents kept); OutOfMemory leaves the old KV
  int kv_len() const { return kv_len_; }
  int capacity() const { return capacity_; }
  bool uses(const Weight* w) const;
  uint64_t bytes() const;              // device bytes held (the budget heap)
  std::string describe() const;        // "span 16 layers (0..15), KV 512 positions, 16 MB f16; arena 15 MB"
  std::string profile();               // span part of describe(PROFILE), "" when nothing ran; resets

 private:
  struct Layer {
    Weight* w[7] = {};
    uint32_t attn_norm = kNone, ffn_norm = kNone, bq = kNone, bk = kNone, bv = kNone, qn = kNone, kn = kNone;
    Buffer kv;
    VkDescriptorSet aux_set = VK_NULL_HANDLE;
    std::vector<VkDescriptorSet> mm_sets[7];  // per weight chunk
    VkDescriptorSet gu_set = VK_NULL_HANDLE;  // gate (binding 0) and up (5) as a pair, when both are one chunk
  };
  // A recording's shape: which steps are fused (see record()). fuse_norm: the
  // rmsnorms live in the wo/down epilogues (and layer 0's on the host);
  // norm_parts: their 1/rms is reduced by the consumers (FISH_VK_SPAN_NORM);
  // pair_gu: gate and up as one dispatch writing silu(gate)·up (FISH_VK_SPAN_GU).
  struct Mode {
    bool tiled = false, fuse_norm = false, fuse_attn = false, fuse_epi = false, norm_parts = false, pair_gu = false;
    uint32_t fold = 0;  // int8 decode: which producers write the next step's int8 rows (kFold*, fold_)
  };
  // kFold32: the folds write B32 rows (blocks of 32, which one producer
  // workgroup owns: no arrival counters), and every K-quant decode matvec
  // reads B32 rows (quantize_x's B32K mode where nothing folds). One token.
  // kFoldWoIn (with kFold32): the attention writes f32 only, and each wo
  // workgroup quantises all of it into B32 rows in shared memory (instead of
  // kFoldAttn's quantisation at the end of the attention).
  // kFoldDownIn (with kFold32, not with kFoldGateUp): likewise each down
  // workgroup quantises silu(gate)·up itself; no quantise step before down.
  // Both measured slower on the H200 (8B 301 / 260-267 / 263 tok/s with 16 /
  // 32 / both against 321-322: every workgroup repeats the quantisation), so
  // they stay variants for FISH_VK_SPAN_QFOLD, off by default.
  static constexpr uint32_t kFoldAttn = 1, kFoldNorm = 2, kFoldGateUp = 4, kFold32 = 8, kFoldWoIn = 16,
                            kFoldDownIn = 32;
  class Recorder;  // span_record.cpp

  // int8: with the quantised-x regions (MatmulKernels::int8()).
  static ArenaLayout arena_layout(const SpanIn& in, uint32_t tokens, bool int8);
  static std::vector<float> rope_table(const SpanIn& in, int capacity);
  Mode mode_for(int n_tok) const;
  void allocate_kv(int capacity, std::vector<Buffer>* out) const;
  void write_buffer(Buffer& dst, uint64_t offset, const void* src, uint64_t n);
  void write_aux_sets();
  void fill_kv(int pos0, int n);  // FISH_VK_BENCH_FILL_KV
  // forward() and forward_view(): head runs the head too; logits (with head) gets a copy.
  void forward_impl(float* x, int n_tok, int pos0, bool head, float* logits);
  // head: the batch also runs the head on its last token (into head_rb_).
  // narrow: the decode attention with narrow_heads_ query heads per workgroup.
  void run_batch(const float* x, int n_tok, int pos0, float* out, bool head = false);
  VkCommandBuffer recording_for(int n_tok, bool profiled, bool head = false, bool narrow = false);
  void record(VkCommandBuffer cmd, int n_tok, Mode m, bool stamps, bool head, bool narrow);
  SpanKernelShape attn_shape(bool narrow) const;
  VkDescriptorSet matmul_set(const WeightChunk& c, const WeightChunk& c2, const Buffer& y);
  void release_head();
  void invalidate_recordings();
  void release_all();

  SpanContext ctx_;
  SpanIn shape_;          // layers' host pointers are not kept (cleared)
  std::vector<float> rope_freqs_;  // shape_.rope_freqs points here
  std::vector<float> norm0_;       // layer 0's attn_norm (the host applies it for decode)
  SpanKernelShape kshape_{};  // a KV group per attention workgroup
  // Decode attention with fewer query heads per workgroup (shorter latency,
  // the group's K/V read GQ/heads times): narrow_heads_ (0: never) while the
  // context is at most narrow_max_kv_ positions (FISH_VK_ATTN_HEADS).
  uint32_t narrow_heads_ = 0;
  uint32_t narrow_max_kv_ = 0;
  int first_layer_ = 0;
  int capacity_ = 0, kv_len_ = 0;
  ArenaLayout arena_{};
  std::vector<Layer> layers_;
  Buffer params_, rope_, arena_buf_, staging_, readback_;
  VkDescriptorSet copy_in_set_ = VK_NULL_HANDLE, copy_out_set_ = VK_NULL_HANDLE;
  VkDescriptorSet quant_set_ = VK_NULL_HANDLE;  // quantize_x over the arena (int8)
  bool int8_ = false;  // int8 matmuls (FISH_VK_INT8=1 at creation: the arena has the xq regions)
  // int8 decode with the quantisation folded into the producers (kFold*
  // bits, FISH_VK_SPAN_QFOLD): every weight int8 with Q8_K activations in one
  // chunk, E, n_ff and n_head·head_dim multiples of 256; kFoldAttn needs
  // G·head_dim a multiple or divisor of 256 (kFold32: head_dim a multiple of
  // 32), kFoldGateUp a gate|up pair.
  uint32_t fold_ = 0;
  // int8 decode: which matvecs take int8 x (bits of FISH_VK_SPAN_I8: weight
  // index 0..6 of a layer, 7 the head); the rest read f32 x, so a step whose
  // consumers are all f32 needs no quantize_x. Prefill: all int8.
  uint32_t i8_mask_ = 0xFF;
  VkCommandPool pool_ = VK_NULL_HANDLE;
  VkFence fence_ = VK_NULL_HANDLE;
  VkQueryPool queries_ = VK_NULL_HANDLE;
  uint32_t max_stamps_ = 0;
  // The head (set_head): its norm's slot in params_ (reserved at creation),
  // its logits (host-visible: the matvec writes them there), a descriptor set
  // per weight chunk (binding 3 = head_rb_).
  Weight* head_ = nullptr;
  uint32_t head_norm_ = kNone;
  Buffer head_rb_;
  std::vector<VkDescriptorSet> head_sets_;
  std::map<int, VkCommandBuffer> cached_;  // n_tok (| kHeadKey | kNarrowKey) -> recorded command buffer (reused)
  static constexpr int kHeadKey = 1 << 20, kNarrowKey = 1 << 21, kStampKey = 1 << 22;
  VkCommandBuffer scratch_cmd_ = VK_NULL_HANDLE;  // profiled recordings
  std::vector<VkCommandBuffer> free_cmds_;

  // Profile since the last profile() call.
  struct Stage {
    std::string name, category;
    double seconds = 0;
  };
  std::vector<std::string> stamp_names_;  // per timestamp interval of the last profiled recording
  std::vector<std::string> stamp_cats_;
  std::map<std::string, Stage> stages_;
  uint64_t prof_forwards_ = 0, prof_decode_ = 0, prof_tokens_ = 0, prof_submits_ = 0;
  double prof_wall_s_ = 0, prof_gpu_s_ = 0, prof_decode_wall_s_ = 0, prof_decode_gpu_s_ = 0;
  // Decode tokens' host side: preparing the ctrl block and x, submit to the
  // fence's signal (seen by the host), reading x and the logits back.
  double prof_decode_prep_s_ = 0, prof_decode_wait_s_ = 0, prof_decode_copy_s_ = 0;
};

}  // namespace fish::vk
