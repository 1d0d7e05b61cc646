// fish plugin-test PATH...: the plugin conformance suite on any plugin file
// (the same checks the test suite runs on every plugin of the build).
#include <cstdio>
#include <cstdlib>
#include <string>

#include "args.h"
#include "command.h"
#include "fish/fish.h"

using namespace fish::cli;

namespace {

struct Tally {
  bool verbose = false;
  int pass = 0, fail = 0, skip = 0;
};

void on_check(const fish_plugin_check* c, void* ctx) {
  auto* t = static_cast<Tally*>(ctx);
  const char* word = c->outcome == FISH_CHECK_PASS ? "PASS" : c->outcome == FISH_CHECK_FAIL ? "FAIL" : "SKIP";
  if (c->outcome == FISH_CHECK_PASS) ++t->pass;
  if (c->outcome == FISH_CHECK_FAIL) ++t->fail;
  if (c->outcome == FISH_CHECK_SKIP) ++t->skip;
  if (t->verbose || c->outcome != FISH_CHECK_PASS)
    std::printf("%s  %s  -- %s\n", word, c->name, c->detail ? c->detail : "");
  else
    std::printf("%s  %s\n", word, c->name);
  std::fflush(stdout);
}

}  // namespace

static int cmd_plugin_test(int argc, char** argv) {
  Args a(argc, argv);
  if (a.flag("-h", "--help")) {
    std::printf("usage: fish plugin-test PLUGIN_FILE... [--filter TEXT] [--seed N] [-v]\n"
                "  Runs the plugin conformance suite on each file and prints PASS/FAIL/SKIP per check:\n"
                "  ABI negotiation (older/newer versions, short tables and structs), probe and devices,\n"
                "  every supported type x n_tok 1/3/37/256 against the engine's f32 product\n"
                "  (bound 1e-3 * sum|w||x| / n_out), matmul_group, the budget overrun, bad arguments,\n"
                "  spans against the same plugin's per-matmul path, KV truncation, gap refusal.\n"
                "  --filter runs the checks whose name contains TEXT; -v prints every check's figures.\n"
                "  Exit status: 0 when nothing failed, 1 otherwise.\n");
    return 0;
  }
  std::string filter;
  const bool has_filter = a.value(nullptr, "--filter", filter);
  int64_t seed = 0;
  a.int_value(nullptr, "--seed", seed);
  Tally t;
  t.verbose = a.flag("-v", "--verbose");
  const auto files = a.positional();
  if (files.empty()) a.fail("missing PLUGIN_FILE (e.g. build/bin/libfish_reference.so)");

  fish_plugin_test_params p = fish_plugin_test_default_params();
  p.seed = uint64_t(seed);
  p.filter = has_filter ? filter.c_str() : nullptr;
  int total_failed = 0;
  for (const auto& f : files) {
    std::printf("== %s\n", f.c_str());
    Tally one;
    one.verbose = t.verbose;
    fish_error* err = nullptr;
    const int32_t failed = fish_plugin_test(f.c_str(), &p, on_check, &one, &err);
    if (failed < 0) {
      std::fprintf(stderr, "fish plugin-test: %s\n", fish_error_message(err));
      fish_error_free(err);
      ++total_failed;
      continue;
    }
    std::printf("== %s: %d passed, %d failed, %d skipped\n", f.c_str(), one.pass, one.fail, one.skip);
    total_failed += one.fail;
  }
  return total_failed ? 1 : 0;
}

static const Command reg{"plugin-test", "run the plugin conformance suite on a plugin file", &cmd_plugin_test};
