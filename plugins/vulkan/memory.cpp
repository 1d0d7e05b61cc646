// Buffers and the VRAM budget (rules in memory.h).
#include "memory.h"

#include <algorithm>

namespace fish::vk {
namespace {

constexpr uint64_t kMiB = uint64_t(1) << 20;

std::string mb(uint64_t bytes) { return std::to_string((bytes + kMiB / 2) / kMiB) + " MB"; }

}  // namespace

Memory::Memory(const Device& dev, const VkConfig& cfg, uint64_t host_budget, LogFn log)
    : dev_(dev), log_(std::move(log)) {
  // Find the heap a storage buffer in device-local memory comes from.
  const DeviceFns& f = dev_.fns();
  auto bci = vk_init<VkBufferCreateInfo>(VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO);
  bci.size = 256;
  bci.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT;
  bci.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
  VkBuffer probe = VK_NULL_HANDLE;
  check(f.vkCreateBuffer(dev_.handle(), &bci, nullptr, &probe), "vkCreateBuffer");
  VkMemoryRequirements req{};
  f.vkGetBufferMemoryRequirements(dev_.handle(), probe, &req);
  f.vkDestroyBuffer(dev_.handle(), probe, nullptr);
  const int t = pick_type(req.memoryTypeBits, MemKind::Device);
  if (t < 0) throw Failure(FailKind::NoDevice, dev_.info().name + " has no memory type for storage buffers");
  const auto& mp = dev_.memory_properties();
  heap_ = mp.memoryTypes[t].heapIndex;
  heap_size_ = mp.memoryHeaps[heap_].size;
  const VkMemoryPropertyFlags need = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
  device_type_mappable_ = (mp.memoryTypes[t].propertyFlags & need) == need;
  headroom_ = std::max<uint64_t>(256 * kMiB, heap_size_ / 10);
  if (host_budget > 0) {
    ceiling_ = host_budget;
    ceiling_source_ = "the host's budget";
  } else if (cfg.budget_bytes > 0) {
    ceiling_ = cfg.budget_bytes;
    ceiling_source_ = "FISH_VRAM_BUDGET_MB";
  } else {
    ceiling_ = device_free() / 100 * 85;
  }
  if (log_)
    log_(2, "memory: heap " + std::to_string(heap_) + " " + mb(heap_size_) + ", free " + mb(device_free()) +
                (dev_.caps().memory_budget ? " (VK_EXT_memory_budget)" : " (80% of the heap)") + ", ceiling " +
                mb(ceiling_) + " (" + ceiling_source_ + "), headroom " + mb(headroom_));
}

int Memory::pick_type(uint32_t type_bits, MemKind kind) const {
  const auto& mp = dev_.memory_properties();
  int best = -1, best_rank = -1;
  for (uint32_t i = 0; i < mp.memoryTypeCount; ++i) {
    if (!(type_bits & (1u << i))) continue;
    const VkMemoryPropertyFlags fl = mp.memoryTypes[i].propertyFlags;
    const bool local = fl & VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT;
    const bool visible = fl & VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT;
    const bool coherent = fl & VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
    const bool cached = fl & VK_MEMORY_PROPERTY_HOST_CACHED_BIT;
    int rank = -1;
    switch (kind) {
      case MemKind::Device:
      case MemKind::DeviceMapped: rank = local ? (visible ? 2 : 3) : 1; break;
      case MemKind::Upload:
        if (visible && coherent) rank = 1 + (!cached ? 1 : 0) + (!local ? 1 : 0);
        break;
      case MemKind::Readback:
        if (visible && coherent) rank = 1 + (cached ? 2 : 0) + (!local ? 1 : 0);
        break;
    }
    if (rank > best_rank) {
      best_rank = rank;
      best = int(i);
    }
  }
  return best;
}

uint64_t Memory::device_free() const {
  if (dev_.caps().memory_budget) {
    auto budget = vk_init<VkPhysicalDeviceMemoryBudgetPropertiesEXT>(VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MEMORY_BUDGET_PROPERTIES_EXT);
    auto mp2 = vk_init<VkPhysicalDeviceMemoryProperties2>(VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MEMORY_PROPERTIES_2);
    mp2.pNext = &budget;
    dev_.instance().fns().vkGetPhysicalDeviceMemoryProperties2(dev_.physical(), &mp2);
    const uint64_t b = budget.heapBudget[heap_], u = budget.heapUsage[heap_];
    return b > u ? b - u : 0;
  }
  const uint64_t cap = heap_size_ / 10 * 8;
  return cap > own_ ? cap - own_ : 0;
}

uint64_t Memory::memory_free() const {
  const uint64_t by_ceiling = ceiling_ > own_ ? ceiling_ - own_ : 0;
  const uint64_t live = device_free();
  const uint64_t by_device = live > headroom_ ? live - headroom_ : 0;
  return std::min(by_ceiling, by_device);
}

Buffer Memory::create(uint64_t size, MemKind kind, VkBufferUsageFlags usage, const std::string& what) {
  const DeviceFns& f = dev_.fns();
  Buffer b;
  b.size = size;
  auto bci = vk_init<VkBufferCreateInfo>(VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO);
  bci.size = std::max<uint64_t>(size, 16);
  bci.usage = usage;
  bci.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
  check(f.vkCreateBuffer(dev_.handle(), &bci, nullptr, &b.buffer), "vkCreateBuffer");
  VkMemoryRequirements req{};
  f.vkGetBufferMemoryRequirements(dev_.handle(), b.buffer, &req);
  const int type = pick_type(req.memoryTypeBits, kind);
  const bool map = kind != MemKind::Device;
  auto fail = [&](FailKind k, const std::string& msg) {
    f.vkDestroyBuffer(dev_.handle(), b.buffer, nullptr);
    throw Failure(k, msg);
  };
  if (type < 0) fail(FailKind::Device, what + ": no suitable memory type");
  if (kind == MemKind::DeviceMapped && !device_type_mappable_) fail(FailKind::Internal, what + ": device memory is not mappable");
  const auto& mp = dev_.memory_properties();
  b.counted = mp.memoryTypes[type].heapIndex == heap_;
  if (b.counted) {
    if (own_ + req.size > ceiling_)
      fail(FailKind::OutOfMemory, what + ": " + mb(req.size) + " would exceed fish_vulkan's ceiling of " + mb(ceiling_) +
                                      " (" + ceiling_source_ + "; " + mb(own_) + " held)");
    const uint64_t live = device_free();
    if (live < req.size || live - req.size < headroom_)
      fail(FailKind::OutOfMemory, what + ": " + mb(req.size) + " would leave less than the headroom of " +
                                      mb(headroom_) + " free on the device (" + mb(live) + " free now)");
  }
  auto mai = vk_init<VkMemoryAllocateInfo>(VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO);
  mai.allocationSize = req.size;
  mai.memoryTypeIndex = uint32_t(type);
  VkResult r = f.vkAllocateMemory(dev_.handle(), &mai, nullptr, &b.memory);
  if (r != VK_SUCCESS)
    fail(r == VK_ERROR_OUT_OF_DEVICE_MEMORY || r == VK_ERROR_OUT_OF_HOST_MEMORY ? FailKind::OutOfMemory : FailKind::Device,
         what + ": vkAllocateMemory(" + mb(req.size) + ") failed: " + result_name(r));
  r = f.vkBindBufferMemory(dev_.handle(), b.buffer, b.memory, 0);
  if (r == VK_SUCCESS && map) r = f.vkMapMemory(dev_.handle(), b.memory, 0, VK_WHOLE_SIZE, 0, &b.mapped);
  if (r != VK_SUCCESS) {
    f.vkFreeMemory(dev_.handle(), b.memory, nullptr);
    fail(FailKind::Device, what + ": binding/mapping memory failed: " + result_name(r));
  }
  b.alloc_size = req.size;
  if (b.counted) own_ += b.alloc_size;
  return b;
}

uint64_t Memory::allocation_size(uint64_t size, MemKind kind, VkBufferUsageFlags usage, bool* counted) const {
  const DeviceFns& f = dev_.fns();
  auto bci = vk_init<VkBufferCreateInfo>(VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO);
  bci.size = std::max<uint64_t>(size, 16);
  bci.usage = usage;
  bci.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
  VkBuffer b = VK_NULL_HANDLE;
  check(f.vkCreateBuffer(dev_.handle(), &bci, nullptr, &b), "vkCreateBuffer");
  VkMemoryRequirements req{};
  f.vkGetBufferMemoryRequirements(dev_.handle(), b, &req);
  f.vkDestroyBuffer(dev_.handle(), b, nullptr);
  const int type = pick_type(req.memoryTypeBits, kind);
  if (counted) *counted = type >= 0 && dev_.memory_properties().memoryTypes[type].heapIndex == heap_;
  return req.size;
}

void Memory::destroy(Buffer& b) {
  if (!b.buffer) return;
  const DeviceFns& f = dev_.fns();
  f.vkDestroyBuffer(dev_.handle(), b.buffer, nullptr);
  if (b.memory) f.vkFreeMemory(dev_.handle(), b.memory, nullptr);  // unmaps implicitly
  if (b.counted) own_ -= b.alloc_size;
  b = Buffer{};
}

}  // namespace fish::vk
