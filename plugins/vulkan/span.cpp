// Span: shapes, validation, device resources and queries (see span.h). The
// forward: span_forward.cpp (which steps it records: span_plan.cpp; recording
// them: span_record.cpp); the KV cache per sequence: span_kv.cpp.
#include "span.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "commands.h"
#include "span_buffers.h"

namespace fish::vk {
namespace {

constexpr uint64_t kMiB = uint64_t(1) << 20;
constexpr uint64_t kStagingChunk = 16 * kMiB;
constexpr uint32_t kAlignFloats = 64;  // region alignment: 256 bytes (any storage offset alignment)
// The decode attention takes one query head per workgroup up to this many
// positions, a KV group per workgroup beyond (docs/experiments/vulkan-attention.md).
constexpr uint32_t kNarrowHeads = 1;
constexpr uint32_t kNarrowMaxKv = 2048;

uint32_t align_up(uint64_t v, uint64_t a) { return uint32_t((v + a - 1) / a * a); }
std::string mb(uint64_t b) { return std::to_string((b + kMiB / 2) / kMiB) + " MB"; }

using span_buffers::kArenaUsage;
using span_buffers::kKvUsage;
using span_buffers::kStorageIn;
using span_buffers::rope_bytes;

// The buffers of a span, as (size, kind, usage): one list for bytes_for() and the constructor.
struct Planned {
  uint64_t size;
  MemKind kind;
  VkBufferUsageFlags usage;
};

uint64_t params_floats(const SpanIn& in) {
  const uint64_t E = uint64_t(in.n_embd), QD = uint64_t(in.n_head) * in.head_dim, KD = uint64_t(in.n_head_kv) * in.head_dim;
  uint64_t per = 0;
  auto add = [&](uint64_t n) { per += align_up(n, 4); };
  add(E), add(E);
  const SpanLayerIn* l0 = in.layers.empty() ? nullptr : &in.layers[0];
  if (l0 && l0->bq) add(QD);
  if (l0 && l0->bk) add(KD);
  if (l0 && l0->bv) add(KD);
  if (l0 && l0->q_norm) add(uint64_t(in.head_dim));
  if (l0 && l0->k_norm) add(uint64_t(in.head_dim));
  if (in.n_ff_shexp > 0) add(E);  // the shared expert's gate
  // + the head's norm weights (set_head), after the layers'.
  return per * uint64_t(in.n_layers) + align_up(E, 4);
}

}  // namespace

// ---- shapes ------------------------------------------------------------------------

ArenaLayout Span::arena_layout(const SpanIn& in, uint32_t tokens, bool int8) {
  ArenaLayout a;
  a.tokens = tokens;
  // F: the rows of gate / up (the dense FFN's, or the shared expert's).
  const uint64_t E = uint64_t(in.n_embd), F = uint64_t(std::max(in.n_ff, in.n_ff_shexp)), QD = uint64_t(in.n_head) * in.head_dim,
                 KD = uint64_t(in.n_head_kv) * in.head_dim, G = uint64_t(in.n_head / in.n_head_kv);
  uint64_t at = ctrl::kWords;
  auto region = [&](uint64_t floats) {
    const uint32_t off = uint32_t(at);
    at = align_up(at + floats, kAlignFloats);
    return off;
  };
  a.x = region(2 * tokens * E);
  a.xn = region(tokens * E);
  a.qkv = region(tokens * (QD + 2 * KD));
  a.qr = region(tokens * QD);
  a.att = region(tokens * QD);
  a.g = region(tokens * F);
  a.u = region(tokens * F);
  a.part = region(uint64_t(in.n_head_kv) * kPartSlots * G * (uint64_t(in.head_dim) + 2));
  a.cnt = region(uint64_t(kPartSlots) * uint64_t(in.n_head_kv));
  a.sq = region(std::max<uint64_t>(4, std::min(tokens, MatmulKernels::kMaxSpanMatvecTokens)) * E);
  // int8 rows of any matmul input (n_in is E, n_ff or n_head · head_dim).
  const uint32_t qt = int8 ? tokens : 0;
  uint64_t wk = 0, wl = 0;
  for (uint64_t n_in : {E, F, QD}) {
    if (n_in % 256 == 0)  // Q8_K rows, or B32 rows (the B32 decode)
      wk = std::max<uint64_t>({wk, MatmulKernels::q8_row_words(256, uint32_t(n_in)),
                               MatmulKernels::b32_row_words(uint32_t(n_in))});
    if (n_in % 32 == 0) wl = std::max<uint64_t>(wl, MatmulKernels::q8_row_words(32, uint32_t(n_in)));
  }
  a.xqk = region(qt * wk);
  a.xql = region(qt * wl);
  a.xq2 = region(int8 ? uint64_t(MatmulKernels::kMaxMatvecTokens) * wk : 0);
  if (in.n_expert > 0) {
    const uint64_t NE = uint64_t(in.n_expert), K = uint64_t(in.n_expert_used);
    a.rl = region(std::max(tokens * NE, NE + (E + 31) / 32 * NE));
    a.route = region(moe_route_words(tokens, NE, K));
    a.rcnt = region(1 + (E + 31) / 32);
    a.hx = region(tokens * K * uint64_t(in.n_ff_expert));
    a.dx = region(tokens * K * E);
    a.shx = region(in.n_ff_shexp > 0 ? tokens * E : 0);
  } else {
    a.rl = a.route = a.rcnt = a.hx = a.dx = a.shx = uint32_t(at);
  }
  a.meta_words = align_up(3 * uint64_t(tokens), 4);  // copied in 16-byte words
  a.meta = region(a.meta_words);
  a.total = uint32_t(at);
  return a;
}

void Span::validate(const SpanContext& ctx, const SpanIn& in, bool with_weights) {
  const std::string where = "span_create (layers " + std::to_string(in.first_layer) + ".." +
                            std::to_string(in.first_layer + in.n_layers - 1) + ")";
  auto bad = [&](const std::string& why) { throw Failure(FailKind::InvalidArgument, where + ": " + why); };
  auto unsupported = [&](const std::string& why) { throw Failure(FailKind::Unsupported, where + ": " + why); };
  const bool moe = in.n_expert > 0;
  if (in.n_layers < 1 || in.n_embd < 1 || in.n_head < 1 || in.n_head_kv < 1 || in.head_dim < 1 ||
      (!moe && in.n_ff < 1) || in.n_ctx < 1 || in.n_seq < 1)
    bad("n_layers, n_embd, n_head, n_head_kv, head_dim, n_ff (dense), n_ctx and n_seq must be >= 1");
  if (moe && (in.n_expert_used < 1 || in.n_expert_used > in.n_expert || in.n_ff_expert < 1 || in.n_ff_shexp < 0))
    bad("MoE needs 1 <= n_expert_used <= n_expert, n_ff_expert >= 1 and n_ff_shexp >= 0");
  if (int(in.layers.size()) != in.n_layers) bad("n_layers is " + std::to_string(in.n_layers) + " but " +
                                                std::to_string(in.layers.size()) + " layers are given");
  if (in.n_head % in.n_head_kv != 0)
    bad("n_head " + std::to_string(in.n_head) + " is not a multiple of n_head_kv " + std::to_string(in.n_head_kv));
  if (in.n_rot < 0 || in.n_rot % 2 != 0 || in.n_rot > in.head_dim)
    bad("n_rot " + std::to_string(in.n_rot) + " must be even and <= head_dim " + std::to_string(in.head_dim));
  if (!(in.norm_eps >= 0) || !std::isfinite(in.rope_freq_base) || in.rope_freq_base <= 0 ||
      !std::isfinite(in.rope_freq_scale) || !std::isfinite(in.attn_scale))
    bad("norm_eps, rope_freq_base, rope_freq_scale or attn_scale is not a usable number");
  // What the kernels handle (else the engine keeps these layers per matmul).
  const DeviceCaps& caps = ctx.dev->caps();
  if (!caps.subgroup_arith) unsupported("the device has no subgroup arithmetic in compute shaders");
  if (in.head_dim % 4 != 0 || in.head_dim > 512)
    unsupported("head_dim " + std::to_string(in.head_dim) + " (the kernels need a multiple of 4, at most 512)");
  if (in.n_embd % 8 != 0) unsupported("n_embd " + std::to_string(in.n_embd) + " is not a multiple of 8");
  if (in.n_ff % 4 != 0) unsupported("n_ff " + std::to_string(in.n_ff) + " is not a multiple of 4");
  if (moe && (in.n_expert > int(MoeKernels::kMaxExperts) || in.n_expert_used > int(MoeKernels::kMaxUsed)))
    unsupported("MoE with " + std::to_string(in.n_expert) + " experts, " + std::to_string(in.n_expert_used) +
                " used (the routing kernel takes up to " + std::to_string(MoeKernels::kMaxExperts) + " and " +
                std::to_string(MoeKernels::kMaxUsed) + ")");
  if (moe && (in.n_ff_expert % 4 != 0 || in.n_ff_shexp % 4 != 0))
    unsupported("n_ff_expert " + std::to_string(in.n_ff_expert) + " / n_ff_shexp " + std::to_string(in.n_ff_shexp) +
                " is not a multiple of 4");
  const int group = in.n_head / in.n_head_kv;
  if (group > 32) unsupported("more than 32 query heads per KV head (" + std::to_string(group) + ")");
  SpanKernelShape ks{uint32_t(in.head_dim), uint32_t(group), uint32_t(in.n_head_kv)};
  if (SpanKernels::attention_shared_bytes(ks) > caps.max_shared_bytes)
    unsupported("attention for head_dim " + std::to_string(in.head_dim) + " x " + std::to_string(group) +
                " heads per KV head needs more shared memory than the device has");
  const int64_t E = in.n_embd, QD = int64_t(in.n_head) * in.head_dim, KD = int64_t(in.n_head_kv) * in.head_dim;
  const int64_t FE = in.n_ff_expert, FS = in.n_ff_shexp;
  const int64_t shapes[kLayerWeights][3] = {  // n_out, n_in, n_mat
      {QD, E, 1},  {KD, E, 1},  {KD, E, 1},  {E, QD, 1}, {in.n_ff, E, 1}, {in.n_ff, E, 1}, {E, in.n_ff, 1},
      {in.n_expert, E, 1}, {FE, E, in.n_expert}, {FE, E, in.n_expert}, {E, FE, in.n_expert},
      {FS, E, 1}, {FS, E, 1}, {E, FS, 1}};
  // Which matrices a layer of this span has.
  auto present = [&](int k) {
    if (k <= kAttnOut) return true;
    if (k <= kFfnDown) return !moe;
    if (k <= kDownExps) return moe;
    return FS > 0;
  };
  if (!with_weights) return;
  const SpanLayerIn& l0 = in.layers[0];
  for (int i = 0; i < in.n_layers; ++i) {
    const SpanLayerIn& l = in.layers[size_t(i)];
    const std::string lw = "layer " + std::to_string(in.first_layer + i);
    for (int k = 0; k < kLayerWeights; ++k) {
      const Weight* w = l.w[k];
      const std::string name = lw + " " + layer_weight_name(k);
      if (!present(k)) {
        if (w) bad(name + " is given to a " + (moe ? "MoE" : "dense") + " layer");
        continue;
      }
      if (!w) bad(name + " is missing");
      if (w->n_mat != shapes[k][2])
        bad(name + " (" + w->name + ") holds " + std::to_string(w->n_mat) + " matrices, the span needs " +
            std::to_string(shapes[k][2]));
      if (w->n_out != shapes[k][0] || w->n_in != shapes[k][1])
        bad(name + " (" + w->name + ") is [" + std::to_string(w->n_out) + " x " + std::to_string(w->n_in) +
            "], the span needs [" + std::to_string(shapes[k][0]) + " x " + std::to_string(shapes[k][1]) + "]");
    }
    if (!l.attn_norm || !l.ffn_norm) bad(lw + ": attn_norm / ffn_norm missing");
    if (l.w[kAttnOut]->chunks.size() != 1 || (!moe && l.w[kFfnDown]->chunks.size() != 1) ||
        (FS > 0 && l.w[kDownShexp]->chunks.size() != 1))
      unsupported(lw + ": attn_output / ffn_down do not fit one device buffer binding");
    if (moe) {
      // The experts' kernels index a stack as one binding, byte offsets in 32 bits.
      for (int k : {kGateExps, kUpExps, kDownExps})
        if (l.w[k]->chunks.size() != 1 || l.w[k]->nbytes >= (uint64_t(1) << 32))
          unsupported(lw + " " + layer_weight_name(k) + " (" + l.w[k]->name + ", " + std::to_string(l.w[k]->nbytes) +
                      " bytes) does not fit one device buffer binding of at most 4 GiB");
      if (l.w[kGateExps]->type != l.w[kUpExps]->type)
        unsupported(lw + ": ffn_gate_exps and ffn_up_exps differ in type (the kernel reads them as a pair)");
      if (FS > 0 && !l.shexp_gate) bad(lw + ": the shared expert's gate vector is missing");
    }
    if (!l.bq != !l0.bq || !l.bk != !l0.bk || !l.bv != !l0.bv || !l.q_norm != !l0.q_norm || !l.k_norm != !l0.k_norm)
      bad(lw + ": its optional vectors (biases, q/k norms) differ from the first layer's");
  }
}

uint32_t Span::batch_tokens(const SpanContext& ctx) {
  if (ctx.cfg->span_tokens > 0) return uint32_t(ctx.cfg->span_tokens);
  // Tensor-core tiles are 128 rows x 64-128 tokens: 128 tokens give a 4096-row
  // projection 64 workgroups, fewer than a large GPU's SMs; 512 give 256.
  return ctx.matmul->coopmat() ? 512u : 128u;
}

uint64_t Span::staging_meta(const SpanIn& in, uint32_t tokens) {
  return (ctrl::kWords * 4 + 2 * uint64_t(tokens) * uint64_t(in.n_embd) * 4 + 255) / 256 * 256;
}

uint64_t Span::bytes_for(const SpanContext& ctx, const SpanIn& in, int capacity) {
  const uint32_t tokens = batch_tokens(ctx);
  const ArenaLayout a = arena_layout(in, tokens, ctx.matmul->int8());
  std::vector<Planned> plan = {
      {params_floats(in) * 4, MemKind::Device, kStorageIn},
      {rope_bytes(in, capacity), MemKind::Device, kStorageIn},
      {uint64_t(a.total) * 4, MemKind::Device, kArenaUsage},
      {staging_meta(in, tokens) + uint64_t(a.meta_words) * 4, MemKind::Upload, VK_BUFFER_USAGE_STORAGE_BUFFER_BIT},
      {uint64_t(tokens) * in.n_embd * 4, MemKind::Readback, VK_BUFFER_USAGE_STORAGE_BUFFER_BIT},
  };
  plan.push_back({span_buffers::page_table_bytes(in, capacity), MemKind::Device, span_buffers::kPageTableUsage});
  const uint64_t kv = pool_bytes(in, uint64_t(std::max(in.n_seq, 1)) * pages_for(capacity));
  for (int l = 0; l < in.n_layers; ++l) plan.push_back({kv, MemKind::Device, kKvUsage});
  uint64_t total = 0;
  // Only what lands in the budget heap, as bytes() counts it: on a discrete GPU
  // the staging buffers live in host memory.
  for (const Planned& p : plan) {
    bool counted = false;
    const uint64_t size = ctx.mem->allocation_size(p.size, p.kind, p.usage, &counted);
    if (counted) total += size;
  }
  return total;
}

std::vector<float> Span::rope_table(const SpanIn& in, int capacity) {
  // θ_i(p) = p · base^(-2i/n_rot) / ff_i · freq_scale, in double (the f32 product
  // p·f loses the angle's low bits at long contexts).
  const int half = in.n_rot / 2;
  std::vector<float> t(std::max<size_t>(4, size_t(capacity) * size_t(half) * 2));
  std::vector<double> freq(static_cast<size_t>(half));
  for (int i = 0; i < half; ++i) {
    const double ff = in.rope_freqs ? double(in.rope_freqs[i]) : 1.0;
    freq[size_t(i)] = std::pow(double(in.rope_freq_base), -2.0 * i / in.n_rot) / ff * double(in.rope_freq_scale);
  }
  for (int p = 0; p < capacity; ++p)
    for (int i = 0; i < half; ++i) {
      const double th = double(p) * freq[size_t(i)];
      t[(size_t(p) * half + i) * 2] = float(std::cos(th));
      t[(size_t(p) * half + i) * 2 + 1] = float(std::sin(th));
    }
  return t;
}

// ---- creation ------------------------------------------------------------------------

const char* layer_weight_name(int k) {
  static const char* names[kLayerWeights] = {"attn_q",         "attn_k",        "attn_v",        "attn_output",
                                             "ffn_gate",       "ffn_up",        "ffn_down",      "ffn_gate_inp",
                                             "ffn_gate_exps",  "ffn_up_exps",   "ffn_down_exps", "ffn_gate_shexp",
                                             "ffn_up_shexp",   "ffn_down_shexp"};
  return k >= 0 && k < kLayerWeights ? names[k] : "?";
}

Span::Span(const SpanContext& ctx, const SpanIn& in) : ctx_(ctx) {
  validate(ctx, in);
  shape_ = in;
  check_pool(uint64_t(in.n_seq) * pages_for(in.n_ctx), "span_create");
  if (in.rope_freqs) rope_freqs_.assign(in.rope_freqs, in.rope_freqs + in.n_rot / 2);
  shape_.rope_freqs = rope_freqs_.empty() ? nullptr : rope_freqs_.data();  // kept for reserve()
  shape_.layers.clear();
  norm0_.assign(in.layers[0].attn_norm, in.layers[0].attn_norm + in.n_embd);
  kshape_ = {uint32_t(in.head_dim), uint32_t(in.n_head / in.n_head_kv), uint32_t(in.n_head_kv)};
  ctx.kernels->choose_tiles(kshape_, ctx.matmul->coopmat());
  if (kNarrowHeads < kshape_.group && kshape_.group % kNarrowHeads == 0) {
    narrow_heads_ = kNarrowHeads;
    narrow_max_kv_ = kNarrowMaxKv;
  }
  int8_ = ctx.matmul->int8();
  arena_ = arena_layout(in, batch_tokens(ctx), int8_);
  staging_meta_ = staging_meta(in, arena_.tokens);
  kv_len_.assign(size_t(in.n_seq), 0);
  first_pos_.assign(size_t(in.n_seq), -1);
  last_pos_.assign(size_t(in.n_seq), -1);
  const DeviceFns& f = ctx_.dev->fns();
  const VkDevice d = ctx_.dev->handle();
  try {
    // Parameters: per layer attn_norm, ffn_norm, then the optional vectors (16-byte aligned).
    std::vector<float> params(size_t(params_floats(in)), 0.0f);
    const size_t E = size_t(in.n_embd), QD = size_t(in.n_head) * in.head_dim, KD = size_t(in.n_head_kv) * in.head_dim;
    size_t at = 0;
    auto put = [&](const float* v, size_t n) {
      if (!v) return kNone;
      const uint32_t off = uint32_t(at);
      std::memcpy(params.data() + at, v, n * 4);
      at = align_up(at + n, 4);
      return off;
    };
    for (const SpanLayerIn& li : in.layers) {
      Layer L;
      std::copy(li.w, li.w + kLayerWeights, L.w);
      L.attn_norm = put(li.attn_norm, E);
      L.ffn_norm = put(li.ffn_norm, E);
      L.bq = put(li.bq, QD);
      L.bk = put(li.bk, KD);
      L.bv = put(li.bv, KD);
      L.qn = put(li.q_norm, size_t(in.head_dim));
      L.kn = put(li.k_norm, size_t(in.head_dim));
      L.shexp_gate = put(li.shexp_gate, E);
      layers_.push_back(std::move(L));
    }
    head_norm_ = uint32_t(at);  // set_head writes the head's norm here
    // Rope table for the initial capacity (before the copy above is forgotten).
    const std::vector<float> rope = rope_table(in, in.n_ctx);

    Memory& mem = *ctx_.mem;
    const std::string tag = "span layers " + std::to_string(in.first_layer) + ".." + std::to_string(in.first_layer + in.n_layers - 1);
    params_ = mem.create(params.size() * 4, MemKind::Device, kStorageIn, tag + " parameters");
    rope_ = mem.create(rope_bytes(in, in.n_ctx), MemKind::Device, kStorageIn, tag + " RoPE table");
    arena_buf_ = mem.create(uint64_t(arena_.total) * 4, MemKind::Device, kArenaUsage, tag + " arena");
    staging_ = mem.create(staging_meta_ + uint64_t(arena_.meta_words) * 4, MemKind::Upload,
                          VK_BUFFER_USAGE_STORAGE_BUFFER_BIT, tag + " input staging");
    readback_ = mem.create(uint64_t(arena_.tokens) * E * 4, MemKind::Readback, VK_BUFFER_USAGE_STORAGE_BUFFER_BIT,
                           tag + " output staging");
    std::vector<Buffer> kv;
    capacity_ = in.n_ctx;
    pool_pages_ = uint32_t(in.n_seq) * pages_for(capacity_);
    allocate_kv(pool_pages_, &kv);
    for (size_t l = 0; l < layers_.size(); ++l) layers_[l].kv = kv[l];
    pt_ = allocate_page_tables(capacity_);
    pt_stride_ = pages_for(capacity_);
    page_refs_.assign(pool_pages_, 0);
    for (uint32_t p = pool_pages_; p-- > 0;) free_pages_.push_back(p);  // page 0 on top
    pages_.assign(size_t(in.n_seq), {});
    pt_dirty_.assign(size_t(in.n_seq), 0);

    auto pci = vk_init<VkCommandPoolCreateInfo>(VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO);
    pci.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
    pci.queueFamilyIndex = ctx_.dev->queue_family();
    check(f.vkCreateCommandPool(d, &pci, nullptr, &pool_), "vkCreateCommandPool");
    auto fci = vk_init<VkFenceCreateInfo>(VK_STRUCTURE_TYPE_FENCE_CREATE_INFO);
    check(f.vkCreateFence(d, &fci, nullptr, &fence_), "vkCreateFence");
    profile_ = std::make_unique<SpanProfile>(*ctx_.dev, ctx_.cfg->profile_level, in.n_layers);

    write_buffer(params_, 0, params.data(), params.size() * 4);
    write_buffer(rope_, 0, rope.data(), std::min<uint64_t>(rope.size() * 4, rope_.size));
    // Zero the arena once: the attention's arrival counters must start at 0
    // (the combining workgroup resets its counter to 0 after use).
    VkCommandBuffer cmd = one_time_commands();
    f.vkCmdFillBuffer(cmd, arena_buf_.buffer, 0, VK_WHOLE_SIZE, 0);
    check(f.vkEndCommandBuffer(cmd), "vkEndCommandBuffer");
    submit_wait(*ctx_.dev, cmd, fence_, false);

    // Descriptor sets: per weight chunk (span matmul layout), per layer (aux), copies.
    Pipelines& pl = *ctx_.pipelines;
    // Binding 5 is a pair's second weight (gate|up: the up chunk), else the chunk again.
    auto mm_set = [&](const WeightChunk& c, const WeightChunk& c2) { return matmul_set(c, c2, arena_buf_); };
    if (moe()) moe_ = std::make_unique<MoeKernels>(*ctx_.dev, pl, *ctx_.matmul);
    for (Layer& L : layers_) {
      for (int k = 0; k < kLayerWeights; ++k) {
        if (!L.w[k] || k == kGateExps || k == kUpExps || k == kDownExps) continue;  // the stacks: moe sets below
        for (const WeightChunk& c : L.w[k]->chunks) L.mm_sets[k].push_back(mm_set(c, c));
      }
      const Weight *g = L.w[kFfnGate], *u = L.w[kFfnUp];
      if (g && u && g->chunks.size() == 1 && u->chunks.size() == 1 && g->type == u->type)
        L.gu_set = mm_set(g->chunks[0], u->chunks[0]);
      if (moe()) {
        L.moe_gu = moe_set(L.w[kGateExps]->chunks[0].buf, L.w[kUpExps]->chunks[0].buf);
        L.moe_down = moe_set(L.w[kDownExps]->chunks[0].buf, L.w[kDownExps]->chunks[0].buf);
        L.moe_up = moe_set(L.w[kUpExps]->chunks[0].buf, L.w[kUpExps]->chunks[0].buf);  // the tiled path's up
        L.moe_aux = moe_set(arena_buf_, arena_buf_);
        const Weight *wo = L.w[kAttnOut], *router = L.w[kFfnRouter];
        if (wo->chunks.size() == 1 && router->chunks.size() == 1 && router->type->ggml_type == 0)
          L.wo_router_set = mm_set(wo->chunks[0], router->chunks[0]);
      }
    }
    for (Layer& L : layers_) L.aux_set = pl.allocate_set(ctx_.kernels->aux_layout());
    write_aux_sets();
    quant_set_ = pl.allocate_set(ctx_.matmul->quant_layout());
    {
      const VkBuffer b = arena_buf_.buffer;
      const uint64_t o = 0, r = arena_buf_.size;
      pl.write_set(quant_set_, 1, &b, &o, &r);
    }
    copy_in_set_ = pl.allocate_set(ctx_.kernels->copy_layout());
    copy_out_set_ = pl.allocate_set(ctx_.kernels->copy_layout());
    {
      const VkBuffer bi[2] = {staging_.buffer, arena_buf_.buffer};
      const uint64_t oi[2] = {0, 0}, ri[2] = {staging_.size, staging_.size};
      pl.write_set(copy_in_set_, 2, bi, oi, ri);
      const uint64_t xb = uint64_t(arena_.tokens) * E * 4;
      const VkBuffer bo[2] = {arena_buf_.buffer, readback_.buffer};
      const uint64_t oo[2] = {uint64_t(arena_.x) * 4, 0}, ro[2] = {xb, xb};
      pl.write_set(copy_out_set_, 2, bo, oo, ro);
      copy_meta_set_ = pl.allocate_set(ctx_.kernels->copy_layout());
      const uint64_t meta_bytes = uint64_t(arena_.meta_words) * 4;
      const uint64_t om[2] = {staging_meta_, uint64_t(arena_.meta) * 4}, rm[2] = {meta_bytes, meta_bytes};
      pl.write_set(copy_meta_set_, 2, bi, om, rm);
    }
    // The B32 decode (B32Decode): every matrix on int8 x (K-quants, Q4_0,
    // Q8_0) in one chunk, E, n_ff and n_head·head_dim multiples of 256; on
    // GPUs unless FISH_VK_SPAN_QFOLD says otherwise. A CPU implementation keeps the
    // CPU's Q8_K / Q8_0 rows, and with them its numbers: the barriers B32 rows save
    // cost nothing there.
    bool k_quants = int8_ && ctx_.dev->caps().subgroup_size >= 4 && E % 256 == 0 && size_t(in.n_ff) % 256 == 0 &&
                    QD % 256 == 0;
    // MoE spans: the attention's matrices decide (the router reads f32 n or
    // quantises its own x); the experts' gate|up and down take B32 rows where
    // B32Decode::experts / down say.
    bool pairs = true, experts = moe() && in.n_ff_shexp == 0;  // a shared expert keeps the norm steps
    bool routers = moe() && uint32_t(in.n_expert) <= MoeKernels::kMaxExperts &&
                   uint32_t(in.n_expert_used) <= MoeKernels::kMaxUsed;
    // h's B32 rows for the down in dx ([k][n_embd] floats per token).
    bool downs = experts && MatmulKernels::b32_row_words(uint32_t(in.n_ff_expert)) <= uint32_t(E);
    // The dense matvecs read B32 rows in every int8 type (K-quants, Q4_0, Q8_0); the experts' in K-quants only.
    const auto b32_int8 = [&](const Weight* w) { return ctx_.matmul->int8_for(*w->type) && w->chunks.size() == 1; };
    const auto k_quant_int8 = [&](const Weight* w) { return b32_int8(w) && MatmulKernels::q8_block(*w->type) == 256; };
    for (const Layer& L : layers_) {
      pairs = pairs && L.gu_set != VK_NULL_HANDLE;
      if (moe()) {
        experts = experts && k_quant_int8(L.w[kGateExps]) && k_quant_int8(L.w[kUpExps]) &&
                  !ctx_.matmul->span_int8_for(*L.w[kFfnRouter]->type, 1);
        downs = downs && k_quant_int8(L.w[kDownExps]);
        routers = routers && L.wo_router_set != VK_NULL_HANDLE;
      }
      for (size_t k = 0; k < size_t(kLayerWeights); ++k) {
        const Weight* w = L.w[k];
        if (moe() && k > kAttnOut) continue;
        k_quants = k_quants && (!w || b32_int8(w));
      }
    }
    const DecodeRows rows = ctx_.cfg->decode_rows;
    b32_.on = k_quants && (rows == DecodeRows::B32 || (rows == DecodeRows::Auto && !ctx_.dev->caps().cpu_device));
    b32_.attention = b32_.on && in.head_dim % 32 == 0;
    b32_.pair = b32_.on && pairs;
    b32_.experts = b32_.on && experts;
    b32_.down = b32_.experts && downs;
    // The summed down's next norm (no shared expert) quantises the next layer's rows itself.
    b32_.sum_rows = b32_.on && moe() && in.n_ff_shexp == 0;
    b32_.router = b32_.experts && routers;
    ctx_.kernels->warm_up(kshape_, b32_.attention, in.n_seq > 1);
    if (narrow_heads_) ctx_.kernels->warm_up(attn_shape(true), b32_.attention, in.n_seq > 1);
    if (moe_)
      moe_->warm_up(*layers_[0].w[kGateExps]->type, *layers_[0].w[kDownExps]->type,
                    MoeKernels::use_tiled(arena_.tokens, uint32_t(in.n_expert), uint32_t(in.n_expert_used)),
                    b32_.experts, b32_.down, b32_.sum_rows);
  } catch (...) {
    release_all();
    throw;
  }
  if (ctx_.log) ctx_.log(2, "span created: " + describe());
}

Span::~Span() { release_all(); }

void Span::release_all() {
  const DeviceFns& f = ctx_.dev->fns();
  const VkDevice d = ctx_.dev->handle();
  if (fence_) f.vkWaitForFences(d, 1, &fence_, VK_TRUE, UINT64_MAX);
  Pipelines& pl = *ctx_.pipelines;
  for (Layer& L : layers_) {
    for (auto& sets : L.mm_sets)
      for (VkDescriptorSet s : sets) pl.free_set(s);
    for (VkDescriptorSet s : {L.gu_set, L.wo_router_set})
      if (s) pl.free_set(s);
    for (VkDescriptorSet s : {L.moe_gu, L.moe_up, L.moe_down, L.moe_aux})
      if (s) pl.free_set(s);
    if (L.aux_set) pl.free_set(L.aux_set);
    ctx_.mem->destroy(L.kv);
  }
  layers_.clear();
  for (VkDescriptorSet* s : {&copy_in_set_, &copy_out_set_, &copy_meta_set_, &quant_set_}) {
    if (*s) pl.free_set(*s);
    *s = VK_NULL_HANDLE;
  }
  release_head();
  for (Buffer* b : {&params_, &rope_, &arena_buf_, &staging_, &readback_, &pt_}) ctx_.mem->destroy(*b);
  cached_.clear();
  free_cmds_.clear();
  scratch_cmd_ = VK_NULL_HANDLE;
  profile_.reset();
  if (fence_) f.vkDestroyFence(d, fence_, nullptr);
  if (pool_) f.vkDestroyCommandPool(d, pool_, nullptr);  // frees its command buffers
  fence_ = VK_NULL_HANDLE;
  pool_ = VK_NULL_HANDLE;
}

// The layers' auxiliary sets (SpanKernels::aux_layout): binding 1 is the layer's KV pool.
void Span::write_aux_sets() {
  for (Layer& L : layers_) {
    const VkBuffer bufs[6] = {arena_buf_.buffer, L.kv.buffer, params_.buffer, rope_.buffer, arena_buf_.buffer, pt_.buffer};
    const uint64_t offs[6] = {0, 0, 0, 0, 0, 0};
    const uint64_t ranges[6] = {arena_buf_.size, L.kv.size, params_.size, rope_.size, arena_buf_.size, pt_.size};
    ctx_.pipelines->write_set(L.aux_set, 6, bufs, offs, ranges);
  }
}

// Host data into a device buffer through a temporary staging buffer, in 16 MB pieces.
void Span::write_buffer(Buffer& dst, uint64_t offset, const void* src, uint64_t n) {
  if (n == 0) return;
  const DeviceFns& f = ctx_.dev->fns();
  Buffer stage = ctx_.mem->create(std::min(n, kStagingChunk), MemKind::Upload, VK_BUFFER_USAGE_TRANSFER_SRC_BIT,
                                  "span upload staging");
  try {
    for (uint64_t done = 0; done < n; done += stage.size) {
      const uint64_t k = std::min(stage.size, n - done);
      std::memcpy(stage.mapped, static_cast<const uint8_t*>(src) + done, k);
      VkCommandBuffer cmd = one_time_commands();
      const VkBufferCopy r{0, offset + done, k};
      f.vkCmdCopyBuffer(cmd, stage.buffer, dst.buffer, 1, &r);
      check(f.vkEndCommandBuffer(cmd), "vkEndCommandBuffer");
      submit_wait(*ctx_.dev, cmd, fence_, false);
    }
  } catch (...) {
    ctx_.mem->destroy(stage);
    throw;
  }
  ctx_.mem->destroy(stage);
}

// ---- queries -----------------------------------------------------------------------------

bool Span::uses(const Weight* w) const {
  if (!w) return false;
  for (const Layer& L : layers_)
    for (const Weight* lw : L.w)
      if (lw == w) return true;
  return w == head_;
}

uint64_t Span::bytes() const {
  uint64_t b = 0;
  auto add = [&](const Buffer& x) {
    if (x.counted) b += x.alloc_size;
  };
  for (const Layer& L : layers_) add(L.kv);
  for (const Buffer* x : {&params_, &rope_, &arena_buf_, &staging_, &readback_, &head_rb_, &pt_}) add(*x);
  return b;
}

std::string Span::describe() const {
  const uint64_t kv = layers_.empty() ? 0 : uint64_t(layers_.size()) * layers_[0].kv.alloc_size;
  const int first = shape_.first_layer, last = first + shape_.n_layers - 1;
  std::string held;  // "12" for one sequence; "3 sequences, 12 + 0 + 7" for several
  if (shape_.n_seq > 1) {
    held = std::to_string(shape_.n_seq) + " sequences, ";
    for (size_t q = 0; q < kv_len_.size() && q < 8; ++q) held += (q ? " + " : "") + std::to_string(kv_len_[q]);
    if (kv_len_.size() > 8) held += " + ...";
  } else {
    held = std::to_string(kv_len_.empty() ? 0 : kv_len_[0]);
  }
  return "span " + std::to_string(shape_.n_layers) + " layers (" + std::to_string(first) + ".." + std::to_string(last) +
         "), KV " + held + " of " + std::to_string(capacity_) + " positions" + (shape_.n_seq > 1 ? " each" : "") + " (" +
         mb(kv) + " f16, " + std::to_string(pages_in_use()) + " of " + std::to_string(pool_pages_) + " pages of " +
         std::to_string(kKvPage) + " in use), arena " + mb(arena_buf_.alloc_size) + (int8_ ? ", int8 matmuls" : "") +
         (ctx_.matmul->coopmat() ? ", prefill: coopmat f16 128x32/128x64/128x128"
                                 : int8_ ? ", prefill: tiled int8 64x64" : ", prefill: tiled f32 64x64") +
         (b32_.on ? std::string(" (decode x in B32 rows") +
                        (b32_.down ? ", the experts' gate|up and down too" : b32_.experts ? ", the experts' gate|up too" : "") +
                        (b32_.router ? ", wo routes" : "") + ")"
                  : std::string()) +
         (kshape_.tile_bc ? std::string(", prompt attention on query tiles (") +
                                (kshape_.tile_coop ? "coopmat" : "scalar") + ", " +
                                std::to_string(SpanKernels::kTileRows) + " rows x " + std::to_string(kshape_.tile_bc) +
                                " positions)"
                          : "") +
         (moe() ? ", MoE " + std::to_string(shape_.n_expert) + " experts (" + std::to_string(shape_.n_expert_used) +
                      " used" + (shape_.gating_norm ? ", renormalised" : "") +
                      (shape_.n_ff_shexp > 0 ? ", + shared expert" : "") +
                      "): routing on the device, experts grouped by expert, mvm_" +
                      layers_[0].w[kGateExps]->type->name + " reading the chosen experts' rows, prompt chunks of >= 4 " +
                      "pairs per expert tiled per expert (" + (ctx_.matmul->coopmat() ? "tcm_" : "tlm_") +
                      layers_[0].w[kGateExps]->type->name + ")"
                : "") +
         (narrow_heads_ ? ", decode attention " + std::to_string(narrow_heads_) + " query head(s) per workgroup to " +
                              std::to_string(narrow_max_kv_) + " positions"
                        : "") +
         (head_ ? ", + output head (" + head_->name + ")" : "");
}

std::string Span::profile() {
  return profile_ ? profile_->report(shape_.first_layer, shape_.first_layer + shape_.n_layers - 1) : "";
}

// A MoE kernels' descriptor set (MoeKernels::layout): w0 at binding 0, the arena
// as x (1), y (3) and routing words (4), the parameters (2), w5 at 5.
VkDescriptorSet Span::moe_set(const Buffer& w0, const Buffer& w5) {
  VkDescriptorSet set = ctx_.pipelines->allocate_set(moe_->layout());
  const VkBuffer bufs[6] = {w0.buffer, arena_buf_.buffer, params_.buffer, arena_buf_.buffer, arena_buf_.buffer, w5.buffer};
  const uint64_t offs[6] = {0, 0, 0, 0, 0, 0};
  const uint64_t ranges[6] = {w0.size, arena_buf_.size, params_.size, arena_buf_.size, arena_buf_.size, w5.size};
  ctx_.pipelines->write_set(set, 6, bufs, offs, ranges);
  return set;
}

// A span matmul's descriptor set (MatmulKernels::span_layout): weight chunk c
// (binding 0; c2 at 5: a pair's second weight, else c again), the arena as x
// (1) and coherent (4), the parameters (2), and y (3: the arena, or the head's logits).
VkDescriptorSet Span::matmul_set(const WeightChunk& c, const WeightChunk& c2, const Buffer& y) {
  VkDescriptorSet set = ctx_.pipelines->allocate_set(ctx_.matmul->span_layout());
  const VkBuffer bufs[6] = {c.buf.buffer, arena_buf_.buffer, params_.buffer, y.buffer, arena_buf_.buffer, c2.buf.buffer};
  const uint64_t offs[6] = {0, 0, 0, 0, 0, 0};
  const uint64_t ranges[6] = {c.buf.size, arena_buf_.size, params_.size, y.size, arena_buf_.size, c2.buf.size};
  ctx_.pipelines->write_set(set, 6, bufs, offs, ranges);
  return set;
}

}  // namespace fish::vk
