// The embedded SPIR-V table.
#include "shaders.h"

#include <cstdint>

#include "fish_vk_shaders.inc"

namespace fish::vk {

const FishVkModule* modules_begin() { return fish_vk_modules; }
const FishVkModule* modules_end() { return fish_vk_modules + sizeof(fish_vk_modules) / sizeof(fish_vk_modules[0]); }

const FishVkModule* find_module(std::string_view name) {
  for (const FishVkModule* m = modules_begin(); m != modules_end(); ++m)
    if (name == m->name) return m;
  return nullptr;
}

const char* shaders_source_sha256() { return FISH_VK_SHADERS_SOURCE_SHA256; }
const char* shaders_compiler() { return FISH_VK_SHADERS_COMPILER; }

}  // namespace fish::vk
