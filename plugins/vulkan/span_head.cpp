// Span: the output head attached to a span (span_set_head): the projection's
// descriptor sets and its logits, which the head's matmul writes straight into
// host-visible memory, so no copy step follows it and the host can read them
// in place (FISH_FORWARD_LOGITS_VIEW); planned into the span's submission by
// span_plan.cpp. The logits buffer holds one row at first and grows to the
// most rows a submission has asked for (decode rows of several sequences, or
// any rows of a batch).
#include <algorithm>
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
  head_rb_rows_ = 0;
  head_ = nullptr;
}

// A descriptor set per chunk of the head (binding 3 = head_rb_), replacing any before.
void Span::write_head_sets() {
  for (VkDescriptorSet st : head_sets_) ctx_.pipelines->free_set(st);
  head_sets_.clear();
  for (const WeightChunk& c : head_->chunks) head_sets_.push_back(matmul_set(c, c, head_rb_));
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
    head_rb_rows_ = 1;
    write_buffer(params_, uint64_t(head_norm_) * 4, norm, uint64_t(shape_.n_embd) * 4);
    head_ = head;
    write_head_sets();
  } catch (...) {
    release_head();
    throw;
  }
}

void Span::ensure_head_rows(int n) {
  if (n <= head_rb_rows_) return;
  // Twice the rows asked for before (a few regrowths at most), up to a submission's tokens.
  const int rows = std::min(std::max(n, 2 * head_rb_rows_), int(arena_.tokens));
  Buffer grown = ctx_.mem->create(uint64_t(rows) * uint64_t(head_->n_out) * 4, MemKind::Readback,
                                  VK_BUFFER_USAGE_STORAGE_BUFFER_BIT, "span head " + head_->name + " logits");
  invalidate_recordings();  // they bind the sets rewritten below
  ctx_.mem->destroy(head_rb_);
  head_rb_ = grown;
  head_rb_rows_ = rows;
  try {
    write_head_sets();
  } catch (...) {
    release_head();  // no half-written sets: the head is gone (a later forward asking for logits says so)
    throw;
  }
}

}  // namespace fish::vk
