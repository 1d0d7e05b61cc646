#include "model/kv_cache.h"

#include <algorithm>
#include <cstring>

#include "common/error.h"

namespace fish {

void KvCache::init(int32_t n_layer, int32_t kv_dim, int32_t n_ctx, int32_t n_seq,
                   const std::vector<bool>& layer_on_cpu) {
  kv_dim_ = kv_dim;
  n_ctx_ = n_ctx;
  on_cpu_ = layer_on_cpu;
  on_cpu_.resize(size_t(n_layer), true);
  k_.clear(), v_.clear();
  k_.resize(size_t(n_layer));
  v_.resize(size_t(n_layer));
  refs_.clear();
  free_.clear();
  retained_.clear();
  seqs_.assign(size_t(std::max(1, n_seq)), Seq{});
}

int32_t KvCache::new_page() {
  int32_t p;
  if (!free_.empty()) {
    p = free_.back();
    free_.pop_back();
  } else {
    p = int32_t(refs_.size());
    refs_.push_back(0);
    const size_t n = size_t(kPage) * size_t(kv_dim_);
    for (size_t l = 0; l < k_.size(); ++l) {
      k_[l].emplace_back(on_cpu_[l] ? new uint16_t[n]() : nullptr);
      v_[l].emplace_back(on_cpu_[l] ? new uint16_t[n]() : nullptr);
    }
  }
  refs_[size_t(p)] = 1;
  return p;
}

void KvCache::release(int32_t page) {
  if (--refs_[size_t(page)] == 0) free_.push_back(page);
}

void KvCache::prepare(int32_t seq, int32_t from, int32_t to) {
  Seq& s = seqs_[size_t(seq)];
  if (from > s.len) throw Error("KV: sequence " + std::to_string(seq) + " written at " + std::to_string(from) +
                                " after " + std::to_string(s.len) + " positions (a gap)");
  if (to > n_ctx_) throw Error("KV: position " + std::to_string(to - 1) + " beyond the context (" +
                               std::to_string(n_ctx_) + ")");
  if (to <= from) return;
  const size_t first = size_t(from >> kPageShift), last = size_t((to - 1) >> kPageShift);
  const size_t n = size_t(kPage) * size_t(kv_dim_);
  for (size_t i = first; i <= last; ++i) {
    if (i >= s.pages.size()) {
      s.pages.push_back(new_page());
      continue;
    }
    const int32_t old = s.pages[i];
    if (refs_[size_t(old)] == 1) continue;
    // Shared with another sequence: this one gets its own copy before writing.
    const int32_t p = new_page();
    for (size_t l = 0; l < k_.size(); ++l) {
      if (!on_cpu_[l]) continue;
      std::memcpy(k_[l][size_t(p)].get(), k_[l][size_t(old)].get(), n * sizeof(uint16_t));
      std::memcpy(v_[l][size_t(p)].get(), v_[l][size_t(old)].get(), n * sizeof(uint16_t));
    }
    release(old);
    s.pages[i] = p;
  }
}

void KvCache::truncate(int32_t seq, int32_t n) {
  Seq& s = seqs_[size_t(seq)];
  n = std::max(0, std::min(n, s.len));
  const size_t keep = size_t((n + kPage - 1) >> kPageShift);
  while (s.pages.size() > keep) {
    release(s.pages.back());
    s.pages.pop_back();
  }
  s.len = n;
}

void KvCache::copy_prefix(int32_t src, int32_t dst, int32_t n) {
  if (src == dst) return truncate(dst, n);
  truncate(dst, 0);
  share_into(seqs_[size_t(src)], dst, n);
}

void KvCache::share_into(const Seq& s, int32_t dst, int32_t n) {
  n = std::max(0, std::min(n, s.len));
  Seq& d = seqs_[size_t(dst)];
  const size_t pages = size_t((n + kPage - 1) >> kPageShift);
  for (size_t i = 0; i < pages; ++i) {
    d.pages.push_back(s.pages[i]);
    ++refs_[size_t(s.pages[i])];
  }
  d.len = n;
}

int32_t KvCache::retain(int32_t seq) {
  const int32_t id = next_retained_++;
  retained_.emplace_back(id, std::move(seqs_[size_t(seq)]));
  seqs_[size_t(seq)] = Seq{};
  return id;
}

void KvCache::copy_retained(int32_t entry, int32_t dst, int32_t n) {
  truncate(dst, 0);
  for (const auto& [id, s] : retained_)
    if (id == entry) return share_into(s, dst, n);
  throw Error("KV: no retained entry " + std::to_string(entry));
}

void KvCache::drop_retained(int32_t entry) {
  for (size_t i = 0; i < retained_.size(); ++i)
    if (retained_[i].first == entry) {
      for (int32_t p : retained_[i].second.pages) release(p);
      retained_.erase(retained_.begin() + std::ptrdiff_t(i));
      return;
    }
}

int32_t KvCache::retained_pages(int32_t entry) const {
  for (const auto& [id, s] : retained_)
    if (id == entry) return int32_t(s.pages.size());
  return 0;
}

uint64_t KvCache::page_bytes() const {
  uint64_t layers = 0;
  for (bool on : on_cpu_) layers += on ? 1 : 0;
  return layers * 2u * uint64_t(kPage) * uint64_t(kv_dim_) * sizeof(uint16_t);
}

void KvCache::set_layer_on_cpu(int32_t layer, bool on) {
  on_cpu_[size_t(layer)] = on;
  const size_t n = size_t(kPage) * size_t(kv_dim_);
  for (auto* b : {&k_[size_t(layer)], &v_[size_t(layer)]})
    for (auto& page : *b) page.reset(on ? new uint16_t[n]() : nullptr);
}

const uint16_t* const* KvCache::tables(Blocks& b, std::vector<std::vector<const uint16_t*>>& t, int32_t layer,
                                       int32_t seq) {
  if (t.size() < seqs_.size()) t.resize(seqs_.size());
  std::vector<const uint16_t*>& tab = t[size_t(seq)];
  const Seq& s = seqs_[size_t(seq)];
  tab.resize(s.pages.size());
  for (size_t i = 0; i < s.pages.size(); ++i) tab[i] = b[size_t(layer)][size_t(s.pages[i])].get();
  return tab.data();
}

const uint16_t* const* KvCache::k_pages(int32_t layer, int32_t seq) { return tables(k_, kt_, layer, seq); }
const uint16_t* const* KvCache::v_pages(int32_t layer, int32_t seq) { return tables(v_, vt_, layer, seq); }

int32_t KvCache::page_refs(int32_t seq, int32_t pos) const {
  const Seq& s = seqs_[size_t(seq)];
  const size_t i = size_t(pos >> kPageShift);
  return i < s.pages.size() ? refs_[size_t(s.pages[i])] : 0;
}

uint64_t KvCache::bytes() const {
  return uint64_t(refs_.size()) * page_bytes();
}

}  // namespace fish
