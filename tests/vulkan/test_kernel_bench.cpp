// The backend kernel benchmark (`fish bench --kernels`) over fish_vulkan: it
// measures every requested type, reports positive figures, formats a table and
// JSON, refuses bad options with a message, and works through the C API.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "backend/backend.h"
#include "backend/kernel_bench.h"
#include "common/error.h"
#include "fish/fish_bench.h"
#include "plugin_device.h"
#include "test_skip.h"

namespace {

// The engine's backend, made to be fish_vulkan: the GPU when there is one, else
// lavapipe (plugin_device.h).
fish::ComputeBackend* vulkan_backend() {
  fish::vktest::select_vulkan_device();
  fish::backend::use_plugin_file(FISH_VULKAN_PLUGIN);
  return fish::backend::get();
}

}  // namespace

TEST_CASE("kernel bench measures every requested type through ComputeBackend", "[vulkan]") {
  fish::ComputeBackend* be = vulkan_backend();
  if (!be) FISH_SKIP("kernel bench: no Vulkan backend: " + fish::backend::reason());
  fish::KernelBenchOptions o;
  o.types = fish::parse_kernel_bench_types("Q4_K,Q8_0,F16");
  fish::parse_kernel_bench_shapes("512x300,256x64", o);
  o.prefill = 37;
  o.reps = 1;
  o.group_bytes = 1 << 20;
  o.n_threads = 2;
  o.warm_ms = 0;
  const auto rep = fish::run_kernel_bench(*be, o);
  REQUIRE(rep.rows.size() == 6);
  for (const auto& r : rep.rows) {
    INFO(r.type << " " << r.n_in << "x" << r.n_out << ": " << r.error);
    CHECK(r.error.empty());
    CHECK(r.copies >= 1);
    CHECK(r.matvec_gbs > 0);
    CHECK(r.call_us > 0);
    CHECK(r.prefill_gflops > 0);
    CHECK(r.cpu_matvec_gbs > 0);
    CHECK(r.cpu_prefill_gflops > 0);
  }
  CHECK(rep.rows[0].copies == int((1 << 20) / rep.rows[0].matrix_bytes));  // 1 MB of copies
  const std::string table = fish::format_kernel_bench(rep, false);
  std::printf("%s", table.c_str());
  CHECK(table.find("| Q4_K  |       512x300 |") != std::string::npos);
  const std::string json = fish::format_kernel_bench(rep, true);
  CHECK(json.find("\"rows\": [") != std::string::npos);
  CHECK(json.find("\"type\": \"F16\", \"n_in\": 256, \"n_out\": 64") != std::string::npos);
  uint64_t left = be->bytes_resident();
  CHECK(left == 0);  // every copy released
  CHECK(rep.moe_rows.empty());  // shapes given, no MoE shapes: no MoE rows
}

// MoE rows: a span of MoE layers per type (6 experts, 3 used, 3 layers cycling
// over the stack copies 1 MB allows), decode and prefill through the span,
// the CPU over one token's experts; the table's MoE section and JSON's moe_rows.
TEST_CASE("kernel bench MoE rows: the chosen experts' bytes per token through a span", "[vulkan][moe]") {
  fish::ComputeBackend* be = vulkan_backend();
  if (!be) FISH_SKIP("kernel bench: no Vulkan backend: " + fish::backend::reason());
  fish::KernelBenchOptions o;
  o.types = fish::parse_kernel_bench_types("Q4_K,Q8_0,F32");
  fish::parse_kernel_bench_shapes("256x64", o);
  o.moe_shapes = {{"tiny", 256, 512, 6, 3, 3}};
  o.prefill = 37;
  o.reps = 1;
  o.group_bytes = 1 << 20;
  o.n_threads = 2;
  o.warm_ms = 0;
  const auto rep = fish::run_kernel_bench(*be, o);
  REQUIRE(rep.moe_rows.size() == 2);  // F32 is not timed as experts
  for (const auto& r : rep.moe_rows) {
    INFO(r.type << ": " << r.error);
    CHECK(r.error.empty());
    // 3 layers x 3 experts x (gate + up [512 x 256] + down [256 x 512]).
    const uint64_t rb256 = r.type == "Q4_K" ? 144 : 272, rb512 = 2 * rb256;
    CHECK(r.token_bytes == 3ull * 3 * (2 * 512 * rb256 + 256 * rb512));
    CHECK(r.copies == std::min(3, std::max(1, int((1 << 20) / (6 * (2 * 512 * rb256 + 256 * rb512))))));
    CHECK(r.decode_gbs > 0);
    CHECK(r.layer_us > 0);
    CHECK(r.prefill_gflops > 0);
    CHECK(r.cpu_gbs > 0);
  }
  const std::string table = fish::format_kernel_bench(rep, false);
  std::printf("%s", table.c_str());
  CHECK(table.find("| Q4_K  | tiny          |       256x512 |     3/6 |") != std::string::npos);
  const std::string json = fish::format_kernel_bench(rep, true);
  CHECK(json.find("\"moe_rows\": [") != std::string::npos);
  CHECK(json.find("\"type\": \"Q8_0\", \"shape\": \"tiny\", \"n_embd\": 256, \"n_ff\": 512") != std::string::npos);
  CHECK(be->bytes_resident() == 0);  // span and weights released
}

// `fish bench --kernels --types FQ3`: fish_vulkan takes FQ3 (fish's 3-bit
// device layout), so its rows are measured; the CPU column stays empty (the
// CPU multiplies FQ3 only in checks, with its scalar reference).
TEST_CASE("kernel bench lists FQ3 rows on fish_vulkan, without a CPU column", "[vulkan][fq3]") {
  fish::ComputeBackend* be = vulkan_backend();
  if (!be) FISH_SKIP("kernel bench: no Vulkan backend: " + fish::backend::reason());
  REQUIRE(be->supports(fish::GgmlType::FQ3));
  fish::KernelBenchOptions o;
  o.types = fish::parse_kernel_bench_types("FQ3");
  fish::parse_kernel_bench_shapes("512x300,256x64", o);
  o.prefill = 37;
  o.reps = 1;
  o.group_bytes = 1 << 20;
  o.n_threads = 2;
  o.warm_ms = 0;
  const auto rep = fish::run_kernel_bench(*be, o);
  REQUIRE(rep.rows.size() == 2);
  for (const auto& r : rep.rows) {
    INFO(r.type << " " << r.n_in << "x" << r.n_out << ": " << r.error);
    CHECK(r.type == "FQ3");
    CHECK(r.error.empty());
    CHECK(r.matrix_bytes == uint64_t(r.n_in / 256 * 112 * r.n_out));
    CHECK(r.matvec_gbs > 0);
    CHECK(r.prefill_gflops > 0);
    CHECK(r.cpu_matvec_gbs == 0);
    CHECK(r.cpu_prefill_gflops == 0);
  }
  const std::string table = fish::format_kernel_bench(rep, false);
  std::printf("%s", table.c_str());
  CHECK(table.find("| FQ3   |       512x300 |") != std::string::npos);
  CHECK(be->bytes_resident() == 0);
}

TEST_CASE("kernel bench refuses bad options with the reason", "[vulkan]") {
  fish::KernelBenchOptions o;
  CHECK_THROWS_WITH(fish::parse_kernel_bench_shapes("4096x", o), Catch::Contains("bad shape '4096x'"));
  CHECK_THROWS_WITH(fish::parse_kernel_bench_shapes("4096x14336,0x5", o), Catch::Contains("'0x5'"));
  CHECK_THROWS_WITH(fish::parse_kernel_bench_shapes("qwen3-30b", o), Catch::Contains("'qwen3-30b'"));
  CHECK_THROWS_WITH(fish::parse_kernel_bench_types("Q4_K,Q2_K"), Catch::Contains("'Q2_K'"));
  fish::KernelBenchOptions two;
  fish::parse_kernel_bench_shapes("4096x14336,14336X4096", two);
  CHECK(two.shapes.size() == 2);
  CHECK(two.moe_shapes.empty());
  fish::KernelBenchOptions mixed;  // a named MoE model beside a matrix
  fish::parse_kernel_bench_shapes("mixtral-8x7b,64x32", mixed);
  REQUIRE(mixed.moe_shapes.size() == 1);
  CHECK(mixed.moe_shapes[0].n_ff == 14336);
  CHECK(mixed.moe_shapes[0].n_used == 2);
  REQUIRE(mixed.shapes.size() == 1);
  CHECK(mixed.shapes[0].n_in == 64);
}

TEST_CASE("fish_kernel_bench through the C API", "[vulkan]") {
  if (!vulkan_backend()) FISH_SKIP("kernel bench: no Vulkan backend: " + fish::backend::reason());
  fish_kernel_bench_params p = fish_kernel_bench_default_params();
  p.types = "Q6_K";
  p.shapes = "256x100";
  p.prefill = 0;
  p.reps = 1;
  p.cpu = 0;
  p.json = 1;
  fish_error* err = nullptr;
  char* s = fish_kernel_bench(&p, &err);
  INFO((err ? fish_error_message(err) : ""));
  REQUIRE(s);
  const std::string out = s;
  fish_free(s);
  CHECK(out.find("\"type\": \"Q6_K\", \"n_in\": 256, \"n_out\": 100") != std::string::npos);
  CHECK(out.find("\"error\": \"\"") != std::string::npos);
  p.shapes = "100x7";  // not a whole number of Q6_K blocks: the row reports it
  s = fish_kernel_bench(&p, &err);
  REQUIRE(s);
  CHECK(std::string(s).find("not a whole number of Q6_K blocks") != std::string::npos);
  fish_free(s);
  p.types = "Q9_X";
  CHECK(fish_kernel_bench(&p, &err) == nullptr);
  REQUIRE(err);
  CHECK(std::string(fish_error_message(err)).find("'Q9_X'") != std::string::npos);
  fish_error_free(err);
}
