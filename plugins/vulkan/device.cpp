// Instance creation, device enumeration/selection and the logical device.
#include "device.h"
#include "vk_coopmat.h"

#include <algorithm>
#include <cstring>
#include <mutex>

namespace fish::vk {
namespace {

constexpr const char* kValidationLayer = "VK_LAYER_KHRONOS_validation";

std::string version_string(uint32_t v) {
  return std::to_string(VK_API_VERSION_MAJOR(v)) + "." + std::to_string(VK_API_VERSION_MINOR(v)) + "." +
         std::to_string(VK_API_VERSION_PATCH(v));
}

bool has_extension(const std::vector<VkExtensionProperties>& exts, const char* name) {
  for (const auto& e : exts)
    if (std::strcmp(e.extensionName, name) == 0) return true;
  return false;
}

VKAPI_ATTR VkBool32 VKAPI_CALL debug_callback(VkDebugUtilsMessageSeverityFlagBitsEXT severity,
                                              VkDebugUtilsMessageTypeFlagsEXT, const VkDebugUtilsMessengerCallbackDataEXT* data,
                                              void* user) {
  const auto* log = static_cast<const LogFn*>(user);
  const int level = (severity & VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT)     ? 0
                    : (severity & VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT) ? 1
                    : (severity & VK_DEBUG_UTILS_MESSAGE_SEVERITY_INFO_BIT_EXT)    ? 3
                                                                                   : 3;
  if (log && *log && data && data->pMessage) (*log)(level, std::string("validation: ") + data->pMessage);
  return VK_FALSE;
}

int type_score(VkPhysicalDeviceType t) {
  switch (t) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return 300;
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return 200;
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: return 100;
    case VK_PHYSICAL_DEVICE_TYPE_CPU: return 10;
    default: return 50;
  }
}

}  // namespace

const char* device_type_name(VkPhysicalDeviceType t) {
  switch (t) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return "discrete GPU";
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return "integrated GPU";
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: return "virtual GPU";
    case VK_PHYSICAL_DEVICE_TYPE_CPU: return "CPU implementation";
    default: return "other";
  }
}

// ---- Instance -------------------------------------------------------------------

Instance::Instance(const VkConfig& cfg, LogFn log) : log_(std::make_unique<LogFn>(std::move(log))) {
  std::string why;
  g_ = loader(&why);
  if (!g_) throw Failure(FailKind::NoDevice, why);
  uint32_t loader_version = VK_API_VERSION_1_0;
  if (g_->vkEnumerateInstanceVersion) g_->vkEnumerateInstanceVersion(&loader_version);
  if (loader_version < VK_API_VERSION_1_1)
    throw Failure(FailKind::NoDevice, "the Vulkan loader " + loader_path() + " only supports Vulkan " +
                                          version_string(loader_version) + " (1.1 is required)");

  uint32_t n = 0;
  g_->vkEnumerateInstanceExtensionProperties(nullptr, &n, nullptr);
  std::vector<VkExtensionProperties> exts(n);
  g_->vkEnumerateInstanceExtensionProperties(nullptr, &n, exts.data());
  exts.resize(n);

  std::vector<const char*> ext_names;
  VkInstanceCreateFlags flags = 0;
  if (has_extension(exts, VK_KHR_PORTABILITY_ENUMERATION_EXTENSION_NAME)) {
    ext_names.push_back(VK_KHR_PORTABILITY_ENUMERATION_EXTENSION_NAME);
    flags |= VK_INSTANCE_CREATE_ENUMERATE_PORTABILITY_BIT_KHR;
  }
  std::vector<const char*> layers;
  bool debug_utils = false;
  if (cfg.validate) {
    g_->vkEnumerateInstanceLayerProperties(&n, nullptr);
    std::vector<VkLayerProperties> lp(n);
    g_->vkEnumerateInstanceLayerProperties(&n, lp.data());
    lp.resize(n);
    const bool have = std::any_of(lp.begin(), lp.end(), [](const VkLayerProperties& l) {
      return std::strcmp(l.layerName, kValidationLayer) == 0;
    });
    if (have) {
      layers.push_back(kValidationLayer);
      if (has_extension(exts, VK_EXT_DEBUG_UTILS_EXTENSION_NAME)) {
        ext_names.push_back(VK_EXT_DEBUG_UTILS_EXTENSION_NAME);
        debug_utils = true;
      }
    } else if (*log_) {
      (*log_)(1, std::string("FISH_VK_VALIDATE=1 but ") + kValidationLayer + " is not installed; running without it");
    }
  }

  auto app = vk_init<VkApplicationInfo>(VK_STRUCTURE_TYPE_APPLICATION_INFO);
  app.pApplicationName = "fish";
  app.pEngineName = "fish";
  app.apiVersion = VK_API_VERSION_1_1;
  auto ci = vk_init<VkInstanceCreateInfo>(VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO);
  ci.flags = flags;
  ci.pApplicationInfo = &app;
  ci.enabledExtensionCount = uint32_t(ext_names.size());
  ci.ppEnabledExtensionNames = ext_names.data();
  ci.enabledLayerCount = uint32_t(layers.size());
  ci.ppEnabledLayerNames = layers.data();
  auto mci = vk_init<VkDebugUtilsMessengerCreateInfoEXT>(VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT);
  mci.messageSeverity = VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT;
  mci.messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT |
                    VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT;
  mci.pfnUserCallback = debug_callback;
  mci.pUserData = log_.get();
  if (debug_utils) ci.pNext = &mci;  // also covers vkCreateInstance itself

  VkResult r = g_->vkCreateInstance(&ci, nullptr, &instance_);
  if (r != VK_SUCCESS)
    throw Failure(FailKind::NoDevice, std::string("vkCreateInstance (Vulkan 1.1) failed: ") + result_name(r), r);
  if (!load_instance_fns(*g_, instance_, debug_utils, &fns_, &why)) {
    auto destroy = reinterpret_cast<PFN_vkDestroyInstance>(g_->vkGetInstanceProcAddr(instance_, "vkDestroyInstance"));
    if (destroy) destroy(instance_, nullptr);
    instance_ = VK_NULL_HANDLE;
    throw Failure(FailKind::NoDevice, why);
  }
  if (debug_utils && fns_.vkCreateDebugUtilsMessengerEXT)
    fns_.vkCreateDebugUtilsMessengerEXT(instance_, &mci, nullptr, &messenger_);
}

const Instance& shared_instance(const VkConfig& cfg, const LogFn& log) {
  static std::mutex mu;
  static Instance* kept[2] = {nullptr, nullptr};  // leaked on purpose: devices may outlive exit handlers
  std::lock_guard<std::mutex> lock(mu);
  Instance*& slot = kept[cfg.validate ? 1 : 0];
  if (!slot) slot = new Instance(cfg, log);
  return *slot;
}

Instance::~Instance() {
  if (messenger_ && fns_.vkDestroyDebugUtilsMessengerEXT) fns_.vkDestroyDebugUtilsMessengerEXT(instance_, messenger_, nullptr);
  if (instance_) fns_.vkDestroyInstance(instance_, nullptr);
}

std::vector<VkPhysicalDevice> Instance::physical_devices() const {
  uint32_t n = 0;
  check(fns_.vkEnumeratePhysicalDevices(instance_, &n, nullptr), "vkEnumeratePhysicalDevices");
  std::vector<VkPhysicalDevice> pds(n);
  VkResult r = fns_.vkEnumeratePhysicalDevices(instance_, &n, pds.data());
  if (r != VK_SUCCESS && r != VK_INCOMPLETE) check(r, "vkEnumeratePhysicalDevices");
  pds.resize(n);
  return pds;
}

std::vector<DeviceCandidate> Instance::candidates(const VkConfig& cfg) const {
  std::vector<DeviceCandidate> out;
  const auto pds = physical_devices();
  for (uint32_t i = 0; i < pds.size(); ++i) {
    DeviceCandidate c;
    c.index = i;
    VkPhysicalDeviceProperties p{};
    fns_.vkGetPhysicalDeviceProperties(pds[i], &p);
    c.name = p.deviceName;
    c.type = p.deviceType;
    c.api_version = p.apiVersion;
    c.driver_version = p.driverVersion;
    c.vendor_id = p.vendorID;
    VkPhysicalDeviceMemoryProperties mp{};
    fns_.vkGetPhysicalDeviceMemoryProperties(pds[i], &mp);
    for (uint32_t h = 0; h < mp.memoryHeapCount; ++h)
      if (mp.memoryHeaps[h].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT)
        c.device_local_bytes = std::max<uint64_t>(c.device_local_bytes, mp.memoryHeaps[h].size);

    uint32_t nq = 0;
    fns_.vkGetPhysicalDeviceQueueFamilyProperties(pds[i], &nq, nullptr);
    std::vector<VkQueueFamilyProperties> qf(nq);
    fns_.vkGetPhysicalDeviceQueueFamilyProperties(pds[i], &nq, qf.data());
    int compute_only = -1, universal = -1, any = -1;
    for (uint32_t q = 0; q < nq; ++q) {
      if (qf[q].queueCount == 0 || !(qf[q].queueFlags & VK_QUEUE_COMPUTE_BIT)) continue;
      if (any < 0) any = int(q);
      const bool gfx = qf[q].queueFlags & VK_QUEUE_GRAPHICS_BIT;
      if (!gfx && compute_only < 0) compute_only = int(q);
      if (gfx && universal < 0) universal = int(q);
    }
    if (cfg.queue_universal) c.queue_family = universal >= 0 ? universal : any;
    else c.queue_family = compute_only >= 0 ? compute_only : any;
    c.queue_compute_only = c.queue_family >= 0 && !(qf[size_t(c.queue_family)].queueFlags & VK_QUEUE_GRAPHICS_BIT);

    c.score = type_score(c.type);
    const bool is_cpu = c.type == VK_PHYSICAL_DEVICE_TYPE_CPU;
    if (p.apiVersion < VK_API_VERSION_1_1)
      c.why_not = "supports Vulkan " + version_string(p.apiVersion) + " only (1.1 is required)";
    else if (c.queue_family < 0)
      c.why_not = "has no compute queue";
    else if (is_cpu && cfg.gpu != VkConfig::GpuMode::Cpu)
      c.why_not = "is a CPU implementation (used only with FISH_GPU=cpu)";
    else if (!is_cpu && cfg.gpu == VkConfig::GpuMode::Cpu)
      c.why_not = "is not a CPU implementation (FISH_GPU=cpu selects those only)";
    c.usable = c.why_not.empty();
    if (!c.usable) c.score = 0;
    out.push_back(std::move(c));
  }
  return out;
}

int choose_device(const std::vector<DeviceCandidate>& all, int forced, std::string* why) {
  if (forced >= 0) {
    if (size_t(forced) >= all.size()) {
      *why = "device " + std::to_string(forced) + " was asked for (FISH_GPU_DEVICE) but there are " +
             std::to_string(all.size()) + " Vulkan devices";
      return -1;
    }
    const auto& c = all[size_t(forced)];
    if (!c.usable) {
      *why = "device " + std::to_string(forced) + " (" + c.name + ") " + c.why_not;
      return -1;
    }
    return forced;
  }
  int best = -1;
  for (size_t i = 0; i < all.size(); ++i) {
    const auto& c = all[i];
    if (!c.usable) continue;
    if (best < 0 || c.score > all[size_t(best)].score ||
        (c.score == all[size_t(best)].score && c.device_local_bytes > all[size_t(best)].device_local_bytes))
      best = int(i);
  }
  if (best < 0) {
    if (all.empty()) {
      *why = "no Vulkan devices";
    } else {
      *why = "no usable Vulkan device:";
      for (const auto& c : all) *why += " [" + std::to_string(c.index) + "] " + c.name + " " + c.why_not + ";";
      why->pop_back();
    }
  }
  return best;
}

// ---- Device ----------------------------------------------------------------------

Device::Device(const Instance& inst, VkPhysicalDevice pd, const DeviceCandidate& cand, LogFn log,
               bool pipeline_stats)
    : inst_(inst), pd_(pd), cand_(cand), log_(log) {
  const InstanceFns& f = inst.fns();
  uint32_t n = 0;
  f.vkEnumerateDeviceExtensionProperties(pd, nullptr, &n, nullptr);
  std::vector<VkExtensionProperties> exts(n);
  f.vkEnumerateDeviceExtensionProperties(pd, nullptr, &n, exts.data());
  exts.resize(n);

  std::vector<const char*> enable;
  const bool has_budget = has_extension(exts, VK_EXT_MEMORY_BUDGET_EXTENSION_NAME);
  const bool has_f16i8 = has_extension(exts, VK_KHR_SHADER_FLOAT16_INT8_EXTENSION_NAME);
  const bool has_8bit = has_extension(exts, VK_KHR_8BIT_STORAGE_EXTENSION_NAME);
  // Integer dot products (the int8 matvec): through the KHR extension, which
  // drivers keep listing after its promotion to 1.3 (the instance asks for 1.1,
  // so core 1.3 features are out of reach anyway).
  const bool has_idot = has_extension(exts, VK_KHR_SHADER_INTEGER_DOT_PRODUCT_EXTENSION_NAME);
  if (has_budget) enable.push_back(VK_EXT_MEMORY_BUDGET_EXTENSION_NAME);
  if (has_f16i8) enable.push_back(VK_KHR_SHADER_FLOAT16_INT8_EXTENSION_NAME);
  if (has_8bit) enable.push_back(VK_KHR_8BIT_STORAGE_EXTENSION_NAME);
  if (has_idot) enable.push_back(VK_KHR_SHADER_INTEGER_DOT_PRODUCT_EXTENSION_NAME);
  // Cooperative matrices (tensor cores: the prefill matmul, matmul_coopmat.comp).
  const bool has_cm = has_extension(exts, VK_KHR_COOPERATIVE_MATRIX_EXTENSION_NAME);
  if (has_cm) enable.push_back(VK_KHR_COOPERATIVE_MATRIX_EXTENSION_NAME);
  // A portability (non-conformant) implementation must have this enabled.
  if (has_extension(exts, "VK_KHR_portability_subset")) enable.push_back("VK_KHR_portability_subset");

  // Optional features: recorded and enabled when present, never required.
  auto s16 = vk_init<VkPhysicalDevice16BitStorageFeatures>(VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES);
  auto f16 = vk_init<VkPhysicalDeviceShaderFloat16Int8FeaturesKHR>(VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_FLOAT16_INT8_FEATURES_KHR);
  auto s8 = vk_init<VkPhysicalDevice8BitStorageFeaturesKHR>(VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_8BIT_STORAGE_FEATURES_KHR);
  auto idot = vk_init<VkPhysicalDeviceShaderIntegerDotProductFeatures>(
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_FEATURES);
  auto cm = vk_init<VkPhysicalDeviceCooperativeMatrixFeaturesKHR>(VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_KHR);
  auto feats = vk_init<VkPhysicalDeviceFeatures2>(VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2);
  void** tail = &feats.pNext;
  *tail = &s16;
  tail = &s16.pNext;
  if (has_f16i8) { *tail = &f16; tail = &f16.pNext; }
  if (has_8bit) { *tail = &s8; tail = &s8.pNext; }
  if (has_idot) { *tail = &idot; tail = &idot.pNext; }
  if (has_cm) { *tail = &cm; tail = &cm.pNext; }
  // Compiler statistics (FISH_VK_PIPELINE_STATS): registers and shared memory per pipeline.
  auto exec = vk_init<VkPhysicalDevicePipelineExecutablePropertiesFeaturesKHR>(
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PIPELINE_EXECUTABLE_PROPERTIES_FEATURES_KHR);
  const bool has_exec = pipeline_stats && has_extension(exts, VK_KHR_PIPELINE_EXECUTABLE_PROPERTIES_EXTENSION_NAME);
  void** exec_link = tail;  // where exec hangs, to unhang it when its feature is off
  if (has_exec) { *tail = &exec; tail = &exec.pNext; }
  f.vkGetPhysicalDeviceFeatures2(pd, &feats);
  const bool want_exec = has_exec && exec.pipelineExecutableInfo;
  if (want_exec) enable.push_back(VK_KHR_PIPELINE_EXECUTABLE_PROPERTIES_EXTENSION_NAME);
  else if (has_exec) *exec_link = nullptr;  // exec is the chain's last link
  // Enable only what fish might use: the optional arithmetic/storage bits.
  VkPhysicalDeviceFeatures2 want = feats;
  want.features = VkPhysicalDeviceFeatures{};
  want.features.shaderInt16 = feats.features.shaderInt16;
  s16.uniformAndStorageBuffer16BitAccess = VK_FALSE;
  s16.storagePushConstant16 = VK_FALSE;
  s16.storageInputOutput16 = VK_FALSE;
  if (has_8bit) {
    s8.uniformAndStorageBuffer8BitAccess = VK_FALSE;
    s8.storagePushConstant8 = VK_FALSE;
  }
  caps_.storage16 = s16.storageBuffer16BitAccess;
  caps_.shader_float16 = has_f16i8 && f16.shaderFloat16;
  caps_.shader_int8 = has_f16i8 && f16.shaderInt8;
  caps_.storage8 = has_8bit && s8.storageBuffer8BitAccess;
  caps_.int_dot = has_idot && idot.shaderIntegerDotProduct;
  cm.cooperativeMatrixRobustBufferAccess = VK_FALSE;
  const bool cm_feature = has_cm && cm.cooperativeMatrix && caps_.shader_float16;

  family_ = uint32_t(cand.queue_family);
  const float prio = 1.0f;
  auto qci = vk_init<VkDeviceQueueCreateInfo>(VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO);
  qci.queueFamilyIndex = family_;
  qci.queueCount = 1;
  qci.pQueuePriorities = &prio;
  auto dci = vk_init<VkDeviceCreateInfo>(VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO);
  dci.pNext = &want;
  dci.queueCreateInfoCount = 1;
  dci.pQueueCreateInfos = &qci;
  dci.enabledExtensionCount = uint32_t(enable.size());
  dci.ppEnabledExtensionNames = enable.data();
  VkResult r = f.vkCreateDevice(pd, &dci, nullptr, &device_);
  if (r != VK_SUCCESS)
    throw Failure(FailKind::NoDevice, "vkCreateDevice on " + cand.name + " failed: " + result_name(r), r);
  std::string why;
  if (!load_device_fns(f, device_, &fns_, &why)) {
    auto destroy = reinterpret_cast<PFN_vkDestroyDevice>(f.vkGetDeviceProcAddr(device_, "vkDestroyDevice"));
    if (destroy) destroy(device_, nullptr);
    device_ = VK_NULL_HANDLE;
    throw Failure(FailKind::NoDevice, why);
  }
  fns_.vkGetDeviceQueue(device_, family_, 0, &queue_);
  if (want_exec) {
    get_exec_props_ = reinterpret_cast<PFN_vkGetPipelineExecutablePropertiesKHR>(
        f.vkGetDeviceProcAddr(device_, "vkGetPipelineExecutablePropertiesKHR"));
    get_exec_stats_ = reinterpret_cast<PFN_vkGetPipelineExecutableStatisticsKHR>(
        f.vkGetDeviceProcAddr(device_, "vkGetPipelineExecutableStatisticsKHR"));
    if (!get_exec_stats_) get_exec_props_ = nullptr;
  }
  if (pipeline_stats && !get_exec_props_)
    this->log(1, "FISH_VK_PIPELINE_STATS=1 but " + cand.name + " does not give pipeline statistics (" +
               VK_KHR_PIPELINE_EXECUTABLE_PROPERTIES_EXTENSION_NAME + "); none are logged");

  // Properties the kernels and the budget use.
  auto sg = vk_init<VkPhysicalDeviceSubgroupProperties>(VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES);
  auto m3 = vk_init<VkPhysicalDeviceMaintenance3Properties>(VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_3_PROPERTIES);
  sg.pNext = &m3;
  auto props = vk_init<VkPhysicalDeviceProperties2>(VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2);
  auto idp = vk_init<VkPhysicalDeviceShaderIntegerDotProductProperties>(
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_PROPERTIES);
  if (caps_.int_dot) m3.pNext = &idp;
  // The compute units, from whichever vendor extension the device lists (a
  // property query needs the extension supported, not enabled).
  auto nv_sm = vk_init<VkPhysicalDeviceShaderSMBuiltinsPropertiesNV>(
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_SM_BUILTINS_PROPERTIES_NV);
  auto amd_cu = vk_init<VkPhysicalDeviceShaderCorePropertiesAMD>(VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_CORE_PROPERTIES_AMD);
  auto arm_core = vk_init<VkPhysicalDeviceShaderCoreBuiltinsPropertiesARM>(
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_CORE_BUILTINS_PROPERTIES_ARM);
  const bool has_nv_sm = has_extension(exts, VK_NV_SHADER_SM_BUILTINS_EXTENSION_NAME);
  const bool has_amd_cu = has_extension(exts, VK_AMD_SHADER_CORE_PROPERTIES_EXTENSION_NAME);
  const bool has_arm_core = has_extension(exts, VK_ARM_SHADER_CORE_BUILTINS_EXTENSION_NAME);
  auto* last = reinterpret_cast<VkBaseOutStructure*>(&sg);
  auto append = [&](void* p) {
    while (last->pNext) last = last->pNext;
    last->pNext = static_cast<VkBaseOutStructure*>(p);
  };
  if (has_nv_sm) append(&nv_sm);
  if (has_amd_cu) append(&amd_cu);
  if (has_arm_core) append(&arm_core);
  props.pNext = &sg;
  f.vkGetPhysicalDeviceProperties2(pd, &props);
  if (has_nv_sm && nv_sm.shaderSMCount) {
    caps_.compute_units = nv_sm.shaderSMCount, caps_.compute_unit_name = "SMs";
  } else if (has_amd_cu && amd_cu.shaderEngineCount) {
    caps_.compute_units = amd_cu.shaderEngineCount * amd_cu.shaderArraysPerEngineCount * amd_cu.computeUnitsPerShaderArray;
    caps_.compute_unit_name = "CUs";
  } else if (has_arm_core && arm_core.shaderCoreCount) {
    caps_.compute_units = arm_core.shaderCoreCount, caps_.compute_unit_name = "cores";
  }
  caps_.int_dot_accel = caps_.int_dot && idp.integerDotProduct4x8BitPackedSignedAccelerated;
  const VkPhysicalDeviceLimits& lim = props.properties.limits;
  caps_.api_version = props.properties.apiVersion;
  caps_.subgroup_size = std::max(1u, sg.subgroupSize);
  // The coopmat modules take 16 x 16 x 16 f16 x f16 -> f32 at subgroup scope
  // in workgroups of 8 subgroups of 32 (their tiles are laid out for that).
  if (cm_feature && caps_.subgroup_size == 32) {
    const GlobalFns* g = loader(nullptr);
    auto list_fn = g ? reinterpret_cast<PFN_vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR>(
                           g->vkGetInstanceProcAddr(inst.handle(), "vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR"))
                     : nullptr;
    uint32_t nc = 0;
    if (list_fn && list_fn(pd, &nc, nullptr) == VK_SUCCESS && nc > 0) {
      std::vector<VkCooperativeMatrixPropertiesKHR> cps(
          nc, vk_init<VkCooperativeMatrixPropertiesKHR>(VK_STRUCTURE_TYPE_COOPERATIVE_MATRIX_PROPERTIES_KHR));
      if (list_fn(pd, &nc, cps.data()) == VK_SUCCESS) {
        for (uint32_t i = 0; i < nc; ++i) {
          const VkCooperativeMatrixPropertiesKHR& c = cps[i];
          if (c.MSize == 16 && c.NSize == 16 && c.KSize == 16 && c.AType == VK_COMPONENT_TYPE_FLOAT16_KHR &&
              c.BType == VK_COMPONENT_TYPE_FLOAT16_KHR && c.CType == VK_COMPONENT_TYPE_FLOAT32_KHR &&
              c.ResultType == VK_COMPONENT_TYPE_FLOAT32_KHR && c.scope == VK_SCOPE_SUBGROUP_KHR && !c.saturatingAccumulation)
            caps_.coopmat = true;
        }
      }
    }
  }
  const VkSubgroupFeatureFlags need = VK_SUBGROUP_FEATURE_BASIC_BIT | VK_SUBGROUP_FEATURE_ARITHMETIC_BIT;
  caps_.subgroup_arith = (sg.supportedStages & VK_SHADER_STAGE_COMPUTE_BIT) && (sg.supportedOperations & need) == need;
  caps_.subgroup_shuffle = caps_.subgroup_arith && (sg.supportedOperations & VK_SUBGROUP_FEATURE_SHUFFLE_BIT);
  caps_.max_storage_range = lim.maxStorageBufferRange;
  caps_.max_alloc = m3.maxMemoryAllocationSize ? m3.maxMemoryAllocationSize : (uint64_t(1) << 30);
  caps_.max_wg_count_x = lim.maxComputeWorkGroupCount[0];
  caps_.max_wg_count_y = lim.maxComputeWorkGroupCount[1];
  caps_.max_wg_size = std::min(lim.maxComputeWorkGroupSize[0], lim.maxComputeWorkGroupInvocations);
  caps_.max_push_constants = lim.maxPushConstantsSize;
  caps_.non_coherent_atom = std::max<uint64_t>(1, lim.nonCoherentAtomSize);
  caps_.storage_offset_align = std::max<uint64_t>(4, lim.minStorageBufferOffsetAlignment);
  caps_.max_shared_bytes = lim.maxComputeSharedMemorySize;
  caps_.cpu_device = cand.type == VK_PHYSICAL_DEVICE_TYPE_CPU;
  uint32_t nq = 0;
  f.vkGetPhysicalDeviceQueueFamilyProperties(pd, &nq, nullptr);
  std::vector<VkQueueFamilyProperties> qf(nq);
  f.vkGetPhysicalDeviceQueueFamilyProperties(pd, &nq, qf.data());
  if (family_ < nq && qf[family_].timestampValidBits > 0) caps_.timestamp_period_ns = lim.timestampPeriod;
  caps_.memory_budget = has_budget;
  f.vkGetPhysicalDeviceMemoryProperties(pd, &mem_);
  if (log)
    log(2, "opened " + cand.name + " (" + device_type_name(cand.type) + "): " + detail());
}

Device::~Device() {
  if (device_) {
    fns_.vkDeviceWaitIdle(device_);
    fns_.vkDestroyDevice(device_, nullptr);
  }
}

std::string Device::detail() const {
  std::string s = "Vulkan " + version_string(caps_.api_version) + ", " + device_type_name(cand_.type) +
                  ", queue family " + std::to_string(family_) + (cand_.queue_compute_only ? " (compute-only)" : " (universal)") +
                  ", subgroup " + std::to_string(caps_.subgroup_size) + (caps_.subgroup_arith ? "" : " (no arithmetic)");
  if (caps_.memory_budget) s += ", memory budget";
  if (caps_.shader_float16) s += ", f16";
  if (caps_.shader_int8) s += ", int8";
  if (caps_.int_dot) s += caps_.int_dot_accel ? ", int8 dot (accelerated)" : ", int8 dot";
  if (caps_.coopmat) s += ", coopmat f16 16x16x16";
  if (caps_.compute_units) s += ", " + std::to_string(caps_.compute_units) + " " + caps_.compute_unit_name;
  return s;
}

std::string Device::statistics(VkPipeline p) const {
  if (!get_exec_props_) return {};
  auto pi = vk_init<VkPipelineInfoKHR>(VK_STRUCTURE_TYPE_PIPELINE_INFO_KHR);
  pi.pipeline = p;
  uint32_t n_exec = 0;
  if (get_exec_props_(device_, &pi, &n_exec, nullptr) != VK_SUCCESS) return {};
  std::string out;
  for (uint32_t e = 0; e < n_exec; ++e) {
    auto ei = vk_init<VkPipelineExecutableInfoKHR>(VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_INFO_KHR);
    ei.pipeline = p;
    ei.executableIndex = e;
    uint32_t n = 0;
    if (get_exec_stats_(device_, &ei, &n, nullptr) != VK_SUCCESS) continue;
    std::vector<VkPipelineExecutableStatisticKHR> st(
        n, vk_init<VkPipelineExecutableStatisticKHR>(VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_STATISTIC_KHR));
    if (get_exec_stats_(device_, &ei, &n, st.data()) != VK_SUCCESS) continue;
    for (uint32_t i = 0; i < n; ++i) {
      const VkPipelineExecutableStatisticKHR& s = st[i];
      std::string v;
      switch (s.format) {
        case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_BOOL32_KHR: v = s.value.b32 ? "true" : "false"; break;
        case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_INT64_KHR: v = std::to_string(s.value.i64); break;
        case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_UINT64_KHR: v = std::to_string(s.value.u64); break;
        default: v = std::to_string(s.value.f64); break;
      }
      if (!out.empty()) out += ", ";
      out += std::string(s.name) + " " + v;
    }
  }
  return out;
}

}  // namespace fish::vk
