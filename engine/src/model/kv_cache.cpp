#include "model/kv_cache.h"

#include <algorithm>

namespace fish {

void KvCache::init(int32_t n_layer, int32_t kv_dim, int32_t n_ctx, const std::vector<bool>& layer_on_cpu) {
  kv_dim_ = kv_dim;
  n_ctx_ = n_ctx;
  len_ = 0;
  capacity_ = 0;
  on_cpu_ = layer_on_cpu;
  on_cpu_.resize(size_t(n_layer), true);
  k_.assign(size_t(n_layer), {});
  v_.assign(size_t(n_layer), {});
}

void KvCache::reserve(int32_t n) {
  n = std::min(n, n_ctx_);
  if (n <= capacity_) return;
  const int32_t cap = std::min(n_ctx_, std::max(n, std::max(capacity_ * 2, 256)));
  for (size_t l = 0; l < k_.size(); ++l) {
    if (!on_cpu_[l]) continue;
    k_[l].resize(size_t(cap) * size_t(kv_dim_));
    v_[l].resize(size_t(cap) * size_t(kv_dim_));
  }
  capacity_ = cap;
}

void KvCache::set_layer_on_cpu(int32_t layer, bool on) {
  on_cpu_[size_t(layer)] = on;
  if (on) {
    k_[size_t(layer)].assign(size_t(capacity_) * size_t(kv_dim_), 0);
    v_[size_t(layer)].assign(size_t(capacity_) * size_t(kv_dim_), 0);
  } else {
    std::vector<uint16_t>().swap(k_[size_t(layer)]);
    std::vector<uint16_t>().swap(v_[size_t(layer)]);
  }
}

uint64_t KvCache::bytes() const {
  uint64_t b = 0;
  for (size_t l = 0; l < k_.size(); ++l) b += (k_[l].size() + v_[l].size()) * sizeof(uint16_t);
  return b;
}

}  // namespace fish
