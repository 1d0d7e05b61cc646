// Recording of the MoE kernels (see moe_kernels.h).
#include "moe_kernels.h"

#include <algorithm>
#include <string>
#include <vector>

namespace fish::vk {

MoeKernels::MoeKernels(const Device& dev, Pipelines& pipelines, const MatmulKernels& matmul)
    : dev_(dev), pipelines_(pipelines), matmul_(matmul), layout_(&pipelines.layout(6, sizeof(MoePush))) {}

void MoeKernels::bind(VkCommandBuffer cmd, VkPipeline p, VkDescriptorSet set, const MoePush& pc) {
  const DeviceFns& f = dev_.fns();
  f.vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, p);
  f.vkCmdBindDescriptorSets(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, layout_->pipeline_layout, 0, 1, &set, 0, nullptr);
  f.vkCmdPushConstants(cmd, layout_->pipeline_layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, sizeof pc, &pc);
}

void MoeKernels::route(VkCommandBuffer cmd, VkDescriptorSet set, const MoePush& pc) {
  const DeviceFns& f = dev_.fns();
  bind(cmd, pipelines_.get("moe_route", *layout_, {1u}), set, pc);  // a workgroup per row (grid-stride)
  f.vkCmdDispatch(cmd, std::min(pc.s.m.n_tok, dev_.caps().max_wg_count_x), 1, 1);
  auto mb = vk_init<VkMemoryBarrier>(VK_STRUCTURE_TYPE_MEMORY_BARRIER);  // the pairs, then their grouping
  mb.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT;
  mb.dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT;
  f.vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0, 1, &mb, 0,
                         nullptr, 0, nullptr);
  bind(cmd, pipelines_.get("moe_route", *layout_, {2u}), set, pc);
  f.vkCmdDispatch(cmd, 1, 1, 1);
}

uint32_t MoeKernels::qout_slice_width() const {
  const uint32_t sg = std::max(1u, dev_.caps().subgroup_size), slices = kQoutRows / kRows;
  uint32_t w = std::max(kWg, sg);
  while (w > sg && (slices * w / sg > 32 || slices * w > dev_.caps().max_wg_size)) w /= 2;
  if (slices * w / sg > 32 || slices * w > dev_.caps().max_wg_size || w % sg != 0)
    throw Failure(FailKind::Unsupported, "MoE gate|up with B32 rows: no workgroup of " + std::to_string(slices) +
                                             " slices fits subgroups of " + std::to_string(sg));
  return w;
}

VkPipeline MoeKernels::mvm(const MatmulType& t, Mvm kind, bool next, uint32_t nt, bool int8, bool qout) {
  // moe_matvec.comp's specialisation: workgroup, ROWS, NT, PAIR, SUM, NEXT, ROUTE, SLICES, QOUT.
  const bool pair = kind == Mvm::kPair || kind == Mvm::kPairs;
  if (int8 && MatmulKernels::q8_block(t) != 256)
    throw Failure(FailKind::Internal, std::string("MoE experts on B32 rows: ") + t.name + " is not a K-quant");
  if (qout && kind != Mvm::kPairs && !(kind == Mvm::kSum && next))
    throw Failure(FailKind::Internal, "MoE B32 output rows: a decode's gate|up or its summed down with the next norm only");
  const bool sliced = qout && kind == Mvm::kPairs;
  const uint32_t slices = sliced ? kQoutRows / kRows : 1;
  return pipelines_.get(std::string(int8 ? "mvmi_" : "mvm_") + t.name, *layout_,
                        {sliced ? qout_slice_width() * slices : kWg, kRows, nt, pair ? 1u : 0u,
                         kind == Mvm::kSum ? 1u : 0u, next ? 1u : 0u, kind == Mvm::kPairs ? 1u : 0u, slices,
                         qout ? 1u : 0u});
}

void MoeKernels::matvec(VkCommandBuffer cmd, const MatmulType& t, VkDescriptorSet set, const MoePush& pc, bool pair,
                        bool sum, bool next, bool int8) {
  const uint32_t groups = row_groups(pc.s.m.n_rows);
  if (sum) {
    if (pair || pc.s.m.n_tok > kSumTokens || pc.s.m.n_tok > dev_.caps().max_wg_count_y)
      throw Failure(FailKind::Internal, "MoE down + sum: down of at most " + std::to_string(kSumTokens) + " tokens");
    if (next && pc.s.norm_off == 0xFFFFFFFFu)
      throw Failure(FailKind::Internal, "MoE down + sum + next rmsnorm: no norm weights");
    const bool qout = pc.s.q_out != 0xFFFFFFFFu;
    if (qout && (!next || pc.s.m.n_tok != 1 || pc.s.m.n_rows % kQoutRows != 0))
      throw Failure(FailKind::Internal, "MoE down + sum writing B32 rows: the next norm, one token and rows in 32s");
    bind(cmd, mvm(t, Mvm::kSum, next, 1, int8, qout), set, pc);
    dev_.fns().vkCmdDispatch(cmd, std::min(groups, dev_.caps().max_wg_count_x), pc.s.m.n_tok, 1);
    return;
  }
  if ((pc.flags & MoePush::kPairs) != 0) {  // a decode's gate|up: one workgroup row per pair
    if (!pair || pc.s.m.n_tok > kSumTokens)
      throw Failure(FailKind::Internal, "MoE gate|up by pairs: a pair of at most " + std::to_string(kSumTokens) + " tokens");
    const bool qout = pc.s.q_out != 0xFFFFFFFFu;
    if (qout && pc.s.m.n_rows % kQoutRows != 0)
      throw Failure(FailKind::Internal, "MoE gate|up B32 rows: " + std::to_string(pc.s.m.n_rows) + " rows, not whole blocks");
    bind(cmd, mvm(t, Mvm::kPairs, false, 1, int8, qout), set, pc);
    const uint32_t gx = qout ? pc.s.m.n_rows / kQoutRows : groups;
    dev_.fns().vkCmdDispatch(cmd, std::min(gx, dev_.caps().max_wg_count_x), pc.s.m.n_tok * pc.k, 1);
    return;
  }
  const uint32_t nt = chunk_pairs(pc.s.m.n_tok, pc.n_expert, pc.k);
  bind(cmd, mvm(t, pair ? Mvm::kPair : Mvm::kDown, false, nt, int8), set, pc);
  const uint32_t slots = std::min(pc.n_expert, pc.s.m.n_tok * pc.k);
  dev_.fns().vkCmdDispatch(cmd, std::min(groups, dev_.caps().max_wg_count_x), slots, 1);
}

uint32_t MoeKernels::coop_tokens(uint32_t n_tok, uint32_t n_expert, uint32_t k) const {
  if (matmul_.coop_tokens_set()) return matmul_.coop_tokens_set();
  const uint32_t pairs = n_tok * k, active = std::max(1u, std::min(n_expert, pairs));
  return (pairs + active - 1) / active <= MatmulKernels::kCoopTokens / 2 ? MatmulKernels::kCoopTokens / 2
                                                                         : MatmulKernels::kCoopTokens;
}

VkPipeline MoeKernels::tiled_pipeline(const MatmulType& t, TiledEpi epi, bool gate_up, uint32_t bn) {
  const std::vector<uint32_t> spec = {uint32_t(epi), gate_up ? 1u : 0u};
  return matmul_.coopmat() ? pipelines_.get(std::string("tcm_") + t.name, *layout_, matmul_.coop_spec(spec, bn))
                           : pipelines_.get(std::string("tlm_") + t.name, *layout_, spec);
}

void MoeKernels::tiled(VkCommandBuffer cmd, const MatmulType& t, VkDescriptorSet set, const MoePush& pc, TiledEpi epi,
                       bool gate_up) {
  const bool coop = matmul_.coopmat();
  const uint32_t tile_rows = coop ? MatmulKernels::kCoopRows : MatmulKernels::kTileRows;
  const uint32_t tile_tokens = coop ? coop_tokens(pc.s.m.n_tok, pc.n_expert, pc.k) : MatmulKernels::kTileTokens;
  bind(cmd, tiled_pipeline(t, epi, gate_up, tile_tokens), set, pc);
  const uint32_t gx = (pc.s.m.n_rows + tile_rows - 1) / tile_rows;
  const uint32_t gy = (pc.s.m.n_tok + tile_tokens - 1) / tile_tokens;
  const uint32_t slots = std::min(pc.n_expert, pc.s.m.n_tok * pc.k);
  if (gx > dev_.caps().max_wg_count_x || gy > dev_.caps().max_wg_count_y)
    throw Failure(FailKind::Internal, "MoE tiled grid " + std::to_string(gx) + " x " + std::to_string(gy) +
                                          " exceeds the device's limits");
  dev_.fns().vkCmdDispatch(cmd, gx, gy, slots);
}

void MoeKernels::combine(VkCommandBuffer cmd, VkDescriptorSet set, const MoePush& pc) {
  bind(cmd, pipelines_.get("moe_combine", *layout_, {}), set, pc);
  dev_.fns().vkCmdDispatch(cmd, pc.s.m.n_tok, 1, 1);
}

void MoeKernels::warm_up(const MatmulType& gate_up, const MatmulType& down, bool tiled, bool int8_pairs,
                         bool int8_down, bool sum_rows) {
  for (uint32_t phases : {1u, 2u}) pipelines_.get("moe_route", *layout_, {phases});
  mvm(gate_up, Mvm::kPairs);
  if (int8_pairs) mvm(gate_up, Mvm::kPairs, false, 1, true, int8_down);
  if (int8_down)
    for (const bool next : {false, true}) mvm(down, Mvm::kSum, next, 1, true);
  pipelines_.get("moe_combine", *layout_, {});
  for (uint32_t nt : {1u, 4u}) {
    mvm(gate_up, Mvm::kPair, false, nt);
    mvm(down, Mvm::kDown, false, nt);
  }
  for (const bool next : {false, true}) mvm(down, Mvm::kSum, next);
  if (sum_rows) mvm(down, Mvm::kSum, true, 1, int8_down, true);
  if (!tiled) return;
  for (uint32_t bn : {MatmulKernels::kCoopTokens / 2, MatmulKernels::kCoopTokens}) {  // coop_tokens()' choices
    tiled_pipeline(gate_up, kSilu, true, bn);
    tiled_pipeline(gate_up, kMulY, true, bn);
    tiled_pipeline(down, kRouteWeight, false, bn);
  }
}

}  // namespace fish::vk
