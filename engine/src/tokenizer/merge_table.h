// MergeTable: (left symbol, right symbol) -> (rank, merged symbol) for byte-level
// BPE, as an open-addressing hash table (linear probing, power-of-two capacity,
// load <= 1/2). The merge loop looks a pair up for every candidate, so this is
// the tokenizer's hottest lookup; a flat table avoids the node chasing of
// std::unordered_map.
#pragma once
#include <cstdint>
#include <vector>

namespace fish {

class MergeTable {
 public:
  struct Merge {
    int32_t rank = -1;    // -1: empty slot
    int32_t result = -1;
  };

  void reserve(size_t n) {
    size_t cap = 16;
    while (cap < n * 2) cap <<= 1;
    keys_.assign(cap, 0);
    vals_.assign(cap, Merge{});
    mask_ = cap - 1;
    size_ = 0;
  }

  // Inserts unless the pair is present (a repeated pair keeps its first rank).
  void insert(int32_t left, int32_t right, Merge m) {
    if ((size_ + 1) * 2 > keys_.size()) grow();
    const uint64_t k = key(left, right);
    for (size_t i = slot(k);; i = (i + 1) & mask_) {
      if (vals_[i].rank < 0) {
        keys_[i] = k;
        vals_[i] = m;
        ++size_;
        return;
      }
      if (keys_[i] == k) return;
    }
  }

  const Merge* find(int32_t left, int32_t right) const {
    if (keys_.empty()) return nullptr;
    const uint64_t k = key(left, right);
    for (size_t i = slot(k);; i = (i + 1) & mask_) {
      if (vals_[i].rank < 0) return nullptr;
      if (keys_[i] == k) return &vals_[i];
    }
  }

  size_t size() const { return size_; }

 private:
  static uint64_t key(int32_t a, int32_t b) { return (uint64_t(uint32_t(a)) << 32) | uint32_t(b); }
  size_t slot(uint64_t k) const { return size_t((k * 0x9E3779B97F4A7C15ull) >> 32) & mask_; }
  void grow() {
    std::vector<uint64_t> keys;
    std::vector<Merge> vals;
    keys.swap(keys_);
    vals.swap(vals_);
    reserve(keys.empty() ? 8 : keys.size());
    for (size_t i = 0; i < keys.size(); ++i)
      if (vals[i].rank >= 0) insert(int32_t(keys[i] >> 32), int32_t(uint32_t(keys[i])), vals[i]);
  }

  std::vector<uint64_t> keys_;
  std::vector<Merge> vals_;
  size_t mask_ = 0, size_ = 0;
};

}  // namespace fish
