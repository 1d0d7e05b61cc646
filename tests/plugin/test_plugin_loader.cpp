// The loader's rules, in process: file names, folders, the broken plugins and
// their reasons, ranking and selection, falling back when a device does not
// open, the adapter's fences and failure injection.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>

#include <catch2/catch.hpp>

#include "backend/backend.h"
#include "backend/plugin_adapter.h"
#include "backend/plugin_loader.h"
#include "plugin_test_util.h"

using namespace fish;
using namespace fish::backend;
using fish::test::contains;
using fish::test::test_plugin;

namespace fs = std::filesystem;

namespace {

const PluginRecord* find(const BackendReport& rep, const std::string& name) {
  for (const auto& r : rep.plugins)
    if (r.file_name == name) return &r;
  return nullptr;
}

// A folder holding copies of the named test plugins (and nothing else).
struct PluginFolder {
  fish::test::TempDir dir{"plugins"};
  explicit PluginFolder(std::initializer_list<const char*> names) {
    for (const char* n : names) fish::test::copy_into(test_plugin(n), dir.path());
  }
  DiscoveryOptions opts() const {
    DiscoveryOptions o;
    o.folders = {dir.str()};
    return o;
  }
};

}  // namespace

TEST_CASE("plugin file names", "[plugin][loader]") {
  std::string n;
  CHECK(plugin_name_from_file("libfish_vulkan.so", &n));
  CHECK(n == "vulkan");
  CHECK(plugin_name_from_file("fish_vendor-x_2.so", &n));
  CHECK(n == "vendor-x_2");
  for (const char* bad : {"libfish.so", "fish_.so", "libfish_.so", "libfish_vulkan.so.1", "libfish_vulkan.dll",
                          "fish_a b.so", "notfish_x.so", "libfish_x.so.bak", "fish_x", "fish_../x.so"})
    CHECK_FALSE(plugin_name_from_file(bad, nullptr));
}

TEST_CASE("search folders are the executable's and this module's and never the current directory", "[plugin][loader]") {
  fish::test::TempDir cwd("cwd");
  const fs::path old = fs::current_path();
  fs::current_path(cwd.path());
  const auto folders = plugin_folders();
  fs::current_path(old);
  REQUIRE(!folders.empty());
  const std::string exe_dir = fs::canonical("/proc/self/exe").parent_path().string();
  CHECK(folders[0] == exe_dir);
  for (const auto& f : folders) CHECK(f != fs::canonical(cwd.path()).string());
}

TEST_CASE("broken plugins are refused with their reason without taking the process down", "[plugin][loader]") {
  struct Case {
    const char* name;
    bool loaded, probed;
    const char* reason;
  };
  const Case cases[] = {
      {"noentry", false, false, "no entry symbol 'fish_plugin_query'"},
      {"wrongmajor", false, false, "ABI version mismatch: the plugin speaks 2.0, this engine " FISH_TEST_ABI_TEXT},
      {"refuses", false, false, "this test plugin needs ABI 7.x, the host offers " FISH_TEST_ABI_TEXT},
      {"probefail", true, false, "probe failed (no device): no test device present (broken test plugin)"},
      {"badconfig", true, false, "probe failed (invalid argument): FISH_TEST_KNOB='x' is not a number (broken test plugin)"},
      {"throws", true, false, "probe failed (internal error)"},
      {"allerrors", true, true, ""},
  };
  for (const Case& c : cases) {
    INFO(c.name);
    const PluginRecord r = load_plugin(test_plugin(c.name));
    CHECK(r.loaded == c.loaded);
    CHECK(r.probed == c.probed);
    CHECK(contains(r.reason, c.reason));
    CHECK(r.config_error == (std::string(c.name) == "badconfig"));  // the user's to fix: a warning
  }
  // A file that is not a shared library at all.
  fish::test::TempDir d("notlib");
  const std::string fake = (d.path() / "libfish_fake.so").string();
  { std::ofstream(fake) << "not an ELF file"; }
  const PluginRecord r = load_plugin(fake);
  CHECK_FALSE(r.loaded);
  CHECK(contains(r.reason, "cannot open"));
}

TEST_CASE("selection - FISH_GPU off and manual-only and scores and FISH_BACKEND", "[plugin][loader]") {
  PluginFolder pf{"refauto50", "refauto80", "probefail", "noentry"};
  const fs::path ref = FISH_TEST_REFERENCE;
  fish::test::copy_into(ref.string(), pf.dir.path());  // libfish_reference.so: manual only

  SECTION("highest score wins; manual-only and broken ones are explained") {
    const BackendReport rep = discover(pf.opts());
    REQUIRE(rep.plugins.size() == 5);
    REQUIRE(rep.chosen >= 0);
    CHECK(rep.plugins[size_t(rep.chosen)].file_name == "refauto80");
    CHECK(rep.candidates.size() == 2);
    CHECK(contains(find(rep, "refauto80")->reason, "highest score (80) of 2 usable plugins"));
    CHECK(contains(find(rep, "refauto50")->reason, "usable, score 50 (rank 2 of 2)"));
    CHECK(contains(find(rep, "reference")->reason, "manual-only plugin (use it with FISH_BACKEND=reference)"));
    CHECK(contains(find(rep, "probefail")->reason, "no test device present"));
    CHECK(contains(find(rep, "noentry")->reason, "no entry symbol"));
    CHECK(contains(rep.reason, "using refauto80"));
  }
  SECTION("FISH_BACKEND picks one, even a manual-only one, and loads nothing else") {
    DiscoveryOptions o = pf.opts();
    o.only = "reference";
    const BackendReport rep = discover(o);
    REQUIRE(rep.chosen >= 0);
    CHECK(rep.plugins[size_t(rep.chosen)].file_name == "reference");
    CHECK_FALSE(find(rep, "refauto80")->loaded);
    CHECK(contains(find(rep, "refauto80")->reason, "not loaded: FISH_BACKEND=reference selects another plugin"));
    o.only = "nosuch";
    const BackendReport none = discover(o);
    CHECK(none.chosen < 0);
    CHECK(contains(none.reason, "FISH_BACKEND=nosuch: no plugin file named fish_nosuch"));
    o.only = "probefail";
    const BackendReport failed = discover(o);
    CHECK(failed.chosen < 0);
    CHECK(contains(failed.reason, "no test device present"));
  }
  SECTION("FISH_GPU=off loads nothing") {
    DiscoveryOptions o = pf.opts();
    o.disabled = true;
    o.disabled_by = "off";
    const BackendReport rep = discover(o);
    CHECK(rep.chosen < 0);
    CHECK(rep.plugins.size() == 5);
    for (const auto& r : rep.plugins) {
      CHECK_FALSE(r.loaded);
      CHECK(contains(r.reason, "not loaded: GPU offload is off (FISH_GPU=off)"));
    }
    CHECK(contains(rep.reason, "GPU offload is off (FISH_GPU=off): CPU only"));
  }
  SECTION("a folder without plugins") {
    fish::test::TempDir empty("empty");
    DiscoveryOptions o;
    o.folders = {empty.str()};
    const BackendReport rep = discover(o);
    CHECK(rep.plugins.empty());
    CHECK(contains(rep.reason, "no plugin files in " + empty.str() + ": CPU only"));
  }
}

TEST_CASE("a plugin whose device does not open gives way to the next candidate", "[plugin][loader]") {
  // allerrors scores 100 but its open() fails; refauto50 is next.
  PluginFolder pf{"allerrors", "refauto50"};
  BackendReport rep = discover(pf.opts());
  REQUIRE(rep.chosen >= 0);
  CHECK(rep.plugins[size_t(rep.chosen)].file_name == "allerrors");
  auto be = open_chosen(rep);
  REQUIRE(be);
  CHECK(be->name() == "refauto50");
  CHECK(rep.plugins[size_t(rep.chosen)].file_name == "refauto50");
  CHECK(contains(find(rep, "allerrors")->reason, "but failed: the device did not open"));
  CHECK(contains(find(rep, "allerrors")->reason, "every call fails (broken test plugin)"));

  // Alone, it leaves the engine CPU only, saying why.
  PluginFolder alone{"allerrors"};
  BackendReport rep2 = discover(alone.opts());
  CHECK(open_chosen(rep2) == nullptr);
  CHECK(rep2.chosen < 0);
  CHECK(contains(rep2.reason, "no plugin opened (allerrors: chosen"));
  CHECK(contains(rep2.reason, "CPU only"));
}

TEST_CASE("a backend whose every call fails gives clean failures with messages", "[plugin][adapter]") {
  PluginFolder pf{"callerrors"};
  BackendReport rep = discover(pf.opts());
  auto be = open_chosen(rep);
  REQUIRE(be);  // open succeeds, everything after fails
  CHECK(be->memory_free() == 0);
  CHECK(be->bytes_resident() == 0);
  CHECK_FALSE(be->supports(GgmlType::F32));
  std::vector<uint8_t> data(64 * 4);
  WeightDesc d;
  d.name = "w";
  d.n_in = 8;
  d.n_out = 8;
  d.data = data.data();
  d.nbytes = data.size();
  CHECK(be->upload(d) == nullptr);
  CHECK(be->last_status() == FISH_E_DEVICE);
  CHECK(contains(be->last_error(), "upload failed (device error): every call fails (broken test plugin)"));
  float x[8] = {}, y[8] = {};
  CHECK_FALSE(be->matmul(reinterpret_cast<BackendWeight*>(&x), x, 1, y));
  CHECK(be->describe().empty());
  SpanDesc sd;
  CHECK(be->span_create(sd) == nullptr);
}

TEST_CASE("an exception thrown across the boundary is contained", "[plugin][adapter]") {
  // fish_throws lets an exception out of probe(): the loader refuses it.
  const PluginRecord r = load_plugin(test_plugin("throws"));
  CHECK(r.loaded);
  CHECK_FALSE(r.probed);
  CHECK(contains(r.reason, "internal error"));
}

TEST_CASE("FISH_BACKEND_FAIL injection - the n-th call and every later one fail", "[plugin][adapter]") {
  const PluginRecord rec = load_plugin(FISH_TEST_REFERENCE);
  REQUIRE(rec.loaded);
  fish_backend_config cfg{};
  cfg.struct_size = sizeof cfg;
  cfg.device_index = -1;
  std::string err;
  auto be = PluginBackend::create(rec.lib, "reference", cfg, &err);
  REQUIRE(be);
  CHECK_FALSE(be->set_fail_spec("span_forwad:2", &err));
  CHECK(contains(err, "unknown call 'span_forwad'"));
  CHECK_FALSE(be->set_fail_spec("matmul:0", &err));
  REQUIRE(be->set_fail_spec("matmul:3", &err));

  std::vector<float> w(16 * 32, 0.25f), x(32, 1.0f), y(16);
  WeightDesc d;
  d.name = "inj";
  d.type = GgmlType::F32;
  d.n_in = 32;
  d.n_out = 16;
  d.data = w.data();
  d.nbytes = w.size() * 4;
  BackendWeight* h = be->upload(d);
  REQUIRE(h);
  CHECK(be->matmul(h, x.data(), 1, y.data()));
  CHECK(y[0] == Approx(8.0f));
  CHECK(be->matmul(h, x.data(), 1, y.data()));
  CHECK_FALSE(be->matmul(h, x.data(), 1, y.data()));
  CHECK(be->last_status() == FISH_E_DEVICE);
  CHECK(be->last_error() == "matmul: forced failure (FISH_BACKEND_FAIL)");
  CHECK_FALSE(be->matmul(h, x.data(), 1, y.data()));
  be->release(h);
  CHECK(be->bytes_resident() == 0);
}
