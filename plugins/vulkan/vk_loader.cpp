// Opening the Vulkan loader at run time and filling the function tables.
#include "vk_loader.h"

#include <cstring>
#include <mutex>

#if defined(_WIN32)
#define WIN32_LEAN_AND_MEAN
#include <windows.h>
#else
#include <dlfcn.h>
#endif

namespace fish::vk {
namespace {

struct LoaderState {
  std::once_flag once;
  GlobalFns fns;
  bool ok = false;
  std::string why;
  std::string path;
};

LoaderState& state() {
  static LoaderState* s = new LoaderState;  // leaked on purpose: nothing runs at exit
  return *s;
}

// Returns vkGetInstanceProcAddr from the first library that opens, or null.
PFN_vkGetInstanceProcAddr open_library(std::string* path, std::string* why) {
#if defined(_WIN32)
  // Application directory and System32 only: never the current directory or PATH.
  HMODULE h = LoadLibraryExW(L"vulkan-1.dll", nullptr, LOAD_LIBRARY_SEARCH_APPLICATION_DIR | LOAD_LIBRARY_SEARCH_SYSTEM32);
  if (!h) {
    *why = "vulkan-1.dll not found in the application directory or System32 (error " +
           std::to_string(GetLastError()) + ")";
    return nullptr;
  }
  *path = "vulkan-1.dll";
  auto fn = reinterpret_cast<PFN_vkGetInstanceProcAddr>(reinterpret_cast<void*>(GetProcAddress(h, "vkGetInstanceProcAddr")));
  if (!fn) *why = "vulkan-1.dll has no vkGetInstanceProcAddr";
  return fn;
#else
#if defined(__APPLE__)
  const char* names[] = {"libvulkan.1.dylib", "libMoltenVK.dylib"};
#else
  const char* names[] = {"libvulkan.so.1"};
#endif
  std::string errors;
  for (const char* name : names) {
    void* h = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
      const char* e = dlerror();
      errors += std::string(errors.empty() ? "" : "; ") + (e ? e : name);
      continue;
    }
    void* sym = dlsym(h, "vkGetInstanceProcAddr");
    if (!sym) {
      errors += std::string(errors.empty() ? "" : "; ") + name + " has no vkGetInstanceProcAddr";
      continue;  // deliberately not closed: a loader library is never unloaded
    }
    *path = name;
    PFN_vkGetInstanceProcAddr fn;
    static_assert(sizeof(fn) == sizeof(sym));
    std::memcpy(&fn, &sym, sizeof(fn));
    return fn;
  }
  *why = "cannot open the Vulkan loader: " + errors;
  return nullptr;
#endif
}

}  // namespace

const GlobalFns* loader(std::string* why) {
  LoaderState& s = state();
  std::call_once(s.once, [&s] {
    s.fns.vkGetInstanceProcAddr = open_library(&s.path, &s.why);
    if (!s.fns.vkGetInstanceProcAddr) return;
    auto gipa = s.fns.vkGetInstanceProcAddr;
#define FISH_VK_LOAD_GLOBAL(name)                                                   \
  s.fns.name = reinterpret_cast<PFN_##name>(gipa(VK_NULL_HANDLE, #name));            \
  if (!s.fns.name) {                                                                \
    s.why = "the Vulkan loader " + s.path + " lacks " #name;                        \
    return;                                                                         \
  }
    FISH_VK_GLOBAL_FNS(FISH_VK_LOAD_GLOBAL)
#undef FISH_VK_LOAD_GLOBAL
    s.fns.vkEnumerateInstanceVersion =
        reinterpret_cast<PFN_vkEnumerateInstanceVersion>(gipa(VK_NULL_HANDLE, "vkEnumerateInstanceVersion"));
    s.ok = true;
  });
  if (!s.ok) {
    if (why) *why = s.why;
    return nullptr;
  }
  return &s.fns;
}

std::string loader_path() {
  std::string why;
  return loader(&why) ? state().path : std::string();
}

bool load_instance_fns(const GlobalFns& g, VkInstance instance, bool debug_utils, InstanceFns* out, std::string* why) {
#define FISH_VK_LOAD_INSTANCE(name)                                                      \
  out->name = reinterpret_cast<PFN_##name>(g.vkGetInstanceProcAddr(instance, #name));     \
  if (!out->name) {                                                                      \
    *why = "the Vulkan instance lacks " #name " (a Vulkan 1.1 loader and driver are needed)"; \
    return false;                                                                        \
  }
  FISH_VK_INSTANCE_FNS(FISH_VK_LOAD_INSTANCE)
#undef FISH_VK_LOAD_INSTANCE
  if (debug_utils) {
    out->vkCreateDebugUtilsMessengerEXT = reinterpret_cast<PFN_vkCreateDebugUtilsMessengerEXT>(
        g.vkGetInstanceProcAddr(instance, "vkCreateDebugUtilsMessengerEXT"));
    out->vkDestroyDebugUtilsMessengerEXT = reinterpret_cast<PFN_vkDestroyDebugUtilsMessengerEXT>(
        g.vkGetInstanceProcAddr(instance, "vkDestroyDebugUtilsMessengerEXT"));
  }
  return true;
}

bool load_device_fns(const InstanceFns& i, VkDevice device, DeviceFns* out, std::string* why) {
#define FISH_VK_LOAD_DEVICE(name)                                                  \
  out->name = reinterpret_cast<PFN_##name>(i.vkGetDeviceProcAddr(device, #name));   \
  if (!out->name) {                                                                \
    *why = "the Vulkan device lacks " #name;                                       \
    return false;                                                                  \
  }
  FISH_VK_DEVICE_FNS(FISH_VK_LOAD_DEVICE)
#undef FISH_VK_LOAD_DEVICE
  return true;
}

const char* result_name(VkResult r) {
  switch (r) {
    case VK_SUCCESS: return "VK_SUCCESS";
    case VK_NOT_READY: return "VK_NOT_READY";
    case VK_TIMEOUT: return "VK_TIMEOUT";
    case VK_INCOMPLETE: return "VK_INCOMPLETE";
    case VK_ERROR_OUT_OF_HOST_MEMORY: return "VK_ERROR_OUT_OF_HOST_MEMORY";
    case VK_ERROR_OUT_OF_DEVICE_MEMORY: return "VK_ERROR_OUT_OF_DEVICE_MEMORY";
    case VK_ERROR_INITIALIZATION_FAILED: return "VK_ERROR_INITIALIZATION_FAILED";
    case VK_ERROR_DEVICE_LOST: return "VK_ERROR_DEVICE_LOST";
    case VK_ERROR_MEMORY_MAP_FAILED: return "VK_ERROR_MEMORY_MAP_FAILED";
    case VK_ERROR_LAYER_NOT_PRESENT: return "VK_ERROR_LAYER_NOT_PRESENT";
    case VK_ERROR_EXTENSION_NOT_PRESENT: return "VK_ERROR_EXTENSION_NOT_PRESENT";
    case VK_ERROR_FEATURE_NOT_PRESENT: return "VK_ERROR_FEATURE_NOT_PRESENT";
    case VK_ERROR_INCOMPATIBLE_DRIVER: return "VK_ERROR_INCOMPATIBLE_DRIVER";
    case VK_ERROR_TOO_MANY_OBJECTS: return "VK_ERROR_TOO_MANY_OBJECTS";
    case VK_ERROR_FORMAT_NOT_SUPPORTED: return "VK_ERROR_FORMAT_NOT_SUPPORTED";
    case VK_ERROR_FRAGMENTED_POOL: return "VK_ERROR_FRAGMENTED_POOL";
    case VK_ERROR_OUT_OF_POOL_MEMORY: return "VK_ERROR_OUT_OF_POOL_MEMORY";
    case VK_ERROR_INVALID_EXTERNAL_HANDLE: return "VK_ERROR_INVALID_EXTERNAL_HANDLE";
    case VK_ERROR_FRAGMENTATION: return "VK_ERROR_FRAGMENTATION";
    case VK_ERROR_UNKNOWN: return "VK_ERROR_UNKNOWN";
    default: return "VkResult(other)";
  }
}

}  // namespace fish::vk
