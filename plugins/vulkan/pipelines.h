// Compute pipelines over the embedded modules, created lazily and cached.
//
// Every kernel binds n storage buffers at bindings 0..n-1 of set 0 and takes
// push constants; one (descriptor set layout, pipeline layout) pair exists per
// (n buffers, push bytes) shape, so later kernel families (the span's rmsnorm,
// RoPE, attention, ...) are more modules and more get() calls, nothing else.
// Specialisation constants are passed as ids 0, 1, 2, ... in order.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "device.h"

namespace fish::vk {

struct Layout {
  VkDescriptorSetLayout set_layout = VK_NULL_HANDLE;
  VkPipelineLayout pipeline_layout = VK_NULL_HANDLE;
  uint32_t n_buffers = 0;
  uint32_t push_bytes = 0;
};

class Pipelines {
 public:
  explicit Pipelines(const Device& dev);
  ~Pipelines();
  Pipelines(const Pipelines&) = delete;
  Pipelines& operator=(const Pipelines&) = delete;

  const Layout& layout(uint32_t n_buffers, uint32_t push_bytes);
  // Throws Failure when the module is missing or the driver refuses it.
  VkPipeline get(const std::string& module, const Layout& layout, const std::vector<uint32_t>& spec);
  size_t count() const { return pipelines_.size(); }

  // Descriptor sets of a layout, from pools that grow as needed.
  VkDescriptorSet allocate_set(const Layout& layout);
  void free_set(VkDescriptorSet set);
  // Binds buffers[i] (whole range from offsets[i], ranges[i] bytes) at binding i.
  void write_set(VkDescriptorSet set, uint32_t n, const VkBuffer* buffers, const uint64_t* offsets, const uint64_t* ranges);

 private:
  VkShaderModule module_for(const std::string& name);

  const Device& dev_;
  std::map<std::pair<uint32_t, uint32_t>, Layout> layouts_;
  std::map<std::string, VkShaderModule> modules_;
  std::map<std::tuple<std::string, VkPipelineLayout, std::vector<uint32_t>>, VkPipeline> pipelines_;
  std::vector<VkDescriptorPool> pools_;
  std::map<VkDescriptorSet, VkDescriptorPool> set_pool_;
};

}  // namespace fish::vk
