// The reference backend: "device memory" is host memory, weights are kept as
// the raw GGUF bytes (copied at upload, as a real device would), and a product
// dequantises each weight row through the host's dequant_row and accumulates
// in double. Simple on purpose: correctness over speed.
#pragma once
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "fish/plugin_abi.h"

namespace fish::reference {

class Span;

// A resident weight: n_mat matrices (MoE experts; usually 1) of n_out rows of
// row_bytes bytes each, in GGUF layout.
struct Weight {
  std::string name;
  uint32_t type = 0;
  int64_t n_in = 0, n_out = 0, n_mat = 1;
  uint64_t row_bytes = 0;
  std::vector<uint8_t> data;  // n_mat * n_out * row_bytes
};

class Backend {
 public:
  explicit Backend(const fish_backend_config* cfg);
  ~Backend();

  void open();
  std::string describe(uint32_t what);
  uint64_t memory_free() const;
  uint64_t bytes_resident() const { return resident_; }
  bool supports(uint32_t type) const;

  Weight* upload(const fish_weight_desc* d);
  void release(Weight* w);
  // y = x · Wᵀ; x: [n_tok, n_in], y: [n_tok, n_out]. mat: which matrix of a
  // stack (MoE experts, n_mat > 1): the ABI's matmul() takes single matrices
  // (allow_stack false), a span's expert products pick one (allow_stack true).
  void matmul(const Weight& w, const float* x, int n_tok, float* y, int64_t mat = 0, bool allow_stack = false) const;

  // Handle checks: a handle this backend did not hand out is an error, not a crash.
  Weight* weight(fish_weight* h) const;
  Span* span(fish_span* h) const;
  void add_span(Span* s) { spans_.insert(s); }
  void remove_span(Span* s) { spans_.erase(s); }

  // Budget accounting for everything the backend allocates (weights, spans).
  void charge(uint64_t bytes, const std::string& what);
  void uncharge(uint64_t bytes) { resident_ -= bytes; }

  std::string last_error = "no error";
  std::string out_string;  // storage for describe()

 private:
  uint64_t budget_ = 0;  // 0: no ceiling of our own (host memory is the limit)
  uint64_t resident_ = 0;
  bool opened_ = false;
  std::set<Weight*> weights_;
  std::set<Span*> spans_;
};

// Physical memory the OS reports as available now (0: unknown).
uint64_t host_memory_available();
uint64_t host_memory_total();

}  // namespace fish::reference
