// The kinds of device buffers a span holds (usage flags) and the size of its
// RoPE table and page tables: shared by the span's creation (span.cpp) and its KV growth
// (span_kv.cpp), so that span_bytes and the buffers made agree.
#pragma once
#include <algorithm>
#include <cstdint>

#include "span.h"

namespace fish::vk::span_buffers {

constexpr VkBufferUsageFlags kStorageIn = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT;
// The KV pool: read and written by the kernels, copied on growth and page by page (copy on write).
constexpr VkBufferUsageFlags kKvUsage =
    VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT;
constexpr VkBufferUsageFlags kArenaUsage = kStorageIn | VK_BUFFER_USAGE_INDIRECT_BUFFER_BIT;
// The page tables: read by the kernels, written by vkCmdUpdateBuffer.
constexpr VkBufferUsageFlags kPageTableUsage = kStorageIn;

// [capacity][n_rot / 2] (cos θ, sin θ) pairs, at least 16 bytes.
inline uint64_t rope_bytes(const SpanIn& in, int capacity) {
  return std::max<uint64_t>(16, uint64_t(capacity) * uint64_t(in.n_rot / 2) * 8);
}

// [n_seq][pages of capacity positions] u32, at least 16 bytes.
inline uint64_t page_table_bytes(const SpanIn& in, int capacity) {
  return std::max<uint64_t>(16, uint64_t(std::max(in.n_seq, 1)) * Span::pages_for(capacity) * 4);
}

}  // namespace fish::vk::span_buffers
