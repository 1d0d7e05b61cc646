// Discovery through the real binaries: `fish` and libfish copied around, plugins
// planted where they must not be found, broken plugins next to `fish`.
#include <filesystem>
#include <cstdlib>
#include <cstring>
#include <string>

#include <catch2/catch.hpp>

#include "plugin_test_util.h"
#include "test_paths.h"

using namespace fish::test;
namespace fs = std::filesystem;

namespace {

using Env = std::vector<std::pair<std::string, std::string>>;

// The engine's own knobs cleared, so the caller's environment cannot decide a test.
Env clean_env(Env extra = {}) {
  Env e = {{"FISH_GPU", ""}, {"FISH_BACKEND", ""}, {"FISH_GPU_VERBOSE", ""}, {"FISH_BACKEND_FAIL", ""},
           {"FISH_GPU_LAYERS", ""}, {"FISH_GPU_SPAN", ""}};
  for (auto& kv : extra) e.push_back(kv);
  return e;
}

// LD_LIBRARY_PATH = dirs, then the caller's own entries: a machine whose
// libraries (cpp-httplib, the Vulkan loader) come from LD_LIBRARY_PATH still
// starts the binaries; the test's folders come first.
std::string ld_path(const std::string& dirs) {
  const char* own = std::getenv("LD_LIBRARY_PATH");
  return own && *own ? dirs + ":" + own : dirs;
}

// A self-contained install: fish + libfish (+ the given plugin files).
fs::path make_app(const TempDir& root, const std::string& name, const std::vector<std::string>& plugins) {
  const fs::path app = root.sub(name);
  copy_into(FISH_TEST_FISH, app);
  copy_into(FISH_TEST_LIBFISH, app);
  for (const auto& p : plugins) copy_into(p, app);
  return app;
}

std::vector<std::string> run_args(const std::string& fish) {
  return {fish, "run", "-m", model_path("stories260K.gguf"), "-p", "Once upon a time", "-n", "12", "--temp", "0", "--ids"};
}

// Greedy token ids of the build's own fish with plugins off: the CPU reference output.
const std::string& cpu_ids() {
  static const std::string ids = [] {
    const ProcResult r = run_process(run_args(FISH_TEST_FISH), "/", clean_env({{"FISH_GPU", "0"}}));
    REQUIRE(r.status == 0);
    REQUIRE(!r.out.empty());
    return r.out;
  }();
  return ids;
}

}  // namespace

TEST_CASE("plugins planted in the current directory or PATH or LD_LIBRARY_PATH are never loaded", "[plugin][e2e]") {
  TempDir cwd("planted");
  const std::string marker = (cwd.path() / "LOADED").string();
  copy_into(test_plugin("marker"), cwd.path());                       // libfish_marker.so
  copy_into(test_plugin("marker"), cwd.path(), "fish_marker2.so");    // fish_marker2.so
  const Env env = clean_env({{"FISH_TEST_MARKER", marker},
                             {"LD_LIBRARY_PATH", ld_path(cwd.str())},
                             {"PATH", cwd.str() + ":" + std::string(std::getenv("PATH") ? std::getenv("PATH") : "")}});
  const ProcResult dev = run_process({FISH_TEST_FISH, "devices"}, cwd.str(), env);
  CHECK(dev.status == 0);
  CHECK_FALSE(contains(dev.out, "marker"));
  CHECK_FALSE(fs::exists(marker));
  const ProcResult run = run_process(run_args(FISH_TEST_FISH), cwd.str(), env);
  CHECK(run.status == 0);
  CHECK_FALSE(fs::exists(marker));

  // Positive control: the same file next to `fish` is loaded (the marker appears).
  TempDir root("control");
  const fs::path app = make_app(root, "app", {test_plugin("marker")});
  const ProcResult ctl = run_process({(app / "fish").string(), "devices"}, cwd.str(), env);
  CHECK(ctl.status == 0);
  CHECK(fs::exists(marker));
}

TEST_CASE("a copied install works with no rebuild and removing the plugin gives CPU only", "[plugin][e2e]") {
  TempDir root("relocated");
  const fs::path app = make_app(root, "app", {test_plugin("refauto50")});
  const std::string fish = (app / "fish").string();
  const std::string elsewhere = root.sub("elsewhere").string();

  const ProcResult dev = run_process({fish, "devices"}, elsewhere, clean_env());
  INFO(dev.out << dev.err);
  CHECK(dev.status == 0);
  CHECK(contains(dev.out, fs::canonical(app).string()));
  CHECK(contains(dev.out, "backend: refauto50"));
  CHECK(contains(dev.out, "status: open: CPU reference"));
  const ProcResult run = run_process(run_args(fish), elsewhere, clean_env());
  CHECK(run.status == 0);
  CHECK(contains(run.err, "backend refauto50 (5 GPU layers)"));

  fs::remove(app / "libfish_refauto50.so");
  const ProcResult dev2 = run_process({fish, "devices"}, elsewhere, clean_env());
  INFO(dev2.out);
  CHECK(dev2.status == 0);
  CHECK(contains(dev2.out, "plugin files: 0"));
  CHECK(contains(dev2.out, "backend: none, CPU only"));
  CHECK(contains(dev2.out, "no plugin files in " + fs::canonical(app).string() + ": CPU only"));
  const ProcResult run2 = run_process(run_args(fish), elsewhere, clean_env());
  CHECK(run2.status == 0);
  CHECK(contains(run2.err, "backend cpu"));
  CHECK(run2.out == cpu_ids());
}

TEST_CASE("libfish's own folder is searched but folders on LD_LIBRARY_PATH are not", "[plugin][e2e]") {
  TempDir root("split");
  const fs::path a = root.sub("A"), b = root.sub("B"), c = root.sub("C");
  copy_into(FISH_TEST_FISH, a);
  copy_into(FISH_TEST_LIBFISH, b);
  copy_into(test_plugin("refauto80"), b);
  copy_into(test_plugin("refauto50"), c);
  copy_into(test_plugin("marker"), c);
  const std::string marker = (root.path() / "LOADED").string();
  const Env env = clean_env({{"LD_LIBRARY_PATH", ld_path(b.string() + ":" + c.string())}, {"FISH_TEST_MARKER", marker}});
  const ProcResult dev = run_process({(a / "fish").string(), "devices"}, root.str(), env);
  INFO(dev.out << dev.err);
  CHECK(dev.status == 0);
  CHECK(contains(dev.out, fs::canonical(a).string()));
  CHECK(contains(dev.out, fs::canonical(b).string()));
  CHECK(contains(dev.out, "backend: refauto80"));
  CHECK_FALSE(contains(dev.out, "refauto50"));
  CHECK_FALSE(fs::exists(marker));
}

TEST_CASE("broken plugins next to fish - the engine stays up with CPU output unchanged and the reason reported", "[plugin][e2e]") {
  struct Case {
    const char* plugin;
    const char* reason;
  };
  const Case cases[] = {
      {"noentry", "no entry symbol 'fish_plugin_query'"},
      {"wrongmajor", "the plugin speaks ABI 3.0, newer than this engine's " FISH_TEST_ABI_TEXT},
      {"refuses", "this test plugin needs ABI 7.x"},
      {"probefail", "probe failed (no device): no test device present"},
      {"throws", "probe failed (internal error)"},
      {"allerrors", "the device did not open: open failed (device error): every call fails"},
      {"callerrors", "status: failed: describe failed (device error): every call fails"},
  };
  TempDir root("broken");
  std::vector<std::string> all;
  for (const Case& c : cases) {
    INFO(c.plugin);
    all.push_back(test_plugin(c.plugin));
    const fs::path app = make_app(root, c.plugin, {test_plugin(c.plugin)});
    const ProcResult dev = run_process({(app / "fish").string(), "devices"}, root.str(), clean_env());
    INFO(dev.out << dev.err);
    CHECK(dev.status == 0);
    CHECK(contains(dev.out, c.reason));
    const ProcResult run = run_process(run_args((app / "fish").string()), root.str(), clean_env());
    INFO(run.err);
    CHECK(run.status == 0);
    CHECK(run.out == cpu_ids());
    // FISH_GPU_VERBOSE=1 shows the same reason on stderr.
    const ProcResult verbose = run_process(run_args((app / "fish").string()), root.str(),
                                           clean_env({{"FISH_GPU_VERBOSE", "1"}}));
    CHECK(verbose.status == 0);
    if (std::string(c.plugin) != "callerrors") CHECK(contains(verbose.err, c.reason));
    CHECK(contains(verbose.err, "fish [loader]"));
  }
  // All of them at once.
  const fs::path app = make_app(root, "all", all);
  const ProcResult run = run_process(run_args((app / "fish").string()), root.str(), clean_env());
  CHECK(run.status == 0);
  CHECK(run.out == cpu_ids());
}

TEST_CASE("a plugin built for ABI 1.x is listed as refused by fish devices and fish run goes on on the CPU", "[plugin][e2e]") {
  // abi1 refuses the 2.0 host as a 1.x plugin does; abi1accepts answers 1.2
  // anyway: either way the engine reads none of its 1.x table.
  TempDir root("abi1");
  for (const char* name : {"abi1", "abi1accepts"}) {
    INFO(name);
    const fs::path app = make_app(root, name, {test_plugin(name)});
    const ProcResult dev = run_process({(app / "fish").string(), "devices"}, root.str(), clean_env());
    INFO(dev.out << dev.err);
    CHECK(dev.status == 0);
    CHECK(contains(dev.out, "libfish_" + std::string(name) + ".so"));
    CHECK(contains(dev.out, "    not loaded\n    the plugin speaks ABI 1.2 (ABI 1.x), which this engine no longer loads: "
                            "rebuild it against plugin ABI " FISH_TEST_ABI_TEXT));
    CHECK(contains(dev.out, "backend: none, CPU only"));
    const ProcResult run = run_process(run_args((app / "fish").string()), root.str(), clean_env());
    INFO(run.err);
    CHECK(run.status == 0);
    CHECK(run.out == cpu_ids());
    CHECK(contains(run.err, "backend cpu"));
    CHECK_FALSE(contains(dev.err + run.err, "called a slot of a 1.x table"));
  }
}

TEST_CASE("a plugin refusing its configuration is a warning on stderr without FISH_GPU_VERBOSE", "[plugin][e2e]") {
  TempDir root("badconfig");
  const fs::path app = make_app(root, "app", {test_plugin("badconfig")});
  const ProcResult run = run_process(run_args((app / "fish").string()), root.str(), clean_env());
  INFO(run.err);
  CHECK(run.status == 0);
  CHECK(run.out == cpu_ids());
  CHECK(contains(run.err, "warning: "));
  CHECK(contains(run.err, "probe failed (invalid argument): FISH_TEST_KNOB='x' is not a number"));
  CHECK(contains(run.err, "the plugin is not used"));
  // A plugin without a device stays quiet unless asked (most machines have no GPU).
  const fs::path app2 = make_app(root, "app2", {test_plugin("probefail")});
  const ProcResult quiet = run_process(run_args((app2 / "fish").string()), root.str(), clean_env());
  CHECK(quiet.status == 0);
  CHECK_FALSE(contains(quiet.err, "no test device present"));
}

TEST_CASE("FISH_GPU=0 or off or false or no loads nothing and FISH_BACKEND picks by name", "[plugin][e2e]") {
  TempDir root("knobs");
  const fs::path app = make_app(root, "app", {test_plugin("marker"), test_plugin("refauto50"), test_plugin("refauto80")});
  const std::string fish = (app / "fish").string(), marker = (root.path() / "LOADED").string();
  for (const char* off : {"0", "off", "FALSE", "no"}) {
    INFO(off);
    const ProcResult r = run_process({fish, "devices"}, root.str(), clean_env({{"FISH_GPU", off}, {"FISH_TEST_MARKER", marker}}));
    CHECK(r.status == 0);
    CHECK(contains(r.out, "plugin loading is off"));
    CHECK(contains(r.out, "backend: none, CPU only"));
    CHECK_FALSE(fs::exists(marker));
  }
  const ProcResult pick = run_process({fish, "devices"}, root.str(), clean_env({{"FISH_BACKEND", "refauto50"}, {"FISH_TEST_MARKER", marker}}));
  CHECK(contains(pick.out, "backend: refauto50"));
  CHECK_FALSE(fs::exists(marker));  // the others are not even loaded
  const fs::path app2 = make_app(root, "app2", {test_plugin("refauto50"), test_plugin("refauto80")});
  const ProcResult best = run_process({(app2 / "fish").string(), "devices"}, root.str(), clean_env());
  CHECK(contains(best.out, "backend: refauto80"));
  CHECK(contains(best.out, "highest score (80) of 2 usable plugins"));
}

TEST_CASE("a small device - the engine places what fits and the rest runs on the CPU", "[plugin][e2e]") {
  // refsmall refuses uploads past 600 kB; stories260K's F32 layers (~180 kB
  // each) and output projection (131 kB) need more, so placement (per matmul:
  // a span's KV reserve for 2048 positions would not fit at all) stops part-way
  // and the run goes on.
  TempDir root("small");
  const fs::path app = make_app(root, "app", {test_plugin("refsmall")});
  const ProcResult run = run_process(run_args((app / "fish").string()), root.str(),
                                     clean_env({{"FISH_GPU_VERBOSE", "1"}, {"FISH_GPU_SPAN", "0"}}));
  INFO(run.err);
  REQUIRE(run.status == 0);
  CHECK(contains(run.err, "exceed the budget"));
  // "backend refsmall (k GPU layers)" with 0 < k < 5 (stories260K has 5 layers).
  const size_t at = run.err.find("backend refsmall (");
  REQUIRE(at != std::string::npos);
  const int k = std::atoi(run.err.c_str() + at + std::strlen("backend refsmall ("));
  CHECK(k > 0);
  CHECK(k < 5);
  // The model's weights are F32, for which the CPU path also multiplies in f32:
  // the greedy tokens are the CPU's.
  CHECK(run.out == cpu_ids());
}
