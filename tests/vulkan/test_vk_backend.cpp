// fish_vulkan's backend rules: its configuration (the strict parser of the
// FISH_* variables), lazy open and status strings, device selection, the VRAM
// budget (ceiling, headroom, memory_free formula), exact bytes_resident,
// describe(), and clean failures on bad input.
#include <catch2/catch.hpp>

#include <fstream>
#include <map>
#include <set>
#include <string>

#include "readme_table.h"
#include "vk_test_util.h"

using fish::GgmlType;
using fish::vk::DeviceCandidate;
using fish::vk::FailKind;
using fish::vk::VkConfig;
using fish::vk::VulkanBackend;
using namespace fish::vktest;

namespace {

constexpr uint64_t kMiB = uint64_t(1) << 20;

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
  VkConfig with_cpu;
  with_cpu.gpu = VkConfig::GpuMode::Cpu;
  const fish::vk::ProbeReport plain = fish::vk::probe_devices(VkConfig{}, nullptr);
  const fish::vk::ProbeReport cpu = fish::vk::probe_devices(with_cpu, nullptr);
  if (!plain.ok) FISH_SKIP("probe: no Vulkan loader/instance: " + plain.error);
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

// The parser: every variable's accepted values, and refusals that name the
// variable and what it accepts (probe then answers FISH_E_INVALID_ARGUMENT).
TEST_CASE("FISH_* variables: the strict parser", "[vulkan]") {
  auto parse = [](std::map<std::string, std::string> env) { return VkConfig::parse(env); };
  const VkConfig d = parse({});
  CHECK(d.error.empty());
  CHECK(d.gpu == VkConfig::GpuMode::Default);
  CHECK(d.int8 == -1);
  CHECK(d.decode_rows == fish::vk::DecodeRows::Auto);
  CHECK((d.span_tokens == 0 && d.coopmat && d.attn_split == 128 && d.attn_max_splits == 32 && d.spin && !d.bench_fill_kv));
  const VkConfig c = parse({{"FISH_GPU", "CPU"}, {"FISH_GPU_DEVICE", "2"}, {"FISH_GPU_VERBOSE", "2"},
                            {"FISH_GPU_PROFILE", "1"}, {"FISH_VRAM_BUDGET_MB", "300"}, {"FISH_VK_QUEUE", "universal"},
                            {"FISH_VK_VALIDATE", "1"}, {"FISH_VK_SPIN", "0"}, {"FISH_VK_INT8", "0"},
                            {"FISH_VK_COOPMAT", "0"}, {"FISH_VK_SPAN_QFOLD", "15"}, {"FISH_VK_MV_ROWS", "4"}, {"FISH_VK_MV_WG", "256"},
                            {"FISH_VK_SPAN_MV", "q=1x32,d=4"}, {"FISH_VK_SPAN_TOKENS", "64"},
                            {"FISH_VK_ATTN_SPLIT", "256"}, {"FISH_VK_ATTN_MAX_SPLITS", "8"},
                            {"FISH_VK_BENCH_FILL_KV", "1"}, {"FISH_VK_PIPELINE_STATS", "1"},
                            {"FISH_BACKEND", "vulkan"}, {"HOME", "/root"}});
  INFO(c.error);
  CHECK(c.error.empty());
  CHECK(c.gpu == VkConfig::GpuMode::Cpu);
  CHECK((c.device_index == 2 && c.verbose == 2 && c.profile_level == 1 && c.budget_bytes == 300ull << 20));
  CHECK((c.queue_universal && c.validate && !c.spin && c.int8 == 0 && c.decode_rows == fish::vk::DecodeRows::B32));
  CHECK((c.mv_rows == 4 && c.mv_wg == 256 && c.span_tokens == 64 && c.attn_split == 256 && c.attn_max_splits == 8));
  CHECK((c.span_mv[fish::vk::kRoleQkv].rows == 1 && c.span_mv[fish::vk::kRoleQkv].wg == 32));
  CHECK((c.span_mv[fish::vk::kRoleDown].rows == 4 && c.span_mv[fish::vk::kRoleDown].wg == 0));
  CHECK(c.span_mv[fish::vk::kRoleWo].rows == 0);
  CHECK(c.bench_fill_kv);
  CHECK((c.pipeline_stats && !d.pipeline_stats));
  CHECK(!c.coopmat);
  CHECK(parse({{"FISH_GPU", "off"}}).gpu == VkConfig::GpuMode::Off);
  CHECK(parse({{"FISH_VK_SPAN_QFOLD", "0"}}).decode_rows == fish::vk::DecodeRows::Q8K);
  CHECK(parse({{"FISH_VK_INT8", ""}}).error.empty());  // set but empty: as if unset
  // Refused: values outside a variable's set, and FISH_VK_* names the plugin does not read
  // (a typo, or one of the variants that were removed).
  const std::pair<const char*, const char*> bad[] = {
      {"FISH_GPU", "maybe"},         {"FISH_GPU_DEVICE", "abc"},     {"FISH_GPU_VERBOSE", "3"},
      {"FISH_GPU_PROFILE", "-1"},    {"FISH_VRAM_BUDGET_MB", "0"},   {"FISH_VK_QUEUE", "graphics"},
      {"FISH_VK_VALIDATE", "yes"},   {"FISH_VK_SPIN", "2"},          {"FISH_VK_INT8", "on"},
      {"FISH_VK_SPAN_QFOLD", "11"},  {"FISH_VK_SPAN_QFOLD", "59"},   {"FISH_VK_MV_ROWS", "3"},
      {"FISH_VK_MV_WG", "100"},      {"FISH_VK_SPAN_MV", "q=3"},     {"FISH_VK_SPAN_MV", "x=2"},
      {"FISH_VK_SPAN_MV", "2x48"},   {"FISH_VK_SPAN_MV", "2,"},      {"FISH_VK_SPAN_TOKENS", "4"},
      {"FISH_VK_ATTN_SPLIT", "8"},   {"FISH_VK_ATTN_MAX_SPLITS", "129"}, {"FISH_VK_BENCH_FILL_KV", "true"},
      {"FISH_VK_SPAN_GU", "1"},      {"FISH_VK_SPAN_NORM", "0"},     {"FISH_VK_SPAN_QSG", "0"},
      {"FISH_VK_SPAN_I8", "247"},    {"FISH_VK_SPAN_U64", "10"},     {"FISH_VK_ATTN_HEADS", "1"},
      {"FISH_VK_ATTN_VLATE", "1"},   {"FISH_VK_SPAN_FUSE", "0"},     {"FISH_VK_INT", "1"},
      {"FISH_VK_PIPELINE_STATS", "2"},
  };
  for (const auto& [name, value] : bad) {
    const VkConfig r = parse({{name, value}});
    INFO(name << "=" << value << ": " << r.error);
    CHECK(r.error.find(name) != std::string::npos);
    // A value outside the set names it and what is accepted; an unknown name lists the known ones.
    CHECK((r.error.find(std::string("='") + value + "' is not ") != std::string::npos ||
           r.error.find("is not a fish_vulkan variable (it reads FISH_VK_QUEUE, ") != std::string::npos));
  }
}

// plugins/vulkan/README.md's table of variables is the list the parser reads.
TEST_CASE("the README's configuration table lists exactly the variables the parser reads", "[vulkan]") {
  const std::set<std::string> readme =
      fish::test::readme_table_variables(std::string(FISH_SOURCE_DIR) + "/plugins/vulkan/README.md", "## Configuration");
  REQUIRE_FALSE(readme.empty());
  const std::vector<std::string> names = VkConfig::variable_names();
  const std::set<std::string> parser(names.begin(), names.end());
  CHECK(parser.size() == names.size());
  CHECK(readme == parser);
  for (const std::string& n : parser) {
    INFO(n);
    CHECK(readme.count(n) == 1);
  }
  for (const std::string& n : readme) {
    INFO(n);
    CHECK(parser.count(n) == 1);
  }
}

TEST_CASE("a refused configuration and FISH_GPU=off make the backend unavailable with the reason", "[vulkan]") {
  {
    VulkanBackend be(test_options(VkConfig::parse({{"FISH_GPU_DEVICE", "abc"}})));
    CHECK_FALSE(be.open());
    CHECK(be.error().find("FISH_GPU_DEVICE='abc'") != std::string::npos);
    CHECK(be.status().rfind("failed: ", 0) == 0);
    uint64_t free = 1;
    CHECK_FALSE(be.memory_free(&free));  // sticky
    CHECK(be.error_kind() == FailKind::NoDevice);
  }
  {
    VkConfig off = test_config();
    off.gpu = VkConfig::GpuMode::Off;
    VulkanBackend be(test_options(off));
    CHECK_FALSE(be.open());
    CHECK(be.error().find("FISH_GPU") != std::string::npos);
  }
  {
    VkConfig far = test_config();
    far.device_index = 99;
    VulkanBackend be(test_options(far));
    CHECK_FALSE(be.open());
    INFO(be.error());
    CHECK((be.error().find("device 99") != std::string::npos || be.error().find("loader") != std::string::npos));
  }
}

TEST_CASE("lazy open, status and describe strings", "[vulkan]") {
  if (!open_backend("vk backend status")) FISH_SKIP(skip_reason());
  VulkanBackend be(test_options());
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
  if (!open_backend("vk span matvec shapes")) FISH_SKIP(skip_reason());
  for (const char* spec : {"q=1x32,o=2x64,gu=8x128,d=4x256", "16x256"}) {
    VkConfig cfg = test_config();
    REQUIRE(VkConfig::parse_span_mv(spec, cfg.span_mv));
    VulkanBackend be(test_options(cfg));
    uint64_t free = 0;
    REQUIRE(be.memory_free(&free));  // opens the device
    for (uint32_t r = 0; r < kRoles; ++r) {
      INFO(spec << ", role " << r);
      CHECK(be.kernels()->span_shape(SpanRole(r)).rows == cfg.span_mv[r].rows);
      CHECK(be.kernels()->span_shape(SpanRole(r)).wg == cfg.span_mv[r].wg);
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
  if (!be) FISH_SKIP(skip_reason());
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
  if (!open_backend("vk backend ceiling")) FISH_SKIP(skip_reason());
  VkConfig cfg = test_config();
  cfg.budget_bytes = 3 * kMiB;  // FISH_VRAM_BUDGET_MB=3
  VulkanBackend be(test_options(cfg));
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
  if (!open_backend("vk backend host budget")) FISH_SKIP(skip_reason());
  VulkanBackend::Options o = test_options();
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
  VulkanBackend::Options big = test_options();
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
  if (!be) FISH_SKIP(skip_reason());
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

// Options for cfg whose log messages up to max_level land in lines.
VulkanBackend::Options logged_options(const VkConfig& cfg, std::vector<std::string>& lines, int max_level) {
  VulkanBackend::Options o = test_options(cfg);
  o.log = [&lines, max_level](int level, const std::string& m) {
    if (level <= max_level) lines.push_back(m);
  };
  return o;
}

TEST_CASE("FISH_VK_VALIDATE=1 enables the validation layer or says it is missing", "[vulkan]") {
  if (!open_backend("vk backend validation")) FISH_SKIP(skip_reason());
  VkConfig cfg = test_config();
  cfg.validate = true;  // FISH_VK_VALIDATE=1
  std::vector<std::string> lines;
  VulkanBackend be(logged_options(cfg, lines, 3));
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

TEST_CASE("FISH_VK_PIPELINE_STATS=1 logs every pipeline's statistics or says the device gives none", "[vulkan]") {
  if (!open_backend("vk backend pipeline statistics")) FISH_SKIP(skip_reason());
  VkConfig cfg = test_config();
  cfg.pipeline_stats = true;  // FISH_VK_PIPELINE_STATS=1
  std::vector<std::string> lines;
  VulkanBackend be(logged_options(cfg, lines, 1));  // its lines are warnings
  REQUIRE(be.open());
  const Matrix m = random_matrix(GgmlType::Q4_K, 256, 70, 11);
  auto* w = be.upload(upload_desc(m));
  REQUIRE(w);
  const auto x = random_x(37, 256, 12);
  std::vector<float> y(37 * 70), y_ref(37 * 70);
  REQUIRE(be.matmul(w, x.data(), 37, y.data()));
  REQUIRE(be.matmul(w, x.data(), 1, y.data() + 36 * 70));
  // The same products without capture: statistics change nothing.
  auto ref = open_backend("vk backend pipeline statistics (reference)");
  REQUIRE(ref);
  auto* wr = ref->upload(upload_desc(m));
  REQUIRE(wr);
  REQUIRE(ref->matmul(wr, x.data(), 37, y_ref.data()));
  REQUIRE(ref->matmul(wr, x.data(), 1, y_ref.data() + 36 * 70));
  CHECK(y == y_ref);
  int warned = 0, stats = 0;
  for (const auto& l : lines) {
    INFO(l);
    if (l.find("FISH_VK_PIPELINE_STATS=1 but ") == 0) {
      ++warned;
      CHECK(l.find("does not give pipeline statistics") != std::string::npos);
    } else if (l.find("pipeline ") == 0) {
      ++stats;
      const size_t colon = l.find("): ");
      REQUIRE(colon != std::string::npos);
      CHECK(l.find(" (spec ") != std::string::npos);
      CHECK(l.size() > colon + 3);  // at least one statistic
    }
  }
  std::printf("pipeline statistics: %d lines, %s\n", stats, warned ? "the device gives none (warned)" : "captured");
  CHECK(warned + (stats > 0 ? 1 : 0) == 1);  // one or the other, never both or neither
}
