// One command buffer, one fence: record, submit, wait. Stage 1 runs every
// matmul (group) as one synchronous submission; a span (stage 2) records its
// whole forward pass into the same kind of buffer.
//
// With profiling on, two timestamps bracket the kernels of a submission
// (mark_begin / mark_end), and last_gpu_seconds() reads the device time between
// them after the wait.
#pragma once
#include <cstdint>

#include "device.h"

namespace fish::vk {

// Submits cmd (ended) with `fence` (reset here) and waits for it. spin: poll
// the fence for up to 50 ms before blocking, since a blocking wait wakes up
// tens of µs late on some drivers and a decode step is ~1 ms. Throws
// Failure(Device) on any error, incl. device loss.
void submit_wait(const Device& dev, VkCommandBuffer cmd, VkFence fence, bool spin);

class Submitter {
 public:
  explicit Submitter(const Device& dev);
  ~Submitter();
  Submitter(const Submitter&) = delete;
  Submitter& operator=(const Submitter&) = delete;

  VkCommandBuffer begin();   // a fresh recording
  void mark_begin();         // timestamp before the kernels (profiling only)
  void mark_end();           // timestamp after them
  void submit_and_wait();    // throws Failure (Device) on any error, incl. device loss

  void set_profiling(bool on) { profiling_ = on && query_pool_ != VK_NULL_HANDLE; }
  void set_spin(bool on) { spin_ = on; }
  bool spin() const { return spin_; }
  bool profiling() const { return profiling_; }
  bool can_profile() const { return query_pool_ != VK_NULL_HANDLE; }
  double last_gpu_seconds() const { return last_gpu_s_; }

  // A global memory dependency: src stage/access -> dst stage/access.
  void barrier(VkPipelineStageFlags src, VkAccessFlags src_access, VkPipelineStageFlags dst, VkAccessFlags dst_access);

 private:
  const Device& dev_;
  VkCommandPool pool_ = VK_NULL_HANDLE;
  VkCommandBuffer cmd_ = VK_NULL_HANDLE;
  VkFence fence_ = VK_NULL_HANDLE;
  VkQueryPool query_pool_ = VK_NULL_HANDLE;
  bool profiling_ = false;
  bool spin_ = false;
  bool marked_ = false;
  double last_gpu_s_ = 0;
};

}  // namespace fish::vk
