// The child process a plugin is probed in (backend/child_process.h) and the
// loader's use of it (load_plugin_isolated): what each way of dying is called,
// the stage it happened in, the timeout, the last words on stderr, and the
// verdict kept per file until the file changes.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include <catch2/catch.hpp>

#include "backend/child_process.h"
#include "backend/plugin_loader.h"
#include "plugin_test_util.h"

using namespace fish::backend;
namespace fs = std::filesystem;

namespace {

int* volatile g_null = nullptr;

double seconds_of(const std::function<void()>& f) {
  const auto t0 = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

TEST_CASE("run_in_child names each way the child can end, and where", "[plugin][isolation]") {
  const ChildOutcome ok = run_in_child([] { child_stage("first"); }, 10);
  CHECK(ok.isolated);
  CHECK(ok.completed);
  CHECK(ok.stage == "first");
  CHECK(ok.describe().empty());

  const ChildOutcome segv = run_in_child(
      [] {
        child_stage("a");
        std::fprintf(stderr, "noise\nabout to crash\n\n");
        child_stage("b");
        *g_null = 1;
      },
      10);
  CHECK_FALSE(segv.completed);
  CHECK(segv.what == "crashed (SIGSEGV, segmentation fault)");
  CHECK(segv.stage == "b");
  CHECK(segv.last_words == "about to crash");
  CHECK(segv.describe() == "crashed (SIGSEGV, segmentation fault) in b; its last words on stderr: 'about to crash'");

  const ChildOutcome ab = run_in_child([] { std::abort(); }, 10);
  CHECK(ab.what == "aborted (SIGABRT)");
  CHECK(ab.describe() == "aborted (SIGABRT) before its first stage");

  const ChildOutcome ex0 = run_in_child([] { child_stage("probe"); std::exit(0); }, 10);
  CHECK_FALSE(ex0.completed);
  CHECK(ex0.describe() == "exited with status 0 in probe");
  const ChildOutcome ex3 = run_in_child([] { std::exit(3); }, 10);
  CHECK(ex3.what == "exited with status 3");

  const ChildOutcome ill = run_in_child([] { raise(SIGILL); }, 10);
  CHECK(ill.what == "crashed (SIGILL, illegal instruction)");

  // A hang is killed at the timeout: 0.3 s here, measured.
  ChildOutcome hang;
  const double s = seconds_of([&] { hang = run_in_child([] { child_stage("open"); for (;;) pause(); }, 0.3); });
  CHECK(hang.describe() == "did not finish within 0.3 s (killed) in open");
  CHECK(s >= 0.3);
  CHECK(s < 3.0);
  // Control characters in the last words are blanked, and a long line is cut at 200.
  const ChildOutcome loud = run_in_child(
      [] {
        std::fprintf(stderr, "\x1b[31mred\x1b[0m %s\n", std::string(300, 'x').c_str());
        std::abort();
      },
      10);
  CHECK(loud.last_words.rfind(" [31mred [0m xxx", 0) == 0);
  CHECK(loud.last_words.size() == 203);
}

TEST_CASE("load_plugin_isolated refuses a faulty plugin and keeps the verdict until the file changes", "[plugin][isolation]") {
  fish::test::TempDir dir("isolated");
  const std::string file = fish::test::copy_into(fish::test::test_plugin("faulty"), dir.path(), "libfish_fault-probe-hang.so");
  PluginRecord rec;
  const double first = seconds_of([&] { rec = load_plugin_isolated(file, 0.5); });
  INFO(rec.reason);
  CHECK(rec.faulty);
  CHECK_FALSE(rec.loaded);
  CHECK(rec.file_name == "fault-probe-hang");
  CHECK(rec.reason == "probed in a child process: did not finish within 0.5 s (killed) in probe; its last words on "
                      "stderr: 'faulty test plugin: failing in probe with hang'");
  CHECK(first >= 0.5);
  // Same file (size, mtime): the kept verdict, no child, no wait.
  PluginRecord again;
  const double second = seconds_of([&] { again = load_plugin_isolated(file, 0.5); });
  CHECK(again.reason == rec.reason);
  CHECK(second < 0.25);
  // A new modification time: probed again.
  fs::last_write_time(file, fs::last_write_time(file) + std::chrono::seconds(5));
  PluginRecord third;
  const double after_touch = seconds_of([&] { third = load_plugin_isolated(file, 0.5); });
  CHECK(third.faulty);
  CHECK(after_touch >= 0.5);
  std::printf("probe-hang at a 0.5 s timeout: %.3f s, kept verdict %.6f s, after touching the file %.3f s\n", first,
              second, after_touch);

  // A healthy plugin comes back from its child and is then loaded here.
  const PluginRecord good = load_plugin_isolated(fish::test::test_plugin("refauto50"), 10);
  INFO(good.reason);
  CHECK_FALSE(good.faulty);
  CHECK(good.loaded);
  CHECK(good.probed);
  CHECK(good.devices.size() == 1);
  // Now in this process: loaded again without a child.
  const PluginRecord same = load_plugin_isolated(fish::test::test_plugin("refauto50"), 10);
  CHECK(same.loaded);
  CHECK(same.lib == good.lib);
}

TEST_CASE("discover honours the deny list and isolation", "[plugin][isolation]") {
  fish::test::TempDir dir("discover-isolated");
  fish::test::copy_into(fish::test::test_plugin("faulty"), dir.path(), "libfish_fault-query-segv.so");
  fish::test::copy_into(fish::test::test_plugin("refauto80"), dir.path());
  DiscoveryOptions o;
  o.folders = {dir.str()};
  BackendReport rep = discover(o);
  REQUIRE(rep.plugins.size() == 2);
  CHECK(rep.plugins[0].faulty);
  CHECK(rep.plugins[0].reason.rfind("probed in a child process: crashed (SIGSEGV, segmentation fault) in fish_plugin_query", 0) == 0);
  REQUIRE(rep.chosen == 1);
  CHECK(rep.plugins[1].file_name == "refauto80");
  o.deny = {"fault-query-segv", "refauto80"};
  rep = discover(o);
  CHECK(rep.plugins[0].reason == "not loaded: denied by FISH_PLUGIN_DENY");
  CHECK(rep.plugins[1].reason == "not loaded: denied by FISH_PLUGIN_DENY");
  CHECK_FALSE(rep.plugins[0].faulty);
  CHECK(rep.chosen == -1);
}
