// The engine's configuration: every FISH_* variable libfish reads, parsed
// strictly in one place (engine_config.cpp, one table: name, accepted values,
// default, setter). Plugins parse their own variables (fish_vulkan:
// plugins/vulkan/vk_config.h); the engine passes the environment on untouched.
//
//   FISH_GPU=0|off|false|no      load no plugin (CPU only); 1|on|true|yes (default) or cpu
//                                let plugins run (cpu: a plugin's CPU devices too, e.g. lavapipe)
//   FISH_BACKEND=<name>          use the plugin file fish_<name> and no other
//   FISH_GPU_LAYERS=<n>          layers on the backend (default: as many as fit)
//   FISH_GPU_DEVICE=<i>[,<j>...] the devices to use, as `fish devices` numbers them; several:
//                                the layers split across them (the same index twice: two
//                                logical devices on one GPU); default: the plugin's best
//   FISH_TENSOR_SPLIT=<a>,<b>... the layers' proportions per device (default: their free memory)
//   FISH_VRAM_BUDGET_MB=<n>[,<m>...]   each device's budget (one value: every device's); also
//                                read by the plugins themselves
//   FISH_GPU_SPAN=0|1            0: the GPU layers per matmul instead of as one span
//   FISH_GPU_SPAN_HEAD=0|1       0: the output projection as its own submission
//   FISH_GPU_LOGITS_VIEW=0|1     0: copy the span's logits instead of reading them in place
//   FISH_GPU_VERBOSE=0|1|2       placement and loader decisions on stderr (2: everything)
//   FISH_GPU_REQUANT=0|1|2|3|auto   smaller re-quantised device copies (common/requant_mode.h)
//   FISH_GPU_REQUANT_CACHE=0|1   0: re-quantise at every load instead of keeping the bytes on disk
//   FISH_CPU_REPACK=0|1          0: the CPU multiplies the GGUF rows as they are
//   FISH_CPU_KERNELS=scalar|avx2|avxvnni|avx512 force a CPU kernel family (tests, comparisons)
//   FISH_PLUGIN_DENY=a,b         plugin files fish_a, fish_b are not loaded
//   FISH_PLUGIN_ISOLATE=0|1      0: probe plugins in this process (debugging), not in a child
//   FISH_PLUGIN_TIMEOUT=<s>      seconds a plugin's probe in the child may take (default 10)
//   FISH_BACKEND_FAIL=<call>[:<n>],...   tests: the n-th call of that backend method fails
//   FISH_TEST_SPAN_FAIL_AT=<pos>[@<k>]  tests: the span (of the k-th device used) fails at that position
//   FISH_TEST_REQUANT_HOST_EXPERTS=0|1  tests: the experts the CPU multiplies for a GPU layer are F32
//                                copies of the values FISH_GPU_REQUANT gives the span's (test-gpu's
//                                per-matmul run then holds the span's weights)
// (the 0|1 variables also take off|on, false|true, no|yes). A value the table
// does not accept is a warning that names the variable, the value and what is
// accepted, and the default is kept: never a silent default.
//
// The process reads its environment once (EngineConfig::process(), warnings on
// stderr). Every place that uses a value takes it from a config its caller
// hands down (ModelOptions::config, backend::use_backend), defaulting to the
// process's: tests build an EngineConfig (or the C API's "NAME=VALUE" text)
// instead of changing the environment.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "common/requant_mode.h"

namespace fish {

// FISH_CPU_KERNELS. Auto: the widest family this CPU runs.
enum class CpuKernels { Auto, Scalar, Avx2, AvxVnni, Avx512 };

struct EngineConfig {
  // Backend selection (read when the process's backend is chosen).
  bool gpu_off = false;             // FISH_GPU says off
  std::string gpu;                  // FISH_GPU as given ("" unset), for messages
  std::string backend;              // FISH_BACKEND ("" any)
  std::vector<std::string> plugin_deny;  // FISH_PLUGIN_DENY
  bool plugin_isolate = true;       // FISH_PLUGIN_ISOLATE
  double plugin_timeout_s = 10.0;   // FISH_PLUGIN_TIMEOUT
  std::string backend_fail;         // FISH_BACKEND_FAIL (the adapter checks the call names)
  // Placement (read at each model load).
  int gpu_layers = -1;              // FISH_GPU_LAYERS, -1: as many as fit
  std::vector<int> gpu_devices;     // FISH_GPU_DEVICE (empty: the plugin's default device)
  std::vector<double> tensor_split; // FISH_TENSOR_SPLIT (empty: by free memory)
  std::vector<uint64_t> vram_budget_mb;  // FISH_VRAM_BUDGET_MB (empty: the plugin's own rule)
  bool gpu_span = true;             // FISH_GPU_SPAN
  bool gpu_span_head = true;        // FISH_GPU_SPAN_HEAD
  bool gpu_logits_view = true;      // FISH_GPU_LOGITS_VIEW
  int gpu_verbose = 0;              // FISH_GPU_VERBOSE
  RequantMode gpu_requant = RequantMode::Off;  // FISH_GPU_REQUANT
  bool gpu_requant_cache = true;    // FISH_GPU_REQUANT_CACHE
  int test_span_fail_at = -1;       // FISH_TEST_SPAN_FAIL_AT, -1: never
  int test_span_fail_device = -1;   // ... @k: the span of the k-th device used only (-1: any)
  bool test_requant_host_experts = false;  // FISH_TEST_REQUANT_HOST_EXPERTS
  // CPU.
  bool cpu_repack = true;           // FISH_CPU_REPACK
  CpuKernels cpu_kernels = CpuKernels::Auto;  // FISH_CPU_KERNELS

  // Receives one warning (a whole sentence, no "fish:" prefix, no newline).
  using WarnSink = std::function<void(const std::string& message)>;

  // vars: variables by name (names that are not the engine's are ignored, but
  // an unknown FISH_CPU_* / FISH_PLUGIN_* / FISH_BACKEND_* name is warned of:
  // those prefixes are the engine's). An empty value is as if unset.
  static EngineConfig parse(const std::map<std::string, std::string>& vars, const WarnSink& warn);
  // parse() of this process's FISH_* environment variables.
  static EngineConfig from_env(const WarnSink& warn);
  // The process's configuration: from_env() on first use (thread-safe, once),
  // its warnings on stderr as "fish: warning: ...".
  static const EngineConfig& process();

  // This configuration with "NAME=VALUE" items (separated by spaces, tabs or
  // newlines) applied on top: for callers that pass configuration in (the C
  // API). Strict: a malformed item, a name that is not in the table or a value
  // it refuses is an error (*err says which and what is accepted; the result
  // is then *this unchanged).
  EngineConfig with(const std::string& items, std::string* err) const;

  // Every variable parse() reads, in the table's order (the README lists exactly these).
  static std::vector<std::string> variable_names();
};

}  // namespace fish
