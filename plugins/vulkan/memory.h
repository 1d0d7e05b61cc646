// Device memory: buffers, the live VRAM budget and exact accounting.
//
// Budget rules (spec "Budgets and knobs"):
//   device_free()  live free bytes of the heap fish allocates from: with
//                  VK_EXT_memory_budget heap budget - heap usage (other programs'
//                  use is seen live), else 80% of the heap minus fish's own bytes.
//   ceiling        fish's own allocations stay below it: the host's explicit
//                  budget, else FISH_VRAM_BUDGET_MB, else 85% of device_free() at open.
//   headroom       an allocation that would leave less than max(256 MB, 10% of
//                  the heap) free on the live budget is refused (measured: a heap
//                  filled to the last ~64 MB gets pages demoted to system memory).
//   memory_free()  what can still be allocated: min(ceiling - own,
//                  device_free - headroom), never negative.
// Every buffer has its own VkDeviceMemory, so resident() (the sum of the
// allocation sizes in that heap) is exact and returns to its old value on release.
#pragma once
#include <cstdint>
#include <string>

#include "device.h"

namespace fish::vk {

enum class MemKind {
  Device,    // device-local, not host-visible when the device has such a type
  DeviceMapped,  // the same memory type, mapped: only when it is host-visible + coherent (UMA, lavapipe)
  Upload,    // host-visible + coherent, written by the host (staging in)
  Readback,  // host-visible + coherent, cached when possible (staging out)
};

struct Buffer {
  VkBuffer buffer = VK_NULL_HANDLE;
  VkDeviceMemory memory = VK_NULL_HANDLE;
  uint64_t size = 0;        // bytes usable (what was asked for)
  uint64_t alloc_size = 0;  // bytes of the allocation
  void* mapped = nullptr;   // host-visible kinds: persistently mapped
  bool counted = false;     // allocated from the budget heap
  explicit operator bool() const { return buffer != VK_NULL_HANDLE; }
};

class Memory {
 public:
  // host_budget: the host's explicit ceiling in bytes (0: FISH_VRAM_BUDGET_MB / 85% rule).
  Memory(const Device& dev, const VkConfig& cfg, uint64_t host_budget, LogFn log);
  Memory(const Memory&) = delete;
  Memory& operator=(const Memory&) = delete;

  // Throws Failure(OutOfMemory) naming `what`, the sizes and the rule that refused it.
  Buffer create(uint64_t size, MemKind kind, VkBufferUsageFlags usage, const std::string& what);
  // The bytes create(size, kind, usage) would allocate, and whether they come
  // from the budget heap (counted in resident()); nothing is allocated.
  uint64_t allocation_size(uint64_t size, MemKind kind, VkBufferUsageFlags usage, bool* counted) const;
  void destroy(Buffer& b);

  uint64_t device_free() const;
  uint64_t memory_free() const;
  uint64_t resident() const { return own_; }
  uint64_t ceiling() const { return ceiling_; }
  uint64_t headroom() const { return headroom_; }
  uint64_t heap_size() const { return heap_size_; }
  const char* ceiling_source() const { return ceiling_source_; }
  // The device-local type is host-visible and coherent (integrated GPUs, CPU
  // implementations): weights are written in place, without a staging copy.
  bool device_memory_mappable() const { return device_type_mappable_; }

 private:
  int pick_type(uint32_t type_bits, MemKind kind) const;

  const Device& dev_;
  LogFn log_;
  uint32_t heap_ = 0;           // the heap weights live in
  uint64_t heap_size_ = 0;
  uint64_t own_ = 0;            // bytes fish holds in heap_
  uint64_t ceiling_ = 0;
  uint64_t headroom_ = 0;
  const char* ceiling_source_ = "85% of free at open";
  bool device_type_mappable_ = false;
};

}  // namespace fish::vk
