// For tests that load fish_vulkan as the engine does (a plugin file,
// configured by the environment at fish_plugin_query): the device it should
// find is a GPU when there is one, else lavapipe. select_vulkan_device() sets
// FISH_GPU=cpu, once per process and before any query, when the caller left
// FISH_GPU unset and no GPU is found (a caller's FISH_GPU is kept as it is).
#pragma once
#include <cstdlib>

#include "backend.h"

namespace fish::vktest {

inline void select_vulkan_device() {
  static const bool done = [] {
    const vk::VkConfig c = vk::VkConfig::from_env();
    if (c.gpu == vk::VkConfig::GpuMode::Default && c.error.empty() && vk::probe_devices(c, nullptr).chosen < 0)
      setenv("FISH_GPU", "cpu", 1);
    return true;
  }();
  (void)done;
}

}  // namespace fish::vktest
