// Span: the paged KV cache (see span.h): the pool and its limits, each
// sequence's pages and length, truncate, copy between sequences (shared
// pages), copy on write, growth of the pool and of the capacity.
//
// Layout of a layer's pool of P pages: K [P·kKvPage][n_head_kv][head_dim]
// then V, f16; page p holds pool rows p·kKvPage .. (p+1)·kKvPage - 1.
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

uint64_t row_bytes(const SpanIn& in) { return uint64_t(in.n_head_kv) * uint64_t(in.head_dim) * 2; }  // one position, K or V

}  // namespace

uint64_t Span::pool_bytes(const SpanIn& in, uint64_t pages) { return 2 * pages * kKvPage * row_bytes(in); }

uint64_t Span::v_offset() const { return pool_bytes(shape_, pool_pages_) / 2; }

void Span::check_seq(int seq, const char* what) const {
  if (seq < 0 || seq >= shape_.n_seq)
    throw Failure(FailKind::InvalidArgument, std::string(what) + ": sequence " + std::to_string(seq) + " of " +
                                                 std::to_string(shape_.n_seq) + " (ids 0.." +
                                                 std::to_string(shape_.n_seq - 1) + ")");
}

void Span::check_pool(uint64_t pages, const char* what) const {
  const uint64_t bytes = pool_bytes(shape_, pages);
  const std::string n = std::to_string(pages * kKvPage) + " KV positions";
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

void Span::allocate_kv(uint32_t pages, std::vector<Buffer>* out) const {
  const uint64_t bytes = pool_bytes(shape_, pages);
  const std::string held = std::to_string(pages) + " pages of " + std::to_string(kKvPage) + " positions";
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

Buffer Span::allocate_page_tables(int capacity) const {
  return ctx_.mem->create(span_buffers::page_table_bytes(shape_, capacity), MemKind::Device, span_buffers::kPageTableUsage,
                          "span KV page tables");
}

uint32_t Span::take_page() {
  const uint32_t p = free_pages_.back();
  free_pages_.pop_back();
  page_refs_[p] = 1;
  return p;
}

void Span::drop_pages(int seq, uint32_t keep) {
  std::vector<uint32_t>& t = pages_[size_t(seq)];
  while (t.size() > keep) {
    const uint32_t p = t.back();
    t.pop_back();
    if (--page_refs_[p] == 0) free_pages_.push_back(p);
  }
}

void Span::grow_pool(uint32_t need_free) {
  if (free_pages_.size() >= need_free) return;
  // Never more than every sequence at full capacity; at least half again (fewer regrowths).
  const uint64_t most = uint64_t(shape_.n_seq) * pages_for(capacity_);
  const uint64_t least = uint64_t(pool_pages_) + need_free - free_pages_.size();
  uint64_t want = std::max<uint64_t>(least, std::min<uint64_t>(most, uint64_t(pool_pages_) + pool_pages_ / 2));
  std::vector<Buffer> kv;
  try {
    check_pool(want, "KV pool");
    allocate_kv(uint32_t(want), &kv);
  } catch (const Failure&) {
    if (want == least) throw;
    want = least;  // the larger pool did not fit: exactly enough
    check_pool(want, "KV pool");
    allocate_kv(uint32_t(want), &kv);
  }
  // K rows keep their offsets; V moves to the new pool's V half.
  const DeviceFns& f = ctx_.dev->fns();
  const uint64_t half_old = v_offset(), half_new = pool_bytes(shape_, want) / 2;
  try {
    sync_pages();  // pending copies land in the old pool first
    if (half_old > 0) {
      const VkBufferCopy regions[2] = {{0, 0, half_old}, {half_old, half_new, half_old}};
      VkCommandBuffer cmd = one_time_commands();
      kv_writes_before_copy(f, cmd);
      for (size_t l = 0; l < layers_.size(); ++l) f.vkCmdCopyBuffer(cmd, layers_[l].kv.buffer, kv[l].buffer, 2, regions);
      check(f.vkEndCommandBuffer(cmd), "vkEndCommandBuffer");
      submit_wait(*ctx_.dev, cmd, fence_, false);
    }
  } catch (...) {
    for (Buffer& b : kv) ctx_.mem->destroy(b);
    throw;
  }
  for (size_t l = 0; l < layers_.size(); ++l) {
    ctx_.mem->destroy(layers_[l].kv);
    layers_[l].kv = kv[l];
  }
  for (uint32_t p = uint32_t(want); p-- > pool_pages_;) free_pages_.push_back(p);  // the lowest on top
  page_refs_.resize(size_t(want), 0);
  pool_pages_ = uint32_t(want);
  write_aux_sets();
  invalidate_recordings();  // the push constants hold the pool's size
  if (ctx_.log) ctx_.log(3, "span KV pool grown: " + describe());
}

void Span::own_pages(const std::vector<std::array<int, 3>>& ranges) {
  // How many pages the ranges take (missing or shared), then the pool, then the tables.
  uint32_t need = 0;
  for (const auto& [q, p0, p1] : ranges) {
    const std::vector<uint32_t>& t = pages_[size_t(q)];
    for (uint32_t i = uint32_t(p0 / kKvPage); i <= uint32_t(p1 / kKvPage); ++i)
      need += i >= t.size() || page_refs_[t[i]] > 1 ? 1 : 0;
  }
  if (need == 0) return;
  grow_pool(need);  // throws with nothing changed
  for (const auto& [q, p0, p1] : ranges) {
    std::vector<uint32_t>& t = pages_[size_t(q)];
    for (uint32_t i = uint32_t(p0 / kKvPage); i <= uint32_t(p1 / kKvPage); ++i) {
      if (i >= t.size()) {
        t.push_back(take_page());
      } else if (page_refs_[t[i]] > 1) {
        const uint32_t mine = take_page();
        page_copies_.emplace_back(t[i], mine);
        --page_refs_[t[i]];
        t[i] = mine;
      } else {
        continue;
      }
      pt_dirty_[size_t(q)] = 1;
    }
  }
}

void Span::sync_pages() {
  const bool tables = std::any_of(pt_dirty_.begin(), pt_dirty_.end(), [](uint8_t d) { return d != 0; });
  if (page_copies_.empty() && !tables) return;
  const DeviceFns& f = ctx_.dev->fns();
  VkCommandBuffer cmd = one_time_commands();
  kv_writes_before_copy(f, cmd);
  if (!page_copies_.empty()) {
    const uint64_t page = kKvPage * row_bytes(shape_), v = v_offset();
    std::vector<VkBufferCopy> regions;
    for (const auto& [from, to] : page_copies_) {
      regions.push_back({from * page, to * page, page});
      regions.push_back({v + from * page, v + to * page, page});
    }
    for (const Layer& L : layers_) f.vkCmdCopyBuffer(cmd, L.kv.buffer, L.kv.buffer, uint32_t(regions.size()), regions.data());
  }
  for (size_t q = 0; q < pt_dirty_.size(); ++q) {
    const std::vector<uint32_t>& t = pages_[q];
    const size_t n = std::min<size_t>(t.size(), pt_stride_);
    // vkCmdUpdateBuffer takes at most 65536 bytes per call.
    for (size_t at = 0; pt_dirty_[q] && at < n; at += 16384)
      f.vkCmdUpdateBuffer(cmd, pt_.buffer, (q * pt_stride_ + at) * 4, std::min<size_t>(16384, n - at) * 4, t.data() + at);
  }
  check(f.vkEndCommandBuffer(cmd), "vkEndCommandBuffer");
  submit_wait(*ctx_.dev, cmd, fence_, false);
  page_copies_.clear();
  std::fill(pt_dirty_.begin(), pt_dirty_.end(), uint8_t(0));
}

// FISH_VK_BENCH_FILL_KV: positions [pos0, pos0 + n) of sequence seq zeroed
// (their pages owned and on the device: forward's own_pages + sync_pages).
void Span::fill_kv(int seq, int pos0, int n) {
  const DeviceFns& f = ctx_.dev->fns();
  const uint64_t rb = row_bytes(shape_), v = v_offset();
  VkCommandBuffer cmd = one_time_commands();
  for (int j = pos0; j < pos0 + n;) {
    const int in_page = std::min(pos0 + n, (j / kKvPage + 1) * kKvPage) - j;
    const uint64_t row = uint64_t(pages_[size_t(seq)][size_t(j / kKvPage)]) * kKvPage + uint64_t(j % kKvPage);
    for (const Layer& L : layers_) {
      f.vkCmdFillBuffer(cmd, L.kv.buffer, row * rb, uint64_t(in_page) * rb, 0);
      f.vkCmdFillBuffer(cmd, L.kv.buffer, v + row * rb, uint64_t(in_page) * rb, 0);
    }
    j += in_page;
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
  drop_pages(seq, pages_for(n));
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
  // A page where dst keeps positions before p0 takes src's rows [p0, page end) by a copy (it is made dst's own
  // first); every later page of [p0, p1) is src's page, shared.
  const uint32_t first_shared = pages_for(p0);
  if (p0 % kKvPage != 0 && p1 > p0) {
    own_pages({{dst, p0, p0}});  // throws OutOfMemory with nothing changed
    const uint32_t i = uint32_t(p0 / kKvPage);
    const int end = std::min(p1, int(i + 1) * kKvPage);
    const uint64_t rb = row_bytes(shape_), v = v_offset();
    const uint64_t from = (uint64_t(pages_[size_t(src)][i]) * kKvPage + uint64_t(p0 % kKvPage)) * rb;
    const uint64_t to = (uint64_t(pages_[size_t(dst)][i]) * kKvPage + uint64_t(p0 % kKvPage)) * rb;
    const uint64_t bytes = uint64_t(end - p0) * rb;
    sync_pages();  // the copy on write of dst's page before the rows go in
    const DeviceFns& f = ctx_.dev->fns();
    const VkBufferCopy regions[2] = {{from, to, bytes}, {v + from, v + to, bytes}};
    VkCommandBuffer cmd = one_time_commands();
    kv_writes_before_copy(f, cmd);
    for (const Layer& L : layers_) f.vkCmdCopyBuffer(cmd, L.kv.buffer, L.kv.buffer, 2, regions);
    check(f.vkEndCommandBuffer(cmd), "vkEndCommandBuffer");
    submit_wait(*ctx_.dev, cmd, fence_, false);
  }
  std::vector<uint32_t>& t = pages_[size_t(dst)];
  const std::vector<uint32_t>& s = pages_[size_t(src)];
  drop_pages(dst, std::min<uint32_t>(first_shared, pages_for(p1)));
  for (uint32_t i = uint32_t(t.size()); i < pages_for(p1); ++i) {
    ++page_refs_[s[i]];
    t.push_back(s[i]);
  }
  pt_dirty_[size_t(dst)] = 1;
  kv_len_[size_t(dst)] = p1;
}

void Span::reserve(int n) {
  if (n < 0) throw Failure(FailKind::InvalidArgument, "span_kv_reserve: negative size");
  if (n <= capacity_) return;
  check_pool(uint64_t(pages_for(n)), "span_kv_reserve");  // one sequence alone must fit
  Buffer rope, pt;
  try {
    rope = ctx_.mem->create(span_buffers::rope_bytes(shape_, n), MemKind::Device, span_buffers::kStorageIn,
                            "span RoPE table");
    const std::vector<float> table = rope_table(shape_, n);
    write_buffer(rope, 0, table.data(), std::min<uint64_t>(table.size() * 4, rope.size));
    pt = allocate_page_tables(n);
  } catch (...) {
    ctx_.mem->destroy(rope);
    ctx_.mem->destroy(pt);
    throw;
  }
  ctx_.mem->destroy(rope_);
  ctx_.mem->destroy(pt_);
  rope_ = rope;
  pt_ = pt;
  capacity_ = n;
  pt_stride_ = pages_for(n);
  std::fill(pt_dirty_.begin(), pt_dirty_.end(), uint8_t(1));  // the tables move to the new stride
  write_aux_sets();
  invalidate_recordings();  // the recorded sets were rewritten
  if (ctx_.log) ctx_.log(3, "span KV capacity raised: " + describe());
}

}  // namespace fish::vk
