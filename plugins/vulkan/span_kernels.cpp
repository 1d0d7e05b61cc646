// Recording of the span's auxiliary kernels (see span_kernels.h).
#include "span_kernels.h"

#include <algorithm>

namespace fish::vk {
namespace {
uint32_t ceil_div(uint32_t a, uint32_t b) { return (a + b - 1) / b; }
}  // namespace

SpanKernels::SpanKernels(const Device& dev, Pipelines& pipelines)
    : dev_(dev), pipelines_(pipelines), aux_(&pipelines.layout(6, sizeof(SpanPush))), copy_(&pipelines.layout(2, 4)) {}

uint32_t SpanKernels::attention_shared_bytes(const SpanKernelShape& s) {
  // span_attention.comp: prep_sh [G·D] + prep_inv [G] + rope_sh [D/2 vec2] + q_sh [G·D] +
  // kv_sh [2·D] + p_sh [128·G] + red_sh [32·G] + stat_sh [2·G] + o_sh [PP·DT·G·4] floats + 1 word,
  // and quant_block.glsl's qb_x [G·D] floats and qb_q [G·D] ints (allocated without QOUT too).
  const uint32_t D = s.head_dim, G = s.heads_per_wg(), dt = D / 4, pp = kAttnWg / std::max(1u, dt);
  return 4 * (G * D + G + D + G * D + 2 * D + kAttnWg * G + 32 * G + 2 * G + pp * dt * G * 4 + 1) +
         4 * (2 * G * D);
}

uint32_t SpanKernels::tiles_shared_bytes(uint32_t D, uint32_t bc, bool coop) {
  // q_sh [64][D+8] + k_sh, v_sh [bc][D+8] halves, p_sh [64][bc+8] halves; coop: stage_sh [64][bc+4] floats.
  return 2 * (kTileRows * (D + 8) + 2 * bc * (D + 8) + kTileRows * (bc + 8)) + (coop ? 4 * kTileRows * (bc + 4) : 0);
}

void SpanKernels::choose_tiles(SpanKernelShape& s, bool coop) const {
  const DeviceCaps& c = dev_.caps();
  s.tile_bc = 0, s.tile_coop = false;
  if (s.head_dim % 16 != 0 || s.group == 0 || s.group > kTileRows || !c.subgroup_shuffle || c.subgroup_size < 2 ||
      c.max_wg_size < 128)
    return;
  if (coop && c.coopmat && tiles_shared_bytes(s.head_dim, 32, true) <= c.max_shared_bytes) {
    s.tile_bc = 32, s.tile_coop = true;
    return;
  }
  for (uint32_t bc : {32u, 16u})
    if (tiles_shared_bytes(s.head_dim, bc, false) <= c.max_shared_bytes) {
      s.tile_bc = bc;
      return;
    }
}

void SpanKernels::bind(VkCommandBuffer cmd, VkPipeline p, const Layout& l, VkDescriptorSet set, const void* pc,
                       uint32_t bytes) {
  const DeviceFns& f = dev_.fns();
  f.vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, p);
  f.vkCmdBindDescriptorSets(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, l.pipeline_layout, 0, 1, &set, 0, nullptr);
  f.vkCmdPushConstants(cmd, l.pipeline_layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, bytes, pc);
}

void SpanKernels::rmsnorm(VkCommandBuffer cmd, VkDescriptorSet set, const SpanPush& pc, bool gather, bool half) {
  if (half && pc.n_embd % 2 != 0) throw Failure(FailKind::Internal, "span rmsnorm: f16 rows need an even n_embd");
  bind(cmd, pipelines_.get("span_rmsnorm", *aux_, {gather ? 1u : 0u, half ? 1u : 0u}), *aux_, set, &pc, sizeof pc);
  dev_.fns().vkCmdDispatch(cmd, pc.n_tok, 1, 1);
}

void SpanKernels::rope_store(VkCommandBuffer cmd, VkDescriptorSet set, const SpanPush& pc, const SpanKernelShape& s,
                             bool multi) {
  bind(cmd, pipelines_.get("span_rope_store", *aux_, {s.head_dim, s.n_head_kv, multi ? 1u : 0u}), *aux_, set, &pc,
       sizeof pc);
  dev_.fns().vkCmdDispatch(cmd, pc.n_tok, pc.n_head + s.n_head_kv, 1);
}

void SpanKernels::attention(VkCommandBuffer cmd, VkDescriptorSet set, const SpanPush& pc, const SpanKernelShape& s,
                            bool fused, VkBuffer arena, bool multi) {
  if (multi && (fused || pc.q8_out != kNone))
    throw Failure(FailKind::Internal, "span attention: rows of several sequences are never fused nor B32 rows");
  bind(cmd, attention_pipeline(s, fused, pc.q8_out != kNone, multi), *aux_, set, &pc, sizeof pc);
  dev_.fns().vkCmdDispatchIndirect(cmd, arena, ctrl::kAttnArgs * 4);
}

void SpanKernels::attention_tiles(VkCommandBuffer cmd, VkDescriptorSet set, const SpanPush& pc,
                                  const SpanKernelShape& s, bool half) {
  if (s.tile_bc == 0) throw Failure(FailKind::Internal, "span attention: query tiles not chosen for this shape");
  bind(cmd, tiles_pipeline(s, half), *aux_, set, &pc, sizeof pc);
  dev_.fns().vkCmdDispatch(cmd, ceil_div(pc.n_tok, kTileRows / s.group), s.n_head_kv, 1);
}

void SpanKernels::copy(VkCommandBuffer cmd, VkDescriptorSet set, uint32_t n16) {
  bind(cmd, pipelines_.get("copy_u4", *copy_, {}), *copy_, set, &n16, 4);
  dev_.fns().vkCmdDispatch(cmd, std::min(ceil_div(n16, 256), 1024u), 1, 1);
}

VkPipeline SpanKernels::attention_pipeline(const SpanKernelShape& s, bool fused, bool b32_out, bool multi) {
  return pipelines_.get("span_attention", *aux_,
                        {s.head_dim, s.heads_per_wg(), s.n_head_kv, fused ? 1u : 0u, b32_out ? 1u : 0u, s.group,
                         v_rows_late(s, fused) ? 1u : 0u, multi ? 1u : 0u});
}

VkPipeline SpanKernels::tiles_pipeline(const SpanKernelShape& s, bool half) {
  return pipelines_.get(s.tile_coop ? "span_attention_tiles_cm" : "span_attention_tiles", *aux_,
                        {s.head_dim, s.group, s.n_head_kv, s.tile_bc, half ? 1u : 0u});
}

void SpanKernels::warm_up(const SpanKernelShape& s, bool b32_out, bool multi) {
  for (uint32_t half : {0u, 1u}) {  // f16 rows: prefill on cooperative matrices
    pipelines_.get("span_rmsnorm", *aux_, {0u, half});
    if (s.tile_bc && (half == 0 || s.tile_coop)) tiles_pipeline(s, half != 0);
  }
  pipelines_.get("span_rope_store", *aux_, {s.head_dim, s.n_head_kv, 0u});
  attention_pipeline(s, false, false, false);
  attention_pipeline(s, true, b32_out, false);
  if (multi) {
    pipelines_.get("span_rope_store", *aux_, {s.head_dim, s.n_head_kv, 1u});
    attention_pipeline(s, false, false, true);
  }
  pipelines_.get("copy_u4", *copy_, {});
}

}  // namespace fish::vk
