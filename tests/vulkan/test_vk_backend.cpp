// fish_vulkan's backend rules: lazy open and status strings, device selection,
// the VRAM budget (ceiling, headroom, memory_free formula), exact
// bytes_resident, describe(), and clean failures on bad input.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <string>

#include "vk_test_util.h"

using fish::GgmlType;
using fish::vk::DeviceCandidate;
using fish::vk::FailKind;
using fish::vk::VulkanBackend;
using namespace fish::vktest;

namespace {

constexpr uint64_t kMiB = uint64_t(1) << 20;

// Sets an environment variable for the life of the object.
struct EnvVar {
  EnvVar(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old, had_ = true;
    if (value) setenv(name, value, 1);
    else unsetenv(name);
  }
  ~EnvVar() {
    if (had_) setenv(name_.c_str(), old_.c_str(), 1);
    else unsetenv(name_.c_str());
  }
  std::string name_, old_;
  bool had_ = false;
};

DeviceCandidate cand(uint32_t index, VkPhysicalDeviceType type, uint64_t heap, int score, bool usable = true) {
  DeviceCandidate c;
  c.index = index;
  c.name = "dev" + std::to_string(index);
  c.type = type;
  c.device_local_bytes = heap;
  c.score = usable ? score : 0;
  c.usable = usable;
  if (!usable) c.why_not = "is a CPU implementation (used only with FISH_GPU=cpu)";
  return c;
}

}  // namespace

TEST_CASE("device choice: discrete > integrated > virtual, forced index, reasons", "[vulkan]") {
  std::vector<DeviceCandidate> all = {cand(0, VK_PHYSICAL_DEVICE_TYPE_CPU, 1 << 30, 10, false),
                                      cand(1, VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU, 2ull << 30, 200),
                                      cand(2, VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU, 8ull << 30, 100),
                                      cand(3, VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU, 4ull << 30, 300),
                                      cand(4, VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU, 8ull << 30, 300)};
  std::string why;
  CHECK(fish::vk::choose_device(all, -1, &why) == 4);  // discrete, larger heap wins the tie
  all.pop_back();
  CHECK(fish::vk::choose_device(all, -1, &why) == 3);
  all.pop_back();
  CHECK(fish::vk::choose_device(all, -1, &why) == 1);  // integrated over virtual despite the heap
  CHECK(fish::vk::choose_device(all, 2, &why) == 2);   // forced
  CHECK(fish::vk::choose_device(all, 7, &why) == -1);
  CHECK(why.find("device 7") != std::string::npos);
  CHECK(fish::vk::choose_device(all, 0, &why) == -1);
  CHECK(why.find("FISH_GPU=cpu") != std::string::npos);
  std::vector<DeviceCandidate> none = {all[0]};
  CHECK(fish::vk::choose_device(none, -1, &why) == -1);
  CHECK(why.find("dev0") != std::string::npos);
}

TEST_CASE("probe on this machine: CPU implementations only with FISH_GPU=cpu", "[vulkan]") {
  fish::vk::ProbeReport plain, cpu;
  {
    EnvVar g("FISH_GPU", nullptr);
    plain = fish::vk::probe_devices(fish::vk::VkConfig::from_env(), nullptr);
  }
  {
    EnvVar g("FISH_GPU", "cpu");
    cpu = fish::vk::probe_devices(fish::vk::VkConfig::from_env(), nullptr);
  }
  if (!plain.ok) {
    std::printf("SKIPPED: probe: no Vulkan loader/instance: %s\n", plain.error.c_str());
    return;
  }
  for (const auto& d : plain.devices) {
    INFO(d.name << ": " << d.why_not);
    if (d.type == VK_PHYSICAL_DEVICE_TYPE_CPU) CHECK_FALSE(d.usable);
  }
  for (const auto& d : cpu.devices) {
    INFO(d.name << ": " << d.why_not);
    CHECK(d.usable == (d.type == VK_PHYSICAL_DEVICE_TYPE_CPU && d.api_version >= VK_API_VERSION_1_1));
    if (d.usable) CHECK(d.score == 10);
  }
  if (plain.chosen >= 0) CHECK(plain.devices[size_t(plain.chosen)].type != VK_PHYSICAL_DEVICE_TYPE_CPU);
}

TEST_CASE("bad knobs and FISH_GPU=off make the backend unavailable with the reason", "[vulkan]") {
  {
    EnvVar e("FISH_GPU_DEVICE", "abc");
    VulkanBackend be({});
    CHECK_FALSE(be.open());
    CHECK(be.error().find("FISH_GPU_DEVICE='abc'") != std::string::npos);
    CHECK(be.status().rfind("failed: ", 0) == 0);
    uint64_t free = 1;
    CHECK_FALSE(be.memory_free(&free));  // sticky
    CHECK(be.error_kind() == FailKind::NoDevice);
  }
  {
    EnvVar e("FISH_GPU", "off");
    VulkanBackend be({});
    CHECK_FALSE(be.open());
    CHECK(be.error().find("FISH_GPU") != std::string::npos);
  }
  {
    EnvVar e("FISH_GPU_DEVICE", "99");
    VulkanBackend be({});
    CHECK_FALSE(be.open());
    INFO(be.error());
    CHECK((be.error().find("device 99") != std::string::npos || be.error().find("loader") != std::string::npos));
  }
}

TEST_CASE("lazy open, status and describe strings", "[vulkan]") {
  auto probe = open_backend("vk backend status");  // settles FISH_GPU for this process
  if (!probe) return;
  probe.reset();
  VulkanBackend be({});
  CHECK(be.status() == "not opened");
  uint64_t r = 1;
  REQUIRE(be.bytes_resident(&r));
  CHECK(r == 0);
  CHECK(be.status() == "not opened");  // bytes_resident does not open the device
  uint64_t free = 0;
  REQUIRE(be.memory_free(&free));      // memory_free does
  CHECK(be.status().rfind("open: ", 0) == 0);
  const std::string dev = be.device()->info().name;
  // "(int8 activations)" where the int8 path is on (the default where the
  // device accelerates int8 dot products, or FISH_VK_INT8=1).
  const std::string i8 = be.kernels()->int8() ? " (int8 activations)" : "";
  CHECK(be.describe() == "vulkan " + dev + ": 0 MB weights" + i8);
  const Matrix a = random_matrix(GgmlType::Q4_K, 256, 64, 1), b = random_matrix(GgmlType::Q6_K, 256, 64, 2);
  auto* w1 = be.upload(upload_desc(a));
  auto* w2 = be.upload(upload_desc(a));
  auto* w3 = be.upload(upload_desc(b));
  REQUIRE((w1 && w2 && w3));
  const std::string d = be.describe();
  INFO(d);
  CHECK(d.rfind("vulkan " + dev + ": ", 0) == 0);
  CHECK(d.find(" MB weights, 2 x Q4_K, 1 x Q6_K") != std::string::npos);
  CHECK(be.profile().empty());  // nothing ran yet
}

TEST_CASE("FISH_VK_SPAN_MV reaches the span matvec's shapes", "[vulkan]") {
  using namespace fish::vk;
  auto probe = open_backend("vk span matvec shapes");  // settles FISH_GPU for this process
  if (!probe) return;
  probe.reset();
  for (const char* spec : {"q=1x32,o=2x64,gu=8x128,d=4x256", "16x256"}) {
    EnvVar mv("FISH_VK_SPAN_MV", spec);
    VulkanBackend be({});
    uint64_t free = 0;
    REQUIRE(be.memory_free(&free));  // opens the device
    SpanMvShape want[kRoles];
    std::string why;
    REQUIRE(VkConfig::parse_span_mv(spec, want, &why));
    for (uint32_t r = 0; r < kRoles; ++r) {
      INFO(spec << ", role " << r);
      CHECK(be.kernels()->span_shape(SpanRole(r)).rows == want[r].rows);
      CHECK(be.kernels()->span_shape(SpanRole(r)).wg == want[r].wg);
    }
    CHECK(be.kernels()->span_shape(kRoleGateUp).rows == (spec[0] == 'q' ? 8u : 16u));
    // And the shapes a decode matvec then takes (Q4_K 4096 -> 14336, gate/up):
    const MatmulType& q4k = *matmul_type(12);  // Q4_K
    const MatvecConfig c = be.kernels()->span_matvec_config(q4k, 4096, 14336, 1, SpanFusion{0, false, false, kRoleGateUp});
    CHECK(c.rows == (spec[0] == 'q' ? 8u : 16u));
    CHECK(c.wg == (spec[0] == 'q' ? 128u : 256u));
  }
}

TEST_CASE("bytes_resident is exact and memory_free follows the budget formula", "[vulkan]") {
  auto be = open_backend("vk backend accounting");
  if (!be) return;
  fish::vk::Memory& mem = *be->memory();
  const uint64_t heap = mem.heap_size();
  CHECK(mem.headroom() == std::max<uint64_t>(256 * kMiB, heap / 10));
  uint64_t r0 = 0, f0 = 0;
  REQUIRE(be->bytes_resident(&r0));
  REQUIRE(be->memory_free(&f0));
  CHECK(f0 == std::min(mem.ceiling() - r0, mem.device_free() > mem.headroom() ? mem.device_free() - mem.headroom() : 0));

  const Matrix m = random_matrix(GgmlType::Q8_0, 4096, 300, 3);  // ~1.3 MB
  auto* w = be->upload(upload_desc(m));
  REQUIRE(w);
  uint64_t r1 = 0, f1 = 0;
  REQUIRE(be->bytes_resident(&r1));
  REQUIRE(be->memory_free(&f1));
  CHECK(r1 - r0 == w->alloc_bytes);
  CHECK(w->alloc_bytes >= m.data.size());
  CHECK(w->alloc_bytes < m.data.size() + 1 * kMiB);
  if (!be->device()->caps().memory_budget) CHECK(f0 - f1 == w->alloc_bytes);  // 80%-of-heap accounting is exact
  REQUIRE(be->release(w));
  uint64_t r2 = 0;
  REQUIRE(be->bytes_resident(&r2));
  CHECK(r2 == r0);
}

TEST_CASE("FISH_VRAM_BUDGET_MB: an upload past the ceiling fails cleanly, the backend goes on", "[vulkan]") {
  if (!open_backend("vk backend ceiling")) return;
  EnvVar e("FISH_VRAM_BUDGET_MB", "3");
  VulkanBackend be({});
  REQUIRE(be.open());
  CHECK(be.memory()->ceiling() == 3 * kMiB);
  const Matrix m = random_matrix(GgmlType::F16, 1024, 1000, 4);  // 2 MB
  auto* w = be.upload(upload_desc(m));
  REQUIRE(w);
  uint64_t free = 0;
  REQUIRE(be.memory_free(&free));
  uint64_t res = 0;
  REQUIRE(be.bytes_resident(&res));
  CHECK(free <= 3 * kMiB - res);
  CHECK(be.upload(upload_desc(m)) == nullptr);
  CHECK(be.error_kind() == FailKind::OutOfMemory);
  INFO(be.error());
  CHECK(be.error().find("ceiling") != std::string::npos);
  CHECK(be.error().find("FISH_VRAM_BUDGET_MB") != std::string::npos);
  uint64_t res2 = 0;
  REQUIRE(be.bytes_resident(&res2));
  CHECK(res2 == res);  // the failed upload holds nothing
  const auto x = random_x(1, 1024, 5);
  std::vector<float> y(1000);
  REQUIRE(be.matmul(w, x.data(), 1, y.data()));
  int64_t bad = 0;
  bound_ratio(m, x.data(), 1, y.data(), &bad);
  CHECK(bad == 0);
}

TEST_CASE("the host's budget and the headroom refuse allocations with the reason", "[vulkan]") {
  if (!open_backend("vk backend host budget")) return;
  VulkanBackend::Options o;
  o.memory_budget = 1 * kMiB;
  VulkanBackend be(o);
  REQUIRE(be.open());
  CHECK(be.memory()->ceiling() == 1 * kMiB);
  const Matrix m = random_matrix(GgmlType::F32, 512, 600, 6);  // 1.2 MB
  CHECK(be.upload(upload_desc(m)) == nullptr);
  CHECK(be.error().find("host's budget") != std::string::npos);

  // Headroom: with a ceiling that does not bind, a buffer that would leave less
  // than max(256 MB, 10% of the heap) free on the live budget is refused
  // before anything is allocated.
  VulkanBackend::Options big;
  big.memory_budget = uint64_t(1) << 50;
  VulkanBackend be2(big);
  REQUIRE(be2.open());
  fish::vk::Memory& mem = *be2.memory();
  const uint64_t free = mem.device_free();
  REQUIRE(free > 0);
  uint64_t res0 = mem.resident();
  try {
    mem.create(free - mem.headroom() + 64 * kMiB, fish::vk::MemKind::Device, VK_BUFFER_USAGE_STORAGE_BUFFER_BIT, "probe");
    FAIL("allocation into the headroom was not refused");
  } catch (const fish::vk::Failure& f) {
    CHECK(f.kind() == FailKind::OutOfMemory);
    CHECK(std::string(f.what()).find("headroom") != std::string::npos);
  }
  CHECK(mem.resident() == res0);
  uint64_t mf = 0;
  REQUIRE(be2.memory_free(&mf));
  const uint64_t live = mem.device_free();
  const uint64_t want = live > mem.headroom() ? live - mem.headroom() : 0;
  CHECK(mf <= want + 16 * kMiB);  // live figures: other programs may allocate in between
  CHECK(mf + 16 * kMiB >= want);
}

TEST_CASE("bad arguments fail with a reason and leave the backend usable", "[vulkan]") {
  auto be = open_backend("vk backend bad input");
  if (!be) return;
  const Matrix m = random_matrix(GgmlType::Q4_0, 64, 8, 7);
  auto u = upload_desc(m);
  u.data = nullptr;
  CHECK(be->upload(u) == nullptr);
  CHECK(be->error_kind() == FailKind::InvalidArgument);
  u = upload_desc(m);
  u.nbytes -= 1;
  CHECK(be->upload(u) == nullptr);
  CHECK(be->error().find("nbytes") != std::string::npos);
  u = upload_desc(m);
  u.n_in = 48;  // not a whole number of 32-element blocks
  CHECK(be->upload(u) == nullptr);
  CHECK(be->error_kind() == FailKind::InvalidArgument);
  auto* w = be->upload(upload_desc(m));
  REQUIRE(w);
  std::vector<float> x(64, 1.0f), y(8);
  CHECK_FALSE(be->matmul(w, x.data(), 0, y.data()));
  CHECK_FALSE(be->matmul(w, nullptr, 1, y.data()));
  auto* fake = reinterpret_cast<fish::vk::Weight*>(&x);
  CHECK_FALSE(be->matmul(fake, x.data(), 1, y.data()));
  CHECK(be->error_kind() == FailKind::InvalidArgument);
  CHECK_FALSE(be->release(fake));
  REQUIRE(be->matmul(w, x.data(), 1, y.data()));
  REQUIRE(be->release(w));
  CHECK_FALSE(be->release(w));  // twice
  CHECK_FALSE(be->matmul(w, x.data(), 1, y.data()));
}

TEST_CASE("destroy releases the device memory", "[vulkan]") {
  auto probe = open_backend("vk backend destroy");
  if (!probe) return;
  if (!probe->device()->caps().memory_budget) {
    std::printf("SKIPPED: destroy: no VK_EXT_memory_budget on %s to watch the heap with\n", probe->device()->info().name.c_str());
    return;
  }
  fish::vk::Memory& mem = *probe->memory();
  const uint64_t before = mem.device_free();
  {
    VulkanBackend be({});
    const Matrix m = random_matrix(GgmlType::F32, 4096, 4096, 8);  // 64 MB
    REQUIRE(be.upload(upload_desc(m)));
    REQUIRE(be.upload(upload_desc(m)));
    CHECK(mem.device_free() + 100 * kMiB < before);
  }
  CHECK(mem.device_free() + 16 * kMiB >= before);
}

TEST_CASE("FISH_VK_VALIDATE=1 enables the validation layer or says it is missing", "[vulkan]") {
  if (!open_backend("vk backend validation")) return;
  EnvVar e("FISH_VK_VALIDATE", "1");
  std::vector<std::string> lines;
  VulkanBackend::Options o;
  o.log = [&lines](int, const std::string& m) { lines.push_back(m); };
  VulkanBackend be(o);
  REQUIRE(be.open());
  bool missing = false;
  for (const auto& l : lines) missing |= l.find("VK_LAYER_KHRONOS_validation is not installed") != std::string::npos;
  std::printf("validation layer %s\n", missing ? "not installed (warning logged)" : "enabled");
  const Matrix m = random_matrix(GgmlType::Q6_K, 256, 70, 9);
  auto* w = be.upload(upload_desc(m));
  REQUIRE(w);
  const auto x = random_x(37, 256, 10);
  std::vector<float> y(37 * 70);
  REQUIRE(be.matmul(w, x.data(), 37, y.data()));
  REQUIRE(be.matmul(w, x.data(), 3, y.data()));
  for (const auto& l : lines) {
    INFO(l);
    CHECK(l.find("validation: ") == std::string::npos);  // no validation errors or warnings
  }
}
