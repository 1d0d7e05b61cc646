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

void SpanKernels::bind(VkCommandBuffer cmd, VkPipeline p, const Layout& l, VkDescriptorSet set, const void* pc,
                       uint32_t bytes) {
  const DeviceFns& f = dev_.fns();
  f.vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, p);
  f.vkCmdBindDescriptorSets(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, l.pipeline_layout, 0, 1, &set, 0, nullptr);
  f.vkCmdPushConstants(cmd, l.pipeline_layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, bytes, pc);
}

void SpanKernels::rmsnorm(VkCommandBuffer cmd, VkDescriptorSet set, const SpanPush& pc, bool gather) {
  bind(cmd, pipelines_.get("span_rmsnorm", *aux_, {gather ? 1u : 0u}), *aux_, set, &pc, sizeof pc);
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

void SpanKernels::copy(VkCommandBuffer cmd, VkDescriptorSet set, uint32_t n16) {
  bind(cmd, pipelines_.get("copy_u4", *copy_, {}), *copy_, set, &n16, 4);
  dev_.fns().vkCmdDispatch(cmd, std::min(ceil_div(n16, 256), 1024u), 1, 1);
}

VkPipeline SpanKernels::attention_pipeline(const SpanKernelShape& s, bool fused, bool b32_out, bool multi) {
  return pipelines_.get("span_attention", *aux_,
                        {s.head_dim, s.heads_per_wg(), s.n_head_kv, fused ? 1u : 0u, b32_out ? 1u : 0u, s.group,
                         v_rows_late(s, fused) ? 1u : 0u, multi ? 1u : 0u});
}

void SpanKernels::warm_up(const SpanKernelShape& s, bool b32_out, bool multi) {
  pipelines_.get("span_rmsnorm", *aux_, {0u});
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
