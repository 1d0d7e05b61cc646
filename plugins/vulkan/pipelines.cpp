// Lazily created layouts, shader modules, pipelines and descriptor sets.
#include "pipelines.h"

#include "shaders.h"

namespace fish::vk {
namespace {
constexpr uint32_t kSetsPerPool = 256;
constexpr uint32_t kBuffersPerPool = kSetsPerPool * 8;
}  // namespace

Pipelines::Pipelines(const Device& dev) : dev_(dev) {}

Pipelines::~Pipelines() {
  const DeviceFns& f = dev_.fns();
  VkDevice d = dev_.handle();
  for (auto& [k, p] : pipelines_) f.vkDestroyPipeline(d, p, nullptr);
  for (auto& [k, m] : modules_) f.vkDestroyShaderModule(d, m, nullptr);
  for (auto& [k, l] : layouts_) {
    f.vkDestroyPipelineLayout(d, l.pipeline_layout, nullptr);
    f.vkDestroyDescriptorSetLayout(d, l.set_layout, nullptr);
  }
  for (VkDescriptorPool p : pools_) f.vkDestroyDescriptorPool(d, p, nullptr);
}

const Layout& Pipelines::layout(uint32_t n_buffers, uint32_t push_bytes) {
  auto key = std::make_pair(n_buffers, push_bytes);
  if (auto it = layouts_.find(key); it != layouts_.end()) return it->second;
  const DeviceFns& f = dev_.fns();
  std::vector<VkDescriptorSetLayoutBinding> b(n_buffers);
  for (uint32_t i = 0; i < n_buffers; ++i) {
    b[i].binding = i;
    b[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
    b[i].descriptorCount = 1;
    b[i].stageFlags = VK_SHADER_STAGE_COMPUTE_BIT;
  }
  Layout l;
  l.n_buffers = n_buffers;
  l.push_bytes = push_bytes;
  auto sci = vk_init<VkDescriptorSetLayoutCreateInfo>(VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO);
  sci.bindingCount = n_buffers;
  sci.pBindings = b.data();
  check(f.vkCreateDescriptorSetLayout(dev_.handle(), &sci, nullptr, &l.set_layout), "vkCreateDescriptorSetLayout");
  VkPushConstantRange pcr{VK_SHADER_STAGE_COMPUTE_BIT, 0, push_bytes};
  auto pci = vk_init<VkPipelineLayoutCreateInfo>(VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO);
  pci.setLayoutCount = 1;
  pci.pSetLayouts = &l.set_layout;
  pci.pushConstantRangeCount = push_bytes ? 1 : 0;
  pci.pPushConstantRanges = &pcr;
  VkResult r = f.vkCreatePipelineLayout(dev_.handle(), &pci, nullptr, &l.pipeline_layout);
  if (r != VK_SUCCESS) {
    f.vkDestroyDescriptorSetLayout(dev_.handle(), l.set_layout, nullptr);
    check(r, "vkCreatePipelineLayout");
  }
  return layouts_.emplace(key, l).first->second;
}

VkShaderModule Pipelines::module_for(const std::string& name) {
  if (auto it = modules_.find(name); it != modules_.end()) return it->second;
  const FishVkModule* m = find_module(name);
  if (!m) throw Failure(FailKind::Internal, "no embedded SPIR-V module named " + name);
  auto ci = vk_init<VkShaderModuleCreateInfo>(VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO);
  ci.codeSize = m->words * 4;
  ci.pCode = m->code;
  VkShaderModule sm = VK_NULL_HANDLE;
  check(dev_.fns().vkCreateShaderModule(dev_.handle(), &ci, nullptr, &sm), ("vkCreateShaderModule(" + name + ")").c_str());
  modules_.emplace(name, sm);
  return sm;
}

VkPipeline Pipelines::get(const std::string& module, const Layout& layout, const std::vector<uint32_t>& spec) {
  auto key = std::make_tuple(module, layout.pipeline_layout, spec);
  if (auto it = pipelines_.find(key); it != pipelines_.end()) return it->second;
  std::vector<VkSpecializationMapEntry> entries(spec.size());
  for (uint32_t i = 0; i < spec.size(); ++i) entries[i] = {i, i * 4u, 4};
  VkSpecializationInfo si{uint32_t(entries.size()), entries.data(), spec.size() * 4, spec.data()};
  auto ci = vk_init<VkComputePipelineCreateInfo>(VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO);
  ci.stage.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO;
  ci.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
  ci.stage.module = module_for(module);
  ci.stage.pName = "main";
  ci.stage.pSpecializationInfo = spec.empty() ? nullptr : &si;
  ci.layout = layout.pipeline_layout;
  if (dev_.captures_statistics()) ci.flags |= VK_PIPELINE_CREATE_CAPTURE_STATISTICS_BIT_KHR;
  VkPipeline p = VK_NULL_HANDLE;
  check(dev_.fns().vkCreateComputePipelines(dev_.handle(), VK_NULL_HANDLE, 1, &ci, nullptr, &p),
        ("vkCreateComputePipelines(" + module + ")").c_str());
  pipelines_.emplace(key, p);
  if (dev_.captures_statistics()) {
    std::string s;
    for (uint32_t v : spec) {
      if (!s.empty()) s += ',';
      s += std::to_string(v);
    }
    dev_.log(1, "pipeline " + module + " (spec " + (s.empty() ? "-" : s) + "): " + dev_.statistics(p));
  }
  return p;
}

VkDescriptorSet Pipelines::allocate_set(const Layout& layout) {
  const DeviceFns& f = dev_.fns();
  auto ai = vk_init<VkDescriptorSetAllocateInfo>(VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO);
  ai.descriptorSetCount = 1;
  ai.pSetLayouts = &layout.set_layout;
  VkDescriptorSet set = VK_NULL_HANDLE;
  for (auto it = pools_.rbegin(); it != pools_.rend(); ++it) {
    ai.descriptorPool = *it;
    if (f.vkAllocateDescriptorSets(dev_.handle(), &ai, &set) == VK_SUCCESS) {
      set_pool_[set] = *it;
      return set;
    }
  }
  VkDescriptorPoolSize ps{VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, kBuffersPerPool};
  auto pci = vk_init<VkDescriptorPoolCreateInfo>(VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO);
  pci.flags = VK_DESCRIPTOR_POOL_CREATE_FREE_DESCRIPTOR_SET_BIT;
  pci.maxSets = kSetsPerPool;
  pci.poolSizeCount = 1;
  pci.pPoolSizes = &ps;
  VkDescriptorPool pool = VK_NULL_HANDLE;
  check(f.vkCreateDescriptorPool(dev_.handle(), &pci, nullptr, &pool), "vkCreateDescriptorPool");
  pools_.push_back(pool);
  ai.descriptorPool = pool;
  check(f.vkAllocateDescriptorSets(dev_.handle(), &ai, &set), "vkAllocateDescriptorSets");
  set_pool_[set] = pool;
  return set;
}

void Pipelines::free_set(VkDescriptorSet set) {
  auto it = set_pool_.find(set);
  if (it == set_pool_.end()) return;
  dev_.fns().vkFreeDescriptorSets(dev_.handle(), it->second, 1, &set);
  set_pool_.erase(it);
}

void Pipelines::write_set(VkDescriptorSet set, uint32_t n, const VkBuffer* buffers, const uint64_t* offsets,
                          const uint64_t* ranges) {
  std::vector<VkDescriptorBufferInfo> info(n);
  std::vector<VkWriteDescriptorSet> w(n);
  for (uint32_t i = 0; i < n; ++i) {
    info[i] = {buffers[i], offsets[i], ranges[i]};
    w[i] = vk_init<VkWriteDescriptorSet>(VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET);
    w[i].dstSet = set;
    w[i].dstBinding = i;
    w[i].descriptorCount = 1;
    w[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
    w[i].pBufferInfo = &info[i];
  }
  dev_.fns().vkUpdateDescriptorSets(dev_.handle(), n, w.data(), 0, nullptr);
}

}  // namespace fish::vk
