// The Vulkan instance, physical-device selection and the logical device.
//
// Selection (spec "Device selection"): discrete GPU > integrated > virtual >
// other; CPU implementations (lavapipe, SwiftShader) only with FISH_GPU=cpu, and
// then only them; FISH_GPU_DEVICE=<index> (or the host's device_index) forces a
// device. Required: Vulkan 1.1 and a queue family with compute. A compute-only
// family is preferred so fish's work does not share the compositor's queue;
// FISH_VK_QUEUE=universal takes a graphics+compute family instead.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "vk_check.h"
#include "vk_config.h"
#include "vk_loader.h"

namespace fish::vk {

// One physical device as enumeration saw it (plain data, kept after the probe).
struct DeviceCandidate {
  uint32_t index = 0;                  // enumeration order: FISH_GPU_DEVICE refers to it
  std::string name;
  VkPhysicalDeviceType type = VK_PHYSICAL_DEVICE_TYPE_OTHER;
  uint32_t api_version = 0;
  uint32_t driver_version = 0;
  uint32_t vendor_id = 0;
  uint64_t device_local_bytes = 0;     // the largest DEVICE_LOCAL heap
  int queue_family = -1;               // the family fish would use
  bool queue_compute_only = false;
  bool usable = false;
  int score = 0;                       // plugin_abi.h scale: discrete 300, integrated 200, virtual 100, CPU 10
  std::string why_not;                 // when !usable
};

const char* device_type_name(VkPhysicalDeviceType t);

// An instance (Vulkan 1.1, portability enumeration when present, validation
// with FISH_VK_VALIDATE=1 when installed). Destroying it destroys the instance.
class Instance {
 public:
  // Throws vk::Failure with the reason.
  Instance(const VkConfig& cfg, LogFn log);
  ~Instance();
  Instance(const Instance&) = delete;
  Instance& operator=(const Instance&) = delete;

  const InstanceFns& fns() const { return fns_; }
  VkInstance handle() const { return instance_; }
  std::vector<VkPhysicalDevice> physical_devices() const;
  // Every device with usability, queue choice and score per the rules above.
  std::vector<DeviceCandidate> candidates(const VkConfig& cfg) const;

 private:
  const GlobalFns* g_ = nullptr;
  InstanceFns fns_;
  VkInstance instance_ = VK_NULL_HANDLE;
  VkDebugUtilsMessengerEXT messenger_ = VK_NULL_HANDLE;
  std::unique_ptr<LogFn> log_;  // stable address for the messenger's user data
};

// The process's instance (one per FISH_VK_VALIDATE setting), created on first
// use and never destroyed: backends and probes share it and each creates and
// destroys only its VkDevice. NVIDIA's driver fails after many
// vkCreateInstance/vkDestroyInstance cycles in one process (on the H200 a
// conformance run's ~40th instance got VK_ERROR_INCOMPATIBLE_DRIVER; others
// report corrupted subgroup ids after ~11 cycles). log: the first creator's,
// used for validation messages. Throws vk::Failure as Instance does (a failure
// is not kept: the next call tries again).
const Instance& shared_instance(const VkConfig& cfg, const LogFn& log);

// The index into `all` of the device to open: forced >= 0 picks that one
// (refused with a reason when it is absent or unusable); otherwise the highest
// score, ties to the larger device-local heap, then enumeration order.
// -1 with *why when nothing qualifies.
int choose_device(const std::vector<DeviceCandidate>& all, int forced, std::string* why);

// What the kernels and the budget need to know about the opened device.
struct DeviceCaps {
  uint32_t api_version = 0;
  uint32_t subgroup_size = 1;
  bool subgroup_arith = false;        // basic + arithmetic subgroup ops in compute shaders
  bool subgroup_shuffle = false;      // subgroupShuffle* in compute shaders (the prompt attention's tiles)
  uint64_t max_storage_range = 0;     // maxStorageBufferRange
  uint64_t max_alloc = 0;             // maxMemoryAllocationSize
  uint32_t max_wg_count_x = 65535;
  uint32_t max_wg_count_y = 65535;
  uint32_t max_wg_size = 128;
  uint32_t max_push_constants = 128;
  float timestamp_period_ns = 0;      // 0: no timestamps on the queue
  uint64_t non_coherent_atom = 64;
  uint64_t storage_offset_align = 256; // minStorageBufferOffsetAlignment
  uint32_t max_shared_bytes = 16384;   // maxComputeSharedMemorySize
  bool cpu_device = false;            // a CPU implementation (lavapipe): never spin on fences
  bool memory_budget = false;         // VK_EXT_memory_budget enabled
  bool shader_float16 = false;        // enabled when the device has it (not required)
  bool shader_int8 = false;
  bool storage16 = false;             // storageBuffer16BitAccess (not required)
  bool storage8 = false;              // storageBuffer8BitAccess (not required)
  bool int_dot = false;               // shaderIntegerDotProduct (VK_KHR_shader_integer_dot_product): int8 matvec
  bool int_dot_accel = false;         // ...4x8BitPackedSignedAccelerated (int8 activations by default)
  bool coopmat = false;               // VK_KHR_cooperative_matrix with 16x16x16 f16 -> f32 at subgroup
                                      // scope, shaderFloat16, subgroups of 32: the prefill matmul on tensor cores
  // Streaming multiprocessors / compute units / shader cores, where the device
  // says (VK_NV_shader_sm_builtins, VK_AMD_shader_core_properties,
  // VK_ARM_shader_core_builtins); 0: unknown. Grids are sized to fill them.
  uint32_t compute_units = 0;
  const char* compute_unit_name = "";  // "SMs", "CUs", "cores"
};

// The logical device, its queue and the memory types fish uses.
class Device {
 public:
  // Throws vk::Failure with the reason.
  // pipeline_stats: capture every pipeline's compiler statistics (FISH_VK_PIPELINE_STATS) where the
  // device has VK_KHR_pipeline_executable_properties (a warning in the log where it does not).
  Device(const Instance& inst, VkPhysicalDevice pd, const DeviceCandidate& cand, LogFn log,
         bool pipeline_stats = false);
  ~Device();
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;

  const DeviceFns& fns() const { return fns_; }
  VkDevice handle() const { return device_; }
  VkPhysicalDevice physical() const { return pd_; }
  const Instance& instance() const { return inst_; }
  VkQueue queue() const { return queue_; }
  uint32_t queue_family() const { return family_; }
  const DeviceCaps& caps() const { return caps_; }
  const DeviceCandidate& info() const { return cand_; }
  const VkPhysicalDeviceMemoryProperties& memory_properties() const { return mem_; }
  std::string detail() const;  // "Vulkan 1.3.230, driver ..., compute queue family 2, subgroup 32"
  // Statistics capture (FISH_VK_PIPELINE_STATS on a device that has it): pipelines are created with
  // VK_PIPELINE_CREATE_CAPTURE_STATISTICS_BIT_KHR and statistics(p) reads them back.
  bool captures_statistics() const { return get_exec_props_ != nullptr; }
  // "Register Count 106, Shared Memory Size 45056, ..." as the driver names them; "" without capture.
  std::string statistics(VkPipeline p) const;
  void log(int level, const std::string& message) const {
    if (log_) log_(level, message);
  }

 private:
  const Instance& inst_;
  VkPhysicalDevice pd_;
  DeviceCandidate cand_;
  DeviceFns fns_;
  VkDevice device_ = VK_NULL_HANDLE;
  VkQueue queue_ = VK_NULL_HANDLE;
  uint32_t family_ = 0;
  DeviceCaps caps_;
  VkPhysicalDeviceMemoryProperties mem_{};
  LogFn log_;
  PFN_vkGetPipelineExecutablePropertiesKHR get_exec_props_ = nullptr;
  PFN_vkGetPipelineExecutableStatisticsKHR get_exec_stats_ = nullptr;
};

}  // namespace fish::vk
