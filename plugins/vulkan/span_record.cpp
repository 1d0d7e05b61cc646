// Span: recording a plan's steps into a command buffer (one loop), and the
// cache of recorded forwards (see span.h).
#include "span.h"

namespace fish::vk {
namespace {

void memory_barrier(const DeviceFns& f, VkCommandBuffer cmd, VkPipelineStageFlags src, VkAccessFlags src_access,
                    VkPipelineStageFlags dst, VkAccessFlags dst_access) {
  auto mb = vk_init<VkMemoryBarrier>(VK_STRUCTURE_TYPE_MEMORY_BARRIER);
  mb.srcAccessMask = src_access;
  mb.dstAccessMask = dst_access;
  f.vkCmdPipelineBarrier(cmd, src, dst, 0, 1, &mb, 0, nullptr, 0, nullptr);
}

constexpr VkAccessFlags kReadWrite = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT;

void record_barrier(const DeviceFns& f, VkCommandBuffer cmd, Barrier b) {
  switch (b) {
    case Barrier::None: return;
    case Barrier::Compute:  // the next step reads what this one wrote
      memory_barrier(f, cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_WRITE_BIT,
                     VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, kReadWrite);
      return;
    case Barrier::ComputeDraw:
      memory_barrier(f, cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_WRITE_BIT,
                     VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_DRAW_INDIRECT_BIT,
                     kReadWrite | VK_ACCESS_INDIRECT_COMMAND_READ_BIT);
      return;
    case Barrier::Host:
      memory_barrier(f, cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
                     VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT, VK_PIPELINE_STAGE_HOST_BIT,
                     VK_ACCESS_HOST_READ_BIT);
      return;
  }
}

}  // namespace

void Span::record(VkCommandBuffer cmd, const SpanPlan& plan, bool stamps) {
  const DeviceFns& f = ctx_.dev->fns();
  SpanKernels& k = *ctx_.kernels;
  MatmulKernels& mm = *ctx_.matmul;
  // Earlier submissions (uploads, the previous forward) before anything here.
  memory_barrier(f, cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
                 VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                 kReadWrite);
  if (stamps) profile_->begin(cmd);
  struct Record {
    VkCommandBuffer cmd;
    SpanKernels& k;
    MatmulKernels& mm;
    const Span& span;
    void operator()(const CopyStep& s) const { k.copy(cmd, s.set, s.n16); }
    void operator()(const RmsNormStep& s) const { k.rmsnorm(cmd, s.set, s.push, s.gather, s.half); }
    void operator()(const QuantizeStep& s) const { mm.record_quantize(cmd, span.quant_set_, s.push, s.block, s.xprod, s.b32); }
    void operator()(const RopeStoreStep& s) const { k.rope_store(cmd, s.set, s.push, s.shape, s.multi); }
    void operator()(const AttentionStep& s) const {
      if (s.tiles) return k.attention_tiles(cmd, s.set, s.push, s.shape, s.half);
      k.attention(cmd, s.set, s.push, s.shape, s.fused, span.arena_buf_.buffer, s.multi);
    }
    void operator()(const MoeRouteStep& s) const { span.moe_->route(cmd, s.set, s.push); }
    void operator()(const MoeMatvecStep& s) const { span.moe_->matvec(cmd, *s.weight->type, s.set, s.push, s.pair, s.sum, s.next, s.int8); }
    void operator()(const MoeTiledStep& s) const {
      span.moe_->tiled(cmd, *s.weight->type, s.set, s.push, s.epi, s.gate_up);
    }
    void operator()(const MoeCombineStep& s) const { span.moe_->combine(cmd, s.set, s.push); }
    void operator()(const MatmulStep& s) const {
      SpanMatmulPush pc = s.push;
      for (size_t c = 0; c < s.weight->chunks.size(); ++c) {
        const WeightChunk& ch = s.weight->chunks[c];
        pc.m.n_rows = ch.rows;
        pc.m.y_off = s.push.m.y_off + ch.row0;
        mm.record_span(cmd, *s.weight->type, s.sets[c], pc, s.fusion);
      }
    }
  };
  const Record rec{cmd, k, mm, *this};
  for (const SpanStep& step : plan.steps) {
    std::visit(rec, step.kernel);
    record_barrier(f, cmd, step.barrier);
    if (stamps && step.stage) profile_->stage(cmd, step.stage, step.category);
  }
  if (stamps) profile_->end(cmd);
}

// A command buffer holding a submission of this shape (n tokens, head rows,
// narrow attention, one sequence or several), recorded once per shape and
// reused. FISH_GPU_PROFILE's stamps (level 1: two, level 2: one per stage)
// go into the cached recordings too, so a profiled forward's host side is an
// unprofiled one's (re-recording a 48-layer MoE decode per token took ~2.5 ms).
VkCommandBuffer Span::recording_for(const Shape& shape) {
  const DeviceFns& f = ctx_.dev->fns();
  const int level = profile_->level();
  if (auto it = cached_.find(shape); it != cached_.end()) {
    if (level > 0) profile_->use(it->second);
    return it->second;
  }
  // Many batch sizes: keep the cache small (room for a decode per sequence).
  if (cached_.size() >= size_t(16 + 2 * shape_.n_seq)) invalidate_recordings();
  VkCommandBuffer cmd = fresh_command_buffer();
  try {
    const auto bi = vk_init<VkCommandBufferBeginInfo>(VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO);
    check(f.vkBeginCommandBuffer(cmd, &bi), "vkBeginCommandBuffer");
    record(cmd, plan(shape), level > 0);
    check(f.vkEndCommandBuffer(cmd), "vkEndCommandBuffer");
  } catch (...) {
    free_cmds_.push_back(cmd);
    throw;
  }
  cached_[shape] = cmd;
  if (level > 0) profile_->use(cmd);
  return cmd;
}

VkCommandBuffer Span::fresh_command_buffer() {
  const DeviceFns& f = ctx_.dev->fns();
  VkCommandBuffer cmd = VK_NULL_HANDLE;
  if (!free_cmds_.empty()) {
    cmd = free_cmds_.back();
    free_cmds_.pop_back();
  } else {
    auto ai = vk_init<VkCommandBufferAllocateInfo>(VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO);
    ai.commandPool = pool_;
    ai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
    ai.commandBufferCount = 1;
    check(f.vkAllocateCommandBuffers(ctx_.dev->handle(), &ai, &cmd), "vkAllocateCommandBuffers");
  }
  check(f.vkResetCommandBuffer(cmd, 0), "vkResetCommandBuffer");
  return cmd;
}

VkCommandBuffer Span::one_time_commands() {
  const DeviceFns& f = ctx_.dev->fns();
  if (!scratch_cmd_) scratch_cmd_ = fresh_command_buffer();
  check(f.vkResetCommandBuffer(scratch_cmd_, 0), "vkResetCommandBuffer");
  auto bi = vk_init<VkCommandBufferBeginInfo>(VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO);
  bi.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
  check(f.vkBeginCommandBuffer(scratch_cmd_, &bi), "vkBeginCommandBuffer");
  return scratch_cmd_;
}

void Span::invalidate_recordings() {
  for (auto& [n, cmd] : cached_) free_cmds_.push_back(cmd);
  cached_.clear();
}

}  // namespace fish::vk
