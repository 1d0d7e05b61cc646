// Span: the KV cache per sequence (see span.h): its buffers and their limits,
// each sequence's length, truncate, copy between sequences, growth.
//
// Layout of a layer's buffer: sequence s's part at s · seq_stride_ bytes,
// K [capacity][n_head_kv][head_dim] then V, f16.
#include <algorithm>
#include <string>

#include "commands.h"
#include "span.h"
#include "span_buffers.h"

namespace fish::vk {
namespace {

// The forwards' KV writes (earlier submissions) before a copy reads or writes the KV.
void kv_writes_before_copy(const DeviceFns& f, VkCommandBuffer cmd) {
  auto mb = vk_init<VkMemoryBarrier>(VK_STRUCTURE_TYPE_MEMORY_BARRIER);
  mb.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT;
  mb.dstAccessMask = VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
  f.vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_PIPELINE_STAGE_TRANSFER_BIT, 0, 1, &mb, 0,
                         nullptr, 0, nullptr);
}

}  // namespace

void Span::check_seq(int seq, const char* what) const {
  if (seq < 0 || seq >= shape_.n_seq)
    throw Failure(FailKind::InvalidArgument, std::string(what) + ": sequence " + std::to_string(seq) + " of " +
                                                 std::to_string(shape_.n_seq) + " (ids 0.." +
                                                 std::to_string(shape_.n_seq - 1) + ")");
}

void Span::check_kv_size(int capacity, const char* what) const {
  const uint64_t bytes = uint64_t(shape_.n_seq) * seq_stride(shape_, capacity);
  const std::string n = std::to_string(capacity) + " positions" +
                        (shape_.n_seq > 1 ? " for each of " + std::to_string(shape_.n_seq) + " sequences" : "");
  // The kernels index the KV in halves with 32-bit words.
  if (bytes / 2 >= (uint64_t(1) << 32))
    throw Failure(FailKind::Unsupported, std::string(what) + ": " + n + " exceed the kernels' 32-bit indices");
  const uint64_t range = ctx_.dev->caps().max_storage_range;
  if (range > 0 && bytes > range)
    throw Failure(FailKind::OutOfMemory, std::string(what) + ": " + n + " need a " + std::to_string(bytes >> 20) +
                                             " MB KV buffer per layer, beyond the device's largest binding (" +
                                             std::to_string(range >> 20) + " MB)");
}

int Span::kv_len(int seq) const {
  check_seq(seq, "span_kv_len");
  return kv_len_[size_t(seq)];
}

void Span::allocate_kv(int capacity, std::vector<Buffer>* out) const {
  const uint64_t bytes = uint64_t(shape_.n_seq) * seq_stride(shape_, capacity);
  const std::string held = std::to_string(capacity) + " positions" +
                           (shape_.n_seq > 1 ? " x " + std::to_string(shape_.n_seq) + " sequences" : "");
  try {
    for (int l = 0; l < shape_.n_layers; ++l)
      out->push_back(ctx_.mem->create(bytes, MemKind::Device, span_buffers::kKvUsage,
                                      "span KV cache, layer " + std::to_string(shape_.first_layer + l) + " (" + held + ")"));
  } catch (...) {
    for (Buffer& b : *out) ctx_.mem->destroy(b);
    out->clear();
    throw;
  }
}

// FISH_VK_BENCH_FILL_KV: positions [pos0, pos0 + n) of sequence seq zeroed.
void Span::fill_kv(int seq, int pos0, int n) {
  const DeviceFns& f = ctx_.dev->fns();
  const uint64_t pp = uint64_t(shape_.n_head_kv) * shape_.head_dim * 2;  // bytes per position
  const uint64_t base = uint64_t(seq) * seq_stride_;
  VkCommandBuffer cmd = one_time_commands();
  for (const Layer& L : layers_) {
    f.vkCmdFillBuffer(cmd, L.kv.buffer, base + uint64_t(pos0) * pp, uint64_t(n) * pp, 0);
    f.vkCmdFillBuffer(cmd, L.kv.buffer, base + uint64_t(capacity_ + pos0) * pp, uint64_t(n) * pp, 0);
  }
  check(f.vkEndCommandBuffer(cmd), "vkEndCommandBuffer");
  submit_wait(*ctx_.dev, cmd, fence_, false);
}

void Span::truncate(int seq, int n) {
  check_seq(seq, "span_kv_truncate");
  int& len = kv_len_[size_t(seq)];
  if (n < 0 || n > len)
    throw Failure(FailKind::Range, "span_kv_truncate: " + std::to_string(n) + " is outside 0.." + std::to_string(len) +
                                       (shape_.n_seq > 1 ? " (sequence " + std::to_string(seq) + ")" : ""));
  len = n;
}

void Span::copy(int src, int dst, int p0, int p1) {
  check_seq(src, "span_kv_copy source");
  check_seq(dst, "span_kv_copy destination");
  if (p0 < 0 || p0 > p1)
    throw Failure(FailKind::InvalidArgument, "span_kv_copy: positions [" + std::to_string(p0) + ", " +
                                                 std::to_string(p1) + ") are not a range");
  const int src_len = kv_len_[size_t(src)], dst_len = kv_len_[size_t(dst)];
  if (p1 > src_len)
    throw Failure(FailKind::Range, "span_kv_copy: sequence " + std::to_string(src) + " holds " + std::to_string(src_len) +
                                       " positions, fewer than " + std::to_string(p1));
  if (p0 > dst_len)
    throw Failure(FailKind::Range, "span_kv_copy: copying from position " + std::to_string(p0) +
                                       " would leave a gap after the " + std::to_string(dst_len) + " positions of sequence " +
                                       std::to_string(dst));
  if (src == dst) return;
  if (p1 > p0) {
    const DeviceFns& f = ctx_.dev->fns();
    const uint64_t pp = uint64_t(shape_.n_head_kv) * shape_.head_dim * 2;  // bytes per position
    const uint64_t s0 = uint64_t(src) * seq_stride_, d0 = uint64_t(dst) * seq_stride_, v = uint64_t(capacity_) * pp;
    const uint64_t from = uint64_t(p0) * pp, bytes = uint64_t(p1 - p0) * pp;
    const VkBufferCopy regions[2] = {{s0 + from, d0 + from, bytes}, {s0 + v + from, d0 + v + from, bytes}};
    VkCommandBuffer cmd = one_time_commands();
    kv_writes_before_copy(f, cmd);
    for (const Layer& L : layers_) f.vkCmdCopyBuffer(cmd, L.kv.buffer, L.kv.buffer, 2, regions);
    check(f.vkEndCommandBuffer(cmd), "vkEndCommandBuffer");
    submit_wait(*ctx_.dev, cmd, fence_, false);
  }
  kv_len_[size_t(dst)] = p1;
}

void Span::reserve(int n) {
  if (n < 0) throw Failure(FailKind::InvalidArgument, "span_kv_reserve: negative size");
  if (n <= capacity_) return;
  check_kv_size(n, "span_kv_reserve");
  std::vector<Buffer> kv;
  allocate_kv(n, &kv);  // throws OutOfMemory with nothing allocated
  Buffer rope;
  const DeviceFns& f = ctx_.dev->fns();
  const uint64_t stride = seq_stride(shape_, n);
  try {
    rope = ctx_.mem->create(span_buffers::rope_bytes(shape_, n), MemKind::Device, span_buffers::kStorageIn,
                            "span RoPE table");
    const std::vector<float> table = rope_table(shape_, n);
    write_buffer(rope, 0, table.data(), std::min<uint64_t>(table.size() * 4, rope.size));
    // Each sequence's K and V prefixes (positions < its length) into the new buffers.
    const uint64_t pp = uint64_t(shape_.n_head_kv) * shape_.head_dim * 2;  // bytes per position
    std::vector<VkBufferCopy> regions;
    for (int q = 0; q < shape_.n_seq; ++q) {
      const uint64_t len = uint64_t(kv_len_[size_t(q)]) * pp, from = uint64_t(q) * seq_stride_, to = uint64_t(q) * stride;
      if (len == 0) continue;
      regions.push_back({from, to, len});
      regions.push_back({from + uint64_t(capacity_) * pp, to + uint64_t(n) * pp, len});
    }
    if (!regions.empty()) {
      VkCommandBuffer cmd = one_time_commands();
      kv_writes_before_copy(f, cmd);
      for (size_t l = 0; l < layers_.size(); ++l)
        f.vkCmdCopyBuffer(cmd, layers_[l].kv.buffer, kv[l].buffer, uint32_t(regions.size()), regions.data());
      check(f.vkEndCommandBuffer(cmd), "vkEndCommandBuffer");
      submit_wait(*ctx_.dev, cmd, fence_, false);
    }
  } catch (...) {
    for (Buffer& b : kv) ctx_.mem->destroy(b);
    ctx_.mem->destroy(rope);
    throw;
  }
  for (size_t l = 0; l < layers_.size(); ++l) {
    ctx_.mem->destroy(layers_[l].kv);
    layers_[l].kv = kv[l];
  }
  ctx_.mem->destroy(rope_);
  rope_ = rope;
  capacity_ = n;
  seq_stride_ = stride;
  write_aux_sets();
  invalidate_recordings();  // the recorded sets were rewritten
  if (ctx_.log) ctx_.log(3, "span KV grown: " + describe());
}

}  // namespace fish::vk
