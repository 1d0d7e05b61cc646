// fish_bench_vk_span --sync: the cost of a dependency between two steps
// (pipeline barrier vs in-dispatch grid barrier), see bench_vk_sync.cpp.
#pragma once
#include <cstdint>

#include "bench_vk_span_mv.h"

namespace fish::vktest {

// stream_bytes: the size of rig.kv(), which the phases read.
int sync_bench(vk::VulkanBackend& be, SpanRig& rig, uint64_t stream_bytes, uint32_t sms, const TimeFn& time);
// The span's decode matvec steps with and without a barrier after each
// (rig: >= 64K arena words, >= 16K parameter words). small: tiny shapes.
int sync_matvec_bench(vk::VulkanBackend& be, SpanRig& rig, int copies, bool small, const TimeFn& time);

}  // namespace fish::vktest
