// Destroying a backend gives its device memory back to the driver, watched
// through VK_EXT_memory_budget's heap figures. They are the whole device's, so
// this case runs alone (RUN_SERIAL): with other tests allocating on the same
// GPU at once (ctest -j8 on the H200) it read their allocations as its own.
#include <catch2/catch.hpp>

#include <chrono>
#include <functional>
#include <thread>

#include "vk_test_util.h"

using fish::GgmlType;
using fish::vk::VulkanBackend;
using namespace fish::vktest;

namespace {
constexpr uint64_t kMiB = uint64_t(1) << 20;
}  // namespace

TEST_CASE("destroy releases the device memory", "[vulkan]") {
  auto probe = open_backend("vk backend destroy");
  if (!probe) FISH_SKIP(skip_reason());
  if (!probe->device()->caps().memory_budget)
    FISH_SKIP("destroy: no VK_EXT_memory_budget on " + probe->device()->info().name + " to watch the heap with");
  fish::vk::Memory& mem = *probe->memory();
  // A driver may update the heap budget some time after an allocation or a
  // free (NVIDIA: the first read after two 64 MB uploads still showed them
  // free), so each check polls for up to 2 s.
  const auto settles = [&](const std::function<bool(uint64_t)>& ok) {
    for (int i = 0; i < 40; ++i) {
      if (ok(mem.device_free())) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return ok(mem.device_free());
  };
  const uint64_t before = mem.device_free();
  {
    VulkanBackend be(test_options());
    const Matrix m = random_matrix(GgmlType::F32, 4096, 4096, 8);  // 64 MB
    REQUIRE(be.upload(upload_desc(m)));
    REQUIRE(be.upload(upload_desc(m)));
    CHECK(settles([&](uint64_t f) { return f + 100 * kMiB < before; }));
  }
  CHECK(settles([&](uint64_t f) { return f + 16 * kMiB >= before; }));
}
