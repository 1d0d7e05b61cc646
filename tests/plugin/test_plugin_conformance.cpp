// The conformance suite on every plugin of the build (build/bin), and proof
// that it catches a subtly wrong plugin.
#include <cstdio>
#include <cstdlib>

#include <catch2/catch.hpp>

#include "backend/conformance.h"
#include "plugin_test_util.h"
#include "test_paths.h"

using namespace fish::backend;
using fish::test::contains;

namespace {

ConformanceSummary run_and_print(const std::string& path, const std::string& filter = "") {
  ConformanceOptions o;
  o.filter = filter;
  o.on_result = [](const CheckResult& r) {
    if (r.outcome != CheckOutcome::Pass)
      std::printf("    %s %s -- %s\n", r.outcome == CheckOutcome::Fail ? "FAIL" : "SKIP", r.name.c_str(),
                  r.detail.c_str());
  };
  return run_conformance(path, o);
}

}  // namespace

TEST_CASE("conformance - every plugin in the build folder", "[plugin][conformance]") {
  // fish_vulkan finds lavapipe (a CPU Vulkan driver) only with FISH_GPU=cpu;
  // the suite should run there too, so allow it unless the caller decided.
  setenv("FISH_GPU", "cpu", 0);
  const auto plugins = fish::test::plugin_files_in(FISH_BIN_DIR);
  REQUIRE(!plugins.empty());  // at least fish_reference is always built
  for (const auto& p : plugins) {
    std::printf("conformance: %s\n", p.c_str());
    const ConformanceSummary s = run_and_print(p);
    std::printf("  %d passed, %d failed, %d skipped\n", s.passed, s.failed, s.skipped);
    if (s.passed == 0) std::printf("  SKIPPED: %s (no check could run here)\n", p.c_str());
    INFO(p);
    CHECK(s.failed == 0);
    CHECK(s.passed + s.failed + s.skipped == int(s.results.size()));
  }
}

TEST_CASE("conformance - the reference plugin passes every check with none skipped", "[plugin][conformance]") {
  const ConformanceSummary s = run_and_print(FISH_TEST_REFERENCE);
  CHECK(s.failed == 0);
  CHECK(s.skipped == 0);
  CHECK(s.passed >= 150);  // 13 types x 2 shapes x 4 n_tok alone are 104
}

TEST_CASE("conformance - a subtly wrong plugin is caught", "[plugin][conformance]") {
  // fish_skewed is fish_reference with every product 5% too large and every
  // span output scaled by 1.05: negotiation and bookkeeping pass, math fails.
  const ConformanceSummary s = run_conformance(fish::test::test_plugin("skewed"));
  int matmul_fail = 0, matmul_total = 0, span_math_fail = 0, negotiate_pass = 0;
  for (const auto& r : s.results) {
    if (r.name.rfind("matmul ", 0) == 0) {
      ++matmul_total;
      matmul_fail += r.outcome == CheckOutcome::Fail;
    }
    if (contains(r.name, "≡ per-matmul")) span_math_fail += r.outcome == CheckOutcome::Fail;
    if (r.name.rfind("negotiate", 0) == 0) negotiate_pass += r.outcome == CheckOutcome::Pass;
  }
  CHECK(matmul_total == 104);
  CHECK(matmul_fail == matmul_total);  // every type, every n_tok
  CHECK(span_math_fail == 5);          // every span variant
  CHECK(negotiate_pass == 8);
}

TEST_CASE("conformance - a file that is not a plugin fails the first check", "[plugin][conformance]") {
  const ConformanceSummary s = run_conformance(fish::test::test_plugin("noentry"));
  REQUIRE(s.results.size() == 1);
  CHECK(s.results[0].name == "load");
  CHECK(s.results[0].outcome == CheckOutcome::Fail);
  CHECK(contains(s.results[0].detail, "no entry symbol"));
  const ConformanceSummary missing = run_conformance("/nonexistent/libfish_x.so");
  REQUIRE(missing.failed == 1);
}
