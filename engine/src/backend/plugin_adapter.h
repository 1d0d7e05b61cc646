// PluginBackend: the ComputeBackend adapter over a loaded plugin's C table.
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
  // the n-th call (1-based, counted from now) of that method and every later
  // one fail with FISH_E_DEVICE. Unknown call names are an error (false).
  bool set_fail_spec(const std::string& spec, std::string* err);

  std::string name() const override { return name_; }
  std::string describe() override;
  std::string last_error() const override;
  std::string status() override;
  std::string profile() override;
  int last_status() const override;
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
  bool span_forward(BackendSpan* s, float* x, int n_tok, int pos0) override;
  bool span_set_head(BackendSpan* s, BackendWeight* head, const float* norm) override;
  bool span_forward_logits(BackendSpan* s, float* x, int n_tok, int pos0, float* logits) override;
  bool has_span_logits_view() const override;
  bool span_forward_logits_view(BackendSpan* s, float* x, int n_tok, int pos0, const float** logits) override;
  bool span_kv_truncate(BackendSpan* s, int n) override;
  bool span_kv_reserve(BackendSpan* s, int n) override;
  int span_kv_len(BackendSpan* s) override;
  void span_destroy(BackendSpan* s) override;

  const fish_plugin_api& api() const { return lib_->api; }
  fish_backend* handle() const { return b_; }
  // The plugin fills the ABI 1.1 head slots: a negotiated minor >= 1 and a table that holds both.
  bool has_span_head() const;

 private:
  // Runs one table call: injection, exception fence, status -> last error.
  template <class F>
  bool call(const char* what, F&& f);
  // has, else an UNSUPPORTED last error naming the missing feature; caller holds mu_.
  bool require(bool has, const char* what, const char* feature);
  std::string describe_what(uint32_t what);

  const PluginLibrary* lib_;
  fish_backend* b_;
  std::string name_;
  mutable std::mutex mu_;
  std::string last_error_;
  int last_status_ = FISH_OK;
  std::map<std::string, long> fail_at_;  // call name -> calls left before failing (1 = next)
};

// The engine's span description in the ABI's form; the holder keeps the arrays
// desc points into (so it is neither copied nor moved).
struct AbiSpanDesc {
  explicit AbiSpanDesc(const SpanDesc& d);
  AbiSpanDesc(const AbiSpanDesc&) = delete;
  AbiSpanDesc& operator=(const AbiSpanDesc&) = delete;
  fish_span_desc desc{};
  std::vector<fish_span_layer> layers;
  std::vector<const fish_span_layer*> layer_ptrs;
};

}  // namespace fish::backend
