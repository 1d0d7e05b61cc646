// Span: the output head attached to a span (span_set_head): the projection's
// descriptor sets and its logits, which the head's matvec writes straight into
// host-visible memory, so no copy step follows it and the host can read them
// in place (FISH_FORWARD_LOGITS_VIEW); planned into the span's submission by
// span_plan.cpp.
#include <string>

#include "span.h"

namespace fish::vk {

void Span::release_head() {
  if (head_rb_ || !head_sets_.empty()) {
    const DeviceFns& f = ctx_.dev->fns();
    if (fence_) f.vkWaitForFences(ctx_.dev->handle(), 1, &fence_, VK_TRUE, UINT64_MAX);
  }
  for (VkDescriptorSet st : head_sets_) ctx_.pipelines->free_set(st);
  head_sets_.clear();
  ctx_.mem->destroy(head_rb_);
  head_ = nullptr;
}

void Span::set_head(Weight* head, const float* norm) {
  invalidate_recordings();  // recordings with the old head (or none) are stale either way
  release_head();
  if (!head) return;
  if (!norm) throw Failure(FailKind::InvalidArgument, "span_set_head: no norm weights");
  if (head->n_in != shape_.n_embd)
    throw Failure(FailKind::InvalidArgument, "span_set_head: " + head->name + " takes " + std::to_string(head->n_in) +
                                                 " inputs, the span's n_embd is " + std::to_string(shape_.n_embd));
  if (head->n_out < 1 || head->chunks.empty())
    throw Failure(FailKind::InvalidArgument, "span_set_head: " + head->name + " has no rows");
  const uint64_t bytes = uint64_t(head->n_out) * 4;
  try {
    const std::string tag = "span head " + head->name;
    head_rb_ = ctx_.mem->create(bytes, MemKind::Readback, VK_BUFFER_USAGE_STORAGE_BUFFER_BIT, tag + " logits");
    write_buffer(params_, uint64_t(head_norm_) * 4, norm, uint64_t(shape_.n_embd) * 4);
    for (const WeightChunk& c : head->chunks) head_sets_.push_back(matmul_set(c, c, head_rb_));
  } catch (...) {
    release_head();
    throw;
  }
  head_ = head;
}

}  // namespace fish::vk
