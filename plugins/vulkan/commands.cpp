// Command recording and synchronous submission.
#include "commands.h"

#include <chrono>

namespace fish::vk {

Submitter::Submitter(const Device& dev) : dev_(dev) {
  const DeviceFns& f = dev_.fns();
  auto pci = vk_init<VkCommandPoolCreateInfo>(VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO);
  pci.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
  pci.queueFamilyIndex = dev_.queue_family();
  check(f.vkCreateCommandPool(dev_.handle(), &pci, nullptr, &pool_), "vkCreateCommandPool");
  auto ai = vk_init<VkCommandBufferAllocateInfo>(VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO);
  ai.commandPool = pool_;
  ai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
  ai.commandBufferCount = 1;
  check(f.vkAllocateCommandBuffers(dev_.handle(), &ai, &cmd_), "vkAllocateCommandBuffers");
  auto fci = vk_init<VkFenceCreateInfo>(VK_STRUCTURE_TYPE_FENCE_CREATE_INFO);
  check(f.vkCreateFence(dev_.handle(), &fci, nullptr, &fence_), "vkCreateFence");
  if (dev_.caps().timestamp_period_ns > 0) {
    auto qci = vk_init<VkQueryPoolCreateInfo>(VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO);
    qci.queryType = VK_QUERY_TYPE_TIMESTAMP;
    qci.queryCount = 2;
    if (f.vkCreateQueryPool(dev_.handle(), &qci, nullptr, &query_pool_) != VK_SUCCESS) query_pool_ = VK_NULL_HANDLE;
  }
}

Submitter::~Submitter() {
  const DeviceFns& f = dev_.fns();
  if (query_pool_) f.vkDestroyQueryPool(dev_.handle(), query_pool_, nullptr);
  if (fence_) f.vkDestroyFence(dev_.handle(), fence_, nullptr);
  if (pool_) f.vkDestroyCommandPool(dev_.handle(), pool_, nullptr);  // frees cmd_
}

VkCommandBuffer Submitter::begin() {
  const DeviceFns& f = dev_.fns();
  check(f.vkResetCommandBuffer(cmd_, 0), "vkResetCommandBuffer");
  auto bi = vk_init<VkCommandBufferBeginInfo>(VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO);
  bi.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
  check(f.vkBeginCommandBuffer(cmd_, &bi), "vkBeginCommandBuffer");
  marked_ = false;
  if (profiling_) f.vkCmdResetQueryPool(cmd_, query_pool_, 0, 2);
  return cmd_;
}

void Submitter::mark_begin() {
  if (profiling_) dev_.fns().vkCmdWriteTimestamp(cmd_, VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, query_pool_, 0);
}

void Submitter::mark_end() {
  if (!profiling_) return;
  dev_.fns().vkCmdWriteTimestamp(cmd_, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, query_pool_, 1);
  marked_ = true;
}

void Submitter::barrier(VkPipelineStageFlags src, VkAccessFlags src_access, VkPipelineStageFlags dst,
                        VkAccessFlags dst_access) {
  auto mb = vk_init<VkMemoryBarrier>(VK_STRUCTURE_TYPE_MEMORY_BARRIER);
  mb.srcAccessMask = src_access;
  mb.dstAccessMask = dst_access;
  dev_.fns().vkCmdPipelineBarrier(cmd_, src, dst, 0, 1, &mb, 0, nullptr, 0, nullptr);
}

void submit_wait(const Device& dev, VkCommandBuffer cmd, VkFence fence, bool spin) {
  const DeviceFns& f = dev.fns();
  check(f.vkResetFences(dev.handle(), 1, &fence), "vkResetFences");
  auto si = vk_init<VkSubmitInfo>(VK_STRUCTURE_TYPE_SUBMIT_INFO);
  si.commandBufferCount = 1;
  si.pCommandBuffers = &cmd;
  VkResult r = f.vkQueueSubmit(dev.queue(), 1, &si, fence);
  if (r != VK_SUCCESS) throw Failure(FailKind::Device, std::string("vkQueueSubmit failed: ") + result_name(r), r);
  if (spin) {
    const auto t0 = std::chrono::steady_clock::now();
    while ((r = f.vkGetFenceStatus(dev.handle(), fence)) == VK_NOT_READY) {
      if (std::chrono::steady_clock::now() - t0 > std::chrono::milliseconds(50)) break;
    }
    if (r == VK_SUCCESS) return;
    if (r != VK_NOT_READY)
      throw Failure(FailKind::Device, std::string("vkGetFenceStatus failed: ") + result_name(r), r);
  }
  r = f.vkWaitForFences(dev.handle(), 1, &fence, VK_TRUE, UINT64_MAX);
  if (r != VK_SUCCESS) throw Failure(FailKind::Device, std::string("vkWaitForFences failed: ") + result_name(r), r);
}

void Submitter::submit_and_wait() {
  const DeviceFns& f = dev_.fns();
  check(f.vkEndCommandBuffer(cmd_), "vkEndCommandBuffer");
  submit_wait(dev_, cmd_, fence_, spin_);
  last_gpu_s_ = 0;
  if (profiling_ && marked_) {
    uint64_t ts[2] = {0, 0};
    if (f.vkGetQueryPoolResults(dev_.handle(), query_pool_, 0, 2, sizeof(ts), ts, sizeof(uint64_t),
                                VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT) == VK_SUCCESS && ts[1] >= ts[0])
      last_gpu_s_ = double(ts[1] - ts[0]) * double(dev_.caps().timestamp_period_ns) * 1e-9;
  }
}

}  // namespace fish::vk
