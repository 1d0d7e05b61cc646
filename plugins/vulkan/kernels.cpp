// Type table and dispatch recording of the matmul kernels.
#include "kernels.h"

#include <algorithm>
#include <string>

#include "moe_kernels.h"

namespace fish::vk {
namespace {

// GGUF numbers and block geometry (the GGUF format's; engine/src/quant/blocks.h),
// and FQ3 (1000: plugin_abi.h FISH_TYPE_FQ3, fish's 3-bit layout of re-quantised
// device copies, never in a file).
constexpr uint32_t kFq3 = 1000;
constexpr MatmulType kTypes[] = {
    {0, "F32", 1, 4},       {1, "F16", 1, 2},       {2, "Q4_0", 32, 18},   {8, "Q8_0", 32, 34},
    {12, "Q4_K", 256, 144}, {13, "Q5_K", 256, 176}, {14, "Q6_K", 256, 210}, {kFq3, "FQ3", 256, 112},
};

uint32_t ceil_div(uint32_t a, uint32_t b) { return (a + b - 1) / b; }

// A tiled kernel's grid: tile_rows-row x tile_tokens-token tiles (matmul_tiled*.comp:
// 64 x 64, matmul_coopmat.comp: 128 x 64), within the device's limits.
void tile_grid(const DeviceCaps& caps, uint32_t n_rows, uint32_t n_tok, uint32_t tile_rows, uint32_t tile_tokens,
               uint32_t& gx, uint32_t& gy) {
  gx = ceil_div(n_rows, tile_rows);
  gy = ceil_div(n_tok, tile_tokens);
  if (gx > caps.max_wg_count_x || gy > caps.max_wg_count_y)
    throw Failure(FailKind::Internal, "tiled matmul grid " + std::to_string(gx) + " x " + std::to_string(gy) +
                                          " exceeds the device's limits");
}
void tiled_grid(const DeviceCaps& caps, uint32_t n_rows, uint32_t n_tok, uint32_t& gx, uint32_t& gy) {
  tile_grid(caps, n_rows, n_tok, MatmulKernels::kTileRows, MatmulKernels::kTileTokens, gx, gy);
}
// The coopmat loader's FUSED_F16 (dequant_seg_f16.glsl): c · sc / 1024 from one
// f16 fma, exact only where the fma rounds once. SPIR-V lets it round its
// product (lavapipe does); NVIDIA's does not (test_vk_kernels [coopmat] on an
// H100), so only NVIDIA devices take the one-operation form (fused_f16()).
constexpr uint32_t kVendorNvidia = 0x10DE;

// The coopmat kernel's grid.
void coop_grid(const DeviceCaps& caps, uint32_t n_rows, uint32_t n_tok, uint32_t bn, uint32_t& gx, uint32_t& gy) {
  tile_grid(caps, n_rows, n_tok, MatmulKernels::kCoopRows, bn, gx, gy);
}

}  // namespace

bool MatmulKernels::fused_f16() const { return dev_.info().vendor_id == kVendorNvidia; }

std::vector<uint32_t> MatmulKernels::coop_spec(std::vector<uint32_t> spec, uint32_t bn) const {
  spec.resize(7, 0);
  spec[4] = bn == 2 * kCoopTokens ? 1u : 0u;
  spec[5] = bn == kCoopTokens / 2 ? 1u : 0u;
  spec[6] = fused_f16() ? 1u : 0u;
  return spec;
}

const MatmulType* matmul_type(uint32_t ggml_type) {
  for (const auto& t : kTypes)
    if (t.ggml_type == ggml_type) return &t;
  return nullptr;
}
const MatmulType* matmul_types_begin() { return kTypes; }
const MatmulType* matmul_types_end() { return kTypes + sizeof(kTypes) / sizeof(kTypes[0]); }

MatmulKernels::MatmulKernels(const Device& dev, Pipelines& pipelines)
    : dev_(dev), pipelines_(pipelines), layout_(&pipelines.layout(3, sizeof(MatmulPush))),
      span_layout_(&pipelines.layout(6, sizeof(SpanMatmulPush))),
      quant_layout_(&pipelines.layout(1, sizeof(QuantPush))), subgroups_(dev.caps().subgroup_arith),
      coop_fill_(coop_fill_for(dev.caps().compute_units)) {}

std::string MatmulKernels::matvec_module(const MatmulType& t) const {
  return std::string("matvec_") + t.name + (subgroups_ ? "" : "_nosg");
}

MatvecConfig MatmulKernels::matvec_config(const MatmulType& t, uint32_t n_in, uint32_t n_rows, uint32_t n_tok) const {
  MatvecConfig c;
  // 128 invocations: 4 subgroups of 32 (NVIDIA), 2 of 64 (AMD); the fallback
  // reduces through shared memory and wants a power of two.
  c.wg = subgroups_ ? 128 : 64;
  // Several rows per subgroup reuse each x value loaded from L1 for every row
  // (x traffic is otherwise 4 bytes per weight per row, 7x the Q4_K weight
  // bytes), at the price of fewer subgroups: 4 rows where that still leaves
  // enough subgroups (large outputs, or Q6_K's costlier rows), 2 or 1 below
  // (the sweep behind these limits: docs/experiments/vulkan-stage1-and-int8.md). More
  // tokens already hold several x vectors in registers.
  const bool heavy_rows = t.ggml_type == 14;  // Q6_K
  if (n_tok == 1) {
    if (n_rows >= 8192 || (n_rows >= 4096 && n_in >= 8192) || (heavy_rows && n_rows >= 1024)) c.rows = 4;
    else if (n_rows >= 1024) c.rows = 2;
    else c.rows = 1;
  } else if (n_tok == 2) {
    c.rows = n_rows >= 2048 ? 2 : 1;
  } else {
    c.rows = 1;
  }
  if (override_rows_) c.rows = override_rows_;
  if (override_wg_) c.wg = override_wg_;
  c.wg = std::min(c.wg, dev_.caps().max_wg_size);
  return c;
}

uint32_t MatmulKernels::q8_block(const MatmulType& t) {
  switch (t.ggml_type) {
    case 2: case 8: return 32;             // Q4_0, Q8_0 (x as Q8_0)
    case 12: case 13: case 14: case kFq3: return 256;  // Q4_K, Q5_K, Q6_K, FQ3 (x as Q8_K)
    default: return 0;
  }
}

uint32_t MatmulKernels::q8_row_words(uint32_t bs, uint32_t n) {
  const uint32_t sg = bs == 256 ? 16 : 32;
  return (n / 4 + n / bs + n / sg + 3) / 4 * 4;
}

uint32_t MatmulKernels::b32_row_words(uint32_t n) { return (n / 4 + n / 32 + n / 16 + 3) / 4 * 4; }

void MatmulKernels::record_quantize(VkCommandBuffer cmd, VkDescriptorSet set, const QuantPush& pc, uint32_t bs,
                                    bool xprod, bool b32k) {
  if (pc.n % bs != 0 || (bs != 256 && bs != 32))
    throw Failure(FailKind::Internal, "quantize_x: " + std::to_string(pc.n) + " elements in blocks of " + std::to_string(bs));
  const DeviceFns& f = dev_.fns();
  if (b32k && bs != 32) throw Failure(FailKind::Internal, "quantize_x: B32 rows are blocks of 32");
  VkPipeline p = pipelines_.get("quantize_x", *quant_layout_, {bs, xprod ? 1u : 0u, b32k ? 1u : 0u});
  f.vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, p);
  f.vkCmdBindDescriptorSets(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, quant_layout_->pipeline_layout, 0, 1, &set, 0, nullptr);
  f.vkCmdPushConstants(cmd, quant_layout_->pipeline_layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, sizeof(QuantPush), &pc);
  f.vkCmdDispatch(cmd, ceil_div(pc.n, 256), pc.n_tok, 1);
}

void MatmulKernels::record(VkCommandBuffer cmd, const MatmulType& t, VkDescriptorSet set, const MatmulPush& pc,
                           bool int8) {
  const DeviceFns& f = dev_.fns();
  const DeviceCaps& caps = dev_.caps();
  VkPipeline p;
  uint32_t gx, gy = 1;
  if (pc.n_tok <= kMaxMatvecTokens) {
    const MatvecConfig c = matvec_config(t, pc.n_in, pc.n_rows, pc.n_tok);
    p = pipelines_.get(int8 ? std::string("mvi_") + t.name : matvec_module(t), *layout_, {c.wg, c.rows, pc.n_tok});
    // Teams per workgroup as the driver reports its subgroup size; the kernel's
    // grid-stride loop keeps the result right if the real size differs.
    const uint32_t teams = subgroups_ ? std::max(1u, c.wg / caps.subgroup_size) : 1u;
    gx = std::min(ceil_div(ceil_div(pc.n_rows, c.rows), teams), caps.max_wg_count_x);
  } else if (coopmat_ && !int8) {
    const uint32_t bn = coop_tokens(t, pc.n_rows, pc.n_tok);
    p = pipelines_.get(std::string("tc_") + t.name, *layout_, coop_spec({}, bn));
    coop_grid(caps, pc.n_rows, pc.n_tok, bn, gx, gy);
  } else {
    p = pipelines_.get(std::string(int8 ? "tiledi_" : "tiled_") + t.name, *layout_, {});
    tiled_grid(caps, pc.n_rows, pc.n_tok, gx, gy);
  }
  f.vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, p);
  f.vkCmdBindDescriptorSets(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, layout_->pipeline_layout, 0, 1, &set, 0, nullptr);
  f.vkCmdPushConstants(cmd, layout_->pipeline_layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, sizeof(MatmulPush), &pc);
  f.vkCmdDispatch(cmd, gx, gy, 1);
}

MatvecConfig MatmulKernels::span_matvec_config(const MatmulType& t, uint32_t n_in, uint32_t n_rows, uint32_t n_tok,
                                               SpanFusion fz) const {
  if (n_tok >= 2) {
    if (group_override_.nb) return group_override_;
    // Token groups (several sequences' decode rows, a verify chunk): from 3
    // rows on, rows across the lanes (below); 2 rows (and a device without
    // the shared memory or workgroup size for that) slices of one subgroup,
    // each its own 1 (two rows of x) or 2 rows over the whole input; token
    // groups of 4 tokens, 2 in registers at a time, from 8 rows on of 8
    // tokens, 4 at a time. On the H200 (int8 Q4_K, 14336 x 4096) 23.8 us on 2
    // rows and 31.0 on 4, where 128-invocation workgroups over 4 rows x 8
    // tokens took 65.8 and 66.5 (one unit per invocation, then a reduction of
    // 32 sums); 4 tokens at a time 48.8 us against 54.5 on 8 rows: 362 and 20
    // shapes in docs/experiments/vulkan-span-batch-rows.md.
    const uint32_t sg = std::max(32u, dev_.caps().subgroup_size);
    MatvecConfig c;
    if (n_tok >= 3) {
      // Rows across the lanes (LANES): 4 lanes per row, 2 rows per lane group.
      // From 5 rows: 4 slices of one subgroup, 8 tokens per group in
      // registers. On an H100 (int8 Q4_K on B32 rows, fish_bench_vk_span
      // --rows --sweep --shape 8b) the fastest of ~150 shapes at T = 16 and 32
      // on both of the 8B's FFN matrices and at T = 8 on one; end to end (fish
      // bench -np 1,4,8,16,32 -d 384) 472.8 / 895.1 / 1194.3 / 1398.4 tok/s at
      // 4 / 8 / 16 / 32 sequences against 465.5 / 742.0 / 916.8 / 1063.4 with
      // the layout below. 3 and 4 rows: 4 tokens in registers, a group of 8 in
      // two steps (the second skipped), 8 slices: on an H200 (4096 x 14336) at
      // T = 4 26.2 us where 8 tokens in registers took 43.6, at T = 3 25.8
      // against the 2-row slices' 44.5; end to end 4 sequences 602.8 tok/s
      // against 475.9, a verify of 4 tokens 6.19 ms against 7.95 (5..7 rows
      // keep 8 tokens in registers: 6 sequences 697.7 against 609.9;
      // docs/experiments/vulkan-span-batch-rows.md). Rows shorter than 8192
      // take 4 of those slices: on an H100 3 / 4 sequences 477.8 / 615.3
      // tok/s against 8 slices' 461.7 / 593.6, a verify of 4 tokens 6.10 ms
      // against 6.29. A 3-row forward runs the 4-row one's grid and loads
      // (the 4th token repeats the 3rd, unwritten).
      c.lanes = 4, c.rows = fz.pair ? 1 : 2, c.nt = 8, c.nb = 1, c.slices = 4;
      if (n_tok <= 4) c.nt = 4, c.nb = 2, c.slices = n_in >= 8192 ? 8 : 4;
      c.wg = sg * c.slices;
      if (c.wg <= dev_.caps().max_wg_size && c.group_shared_bytes(fz.pair) <= dev_.caps().max_shared_bytes) return c;
      c = MatvecConfig{};
    }
    c.slices = 4;
    c.rows = n_tok <= 2 ? 1 : 2;
    c.nt = n_tok >= 8 ? 4 : 2, c.nb = 2;
    while (c.rows > 1 && c.rows * c.nt * c.nb * (fz.pair ? 2u : 1u) > sg) c.rows /= 2;
    c.wg = std::min(sg * c.slices, std::min(dev_.caps().max_wg_size, 32 * sg));
    c.slices = c.wg / sg;
    return c;
  }
  // Units per row as matvec_units.glsl defines them: 4 (F32), 8 (F16) or 32
  // elements, 64 for Q6_K, FQ3 and U64's Q4_K / Q5_K (matvec_units_i8.glsl).
  const bool unit64 = t.ggml_type == 14 || t.ggml_type == kFq3 || span_u64(t, fz, n_tok);
  const uint32_t unit = t.ggml_type == 0 ? 4 : t.ggml_type == 1 ? 8 : unit64 ? 64 : 32;
  const uint32_t units = std::max(1u, n_in / unit);
  MatvecConfig c;
  // Rows per workgroup: as many as keep >= 512 workgroups (x is loaded once for all of them).
  c.rows = n_rows >= 4 * 512 ? 4 : n_rows >= 2 * 512 ? 2 : 1;
  uint32_t wg = 32;
  while (wg < 128 && wg * 2 <= units) wg *= 2;
  c.wg = std::max(wg, dev_.caps().subgroup_size);
  if (override_rows_) c.rows = override_rows_;
  if (override_wg_) c.wg = override_wg_;
  const SpanMvShape& s = span_shape_[fz.role];
  if (s.rows) c.rows = s.rows;
  if (s.wg) c.wg = s.wg;
  // At most 32 accumulated (row, token) sums: registers, and one finishing
  // invocation each (the workgroup has >= 32). One token here.
  const uint32_t per_row = fz.pair ? 2u : 1u;
  while (c.rows > 1 && c.rows * per_row > 32) c.rows /= 2;
  if (fz.qb32) {
    // A B32 block (32 rows) per workgroup, in slices of ROWS rows, each of
    // whole subgroups: every invocation accumulates ROWS rows, as elsewhere.
    const uint32_t sg = std::max(32u, dev_.caps().subgroup_size);
    c.rows = std::min(c.rows, 8u);
    c.slices = 32 / c.rows;
    // The gate|up pair: slices of one subgroup, its fastest shape in the 8B's
    // decode (docs/experiments/vulkan-decode-quantisation.md).
    if (fz.pair && !s.wg && !override_wg_) c.wg = sg;
    c.wg = std::max(c.wg / sg, 1u) * sg;  // a slice's size
    const uint32_t most = std::min(dev_.caps().max_wg_size, 32 * std::max(1u, dev_.caps().subgroup_size));
    while (c.wg > sg && c.wg * c.slices > most) c.wg /= 2;
    while (c.rows < 32 && c.wg * c.slices > most) c.rows *= 2, c.slices /= 2;
    c.wg *= c.slices;
  }
  // The kernel keeps per-subgroup sums for at most 32 subgroups.
  c.wg = std::min({std::max(c.wg, 32u), dev_.caps().max_wg_size, 32 * std::max(1u, dev_.caps().subgroup_size)});
  return c;
}

uint32_t MatmulKernels::coop_tokens(const MatmulType& t, uint32_t n_rows, uint32_t n_tok) const {
  return coop_tokens_ ? coop_tokens_ : coop_tokens_rule(t.ggml_type, n_rows, n_tok, coop_fill_);
}

uint32_t MatmulKernels::coop_tokens_rule(uint32_t ggml_type, uint32_t n_rows, uint32_t n_tok, uint32_t fill) {
  // Measured with f16 x on an H100 (132 SMs, fill 99; fish_bench_vk_span
  // --prefill, docs/experiments/vulkan-coopmat-prefill.md): 128-token tiles,
  // half the weight decoding per product, pay only for Q6_K's costly decode
  // (8B down 572 -> 505 us) and where a grid of them still fills the device;
  // Q4_K runs faster on 64 (8B gate/up 525 -> 469). Grids of 64 64-token
  // tiles take 32-token ones (8B k, v: 95 -> 73, 121 -> 99 us); grids of 128
  // keep 64 (1B q: 53.4 us against 56.3 at 32).
  const uint32_t row_tiles = ceil_div(n_rows, kCoopRows);
  if (ggml_type == 14 && n_tok > kCoopTokens && row_tiles * ceil_div(n_tok, 2 * kCoopTokens) >= fill)
    return 2 * kCoopTokens;
  if (row_tiles * ceil_div(n_tok, kCoopTokens) < fill) return kCoopTokens / 2;
  return kCoopTokens;
}

bool MatmulKernels::span_u64(const MatmulType& t, SpanFusion fz, uint32_t n_tok) const {
  return n_tok == 1 && fz.int8 && (t.ggml_type == 12 || t.ggml_type == 13) && ((span_u64_ >> fz.role) & 1u) != 0;
}

uint32_t MatmulKernels::span_row_groups(const MatmulType& t, uint32_t n_in, uint32_t n_rows, uint32_t n_tok,
                                        SpanFusion fz) const {
  if (n_tok > kMaxSpanMatvecTokens) return 0;
  const MatvecConfig c = span_matvec_config(t, n_in, n_rows, n_tok, fz);
  return ceil_div(n_rows, c.wg_rows());
}

void MatmulKernels::record_span(VkCommandBuffer cmd, const MatmulType& t, VkDescriptorSet set, const SpanMatmulPush& pc,
                                SpanFusion fz) {
  const DeviceFns& f = dev_.fns();
  const DeviceCaps& caps = dev_.caps();
  VkPipeline p;
  uint32_t gx, gy = 1;
  if (pc.m.n_tok <= kMaxSpanMatvecTokens) {
    if (!subgroups_) throw Failure(FailKind::Unsupported, "span matvec needs subgroup arithmetic");
    const bool qout = pc.q_out != 0xFFFFFFFFu;
    if (qout != fz.qb32 || (fz.qb32 && (!fz.int8 || pc.m.n_tok != 1 || pc.m.n_rows % 32 != 0)))
      throw Failure(FailKind::Internal, "span matvec: B32 output needs int8, one token and rows in 32s");
    if (fz.epi == 4 && !fz.pair) throw Failure(FailKind::Internal, "span matvec: EPI 4 is the gate|up pair's");
    if (fz.epi == 5 && (fz.pair || fz.qb32 || pc.m.n_rows > MoeKernels::kMaxExperts ||
                        (pc.xg_off & 0xFFFFu) > MoeKernels::kMaxUsed))
      throw Failure(FailKind::Internal, "span matvec: the routing tail takes one matrix of <= " +
                                            std::to_string(MoeKernels::kMaxExperts) + " experts, k <= " +
                                            std::to_string(MoeKernels::kMaxUsed));
    if (fz.epi > 5) throw Failure(FailKind::Internal, "span matvec: no epilogue " + std::to_string(fz.epi));
    if (fz.router && (fz.epi != 3 || !fz.qb32 || fz.pair || pc.rt_n_expert == 0 ||
                      pc.rt_n_expert > MoeKernels::kMaxExperts || (pc.rt_k & 0xFFFFu) == 0 ||
                      (pc.rt_k & 0xFFFFu) > std::min(pc.rt_n_expert, MoeKernels::kMaxUsed)))
      throw Failure(FailKind::Internal, "span matvec: the router fold takes EPI 3 on B32 output rows, one matrix, <= " +
                                            std::to_string(MoeKernels::kMaxExperts) + " experts, 1 <= k <= " +
                                            std::to_string(MoeKernels::kMaxUsed));
    if (fz.xh || fz.oh) throw Failure(FailKind::Internal, "span matvec: f16 rows are the coopmat prefill's");
    const MatvecConfig c = span_matvec_config(t, pc.m.n_in, pc.m.n_rows, pc.m.n_tok, fz);
    std::vector<uint32_t> spec = {c.wg, c.rows, c.nb ? c.nt : pc.m.n_tok, fz.epi, fz.xprod && !fz.int8 ? 1u : 0u,
                                  fz.pair ? 1u : 0u, fz.qb32 ? 1u : 0u, fz.xb32 && fz.int8 ? 1u : 0u, c.slices,
                                  span_u64(t, fz, pc.m.n_tok) ? 1u : 0u};
    if (c.nb) spec.push_back(c.nb);  // token groups (the one-token decode: the module's default, 0)
    if (c.lanes) {
      if (!c.nb || c.wg % c.slices != 0 || (c.wg / c.slices) % c.lanes != 0)
        throw Failure(FailKind::Internal, "span matvec: rows across lanes need token groups and whole lane groups");
      if (c.group_shared_bytes(fz.pair) > caps.max_shared_bytes)
        throw Failure(FailKind::Internal, "span matvec: " + std::to_string(c.group_shared_bytes(fz.pair)) +
                                              " bytes of shared memory for rows across lanes, the device has " +
                                              std::to_string(caps.max_shared_bytes));
      spec.push_back(c.lanes);
      spec.push_back(c.wg_rows());
    }
    if (fz.router) {
      if (c.nb || c.lanes || c.wg_rows() != 32)
        throw Failure(FailKind::Internal, "span matvec: the router fold needs one token's 32-row workgroups");
      spec.insert(spec.end(), {0u, 0u, 1u, 1u});  // NB, LANES, RL_ROWS as the one-token decode's; ROUTER
    }
    p = pipelines_.get(std::string(fz.int8 ? "mvsi_" : "mvs_") + t.name, *span_layout_, spec);
    const uint32_t token_groups = c.nb ? ceil_div(pc.m.n_tok, c.nt * c.nb) : 1;
    gx = std::min(ceil_div(pc.m.n_rows, c.wg_rows()) * token_groups, caps.max_wg_count_x);
  } else {
    if (fz.epi == 3 || fz.epi > 4 || fz.pair)
      throw Failure(FailKind::Internal, "span: the tiled kernel has no norm or pair epilogue");
    if ((fz.xh || fz.oh) && (!coopmat_ || fz.int8 || fz.xprod || (fz.oh && fz.epi != 4)))
      throw Failure(FailKind::Internal, "span: f16 rows need the coopmat prefill on f32 products (OH: EPI 4)");
    if (coopmat_ && !fz.int8) {
      const uint32_t bn = coop_tokens(t, pc.m.n_rows, pc.m.n_tok);
      p = pipelines_.get(std::string("tlc_") + t.name, *span_layout_,
                         coop_spec({fz.epi, fz.xprod ? 1u : 0u, fz.xh ? 1u : 0u, fz.oh ? 1u : 0u}, bn));
      coop_grid(caps, pc.m.n_rows, pc.m.n_tok, bn, gx, gy);
    } else {
      p = fz.int8 ? pipelines_.get(std::string("tlsi_") + t.name, *span_layout_, {fz.epi})
                  : pipelines_.get(std::string("tls_") + t.name, *span_layout_, {fz.epi, fz.xprod ? 1u : 0u});
      tiled_grid(caps, pc.m.n_rows, pc.m.n_tok, gx, gy);
    }
  }
  f.vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, p);
  f.vkCmdBindDescriptorSets(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, span_layout_->pipeline_layout, 0, 1, &set, 0, nullptr);
  f.vkCmdPushConstants(cmd, span_layout_->pipeline_layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, sizeof(SpanMatmulPush), &pc);
  f.vkCmdDispatch(cmd, gx, gy, 1);
}

bool MatmulKernels::warm_up(const MatmulType& t, uint32_t n_in, uint32_t n_rows) {
  for (uint32_t nt = 1; nt <= kMaxMatvecTokens; ++nt) {
    const MatvecConfig c = matvec_config(t, n_in, n_rows, nt);
    pipelines_.get(matvec_module(t), *layout_, {c.wg, c.rows, nt});
  }
  if (coopmat_) {
    for (uint32_t bn : {kCoopTokens / 2, kCoopTokens, 2 * kCoopTokens}) {  // the tile widths record() picks from
      pipelines_.get(std::string("tc_") + t.name, *layout_, coop_spec({}, bn));
    }
  } else
    pipelines_.get(std::string("tiled_") + t.name, *layout_, {});
  return true;
}

}  // namespace fish::vk
