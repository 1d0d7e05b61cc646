// The plugin conformance suite: every check the ABI promises, run against one
// plugin file. Used by the test suite (tests/plugin, on every plugin of the
// build) and by `fish plugin-test PATH` (through fish_plugin_test in the C API).
//
// Checks: loading; version negotiation (this host's version, a newer minor,
// older and newer majors, a plugin table and a host table shorter than the
// plugin's, short probe/device/config structs); probe and devices; backend
// lifecycle and describe strings; supports(); matmul for every supported type
// at n_tok 1/3/37/256 against the engine's f32 reference with the spec's bound
// (|y - ref| <= 1e-3 * Σ_r Σ_i |w_ri||x_ti| / n_out for every element of token
// t); matmul_group; a budget overrun that fails cleanly with the backend still
// working; bad arguments; every span call (llama / qwen2 / qwen3 shapes)
// against the same plugin's per-matmul path: same argmax, max |Δlogit| <= 2%
// of max |logit|, with x out or not, logits of chosen rows copied and viewed,
// several sequences (in one batch, interleaved, span_kv_copy, truncate and
// drop), gaps, bad sequence ids and capacity refused with x untouched,
// span_kv_reserve; unknown roles, architecture values and MoE refused as
// unsupported. What a plugin does not implement (FISH_E_UNSUPPORTED) is
// reported as SKIP with its reason, never as PASS.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace fish::backend {

enum class CheckOutcome { Pass, Fail, Skip };

struct CheckResult {
  std::string name;    // "matmul Q4_K n_tok=37"
  CheckOutcome outcome = CheckOutcome::Pass;
  std::string detail;  // measured figures, or why it failed / was skipped
};

struct ConformanceOptions {
  uint64_t seed = 20261129;
  std::string filter;  // run only checks whose name contains this ("" = all)
  std::function<void(const CheckResult&)> on_result;  // called as each check finishes
};

struct ConformanceSummary {
  std::vector<CheckResult> results;
  int passed = 0, failed = 0, skipped = 0;
};

// Never throws; a plugin that cannot even be opened gives one failed check.
ConformanceSummary run_conformance(const std::string& plugin_path, const ConformanceOptions& opts = {});

}  // namespace fish::backend
