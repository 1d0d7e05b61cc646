// fish_vulkan as a plugin file: no link-time Vulkan dependency (the ELF's
// DT_NEEDED list), loading and querying it does no Vulkan work (the loader is
// not mapped until probe), the ABI 2.0 table behaves (a refused span says
// why), a bad FISH_VK_* value is refused by probe, and the engine's plugin
// conformance suite passes on it, its checks of several sequences included.
#include <catch2/catch.hpp>

#include <dlfcn.h>
#include <elf.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <tuple>
#include <vector>

#include "backend/conformance.h"
#include "fish/plugin_abi.h"
#include "plugin_device.h"
#include "scoped_env.h"
#include "test_skip.h"

namespace {

const char* kPlugin = FISH_VULKAN_PLUGIN;

// DT_NEEDED entries of an ELF64 shared object, read from its section headers.
std::vector<std::string> needed_libraries(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::vector<uint8_t> b((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  REQUIRE(b.size() > sizeof(Elf64_Ehdr));
  Elf64_Ehdr eh;
  std::memcpy(&eh, b.data(), sizeof eh);
  REQUIRE(std::memcmp(eh.e_ident, ELFMAG, SELFMAG) == 0);
  REQUIRE(eh.e_ident[EI_CLASS] == ELFCLASS64);
  REQUIRE(eh.e_shoff + uint64_t(eh.e_shnum) * sizeof(Elf64_Shdr) <= b.size());
  std::vector<Elf64_Shdr> sh(eh.e_shnum);
  std::memcpy(sh.data(), b.data() + eh.e_shoff, sh.size() * sizeof(Elf64_Shdr));
  std::vector<std::string> out;
  for (const auto& s : sh) {
    if (s.sh_type != SHT_DYNAMIC) continue;
    REQUIRE(s.sh_link < sh.size());
    const Elf64_Shdr& str = sh[s.sh_link];
    for (uint64_t off = s.sh_offset; off + sizeof(Elf64_Dyn) <= s.sh_offset + s.sh_size; off += sizeof(Elf64_Dyn)) {
      Elf64_Dyn d;
      std::memcpy(&d, b.data() + off, sizeof d);
      if (d.d_tag == DT_NULL) break;
      if (d.d_tag == DT_NEEDED && str.sh_offset + d.d_un.d_val < b.size())
        out.emplace_back(reinterpret_cast<const char*>(b.data() + str.sh_offset + d.d_un.d_val));
    }
  }
  return out;
}

bool vulkan_mapped() {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line))
    if (line.find("libvulkan") != std::string::npos) return true;
  return false;
}

fish_host_api make_host() {
  fish_host_api h{};
  h.struct_size = sizeof h;
  h.abi_version = FISH_PLUGIN_ABI_VERSION;
  h.host_version = "test_vk_plugin";
  h.log = [](int32_t level, const char* source, const char* msg) {
    if (level <= FISH_LOG_WARN) std::fprintf(stderr, "[%s] %s\n", source, msg);
  };
  return h;
}

fish_plugin_query_fn entry() {
  void* h = dlopen(kPlugin, RTLD_NOW | RTLD_LOCAL);
  INFO(dlerror());
  REQUIRE(h);
  void* sym = dlsym(h, FISH_PLUGIN_ENTRY);
  REQUIRE(sym);
  fish_plugin_query_fn fn;
  std::memcpy(&fn, &sym, sizeof fn);
  return fn;
}

// The plugin's table, negotiated at this header's version.
fish_plugin_api query_api() {
  static fish_host_api host = make_host();
  fish_plugin_api api{};
  api.struct_size = sizeof api;
  REQUIRE(entry()(FISH_PLUGIN_ABI_VERSION, &host, &api) == FISH_OK);
  return api;
}

}  // namespace

// First in the file: when all cases run in one process, nothing has opened the
// Vulkan loader before this one looks.
TEST_CASE("loading and querying fish_vulkan does no Vulkan work", "[vulkan]") {
  REQUIRE_FALSE(vulkan_mapped());
  fish_plugin_query_fn q = entry();
  static fish_host_api host = make_host();
  fish_plugin_api api{};
  api.struct_size = sizeof api;
  REQUIRE(q(FISH_PLUGIN_ABI_VERSION, &host, &api) == FISH_OK);
  CHECK_FALSE(vulkan_mapped());
  fish_backend* b = nullptr;
  fish_backend_config cfg{};
  cfg.struct_size = sizeof cfg;
  cfg.device_index = -1;
  REQUIRE(api.backend_create(&cfg, &b) == FISH_OK);
  CHECK_FALSE(vulkan_mapped());  // backend_create is lazy too
  const char* s = nullptr;
  REQUIRE(api.describe(b, FISH_DESCRIBE_STATUS, &s) == FISH_OK);
  CHECK(std::string(s) == "not opened");
  fish_probe_result pr{};
  pr.struct_size = sizeof pr;
  const fish_status st = api.probe(&pr);
  std::printf("probe: %d, %u devices, score %d%s%s\n", st, pr.n_devices, pr.score, st ? ": " : "",
              st ? api.plugin_error() : "");
  // probe() is the first thing allowed to open the loader (when one is installed).
  if (st == FISH_OK) CHECK(vulkan_mapped());
  api.backend_destroy(b);
}

TEST_CASE("readelf: fish_vulkan has no link-time Vulkan dependency", "[vulkan]") {
  const auto libs = needed_libraries(kPlugin);
  REQUIRE_FALSE(libs.empty());
  for (const auto& l : libs) {
    INFO(l);
    CHECK(l.find("vulkan") == std::string::npos);
  }
}

TEST_CASE("the ABI table: negotiation, lazy open, a product, describe, destroy", "[vulkan]") {
  fish_plugin_query_fn q = entry();
  static fish_host_api host = make_host();
  fish_plugin_api api{};
  api.struct_size = sizeof api;
  // Another major is refused with a message.
  REQUIRE(q(FISH_ABI_MAKE_VERSION(FISH_PLUGIN_ABI_MAJOR + 1, 0), &host, &api) == FISH_E_VERSION);
  REQUIRE(api.message);
  CHECK(std::string(api.message).find("ABI") != std::string::npos);
  api = fish_plugin_api{};
  api.struct_size = sizeof api;
  REQUIRE(q(FISH_PLUGIN_ABI_VERSION, &host, &api) == FISH_OK);
  CHECK(std::string(api.name) == "vulkan");
  CHECK(api.abi_version == FISH_PLUGIN_ABI_VERSION);
  // Stage 2: the span functions, as a group, span_kv_copy included (spans of several sequences).
  CHECK(FISH_API_HAS(&api, span_bytes));
  CHECK(FISH_API_HAS(&api, span_create));
  CHECK(FISH_API_HAS(&api, span_destroy));
  CHECK(FISH_API_HAS(&api, span_set_head));
  CHECK(FISH_API_HAS(&api, span_forward));
  CHECK(FISH_API_HAS(&api, span_kv_len));
  CHECK(FISH_API_HAS(&api, span_kv_truncate));
  CHECK(FISH_API_HAS(&api, span_kv_reserve));
  CHECK(FISH_API_HAS(&api, span_kv_copy));
  fish::vktest::select_vulkan_device();
  api = query_api();  // the variables are read at the query
  fish_probe_result pr{};
  pr.struct_size = sizeof pr;
  const fish_status st = api.probe(&pr);
  if (st != FISH_OK) FISH_SKIP(std::string("ABI table: no usable Vulkan device: ") + api.plugin_error());
  REQUIRE(pr.n_devices >= 1);
  fish_device_info di{};
  di.struct_size = sizeof di;
  REQUIRE(api.device_info(uint32_t(pr.default_device), &di) == FISH_OK);
  std::printf("device: %s (%s), score %d\n", di.name, di.detail, di.score);
  CHECK(di.score == pr.score);
  CHECK(api.device_info(pr.n_devices, &di) == FISH_E_RANGE);

  fish_backend* b = nullptr;
  fish_backend_config cfg{};
  cfg.struct_size = sizeof cfg;
  cfg.device_index = -1;
  REQUIRE(api.backend_create(&cfg, &b) == FISH_OK);
  uint64_t free = 0;
  REQUIRE(api.memory_free(b, &free) == FISH_OK);
  CHECK(free > 0);
  const char* s = nullptr;
  REQUIRE(api.describe(b, FISH_DESCRIBE_STATUS, &s) == FISH_OK);
  CHECK(std::string(s).rfind("open: ", 0) == 0);

  // A 3 x 5 F32 product through the table.
  const float w[15] = {1, 2, 3, 4, 5, -1, 0, 1, 0, -1, 0.5f, 0.25f, 0, 0, 2};
  fish_weight_desc d{};
  d.struct_size = sizeof d;
  d.type = FISH_TYPE_F32;
  d.name = "tiny";
  d.n_in = 5;
  d.n_out = 3;
  d.n_mat = 1;
  d.data = w;
  d.nbytes = sizeof w;
  fish_weight* fw = nullptr;
  REQUIRE(api.upload(b, &d, &fw) == FISH_OK);
  const float x[10] = {1, 1, 1, 1, 1, 2, 0, -1, 0, 1};
  float y[6] = {};
  REQUIRE(api.matmul(b, fw, x, 2, y) == FISH_OK);
  const float want[6] = {15, -1, 2.75f, 4, -4, 3};
  for (int i = 0; i < 6; ++i) CHECK(y[i] == Approx(want[i]).margin(1e-5));
  REQUIRE(api.describe(b, FISH_DESCRIBE_SUMMARY, &s) == FISH_OK);
  {
    // "(int8 activations)" where the int8 path is on (the default where the
    // device accelerates int8 dot products, or FISH_VK_INT8=1).
    const std::string sum = s;
    const std::string base = std::string("vulkan ") + di.name + ": 0 MB weights, 1 x F32";
    CHECK((sum == base || sum == base + " (int8 activations)"));
  }
  CHECK(api.describe(b, 77, &s) == FISH_E_UNSUPPORTED);
  int32_t sup = 1;
  REQUIRE(api.supports(b, FISH_TYPE_Q2_K, &sup) == FISH_OK);
  CHECK(sup == 0);
  CHECK(api.matmul(b, fw, x, 0, y) == FISH_E_INVALID_ARGUMENT);
  CHECK(std::string(api.last_error(b)).find("n_tok") != std::string::npos);

  // A span fish_vulkan does not run is refused, saying why: MoE layers of more
  // experts than its routing kernel takes (it runs up to 512, 16 used).
  fish_arch arch{};
  arch.struct_size = sizeof arch;
  arch.norm_eps = 1e-5f, arch.n_rot = 4, arch.rope_freq_base = 10000, arch.rope_freq_scale = 1, arch.n_expert = 600;
  arch.n_expert_used = 2, arch.n_ff_expert = 8;
  const float ones[8] = {1, 1, 1, 1, 1, 1, 1, 1};
  fish_layer_tensor t[2]{};
  for (fish_layer_tensor& e : t) e.struct_size = sizeof e, e.data = ones, e.n = 8;
  t[0].role = FISH_ROLE_ATTN_NORM, t[1].role = FISH_ROLE_FFN_NORM;
  fish_span_layer layer{};
  layer.struct_size = sizeof layer;
  layer.n_tensors = 2, layer.tensors = t;
  fish_span_desc sd{};
  sd.struct_size = sizeof sd;
  sd.n_layers = 1, sd.n_embd = 8, sd.n_head = 2, sd.n_head_kv = 1, sd.head_dim = 4, sd.n_ctx = 16, sd.n_seq = 1;
  sd.arch = &arch, sd.layers = &layer;
  fish_span* span = nullptr;
  CHECK(api.span_create(b, &sd, &span) == FISH_E_UNSUPPORTED);
  INFO(api.last_error(b));
  CHECK(std::string(api.last_error(b)).find("MoE with 600 experts, 2 used (the routing kernel takes up to 512 and 16)") !=
        std::string::npos);
  CHECK(span == nullptr);
  REQUIRE(api.release(b, fw) == FISH_OK);
  uint64_t res = 1;
  REQUIRE(api.bytes_resident(b, &res) == FISH_OK);
  REQUIRE(api.backend_destroy(b) == FISH_OK);
}

TEST_CASE("the plugin conformance suite passes on fish_vulkan", "[vulkan]") {
  {
    fish::vktest::select_vulkan_device();
    const fish_plugin_api api = query_api();
    fish_probe_result pr{};
    pr.struct_size = sizeof pr;
    if (api.probe(&pr) != FISH_OK) FISH_SKIP(std::string("conformance: no usable Vulkan device: ") + api.plugin_error());
  }
  fish::backend::ConformanceOptions opts;
  opts.on_result = [](const fish::backend::CheckResult& r) {
    const char* o = r.outcome == fish::backend::CheckOutcome::Pass   ? "PASS"
                    : r.outcome == fish::backend::CheckOutcome::Fail ? "FAIL"
                                                                     : "SKIP";
    std::printf("  %s %s%s%s\n", o, r.name.c_str(), r.detail.empty() ? "" : ": ", r.detail.c_str());
  };
  const auto sum = fish::backend::run_conformance(kPlugin, opts);
  std::printf("conformance: %d passed, %d failed, %d skipped\n", sum.passed, sum.failed, sum.skipped);
  int several_sequences = 0;
  for (const auto& r : sum.results) {
    INFO(r.name << ": " << r.detail);
    CHECK(r.outcome != fish::backend::CheckOutcome::Fail);
    if (r.name.rfind("sequences: ", 0) == 0) {
      CHECK(r.outcome == fish::backend::CheckOutcome::Pass);  // fish_vulkan runs them all, none skipped
      ++several_sequences;
    }
  }
  CHECK(sum.passed > 20);
  CHECK(several_sequences >= 10);  // the suite's checks of several sequences (conformance_seq.cpp)
}

// The plugin reads its variables at fish_plugin_query (the host queries once
// per process): this case sets one, queries, and restores it, as a user's
// shell would before starting fish.
TEST_CASE("a bad FISH_VK_* value or a removed knob: probe refuses the configuration and names the variable", "[vulkan]") {
  for (const auto& [name, value, says] :
       {std::tuple{"FISH_VK_SPAN_QFOLD", "99", "FISH_VK_SPAN_QFOLD='99' is not 0 (Q8_K / Q8_0 rows"},
        std::tuple{"FISH_VK_SPAN_NORM", "0", "FISH_VK_SPAN_NORM is not a fish_vulkan variable"}}) {
    fish_probe_result pr{};
    pr.struct_size = sizeof pr;
    fish_status st;
    std::string why;
    {
      const fish::test::ScopedEnv env(name, value);
      const fish_plugin_api api = query_api();
      st = api.probe(&pr);
      why = api.plugin_error();
    }
    INFO(name << "=" << value << ": " << why);
    // Whether or not this machine has a device: the configuration is refused first.
    CHECK(st == FISH_E_INVALID_ARGUMENT);
    CHECK(why.find(says) != std::string::npos);
    CHECK(pr.n_devices == 0);
    // With the variable gone the probe answers as before (a device, or none found).
    const fish_plugin_api again = query_api();
    fish_probe_result pr2{};
    pr2.struct_size = sizeof pr2;
    CHECK(again.probe(&pr2) != FISH_E_INVALID_ARGUMENT);
  }
}
