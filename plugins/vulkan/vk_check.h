// Errors inside fish_vulkan: a failed Vulkan call or a refused request throws
// vk::Failure; the backend's public methods catch it and turn it into a status
// and a message (nothing crosses the plugin boundary by exception).
#pragma once
#include <functional>
#include <stdexcept>
#include <string>

#include "vk_loader.h"

namespace fish::vk {

// NoDevice: nothing usable to open (loader, instance, selection); Device: a
// device call failed or the device was lost (sticky).
enum class FailKind { NoDevice, Device, OutOfMemory, Unsupported, InvalidArgument, Range, Internal };

class Failure : public std::runtime_error {
 public:
  Failure(FailKind kind, const std::string& msg, VkResult r = VK_SUCCESS)
      : std::runtime_error(msg), kind_(kind), result_(r) {}
  FailKind kind() const { return kind_; }
  VkResult result() const { return result_; }

 private:
  FailKind kind_;
  VkResult result_;
};

// Throws for anything but VK_SUCCESS: out-of-memory results become
// FailKind::OutOfMemory, everything else FailKind::Device.
inline void check(VkResult r, const char* what) {
  if (r == VK_SUCCESS) return;
  const bool oom = r == VK_ERROR_OUT_OF_DEVICE_MEMORY || r == VK_ERROR_OUT_OF_HOST_MEMORY;
  throw Failure(oom ? FailKind::OutOfMemory : FailKind::Device, std::string(what) + " failed: " + result_name(r), r);
}

// Logging inside the plugin: level as in plugin_abi.h (0 error, 1 warn, 2 info, 3 debug).
using LogFn = std::function<void(int level, const std::string& message)>;

}  // namespace fish::vk
