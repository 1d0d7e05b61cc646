// PluginBackend: the ComputeBackend adapter over a loaded plugin's C table, and
// the one place that converts the engine's descriptions to the C ABI's.
// Model code sees only ComputeBackend; this class turns its calls into table
// calls, statuses into bool + last_error(), and fences every call so that a
// misbehaving plugin (an exception across the boundary) cannot take the engine
// down. Calls are serialised by a mutex (the ABI promises one thread at a time
// per backend object).
#pragma once
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "backend/compute_backend.h"
#include "backend/plugin_loader.h"
#include "fish/plugin_abi.h"

namespace fish::backend {

class PluginBackend final : public ComputeBackend {
 public:
  // Takes ownership of b (created through lib's table); the destructor calls
  // backend_destroy. The engine's process-wide backend is never destroyed.
  PluginBackend(const PluginLibrary* lib, fish_backend* b, std::string name);
  ~PluginBackend() override;
  PluginBackend(const PluginBackend&) = delete;
  PluginBackend& operator=(const PluginBackend&) = delete;

  // Creates a backend from a loaded plugin; nullptr with *err on failure.
  static std::unique_ptr<PluginBackend> create(const PluginLibrary* lib, const std::string& name,
                                               const fish_backend_config& cfg, std::string* err);

  // Test-only failure injection (FISH_BACKEND_FAIL's syntax: "call:n[,call:n]"):
  // the n-th call (1-based, counted from now) of that table slot and every
  // later one fail with FISH_E_DEVICE. Unknown call names are an error (false).
  bool set_fail_spec(const std::string& spec, std::string* err);

  std::string name() const override { return name_; }
  std::string describe() override;
  std::string last_error() const override;
  int last_status() const override;
  std::string status() override;
  std::string profile() override;
  bool open() override;

  uint64_t memory_free() override;
  uint64_t bytes_resident() override;
  bool supports(GgmlType t) override;

  BackendWeight* upload(const WeightDesc& w) override;
  void release(BackendWeight* w) override;
  bool matmul(BackendWeight* w, const float* x, int n_tok, float* y) override;
  bool matmul_group(BackendWeight* const* ws, int n_w, const float* x, int n_tok, float* const* ys) override;

  bool has_spans() const override;
  uint64_t span_bytes(const SpanDesc& d) override;
  BackendSpan* span_create(const SpanDesc& d) override;
  void span_destroy(BackendSpan* s) override;
  bool span_set_head(BackendSpan* s, BackendWeight* head, const float* norm) override;
  bool span_forward(BackendSpan* s, SpanBatch& b) override;
  int span_kv_len(BackendSpan* s, int32_t seq) override;
  bool span_kv_truncate(BackendSpan* s, int32_t seq, int32_t n) override;
  bool has_span_kv_copy() const override;
  bool span_kv_copy(BackendSpan* s, int32_t src, int32_t dst, int32_t p0, int32_t p1) override;
  bool span_kv_reserve(BackendSpan* s, int32_t n) override;

  // Exactly one span_forward table call, no per-sequence retry: the
  // conformance suite sees the plugin's own answer to a mixed batch.
  bool span_forward_once(BackendSpan* s, SpanBatch& b);

  const fish_plugin_api& api() const { return lib_->api; }
  fish_backend* handle() const { return b_; }

 private:
  // What the adapter keeps of a span to run a refused batch per sequence.
  struct SpanInfo {
    int32_t n_embd = 0;
    int64_t n_vocab = 0;             // rows of the attached head (0: none)
    std::vector<float> split_view;   // logits of a batch run per sequence, when a view was asked for
  };

  // Runs one table call: injection, exception fence, status -> last error. Caller holds mu_.
  template <class F>
  bool call(const char* what, F&& f);
  // has, else an UNSUPPORTED last error naming the missing feature; caller holds mu_.
  bool require(bool has, const char* what, const char* feature);
  std::string describe_what(uint32_t what);
  bool forward_once_locked(BackendSpan* s, SpanBatch& b);
  bool forward_per_sequence(BackendSpan* s, SpanBatch& b, SpanInfo& info);

  const PluginLibrary* lib_;
  fish_backend* b_;
  std::string name_;
  mutable std::mutex mu_;
  std::string last_error_;
  int last_status_ = FISH_OK;
  std::map<std::string, long> fail_at_;      // call name -> calls left before failing (1 = next)
  std::map<BackendWeight*, int64_t> rows_;   // n_out of each uploaded weight (a head's n_vocab)
  std::map<BackendSpan*, SpanInfo> spans_;
};

// The engine's span description in the ABI's form (one conversion per call;
// the holder owns the arrays desc points into, so it is neither copied nor moved).
struct AbiSpanDesc {
  explicit AbiSpanDesc(const SpanDesc& d);
  AbiSpanDesc(const AbiSpanDesc&) = delete;
  AbiSpanDesc& operator=(const AbiSpanDesc&) = delete;
  fish_span_desc desc{};
  fish_arch arch{};
  std::vector<fish_layer_tensor> tensors;  // every layer's, layer after layer
  std::vector<fish_span_layer> layers;     // each points into tensors
};

}  // namespace fish::backend
