// VulkanBackend: fish_vulkan's plain C++ API (entry.cpp maps the plugin ABI
// onto it; tests/vulkan call it directly).
//
// Creating one does nothing: the device is opened on the first call that needs
// it (or open()). Any failure to open is sticky and reported with its reason;
// a device error or a lost device later is sticky too (every call then fails,
// the engine runs on the CPU). Other failures (budget, bad arguments,
// unsupported type) fail that call only. Nothing throws out of these methods.
//
// Calls on one backend come from one thread at a time (plugin ABI rule).
#pragma once
#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "commands.h"
#include "device.h"
#include "kernels.h"
#include "memory.h"
#include "pipelines.h"
#include "span.h"
#include "span_kernels.h"
#include "weight.h"

namespace fish::vk {

// Outcome of device discovery, for probe()/device_info()/`fish devices`.
struct ProbeReport {
  bool ok = false;             // the loader and an instance worked
  std::string error;           // why not (when !ok), or why nothing is usable
  std::vector<DeviceCandidate> devices;
  int chosen = -1;             // index into devices, -1 when none qualifies
};

// Enumerates devices with a short-lived instance (destroyed before returning).
ProbeReport probe_devices(const VkConfig& cfg, const LogFn& log);

class VulkanBackend {
 public:
  struct Options {
    VkConfig config;           // the plugin's variables (entry.cpp: parsed from the environment)
    int device_index = -1;     // >= 0 forces a device (else config.device_index, else the best)
    uint64_t memory_budget = 0;// > 0: the host's ceiling in bytes
    LogFn log;                 // null: stderr when config.verbose is set
  };

  explicit VulkanBackend(Options opt);
  ~VulkanBackend();  // releases everything (weights, scratch, pipelines, device, instance)
  VulkanBackend(const VulkanBackend&) = delete;
  VulkanBackend& operator=(const VulkanBackend&) = delete;

  bool open();
  const std::string& error() const { return error_; }
  FailKind error_kind() const { return error_kind_; }

  std::string status() const;    // "not opened" / "open: <device>: <detail>" / "failed: <why>"
  std::string describe();        // "vulkan NVIDIA H200: 812 MB weights, 113 x Q4_K, 17 x Q6_K"
  std::string profile();         // counters since the last call ("" when nothing ran)

  bool memory_free(uint64_t* out);
  bool bytes_resident(uint64_t* out);
  bool supports(uint32_t ggml_type, bool* out);

  Weight* upload(const WeightUpload& w);   // nullptr on failure
  bool release(Weight* w);
  // x: [n_tok, n_in] f32, y: [n_tok, n_out] f32.
  bool matmul(Weight* w, const float* x, int n_tok, float* y);
  bool matmul_group(Weight* const* ws, int n_w, const float* x, int n_tok, float* const* ys);

  // Spans (stage 2, span.h). A weight a span uses cannot be released before
  // the span is destroyed.
  bool span_bytes(const SpanIn& in, uint64_t* out);
  Span* span_create(const SpanIn& in);  // nullptr on failure
  // *logits: the head's logits ([s->logits_count()][n_vocab]) when rows
  // were asked for (Span::forward), else nullptr.
  bool span_forward(Span* s, const Span::Forward& f, const float** logits);
  // The output head in the span's submission (Span::set_head).
  bool span_set_head(Span* s, Weight* head, const float* norm);
  // Per sequence (0 .. n_seq - 1; Span::truncate / copy / kv_len).
  bool span_kv_truncate(Span* s, int seq, int n);
  bool span_kv_copy(Span* s, int src, int dst, int p0, int p1);
  bool span_kv_reserve(Span* s, int n);
  bool span_kv_len(Span* s, int seq, int* out);
  bool span_destroy(Span* s);

  // ---- for tests and benchmarks -------------------------------------------------
  const Device* device() const { return device_.get(); }
  Memory* memory() { return memory_.get(); }
  MatmulKernels* kernels() { return kernels_.get(); }
  SpanKernels* span_kernels() { return span_kernels_.get(); }
  const VkConfig& config() const { return cfg_; }
  Submitter* submitter() { return submitter_.get(); }
  Pipelines* pipelines() { return pipelines_.get(); }
  void set_profiling(bool on);       // stage-1 submissions' device time (last_gpu_seconds)
  double last_gpu_seconds() const;  // device time of the last submission's kernels (profiling on)
  // Smaller limits than the device's, to exercise weight chunking and token batching.
  void set_test_limits(uint64_t max_chunk_bytes, uint64_t max_scratch_bytes);

 private:
  bool fail(const Failure& f);
  bool fail(FailKind k, const std::string& msg);
  bool ensure_open();
  void teardown();
  bool live(const Weight* w) const { return weights_.count(const_cast<Weight*>(w)) != 0; }
  bool live(const Span* s) const { return spans_.count(const_cast<Span*>(s)) != 0; }
  // A call on span s: the device open, s a live span of this backend, then f()
  // with a Failure or any other exception turned into last_error (named `what`).
  template <class F>
  bool span_call(Span* s, const char* what, F&& f);
  SpanContext span_context();
  bool check_span_in(const SpanIn& in, const char* what);
  void ensure_scratch(uint64_t x_bytes, uint64_t y_bytes);
  void bind_chunk(WeightChunk& c);
  void free_weight(Weight* w);
  uint64_t binding_limit() const;
  bool run_group(Weight* const* ws, int n_w, const float* x, int n_tok, float* const* ys);

  Options opt_;
  VkConfig cfg_;
  enum class State { Closed, Open, Failed } state_ = State::Closed;
  std::string error_;
  FailKind error_kind_ = FailKind::Internal;

  const Instance* instance_ = nullptr;  // shared_instance(): the process's
  std::unique_ptr<Device> device_;
  std::unique_ptr<Memory> memory_;
  std::unique_ptr<Pipelines> pipelines_;
  std::unique_ptr<Submitter> submitter_;
  std::unique_ptr<MatmulKernels> kernels_;
  std::unique_ptr<SpanKernels> span_kernels_;

  std::set<Weight*> weights_;
  std::set<Span*> spans_;
  Buffer x_dev_, y_dev_, x_up_, y_down_;  // matmul scratch: device x/y and their staging
  uint64_t scratch_generation_ = 1;
  VkDescriptorSet q_set_ = VK_NULL_HANDLE;  // quantize_x over x_dev_ (int8 decode)
  uint64_t q_set_generation_ = 0;

  uint64_t test_chunk_limit_ = 0, test_scratch_limit_ = 0;

  // Profile counters since the last profile() call.
  uint64_t prof_submits_ = 0, prof_matvec_ = 0, prof_tiled_ = 0, prof_weight_bytes_ = 0;
  double prof_gpu_s_ = 0, prof_wall_s_ = 0;
};

}  // namespace fish::vk
