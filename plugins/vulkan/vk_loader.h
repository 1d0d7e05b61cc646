// The Vulkan loader, opened at run time: fish_vulkan has no link-time Vulkan
// dependency. The library is found the way the spec says (Linux libvulkan.so.1;
// Windows vulkan-1.dll from the application directory or System32 only, never
// the current directory or PATH; macOS libvulkan.1.dylib, then
// libMoltenVK.dylib), opened once on first use and never closed (no driver code
// may run during process exit). Every entry point comes from
// vkGetInstanceProcAddr / vkGetDeviceProcAddr into the tables below.
#pragma once
#define VK_NO_PROTOTYPES
#include <vulkan/vulkan.h>

#include <string>

namespace fish::vk {

// Entry points reachable without an instance.
#define FISH_VK_GLOBAL_FNS(X)              \
  X(vkCreateInstance)                      \
  X(vkEnumerateInstanceExtensionProperties) \
  X(vkEnumerateInstanceLayerProperties)

// Instance-level entry points (core 1.0/1.1, plus debug utils when enabled).
#define FISH_VK_INSTANCE_FNS(X)                  \
  X(vkDestroyInstance)                           \
  X(vkEnumeratePhysicalDevices)                  \
  X(vkGetPhysicalDeviceProperties)               \
  X(vkGetPhysicalDeviceProperties2)              \
  X(vkGetPhysicalDeviceFeatures2)                \
  X(vkGetPhysicalDeviceQueueFamilyProperties)    \
  X(vkGetPhysicalDeviceMemoryProperties)         \
  X(vkGetPhysicalDeviceMemoryProperties2)        \
  X(vkEnumerateDeviceExtensionProperties)        \
  X(vkCreateDevice)                              \
  X(vkGetDeviceProcAddr)

#define FISH_VK_DEBUG_FNS(X)         \
  X(vkCreateDebugUtilsMessengerEXT)  \
  X(vkDestroyDebugUtilsMessengerEXT)

// Device-level entry points.
#define FISH_VK_DEVICE_FNS(X)            \
  X(vkDestroyDevice)                     \
  X(vkGetDeviceQueue)                    \
  X(vkDeviceWaitIdle)                    \
  X(vkQueueSubmit)                       \
  X(vkQueueWaitIdle)                     \
  X(vkCreateBuffer)                      \
  X(vkDestroyBuffer)                     \
  X(vkGetBufferMemoryRequirements)       \
  X(vkAllocateMemory)                    \
  X(vkFreeMemory)                        \
  X(vkBindBufferMemory)                  \
  X(vkMapMemory)                         \
  X(vkUnmapMemory)                       \
  X(vkCreateShaderModule)                \
  X(vkDestroyShaderModule)               \
  X(vkCreateDescriptorSetLayout)         \
  X(vkDestroyDescriptorSetLayout)        \
  X(vkCreatePipelineLayout)              \
  X(vkDestroyPipelineLayout)             \
  X(vkCreateComputePipelines)            \
  X(vkDestroyPipeline)                   \
  X(vkCreateDescriptorPool)              \
  X(vkDestroyDescriptorPool)             \
  X(vkAllocateDescriptorSets)            \
  X(vkFreeDescriptorSets)                \
  X(vkUpdateDescriptorSets)              \
  X(vkCreateCommandPool)                 \
  X(vkDestroyCommandPool)                \
  X(vkAllocateCommandBuffers)            \
  X(vkFreeCommandBuffers)                \
  X(vkBeginCommandBuffer)                \
  X(vkEndCommandBuffer)                  \
  X(vkResetCommandBuffer)                \
  X(vkCmdBindPipeline)                   \
  X(vkCmdBindDescriptorSets)             \
  X(vkCmdPushConstants)                  \
  X(vkCmdDispatch)                       \
  X(vkCmdDispatchIndirect)               \
  X(vkCmdCopyBuffer)                     \
  X(vkCmdFillBuffer)                     \
  X(vkCmdUpdateBuffer)                   \
  X(vkCmdPipelineBarrier)                \
  X(vkCmdWriteTimestamp)                 \
  X(vkCmdResetQueryPool)                 \
  X(vkCreateQueryPool)                   \
  X(vkDestroyQueryPool)                  \
  X(vkGetQueryPoolResults)               \
  X(vkCreateFence)                       \
  X(vkDestroyFence)                      \
  X(vkResetFences)                       \
  X(vkWaitForFences)                     \
  X(vkGetFenceStatus)

// A zeroed Vulkan struct with its sType set.
template <class T>
T vk_init(VkStructureType type) {
  T v{};
  v.sType = type;
  return v;
}

#define FISH_VK_DECLARE_FN(name) PFN_##name name = nullptr;

struct GlobalFns {
  PFN_vkGetInstanceProcAddr vkGetInstanceProcAddr = nullptr;
  PFN_vkEnumerateInstanceVersion vkEnumerateInstanceVersion = nullptr;  // null: a 1.0 loader
  FISH_VK_GLOBAL_FNS(FISH_VK_DECLARE_FN)
};
struct InstanceFns {
  FISH_VK_INSTANCE_FNS(FISH_VK_DECLARE_FN)
  FISH_VK_DEBUG_FNS(FISH_VK_DECLARE_FN)  // null unless VK_EXT_debug_utils is enabled
};
struct DeviceFns {
  FISH_VK_DEVICE_FNS(FISH_VK_DECLARE_FN)
};

// The process-wide loader: nullptr when the library cannot be opened or lacks
// vkGetInstanceProcAddr, with the reason in *why. Thread-safe; the first call
// opens the library, later calls return the same answer.
const GlobalFns* loader(std::string* why);

// Which file was opened ("libvulkan.so.1"), or "" before/without success.
std::string loader_path();

// Fills the instance / device tables; false (with the missing name in *why)
// when a required entry point is absent.
bool load_instance_fns(const GlobalFns& g, VkInstance instance, bool debug_utils, InstanceFns* out, std::string* why);
bool load_device_fns(const InstanceFns& i, VkDevice device, DeviceFns* out, std::string* why);

// "VK_ERROR_OUT_OF_DEVICE_MEMORY" etc.
const char* result_name(VkResult r);

}  // namespace fish::vk
