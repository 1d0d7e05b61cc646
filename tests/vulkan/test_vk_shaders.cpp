// The embedded SPIR-V: every module passes spirv-val (SPIRV-Tools, Vulkan 1.1
// rules), the module table covers every kernel type, and the committed
// shaders/prebuilt/fish_vk_shaders.inc was generated from the current sources
// (same SHA-256 as cmake/FishGlslc.cmake computes: every *.comp, *.glsl and
// modules.txt in shaders/, sorted by name, each as "<name>\n<content>").
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <unistd.h>

#include "kernels.h"
#include "sha256.h"
#include "shaders.h"
#include "test_paths.h"
#include "test_skip.h"

namespace fs = std::filesystem;

namespace {

std::string read_file(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::string sources_hash() {
  const fs::path dir = fish::test::source_path("shaders");
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (!e.is_regular_file()) continue;
    const std::string n = e.path().filename().string();
    const std::string ext = e.path().extension().string();
    if (ext == ".comp" || ext == ".glsl" || n == "modules.txt") names.push_back(n);
  }
  std::sort(names.begin(), names.end());
  std::string all;
  for (const auto& n : names) all += n + "\n" + read_file(dir / n);
  return fish::vktest::sha256_hex(all);
}

}  // namespace

TEST_CASE("sha256 matches the FIPS 180-4 examples", "[vulkan]") {
  CHECK(fish::vktest::sha256_hex("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  CHECK(fish::vktest::sha256_hex("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  CHECK(fish::vktest::sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq") ==
        "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
}

TEST_CASE("the prebuilt SPIR-V is up to date with the shader sources", "[vulkan]") {
  const std::string want = sources_hash();
  const std::string prebuilt = read_file(fish::test::source_path("shaders/prebuilt/fish_vk_shaders.inc"));
  REQUIRE_FALSE(prebuilt.empty());
  INFO("shaders/ hash " << want
                        << "; refresh with: cmake -B build -DFISH_GLSLC=<glslc> && ninja -C build fish_vk_prebuilt");
  CHECK(prebuilt.find("#define FISH_VK_SHADERS_SOURCE_SHA256 \"" + want + "\"") != std::string::npos);
  // And the modules this build embeds come from the same sources.
  CHECK(std::string(fish::vk::shaders_source_sha256()) == want);
}

TEST_CASE("every kernel type has its matvec, fallback matvec and tiled modules", "[vulkan]") {
  int n = 0;
  for (const auto* t = fish::vk::matmul_types_begin(); t != fish::vk::matmul_types_end(); ++t) {
    for (const std::string prefix : {"matvec_", "tiled_", "tc_", "tlc_"}) {
      for (const std::string suffix : {"", "_nosg"}) {
        if (prefix != "matvec_" && !suffix.empty()) continue;
        const std::string name = prefix + t->name + suffix;
        const FishVkModule* m = fish::vk::find_module(name);
        INFO(name);
        REQUIRE(m != nullptr);
        REQUIRE(m->words > 5);
        CHECK(m->code[0] == 0x07230203u);  // SPIR-V magic
        CHECK(m->code[1] <= 0x00010300u);  // SPIR-V <= 1.3: what Vulkan 1.1 consumes
        ++n;
      }
    }
  }
  CHECK(n == 40);  // 8 types (FQ3 included) x 5
}

TEST_CASE("every embedded SPIR-V module passes spirv-val for Vulkan 1.1", "[vulkan]") {
  const std::string val = FISH_SPIRV_VAL;
  if (val.empty() || val.find("NOTFOUND") != std::string::npos) FISH_SKIP("spirv-val not found (install spirv-tools)");
  const fs::path dir = fs::temp_directory_path() / ("fish_vk_spv_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  // spirv-val on one module: its exit status and what it printed.
  auto validate = [&](const FishVkModule& m, std::string* out) {
    const fs::path p = dir / (std::string(m.name) + ".spv");
    {
      std::ofstream f(p, std::ios::binary);
      f.write(reinterpret_cast<const char*>(m.code), std::streamsize(m.words * 4));
    }
    const std::string cmd = "\"" + val + "\" --target-env vulkan1.1 \"" + p.string() + "\" 2>&1";
    FILE* pipe = popen(cmd.c_str(), "r");
    REQUIRE(pipe);
    char buf[512];
    while (std::fgets(buf, sizeof buf, pipe)) *out += buf;
    return pclose(pipe);
  };
  // Does this spirv-val know cooperative matrices (Debian 12's 2023.1 does not)?
  const FishVkModule* probe = fish::vk::find_module("tc_F16");
  REQUIRE(probe != nullptr);
  std::string probe_out;
  const bool knows_coopmat = validate(*probe, &probe_out) == 0 || probe_out.find("6022") == std::string::npos;
  if (!knows_coopmat) WARN(val << " does not know cooperative matrices (capability 6022): the tc_/tlc_/tcm_/_cm modules are not validated (cmake/fetch-shader-tools.sh)");
  int n = 0, skipped = 0;
  for (const FishVkModule* m = fish::vk::modules_begin(); m != fish::vk::modules_end(); ++m) {
    const std::string name = m->name;
    const bool coopmat = name.rfind("tc_", 0) == 0 || name.rfind("tlc_", 0) == 0 || name.rfind("tcm_", 0) == 0 ||
                         (name.size() > 3 && name.compare(name.size() - 3, 3, "_cm") == 0);
    if (!knows_coopmat && coopmat) {
      ++skipped, ++n;
      continue;
    }
    std::string out;
    const int rc = validate(*m, &out);
    INFO(m->name << ": " << out);
    CHECK(rc == 0);
    ++n;
  }
  fs::remove_all(dir);
  // 24 matmul modules (8 types: matvec_, matvec_*_nosg, tiled_) + copy_u4
  // + 16 span matmul variants (mvs_, tls_) + 3 span kernels, + quantize_x and
  // 4 x 6 int8 matmul modules (mvi_, mvsi_, tiledi_, tlsi_: Q4_0, Q8_0, the
  // K-quants and FQ3) + bench_sync (fish_bench_vk_span --sync) + 2 x 8 coopmat
  // modules (tc_, tlc_) + the MoE kernels (moe_route, moe_combine, 8 mvm_, 4 mvmi_, 8 tlm_, 8 tcm_ on coopmat)
  // + the prompt attention on query tiles, scalar and coopmat (span_attention_tiles, _cm)
  // + 8 checks of the coopmat loader's decode (segf16_, test_vk_span_kernels)
  CHECK(n == 126);
  CHECK((skipped == 0 || skipped == 25));
}
