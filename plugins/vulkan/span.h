// A span (stage 2): a contiguous range of decoder layers resident on the
// device with its own f16 KV cache for n_seq sequences, run by forward() as
// one command buffer, one submit, one fence (plugin_abi.h spells out the math).
//
// Device memory (all through Memory, so bytes_resident() is exact):
//   params   f32 vectors per layer: attn_norm, ffn_norm [, bq, bk, bv, q_norm, k_norm],
//            then the head's norm
//   rope     [capacity][n_rot/2] (cos θ, sin θ), computed on the host in double
//   kv[l]    per layer, a pool of pages of kKvPage positions: K [pool rows][n_head_kv][D]
//            then V, f16 (pool row r is in page r / kKvPage)
//   pt       the page tables: [n_seq][pages per sequence] pool pages, u32
//   arena    ctrl block, x, the work regions and the row table for `tokens` tokens (ArenaLayout)
//   staging  host-visible ctrl + x (+ the row table) in, x out
//
// Each sequence holds up to `capacity` positions (span_create's n_ctx, raised
// by reserve) in pages of kKvPage positions taken from the pool as its
// positions are written and given back by truncate. The pool starts with
// room for every sequence at n_ctx (what span_bytes states) and grows, by
// half its size at least, when a forward needs more pages than are free (an
// OutOfMemory then fails that forward before it runs). span_kv_copy shares
// the source's pages (a reference count per page) instead of copying them;
// a page shared by several sequences is copied for the one about to write
// into it (copy on write), so a common prompt prefix is held once. The
// kernels find a position through its sequence's page table (span_common.glsl
// kv_row: one table word per position, read once per K/V row), uploaded when a
// table changed, before the forward that needs it.
//
// Per forward the host writes the ctrl block and x into the staging buffer and
// submits one command buffer per `tokens` rows: the steps of plan()
// (span_plan.cpp says which, per layer and forward shape), recorded by
// record() (span_record.cpp). A submission whose rows are of one sequence is
// the one-sequence forward (positions pos0 + t and the sequence's page table
// in the ctrl block); rows of several sequences add a row table (position and
// page table per row) read by
// the RoPE / KV-store and attention kernels, so the matrices are still read
// once for all rows (span_forward.cpp). A decode (n_tok = 1) reuses a command
// buffer recorded once (the position lives in the ctrl block, the attention
// grid is an indirect dispatch), so a token costs the host two memcpys, a
// submit and a fence wait.
#pragma once
#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "kernels.h"
#include "memory.h"
#include "moe_kernels.h"
#include "span_kernels.h"
#include "span_plan.h"
#include "span_profile.h"
#include "weight.h"

namespace fish::vk {

// The matrices of a layer, by role (the ABI's FISH_ROLE_ATTN_Q .. FFN_DOWN,
// then MoE's: the router, the expert stacks, the shared expert). A dense layer
// has the first seven, a MoE layer the attention's, the router and the
// stacks (+ the shared expert's three); the others are null.
enum LayerWeight : int {
  kAttnQ, kAttnK, kAttnV, kAttnOut, kFfnGate, kFfnUp, kFfnDown,
  kFfnRouter, kGateExps, kUpExps, kDownExps, kGateShexp, kUpShexp, kDownShexp, kLayerWeights
};
const char* layer_weight_name(int k);  // "attn_q" ...

// What span_create gets (span_abi.cpp builds it from the ABI's fish_span_desc;
// host pointers valid during the call).
struct SpanLayerIn {
  Weight* w[kLayerWeights] = {};
  const float *attn_norm = nullptr, *ffn_norm = nullptr;
  const float *bq = nullptr, *bk = nullptr, *bv = nullptr, *q_norm = nullptr, *k_norm = nullptr;
  const float* shexp_gate = nullptr;  // [n_embd]: the shared expert's sigmoid gate (MoE)
};
struct SpanIn {
  int first_layer = 0, n_layers = 0;
  int n_embd = 0, n_head = 0, n_head_kv = 0, head_dim = 0, n_ff = 0, n_ctx = 0;
  int n_seq = 1;  // sequences, each up to n_ctx positions of KV
  float norm_eps = 1e-5f;
  bool neox = false;
  int n_rot = 0;
  float rope_freq_base = 10000, rope_freq_scale = 1;
  const float* rope_freqs = nullptr;  // [n_rot / 2] or null
  float attn_scale = 0;               // 0: 1/sqrt(head_dim)
  // MoE (n_expert > 0; n_ff is then 0): softmax over the router, the top
  // n_expert_used, renormalised with gating_norm; n_ff_shexp 0: no shared expert.
  int n_expert = 0, n_expert_used = 0, n_ff_expert = 0, n_ff_shexp = 0;
  bool gating_norm = false;
  std::vector<SpanLayerIn> layers;
};

// Float offsets of the arena's regions (each 256-byte aligned) for T tokens.
struct ArenaLayout {
  uint32_t tokens = 0;
  // x: [tokens][n_embd] then, for decode, the host's x·attn_norm of layer 0
  // ([n_tok][n_embd] right after the n_tok rows of x: one copy-in). xn: the
  // normalised x (rmsnorm kernel) or x·g of the next norm (matvec epilogue).
  // sq: the norm epilogues' Σy² partials, [min(tokens, 32)][n_embd].
  // xqk / xql: a matmul step's input quantised to int8 rows in blocks of 256
  // (K-quants) / 32 (Q4_0, Q8_0), MatmulKernels::q8_row_words words per token
  // (empty without int8); in the B32 decode every int8 type's B32 rows are in
  // xqk. xq2: the second B32 rows region of the decode.
  uint32_t x = 0, xn = 0, qkv = 0, qr = 0, att = 0, g = 0, u = 0, part = 0, cnt = 0, sq = 0;
  uint32_t xqk = 0, xql = 0, xq2 = 0;
  // The row table (uint words, filled by the host when a submission needs
  // it): [tokens] (position, page table word index) pairs for rows of several
  // sequences, then at meta + 2·tokens the rows whose logits are wanted.
  uint32_t meta = 0, meta_words = 0;
  // MoE (empty for a dense span): the router's logits [tokens][n_expert], the
  // routing words (moe_kernels.h), the experts' silu·up rows [tokens·k][n_ff_expert],
  // their weighted down rows [tokens·k][n_embd], the shared expert's down [tokens][n_embd].
  // rl: the router's logits [tokens][n_expert] (a one-row decode whose wo
  // routes: n_expert logits, then wo's partials [n_embd / 32][n_expert]).
  // rcnt: the router tail's arrival counter (one word, 0 between dispatches),
  // then the summed down's per B32 block of n_embd (MoePush::cnt_off).
  uint32_t rl = 0, route = 0, rcnt = 0, hx = 0, dx = 0, shx = 0;
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
  static constexpr int kKvPage = 64;           // positions per KV page (span_common.glsl KV_PAGE)
  // Pages of kKvPage positions that hold n positions.
  static uint32_t pages_for(int n) { return uint32_t((int64_t(n) + kKvPage - 1) / kKvPage); }

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

  // One forward: n_tok rows, row t of sequence seq[t] at position pos[t]
  // (without them: sequence 0 at pos0 + t). Per sequence its rows come in
  // order of position, consecutive, the first at or before its KV length.
  struct Forward {
    const float* x = nullptr;  // [n_tok][n_embd], the stream entering the first layer
    int n_tok = 0, pos0 = 0;
    const int32_t* seq = nullptr;  // [n_tok] or null: every row is sequence 0
    const int32_t* pos = nullptr;  // [n_tok] or null: pos0 + t
    float* x_out = nullptr;    // the stream leaving the last layer ([n_tok][n_embd], may be x), or null
    bool logits = false;       // the head's logits of the last row (needs set_head)
    const uint8_t* logits_rows = nullptr;  // [n_tok], nonzero: these rows' logits, in row order (instead of `logits`)
  };
  // Throws Failure (Range: a gap or past the capacity; InvalidArgument: a bad
  // sequence id or rows out of order; Device). x_out is written only after the
  // last submission succeeded; on failure each sequence of the batch keeps
  // the positions before its first row. Returns the logits
  // ([logits_count()][n_vocab], host memory, valid until the next forward)
  // when asked for, else nullptr.
  const float* forward(const Forward& f);
  int logits_count() const { return logits_count_; }  // rows of the last forward's logits
  // The model's head after the last layer: logits = (rmsnorm(x) ∘ norm) · headᵀ
  // (head [n_vocab][n_embd], a weight of the same backend; norm copied to the
  // parameters). nullptr detaches. Throws Failure (InvalidArgument, OutOfMemory).
  void set_head(Weight* head, const float* norm);
  // Sequence seq keeps its positions < n (Range when n > its length;
  // InvalidArgument for a bad id).
  void truncate(int seq, int n);
  // Sequence dst's positions [p0, p1) become a copy of sequence src's (p1 <=
  // src's length, p0 <= dst's, else Range); dst's length becomes p1. Whole
  // pages are shared; only a page that dst holds positions of before p0 is
  // copied into (one vkCmdCopyBuffer per layer).
  void copy(int src, int dst, int p0, int p1);
  // Raises every sequence's capacity to n positions (contents kept; the pool
  // grows as pages are written). OutOfMemory leaves the old tables.
  void reserve(int n);
  int kv_len(int seq = 0) const;  // InvalidArgument for a bad id
  int n_seq() const { return shape_.n_seq; }
  int64_t head_rows() const { return head_ ? head_->n_out : 0; }  // logits per forward
  int capacity() const { return capacity_; }
  uint32_t pool_pages() const { return pool_pages_; }  // KV pages of kKvPage positions held
  uint32_t pages_in_use() const { return pool_pages_ - uint32_t(free_pages_.size()); }
  bool uses(const Weight* w) const;
  uint64_t bytes() const;    // device bytes held (the budget heap)
  std::string describe() const;  // "span 16 layers (0..15), KV 12 of 512 positions (16 MB f16), arena 15 MB, ..."
  std::string profile();         // span part of describe(PROFILE), "" when nothing ran; resets
  // What a recorded submission is specialised on (and the key of the cache of them).
  struct Shape {
    int n_tok = 0;
    int head_rows = 0;       // logits rows (0: none)
    bool head_last = false;  // the one logits row is the last (the head reads the decode's x·norm)
    bool narrow = false;     // decode attention with narrow_heads_ query heads per workgroup
    bool multi = false;      // rows of several sequences (positions and page tables from the row table)
    bool operator<(const Shape& o) const;
  };
  // The steps a forward of n_tok tokens of sequence 0 records (with the head:
  // also the logits of the last row).
  SpanPlan plan(int n_tok, bool head) const;
  SpanPlan plan(const Shape& shape) const;

 private:
  struct Layer {
    Weight* w[kLayerWeights] = {};
    uint32_t attn_norm = kNone, ffn_norm = kNone, bq = kNone, bk = kNone, bv = kNone, qn = kNone, kn = kNone;
    uint32_t shexp_gate = kNone;  // MoE: the shared expert's gate vector
    // MoE (MoeKernels::layout): gate|up stacks (bindings 0 / 5), the down stack, route + combine (no weight).
    VkDescriptorSet moe_gu = VK_NULL_HANDLE, moe_down = VK_NULL_HANDLE, moe_aux = VK_NULL_HANDLE;
    VkDescriptorSet moe_up = VK_NULL_HANDLE;  // the up stack at binding 0 (tiled prompt chunks)
    Buffer kv;
    VkDescriptorSet aux_set = VK_NULL_HANDLE;   // SpanKernels::aux_layout: binding 1 is this layer's KV pool
    std::vector<VkDescriptorSet> mm_sets[kLayerWeights];  // per weight chunk
    VkDescriptorSet gu_set = VK_NULL_HANDLE;  // gate (binding 0) and up (5) as a pair, when both are one chunk
    VkDescriptorSet wo_router_set = VK_NULL_HANDLE;  // MoE: wo (0) and an f32 router (5), both one chunk
  };
  // The int8 decode of one token in B32 rows (DecodeRows::B32): the int8
  // matvecs (K-quants, Q4_0, Q8_0) read blocks of 32 that their producers write themselves, so no
  // quantise step is left in a layer. The norm epilogues of wo and down
  // always write them; the attention where head_dim is a multiple of 32; the
  // gate|up pair (one dispatch writing silu(gate)·up) where every layer's gate
  // and up are single chunks of one type. Forwards of 2..32 rows (token
  // groups) read B32 rows too, from quantise steps. Off: a quantise step
  // before each matmul step writes the CPU's Q8_K / Q8_0 rows. MoE spans: the
  // experts' gate|up (mvmi_<T>) reads wo's B32 rows where every layer's
  // gate and up experts are single-chunk K-quants and no router takes int8 x
  // (the router then reads wo's f32 n; a quantise step for it would overwrite
  // the rows); with K-quant downs too, that gate|up also writes h's B32 rows
  // (in the dx region, unused by a decode) for the summed down (down).
  // Without a shared expert the summed down writes the next layer's q/k/v
  // rows (sum_rows); with the experts on B32 rows and every layer's router
  // an f32 matrix in one chunk, wo computes the router's logits and routes
  // (router: matvec_span.comp ROUTER, no router dispatch).
  struct B32Decode {
    bool on = false, attention = false, pair = false, experts = false, down = false;
    bool sum_rows = false, router = false;
  };
  class Planner;  // span_plan.cpp
  // One submission's rows (span_forward.cpp): of sequence `seq` at pos0 + t,
  // or (seq < 0) row t of sequence rseq[t] at rpos[t].
  struct Submission {
    const float* x = nullptr;
    int n = 0;
    int seq = 0, pos0 = 0;
    const int32_t *rseq = nullptr, *rpos = nullptr;
    const uint8_t* want = nullptr;  // [n] or null: the rows whose logits are wanted
    int n_want = 0;
  };

  static ArenaLayout arena_layout(const SpanIn& in, uint32_t tokens, bool int8);
  // Tokens per submission: FISH_VK_SPAN_TOKENS, else the device's default.
  static uint32_t batch_tokens(const SpanContext& ctx);
  static std::vector<float> rope_table(const SpanIn& in, int capacity);
  // Bytes of a layer's KV pool of `pages` pages (K and V, f16).
  static uint64_t pool_bytes(const SpanIn& in, uint64_t pages);
  uint64_t v_offset() const;  // bytes of K (where V starts) in a layer's pool now
  // Byte offset of the row table in the staging buffer.
  static uint64_t staging_meta(const SpanIn& in, uint32_t tokens);
  // Throws Unsupported / OutOfMemory when a KV pool of this many pages would
  // pass the kernels' 32-bit indices or the device's binding range.
  void check_pool(uint64_t pages, const char* what) const;
  void check_seq(int seq, const char* what) const;
  void allocate_kv(uint32_t pages, std::vector<Buffer>* out) const;
  Buffer allocate_page_tables(int capacity) const;
  // The pages of sequence q's positions [p0, p1] (p0 <= its length) present
  // and its own: missing pages taken, shared ones copied (copy on write); the
  // pool grown first when too few are free (OutOfMemory changes nothing).
  // Several sequences at once: (q, p0, p1) triples.
  void own_pages(const std::vector<std::array<int, 3>>& ranges);
  void grow_pool(uint32_t need_free);
  uint32_t take_page();
  void drop_pages(int seq, uint32_t keep);  // sequence seq keeps its first `keep` pages
  // Pending page copies (pool page pairs, every layer) and changed page
  // tables to the device, in one submission; no-op when there is none.
  void sync_pages();
  void write_buffer(Buffer& dst, uint64_t offset, const void* src, uint64_t n);
  void write_aux_sets();
  void fill_kv(int seq, int pos0, int n);  // FISH_VK_BENCH_FILL_KV
  // One submission; the result is left in the readback buffer (and copied to
  // out when given), the logits of its wanted rows in head_rb_.
  void run_batch(const Submission& b, float* out);
  // The head's logits buffer holds at least n rows (grown on demand).
  void ensure_head_rows(int n);
  // The decode attention with narrow_heads_ query heads per workgroup at this context.
  bool narrow_attention(int n_tok, int n_kv) const;
  VkCommandBuffer recording_for(const Shape& shape);
  VkCommandBuffer fresh_command_buffer();
  VkCommandBuffer one_time_commands();  // begun, for uploads and copies; the caller ends and submits it
  void record(VkCommandBuffer cmd, const SpanPlan& plan, bool stamps);
  SpanKernelShape attn_shape(bool narrow) const;
  VkDescriptorSet matmul_set(const WeightChunk& c, const WeightChunk& c2, const Buffer& y);
  void write_head_sets();
  void release_head();
  void invalidate_recordings();
  void release_all();

 VkDescriptorSet moe_set(const Buffer& w0, const Buffer& w5);
  bool moe() const { return shape_.n_expert > 0; }

  SpanContext ctx_;
  std::unique_ptr<MoeKernels> moe_;  // MoE spans only
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
  int capacity_ = 0;
  std::vector<int> kv_len_;  // per sequence
  // The KV pool: pages, each page's sequences (0: free), the free ones (a
  // stack), per sequence its pages in position order; page copies and page
  // tables waiting for sync_pages.
  uint32_t pool_pages_ = 0;
  std::vector<uint32_t> page_refs_, free_pages_;
  std::vector<std::vector<uint32_t>> pages_;
  std::vector<std::pair<uint32_t, uint32_t>> page_copies_;  // (from, to)
  std::vector<uint8_t> pt_dirty_;                           // per sequence
  uint32_t pt_stride_ = 0;  // words between two sequences' page tables (pages_for(capacity_))
  ArenaLayout arena_{};
  uint64_t staging_meta_ = 0;  // the row table's byte offset in staging_
  std::vector<Layer> layers_;
  Buffer params_, rope_, arena_buf_, staging_, readback_, pt_;
  VkDescriptorSet copy_in_set_ = VK_NULL_HANDLE, copy_out_set_ = VK_NULL_HANDLE;
  VkDescriptorSet copy_meta_set_ = VK_NULL_HANDLE;  // the row table: staging -> arena
  VkDescriptorSet quant_set_ = VK_NULL_HANDLE;  // quantize_x over the arena (int8)
  bool int8_ = false;  // int8 matmuls (at creation: the arena has the int8 rows regions)
  B32Decode b32_;
  VkCommandPool pool_ = VK_NULL_HANDLE;
  VkFence fence_ = VK_NULL_HANDLE;
  // The head (set_head): its norm's slot in params_ (reserved at creation),
  // its logits (host-visible, head_rb_rows_ rows of n_vocab: the matvec
  // writes them there), a descriptor set per weight chunk (binding 3 = head_rb_).
  Weight* head_ = nullptr;
  uint32_t head_norm_ = kNone;
  Buffer head_rb_;
  int head_rb_rows_ = 0;
  std::vector<VkDescriptorSet> head_sets_;
  // A forward's logits gathered from several submissions, and how many rows.
  std::vector<float> logits_host_;
  int logits_count_ = 0;
  // A forward's rows (the caller's, or sequence 0 at pos0 + t), and per
  // sequence its first and last position in the batch (-1: none).
  std::vector<int32_t> row_seq_, row_pos_;
  std::vector<uint8_t> row_want_;  // 1: the row's logits are wanted
  std::vector<int> first_pos_, last_pos_;
  // Recorded command buffers, reused, by shape.
  std::map<Shape, VkCommandBuffer> cached_;
  VkCommandBuffer scratch_cmd_ = VK_NULL_HANDLE;  // one-time recordings (uploads, KV copies)
  std::vector<VkCommandBuffer> free_cmds_;
  std::unique_ptr<SpanProfile> profile_;
};

}  // namespace fish::vk
