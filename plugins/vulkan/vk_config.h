// fish_vulkan's configuration: every FISH_* variable the plugin reads, parsed
// strictly in one place. entry.cpp parses the environment once per
// fish_plugin_query (the host queries once per process) and hands the result
// to every backend it creates; tests build a VkConfig themselves.
//
//   FISH_GPU=0|off|false|no        no GPU: the plugin reports no device
//   FISH_GPU=cpu                   CPU Vulkan implementations (lavapipe) only
//   FISH_GPU=1|on|true|yes         (or unset) GPUs only, the best one
//   FISH_GPU_DEVICE=<n>[,<m>...]   the physical device with Vulkan index n (a list is the engine's:
//                                  one backend per listed device, each created with its index;
//                                  the plugin's own choice stays automatic)
//   FISH_GPU_VERBOSE=0|1|2         without a host logger: 1 warnings, 2 everything on stderr
//   FISH_GPU_PROFILE=0|1|2         1: device time of every submission; 2: per span stage
//   FISH_VRAM_BUDGET_MB=<n>[,..]   ceiling on the plugin's allocations (default 85% of free at open;
//                                  a list: the engine passes each device's own)
//   FISH_VK_QUEUE=compute|universal  queue family (default: compute-only when there is one)
//   FISH_VK_VALIDATE=0|1           VK_LAYER_KHRONOS_validation, its messages to the log
//   FISH_VK_SPIN=0|1               0: wait on fences by blocking only (default: spin briefly on GPUs)
//   FISH_VK_INT8=0|1               int8 activations (integer dot products); default: on where the
//                                  device accelerates them or is a CPU implementation with them
//   FISH_VK_COOPMAT=0|1            prefill on cooperative matrices (tensor cores); default: on where
//                                  the device has them (16x16x16 f16 -> f32, subgroups of 32)
//   FISH_VK_SPAN_QFOLD=0|15        int8 span decode: 0 Q8_K / Q8_0 rows from quantise steps (the CPU's
//                                  arithmetic; the default on CPU implementations), 15 B32 rows
//                                  that the producers write (the default on GPUs)
//   FISH_VK_MV_ROWS=1|2|4, FISH_VK_MV_WG=32|64|128|256|512   stage-1 matvec shape (tuning)
//   FISH_VK_SPAN_MV=[q|o|gu|d=]ROWS[xWG],...   span matvec shapes per projection (tuning)
//   FISH_VK_SPAN_TOKENS=8..1024    tokens per span submission (default 512 with cooperative
//                                  matrices: tiles for every SM; 128 without)
//   FISH_VK_ATTN_SPLIT=16..        decode attention: positions per split (default 128)
//   FISH_VK_ATTN_MAX_SPLITS=1..128 decode attention: most splits (default 32)
//   FISH_VK_PIPELINE_STATS=0|1     1: log each pipeline's compiler statistics (registers, shared
//                                  memory) where the driver gives them (VK_KHR_pipeline_executable_properties)
//   FISH_VK_BENCH_FILL_KV=0|1      BENCHMARKS ONLY: a span forward of more than one token
//                                  computes nothing, it zeroes those KV positions (decode can
//                                  then be timed at a long context without the prompt's cost)
// Any other FISH_VK_* variable, or a value outside these, is an error that
// names the variable and what it accepts (probe answers FISH_E_INVALID_ARGUMENT).
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace fish::vk {

// The span matvec's shape for one projection role; 0: the heuristic's.
struct SpanMvShape {
  uint32_t rows = 0, wg = 0;
};
enum SpanRole : uint32_t { kRoleOther = 0, kRoleQkv = 1, kRoleWo = 2, kRoleGateUp = 3, kRoleDown = 4, kRoles = 5 };

// The int8 span decode's activation rows (FISH_VK_SPAN_QFOLD).
enum class DecodeRows {
  Auto,  // B32 on GPUs, Q8_K on CPU implementations
  Q8K,   // a quantise step before every matmul step, the CPU's Q8_K blocks of 256
  B32,   // blocks of 32 written by the producing kernels themselves (no quantise steps)
};

struct VkConfig {
  enum class GpuMode { Default, Off, Cpu };
  GpuMode gpu = GpuMode::Default;
  int device_index = -1;  // -1: automatic selection
  bool queue_universal = false;
  bool validate = false;
  int verbose = 0;
  uint64_t budget_bytes = 0;  // 0: the 85% rule
  int profile_level = 0;      // 0 off, 1 per submission, 2 per span stage
  bool spin = true;
  int int8 = -1;              // -1: the device's default, 0 off, 1 on
  bool coopmat = true;        // prefill on cooperative matrices where the device has them
  DecodeRows decode_rows = DecodeRows::Auto;
  int mv_rows = 0, mv_wg = 0;   // stage-1 matvec shape, 0: heuristic
  SpanMvShape span_mv[kRoles];  // per SpanRole, 0: heuristic
  int span_tokens = 0;  // 0: the device's default (512 with cooperative matrices, else 128)
  int attn_split = 128;
  int attn_max_splits = 32;
  bool bench_fill_kv = false;
  bool pipeline_stats = false;  // log every pipeline's compiler statistics
  // Not a variable: the roles (bits 1 << SpanRole) whose int8 Q4_K / Q5_K span
  // matvecs take units of 64 elements; -1: the device's default (q/k/v and
  // gate/up on GPUs, none on CPU implementations). Tests set it.
  int span_u64 = -1;
  std::string error;  // the first variable refused, and what it accepts ("" when all are good)

  // env: every FISH_* variable by name (others are ignored).
  static VkConfig parse(const std::map<std::string, std::string>& env);
  static VkConfig from_env();  // parse() of this process's environment
  static std::vector<std::string> variable_names();  // every variable parse() reads
  // A FISH_VK_SPAN_MV value into out[kRoles]; false when malformed.
  static bool parse_span_mv(const std::string& spec, SpanMvShape* out);
};

}  // namespace fish::vk
