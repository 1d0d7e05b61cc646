// The conformance suite on every plugin of the build (build/bin), and proof
// that it catches a subtly wrong plugin.
#include <cstdio>
#include <cstdlib>
#include <set>

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
    if (s.passed == 0) WARN(p << ": no check could run here");
    INFO(p);
    CHECK(s.failed == 0);
    CHECK(s.passed + s.failed + s.skipped == int(s.results.size()));
  }
}

TEST_CASE("conformance - the reference plugin passes every check with none skipped", "[plugin][conformance]") {
  const ConformanceSummary s = run_and_print(FISH_TEST_REFERENCE);
  CHECK(s.failed == 0);
  CHECK(s.skipped == 0);
  CHECK(s.passed >= 200);  // 13 types x 2 shapes x 4 n_tok alone are 104; 5 span shapes x 15; 10 on sequences
  int seq = 0, refusals = 0, moe = 0;
  for (const auto& r : s.results) {
    seq += r.name.rfind("sequences: ", 0) == 0;
    refusals += r.name.rfind("span refuses ", 0) == 0;
    moe += r.name.rfind("moe ", 0) == 0 && r.outcome == CheckOutcome::Pass;
  }
  CHECK(seq == 10);
  CHECK(refusals == 3);
  CHECK(moe == 16);  // 4 MoE shapes x (create, one sequence, several, destroy)
}

TEST_CASE("conformance - a plugin without MoE has the MoE checks skipped with its reason", "[plugin][conformance]") {
  // fish_refnomoe refuses spans with n_expert > 0 (FISH_E_UNSUPPORTED); the rest passes.
  const ConformanceSummary s = run_and_print(fish::test::test_plugin("refnomoe"));
  CHECK(s.failed == 0);
  int moe_skipped = 0;
  for (const auto& r : s.results) {
    if (r.outcome != CheckOutcome::Skip) continue;
    INFO(r.name << ": " << r.detail);
    CHECK(r.name.rfind("moe ", 0) == 0);
    CHECK(contains(r.detail, "the plugin does not run MoE spans"));
    CHECK(contains(r.detail, "MoE (n_expert"));
    ++moe_skipped;
  }
  CHECK(moe_skipped == 16);
}

TEST_CASE("conformance - a filter reports only its checks, the span steps they build on run unreported", "[plugin][conformance]") {
  for (const char* filter : {"per-matmul", "span_kv_copy"}) {
    INFO(filter);
    const ConformanceSummary s = run_and_print(FISH_TEST_REFERENCE, filter);
    CHECK(s.failed == 0);
    CHECK(s.skipped == 0);
    CHECK(s.passed == (std::string(filter) == "per-matmul" ? 5 : 1));
    for (const auto& r : s.results) CHECK(contains(r.name, filter));
  }
}

// What a narrower plugin does not implement (FISH_E_UNSUPPORTED) is a SKIP
// with its reason, never a PASS, and the rest of the suite still runs.
TEST_CASE("conformance - a plugin holding one sequence per span skips the sequence checks", "[plugin][conformance]") {
  // fish_refoneseq: span_create refuses n_seq > 1, and its head gives the last row's logits only.
  const ConformanceSummary s = run_and_print(fish::test::test_plugin("refoneseq"));
  CHECK(s.failed == 0);
  int seq_skipped = 0, seq_other = 0, rows_skipped = 0, rows_passed = 0;
  for (const auto& r : s.results) {
    INFO(r.name << ": " << r.detail);
    if (r.name.rfind("sequences: ", 0) == 0) {
      if (r.outcome == CheckOutcome::Skip && contains(r.detail, "the plugin holds one sequence per span")) ++seq_skipped;
      else ++seq_other;
    }
    if (contains(r.name, "logits of several rows")) {
      rows_skipped += r.outcome == CheckOutcome::Skip && contains(r.detail, "logits of rows other than the last");
      rows_passed += r.outcome == CheckOutcome::Pass;
    }
    if (contains(r.name, "the last row's logits")) CHECK(r.outcome == CheckOutcome::Pass);
  }
  CHECK(seq_skipped == 10);
  CHECK(seq_other == 0);
  CHECK(rows_skipped == 10);  // 2 per span shape
  CHECK(rows_passed == 0);
  CHECK(s.skipped == 24);  // + each MoE shape's several-sequence check
}

TEST_CASE("conformance - a plugin running one sequence per forward skips the mixed-batch checks", "[plugin][conformance]") {
  // fish_refnomix: several sequences per span, but a batch of several is refused.
  const ConformanceSummary s = run_and_print(fish::test::test_plugin("refnomix"));
  CHECK(s.failed == 0);
  std::set<std::string> skipped;
  int moe_mixed = 0;
  for (const auto& r : s.results) {
    if (r.outcome != CheckOutcome::Skip) continue;
    CHECK(contains(r.detail, "this build runs one per forward"));
    if (r.name.rfind("moe ", 0) == 0) ++moe_mixed;  // each MoE shape's several-sequence check
    else skipped.insert(r.name);
  }
  CHECK(moe_mixed == 4);
  CHECK(skipped == std::set<std::string>{"sequences: several sequences in one batch",
                                         "sequences: rows of several sequences interleaved",
                                         "sequences: logits of each sequence's last row in one batch"});
}

TEST_CASE("conformance - a span shape the plugin does not implement is skipped with its reason", "[plugin][conformance]") {
  // fish_refnoqk refuses qwen3's q/k norm roles: the qwen3 shape's checks skip, the others pass.
  const ConformanceSummary s = run_and_print(fish::test::test_plugin("refnoqk"));
  CHECK(s.failed == 0);
  int qwen3 = 0;
  for (const auto& r : s.results) {
    if (r.outcome != CheckOutcome::Skip) continue;
    INFO(r.name);
    CHECK(r.name.rfind("span qwen3 F32: ", 0) == 0);
    CHECK(contains(r.detail, "tensor role 9 (attn_q_norm) is not implemented"));
    ++qwen3;
  }
  CHECK(qwen3 == 15);
}

TEST_CASE("conformance - a subtly wrong plugin is caught", "[plugin][conformance]") {
  // fish_skewed is fish_reference with every product 5% too large and every
  // span output x scaled by 1.05: negotiation passes, the math fails.
  const ConformanceSummary s = run_conformance(fish::test::test_plugin("skewed"));
  int matmul_fail = 0, matmul_total = 0, span_math_fail = 0, moe_math_fail = 0, negotiate_pass = 0;
  for (const auto& r : s.results) {
    if (r.name.rfind("matmul ", 0) == 0) {
      ++matmul_total;
      matmul_fail += r.outcome == CheckOutcome::Fail;
    }
    if (contains(r.name, "≡ per-matmul")) span_math_fail += r.outcome == CheckOutcome::Fail;
    if (contains(r.name, "≡ f64 reference")) moe_math_fail += r.outcome == CheckOutcome::Fail;
    if (r.name.rfind("negotiate", 0) == 0) negotiate_pass += r.outcome == CheckOutcome::Pass;
  }
  CHECK(matmul_total == 112);  // 14 types (13 GGUF + FQ3) x 2 shapes x 4 token counts
  CHECK(matmul_fail == matmul_total);  // every type, every n_tok
  CHECK(span_math_fail == 5);          // every span variant
  CHECK(moe_math_fail >= 4);           // every MoE shape's first forward (its later steps cascade)
  CHECK(negotiate_pass == 7);
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
