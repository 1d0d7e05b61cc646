// Faulty plugins next to the real `fish`: one that segfaults, aborts, calls
// exit(0) or exit(3), or hangs in its constructor, fish_plugin_query, probe or
// device open is probed in a child process and refused with what happened; the
// run goes on on the CPU (or another plugin) with the CPU's text and exit 0,
// and `fish devices` names it and why. FISH_PLUGIN_DENY skips a plugin,
// FISH_PLUGIN_ISOLATE=0 loads it in the process (and so dies with it), and
// after a fallback the stats line names the backend that ran.
#include <filesystem>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "plugin_test_util.h"
#include "test_paths.h"

using namespace fish::test;
namespace fs = std::filesystem;

namespace {

using Env = std::vector<std::pair<std::string, std::string>>;

Env clean_env(Env extra = {}) {
  Env e = {{"FISH_GPU", ""},          {"FISH_BACKEND", ""},       {"FISH_GPU_VERBOSE", ""},
           {"FISH_BACKEND_FAIL", ""}, {"FISH_GPU_LAYERS", ""},    {"FISH_GPU_SPAN", ""},
           {"FISH_PLUGIN_DENY", ""},  {"FISH_PLUGIN_ISOLATE", ""}, {"FISH_PLUGIN_TIMEOUT", "1"}};
  for (auto& kv : extra) e.push_back(kv);
  return e;
}

std::vector<std::string> run_args(const std::string& fish) {
  return {fish, "run", "-m", model_path("stories260K.gguf"), "-p", "Once upon a time", "-n", "12", "--temp", "0", "--ids"};
}

const std::string& cpu_ids() {
  static const std::string ids = [] {
    const ProcResult r = run_process(run_args(FISH_TEST_FISH), "/", clean_env({{"FISH_GPU", "0"}}));
    REQUIRE(r.status == 0);
    REQUIRE(!r.out.empty());
    return r.out;
  }();
  return ids;
}

// fish + libfish + the faulty plugin as libfish_fault-<where>-<how>.so (+ extra plugin files).
fs::path make_app(const TempDir& root, const std::string& name, const std::vector<std::string>& faults,
                  const std::vector<std::string>& extra = {}) {
  const fs::path app = root.sub(name);
  copy_into(FISH_TEST_FISH, app);
  copy_into(FISH_TEST_LIBFISH, app);
  for (const auto& f : faults) copy_into(test_plugin("faulty"), app, "libfish_fault-" + f + ".so");
  for (const auto& p : extra) copy_into(p, app);
  return app;
}

size_t count(const std::string& hay, const std::string& needle) {
  size_t n = 0;
  for (size_t at = hay.find(needle); at != std::string::npos; at = hay.find(needle, at + 1)) ++n;
  return n;
}

struct Where {
  const char* name;   // in the file name
  const char* stage;  // as the message says it
};
const Where kWheres[] = {{"ctor", "dlopen (the library's constructors)"},
                         {"query", "fish_plugin_query"},
                         {"probe", "probe"},
                         {"open", "open"}};
struct How {
  const char* name;
  const char* what;
};
const How kHows[] = {{"segv", "crashed (SIGSEGV, segmentation fault)"},
                     {"abort", "aborted (SIGABRT)"},
                     {"exit0", "exited with status 0"},
                     {"exit3", "exited with status 3"},
                     {"hang", "did not finish within 1 s (killed)"}};

}  // namespace

TEST_CASE("faulty plugins: a crash, abort, exit or hang in the constructor, query, probe or open is contained", "[plugin][e2e][faulty]") {
  TempDir root("faulty");
  for (const Where& w : kWheres) {
    for (const How& h : kHows) {
      const std::string fault = std::string(w.name) + "-" + h.name;
      INFO("libfish_fault-" << fault << ".so");
      const fs::path app = make_app(root, fault, {fault});
      const std::string fish = (app / "fish").string();
      // One line naming the file, what happened and where, and what the plugin said last.
      const std::string warning = "fish [loader] warning: " + (fs::canonical(app) / ("libfish_fault-" + fault + ".so")).string() +
                                  ": probed in a child process: " + h.what + " in " + w.stage +
                                  "; its last words on stderr: 'faulty test plugin: failing in " + w.name + " with " +
                                  h.name + "' - the plugin is not used\n";
      const ProcResult run = run_process(run_args(fish), root.str(), clean_env());
      INFO(run.err);
      CHECK(run.status == 0);
      CHECK(run.out == cpu_ids());
      CHECK(count(run.err, warning) == 1);
      CHECK(contains(run.err, "; backend cpu (0 GPU layers)\n"));
      const ProcResult dev = run_process({fish, "devices"}, root.str(), clean_env());
      INFO(dev.out << dev.err);
      CHECK(dev.status == 0);
      CHECK(contains(dev.out, "libfish_fault-" + fault + ".so\n    not loaded\n    probed in a child process: " + h.what +
                                  " in " + w.stage));
      CHECK(contains(dev.out, "backend: none, CPU only"));
      CHECK(count(dev.err, warning) == 1);
    }
  }
}

TEST_CASE("faulty plugins: all of them beside a good plugin - the good one is used", "[plugin][e2e][faulty]") {
  TempDir root("faulty-all");
  std::vector<std::string> faults;
  for (const Where& w : kWheres)
    for (const How& h : kHows) faults.push_back(std::string(w.name) + "-" + h.name);
  const fs::path app = make_app(root, "app", faults, {test_plugin("refauto50")});
  const ProcResult run = run_process(run_args((app / "fish").string()), root.str(), clean_env());
  INFO(run.err);
  CHECK(run.status == 0);
  CHECK(count(run.err, ": probed in a child process: ") == faults.size());
  CHECK(contains(run.err, "; backend refauto50 (5 GPU layers)\n"));
  CHECK(!run.out.empty());
}

TEST_CASE("faulty plugins: FISH_GPU_VERBOSE=2 says which plugin is probed and each call before it is made", "[plugin][e2e][faulty]") {
  TempDir root("faulty-verbose");
  const fs::path app = make_app(root, "app", {"query-segv"});
  const std::string file = (fs::canonical(app) / "libfish_fault-query-segv.so").string();
  const ProcResult run = run_process(run_args((app / "fish").string()), root.str(), clean_env({{"FISH_GPU_VERBOSE", "2"}}));
  INFO(run.err);
  CHECK(run.status == 0);
  CHECK(contains(run.err, "fish [loader] " + file + ": loading\n"));
  CHECK(contains(run.err, "fish [loader] " + file + ": probing in a child process first\n"));
  CHECK(contains(run.err, "fish [loader] " + file + ": the child crashed (SIGSEGV, segmentation fault) in fish_plugin_query"));
}

TEST_CASE("faulty plugins: FISH_PLUGIN_DENY skips them, FISH_PLUGIN_ISOLATE=0 loads them in the process", "[plugin][e2e][faulty]") {
  TempDir root("faulty-knobs");
  const fs::path app = make_app(root, "app", {"query-segv", "probe-exit0"});
  const std::string fish = (app / "fish").string();
  const ProcResult denied =
      run_process(run_args(fish), root.str(), clean_env({{"FISH_PLUGIN_DENY", "fault-query-segv,fault-probe-exit0"}}));
  INFO(denied.err);
  CHECK(denied.status == 0);
  CHECK(denied.out == cpu_ids());
  CHECK_FALSE(contains(denied.err, "warning"));
  const ProcResult dev = run_process({fish, "devices"}, root.str(), clean_env({{"FISH_PLUGIN_DENY", "fault-query-segv"}}));
  INFO(dev.out);
  CHECK(contains(dev.out, "libfish_fault-query-segv.so\n    not loaded\n    not loaded: denied by FISH_PLUGIN_DENY\n"));
  CHECK(contains(dev.out, "libfish_fault-probe-exit0.so\n    not loaded\n    probed in a child process: exited with status 0 in probe"));
  // Without the child the faults are the process's: the segfault kills fish
  // (run_process: -1), the exit(0) ends it with status 0 and no text at all.
  const fs::path segv = make_app(root, "segv", {"query-segv"});
  const ProcResult dies = run_process(run_args((segv / "fish").string()), root.str(), clean_env({{"FISH_PLUGIN_ISOLATE", "0"}}));
  CHECK(dies.status == -1);
  CHECK(dies.out.empty());
  const fs::path exits = make_app(root, "exit0", {"probe-exit0"});
  const ProcResult quiet = run_process(run_args((exits / "fish").string()), root.str(), clean_env({{"FISH_PLUGIN_ISOLATE", "0"}}));
  CHECK(quiet.status == 0);
  CHECK(quiet.out.empty());
  // A mistyped knob is a warning naming what it accepts, and isolation stays on.
  const ProcResult typo = run_process(run_args((segv / "fish").string()), root.str(), clean_env({{"FISH_PLUGIN_ISOLATE", "nope"}}));
  INFO(typo.err);
  CHECK(typo.status == 0);
  CHECK(contains(typo.err, "fish: warning: FISH_PLUGIN_ISOLATE='nope' is not 0, off, false, no, 1, on, true or yes; "
                           "using the default (on)\n"));
  CHECK(contains(typo.err, ": probed in a child process: crashed (SIGSEGV, segmentation fault) in fish_plugin_query"));
}

TEST_CASE("after a fallback to the CPU the stats line names the CPU", "[plugin][e2e][faulty]") {
  // The reference plugin runs the span until its 5th forward fails
  // (FISH_BACKEND_FAIL): the run goes on on the CPU, and says so.
  TempDir root("fallback");
  const fs::path app = make_app(root, "app", {}, {FISH_TEST_REFERENCE});
  const ProcResult run = run_process(run_args((app / "fish").string()), root.str(),
                                     clean_env({{"FISH_BACKEND", "reference"}, {"FISH_BACKEND_FAIL", "span_forward:5"}}));
  INFO(run.err);
  CHECK(run.status == 0);
  CHECK(!run.out.empty());
  CHECK(contains(run.err, "span_forward: forced failure (FISH_BACKEND_FAIL)); continuing on the CPU\n"));
  CHECK(contains(run.err, "; backend cpu (0 GPU layers, after falling back from reference)\n"));
  const ProcResult plain = run_process(run_args((app / "fish").string()), root.str(), clean_env({{"FISH_BACKEND", "reference"}}));
  CHECK(plain.status == 0);
  CHECK(contains(plain.err, "; backend reference (5 GPU layers)\n"));
}
