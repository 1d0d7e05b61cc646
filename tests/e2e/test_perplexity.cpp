// Perplexity through `fish perplexity` against reference/perplexity.tsv
// (llama-perplexity on the same files): within 0.1% for F32 weights and 0.5%
// for quantised weights, the tolerances stated in reference/README.md. Both
// with the CPU's load-time weight repack (default; Q4_K / Q5_K / Q6_K strips on
// AVX-512 VNNI and AVX2) and without it (FISH_CPU_REPACK=0, GGUF rows): the two differ
// only in f32 summation order, but on a random-weight model that flips int8
// activation roundings downstream, so each is held to llama.cpp's value.
#include <catch2/catch.hpp>
#include <cmath>

#include "e2e_util.h"
#include "test_paths.h"

using namespace fish::test;

TEST_CASE("perplexity matches reference/perplexity.tsv", "[e2e][perplexity]") {
  for (const auto& row : read_tsv(shared_path("reference/perplexity.tsv"))) {
    REQUIRE(row.size() == 4);
    const std::string model = row[0], text = row[1], ctx = row[2];
    const double want = std::stod(row[3]);
    for (const char* repack : {"1", "0"}) {
    int st = 0;
    const std::string out = run_command(std::string("FISH_CPU_REPACK=") + repack + " FISH_GPU=0 " + bin_path("fish") + " perplexity -t 2 -m " + model_path(model) + " -f " +
                                            shared_path("reference/" + text) + " -c " + ctx + " 2>/dev/null",
                                        &st);
    REQUIRE(st == 0);
    const size_t at = out.rfind("PPL = ");
    REQUIRE(at != std::string::npos);
    const double got = std::stod(out.substr(at + 6));
    const double tol = model.find("Q") == std::string::npos ? 0.001 : 0.005;
    INFO(model << " (FISH_CPU_REPACK=" << repack << "): fish " << got << " vs llama.cpp " << want << " (tolerance " << tol * 100 << "%)");
    CHECK(std::fabs(got - want) / want <= tol);
    }
  }
}
