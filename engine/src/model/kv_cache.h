// KvCache: the CPU key/value cache, f16 (as llama.cpp's default), one pair of
// [positions, kv_dim] arrays per layer that runs on the CPU. It grows on demand
// (capacity doubles up to n_ctx) so a 128K-context model does not reserve
// gigabytes up front; layers that run in a device span get no CPU cache at all.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

namespace fish {

class KvCache {
 public:
  KvCache() = default;
  // layer_on_cpu[l]: whether layer l needs a CPU cache.
  void init(int32_t n_layer, int32_t kv_dim, int32_t n_ctx, const std::vector<bool>& layer_on_cpu);
  // Makes room for positions < n (n <= n_ctx); pointers from k()/v() change.
  void reserve(int32_t n);
  void set_layer_on_cpu(int32_t layer, bool on);

  uint16_t* k(int32_t layer) { return k_[size_t(layer)].data(); }
  uint16_t* v(int32_t layer) { return v_[size_t(layer)].data(); }
  bool has_layer(int32_t layer) const { return on_cpu_[size_t(layer)]; }

  int32_t len() const { return len_; }      // positions 0..len-1 are valid
  void set_len(int32_t n) { len_ = n; }
  int32_t n_ctx() const { return n_ctx_; }
  int32_t kv_dim() const { return kv_dim_; }
  uint64_t bytes() const;

 private:
  int32_t kv_dim_ = 0, n_ctx_ = 0, len_ = 0, capacity_ = 0;
  std::vector<bool> on_cpu_;
  std::vector<std::vector<uint16_t>> k_, v_;
};

}  // namespace fish
