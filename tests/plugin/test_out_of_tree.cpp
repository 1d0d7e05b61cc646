// The ABI package installs, and a plugin (plain C99) builds out of tree against
// it with find_package(fish_plugin_abi), then passes the conformance suite.
#include <cstdio>
#include <filesystem>

#include <catch2/catch.hpp>

#include "fish/fish.h"
#include "plugin_test_util.h"
#include "test_paths.h"

using namespace fish::test;
namespace fs = std::filesystem;

TEST_CASE("out-of-tree plugin against the installed fish_plugin_abi package", "[plugin][package]") {
  TempDir t("outoftree");
  const std::string prefix = (t.path() / "prefix").string(), build = (t.path() / "build").string();
  const ProcResult inst = run_process({FISH_TEST_CMAKE, "--install", FISH_TEST_BUILD_DIR, "--prefix", prefix,
                                       "--component", "plugin_abi"},
                                      t.str());
  INFO(inst.out << inst.err);
  REQUIRE(inst.status == 0);
  CHECK(fs::exists(fs::path(prefix) / "include/fish/plugin_abi.h"));
  bool config = false;
  for (const char* lib : {"lib", "lib64", "lib/x86_64-linux-gnu"})
    config = config || fs::exists(fs::path(prefix) / lib / "cmake/fish_plugin_abi/fish_plugin_abiConfig.cmake");
  CHECK(config);

  const ProcResult conf = run_process({FISH_TEST_CMAKE, "-S", source_path("tests/plugin/out_of_tree"), "-B", build,
                                       "-DCMAKE_PREFIX_PATH=" + prefix, "-DCMAKE_C_COMPILER=" FISH_TEST_C_COMPILER,
                                       "-DCMAKE_BUILD_TYPE=Release"},
                                      t.str());
  INFO(conf.out << conf.err);
  REQUIRE(conf.status == 0);
  const ProcResult bld = run_process({FISH_TEST_CMAKE, "--build", build}, t.str());
  INFO(bld.out << bld.err);
  REQUIRE(bld.status == 0);
  const std::string plugin = build + "/libfish_tiny.so";
  REQUIRE(fs::exists(plugin));

  struct Tally {
    int pass = 0, fail = 0, skip = 0;
    bool f32 = false;
  } tally;
  fish_error* err = nullptr;
  const int32_t failed = fish_plugin_test(
      plugin.c_str(), nullptr,
      [](const fish_plugin_check* c, void* ctx) {
        auto* ta = static_cast<Tally*>(ctx);
        if (c->outcome == FISH_CHECK_FAIL) std::printf("  FAIL %s -- %s\n", c->name, c->detail);
        ta->pass += c->outcome == FISH_CHECK_PASS;
        ta->fail += c->outcome == FISH_CHECK_FAIL;
        ta->skip += c->outcome == FISH_CHECK_SKIP;
        if (std::string(c->name) == "matmul F32 [67x512] n_tok=256" && c->outcome == FISH_CHECK_PASS) ta->f32 = true;
      },
      &tally, &err);
  INFO((err ? fish_error_message(err) : ""));
  fish_error_free(err);
  CHECK(failed == 0);
  CHECK(tally.fail == 0);
  CHECK(tally.f32);          // its one type really ran
  CHECK(tally.skip >= 12);   // the other types and the spans are skipped, not failed
  std::printf("fish_tiny (out of tree, C99): %d passed, %d skipped\n", tally.pass, tally.skip);
}
