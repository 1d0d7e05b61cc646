// The loader's rules, in process: file names, folders, the broken plugins and
// their reasons, ranking and selection, falling back when a device does not
// open, the adapter's fences and failure injection.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>

#include <catch2/catch.hpp>

#include "backend/backend.h"
#include "backend/conformance_synth.h"
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
      {"wrongmajor", false, false, "the plugin speaks ABI 3.0, newer than this engine's " FISH_TEST_ABI_TEXT},
      {"refuses", false, false, "this test plugin needs ABI 7.x, the host offers " FISH_TEST_ABI_TEXT},
      {"abi1", false, false,
       "the plugin speaks ABI 1.2 (ABI 1.x), which this engine no longer loads: rebuild it against plugin ABI "
       FISH_TEST_ABI_TEXT " (it says: fish_abi1 speaks plugin ABI 1.x; the host offers " FISH_TEST_ABI_TEXT ")"},
      {"abi1accepts", false, false,
       "the plugin speaks ABI 1.2 (ABI 1.x), which this engine no longer loads: rebuild it against plugin ABI " FISH_TEST_ABI_TEXT},
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

namespace {

// A backend of a plugin file, with the synthetic two-layer decoder of the
// conformance suite uploaded and a span of 2 sequences with its head.
struct SeqSpan {
  std::unique_ptr<PluginBackend> be;
  conf::Synth s;
  BackendSpan* span = nullptr;
  BackendWeight* head = nullptr;
  explicit SeqSpan(const std::string& file) {
    const PluginRecord rec = load_plugin(file);
    REQUIRE(rec.loaded);
    fish_backend_config cfg{};
    cfg.struct_size = sizeof cfg;
    cfg.device_index = -1;
    std::string err;
    be = PluginBackend::create(rec.lib, rec.file_name, cfg, &err);
    REQUIRE(be);
    std::mt19937_64 rng(99);  // the same weights in every SeqSpan
    s = conf::make_synth(conf::span_variants()[0], rng);
    conf::upload_synth(*be, s);
    span = be->span_create(conf::span_desc(s, 64, 2));
    REQUIRE(span);
    head = be->upload(conf::desc_of(s.head));
    REQUIRE(head);
    REQUIRE(be->span_set_head(span, head, s.head_norm.data()));
  }
};

}  // namespace

TEST_CASE("adapter - a batch of several sequences the plugin refuses runs as one forward per sequence", "[plugin][adapter]") {
  // fish_refnomix is the reference plugin refusing batches of several
  // sequences (FISH_E_UNSUPPORTED): the adapter sends one forward per sequence
  // and gives back the same x and logits, in row order, as one forward would.
  SeqSpan one(FISH_TEST_REFERENCE), split(test_plugin("refnomix"));
  const int E = one.s.v.n_embd;
  conf::Rows r;
  r.add(0, 0, 4);
  r.add(1, 0, 3);
  std::mt19937_64 rng(5);  // single-sequence batches fill both sequences alike
  std::vector<float> x0 = conf::random_vector(size_t(r.n()) * E, 1.0f, rng), x1 = x0;
  for (SeqSpan* sp : {&one, &split}) {
    std::vector<float>& x = sp == &one ? x0 : x1;
    for (int q = 0; q < 2; ++q) {
      SpanBatch b;
      b.n_tok = q == 0 ? 4 : 3;
      b.x = x.data() + (q == 0 ? 0 : 4 * E);
      b.seq = r.seq.data() + (q == 0 ? 0 : 4);
      b.pos = r.pos.data() + (q == 0 ? 0 : 4);
      b.x_out = true;
      REQUIRE(sp->be->span_forward(sp->span, b));
    }
  }
  CHECK(x0 == x1);
  // Interleaved rows of both sequences, the last row of each wanted, through the view.
  conf::Rows mixed;
  for (int i = 0; i < 3; ++i) {
    mixed.add(0, 4 + i, 1, i == 2);
    if (i < 2) mixed.add(1, 3 + i, 1, i == 1);
  }
  const std::vector<float> in = conf::random_vector(size_t(mixed.n()) * E, 1.0f, rng);
  std::vector<float> xa = in, xb = in;
  std::vector<std::vector<float>> logits;
  for (SeqSpan* sp : {&one, &split}) {
    SpanBatch b;
    b.n_tok = mixed.n();
    b.x = sp == &one ? xa.data() : xb.data();
    b.seq = mixed.seq.data();
    b.pos = mixed.pos.data();
    b.logits_rows = mixed.want.data();
    b.x_out = true;
    b.logits_view = true;
    INFO(sp->be->name());
    REQUIRE(sp->be->span_forward(sp->span, b));
    REQUIRE(b.view);
    logits.emplace_back(b.view, b.view + 2 * conf::kVocab);
    CHECK(sp->be->span_kv_len(sp->span, 0) == 7);
    CHECK(sp->be->span_kv_len(sp->span, 1) == 5);
  }
  CHECK(xa == xb);  // the reference's rows do not depend on their batch: equal bit for bit
  CHECK(logits[0] == logits[1]);
  // The plugin's own answer is still available (the conformance suite reads it).
  SpanBatch raw;
  raw.n_tok = mixed.n();
  raw.x = xb.data();
  raw.seq = mixed.seq.data();
  raw.pos = mixed.pos.data();
  CHECK_FALSE(split.be->span_forward_once(split.span, raw));
  CHECK(split.be->last_status() == FISH_E_UNSUPPORTED);

  SECTION("a sequence failing part-way leaves x untouched and the sequences where they were") {
    std::string err;
    REQUIRE(split.be->set_fail_spec("span_forward:3", &err));  // 1: the mixed batch, 2: sequence 0, 3: sequence 1
    conf::Rows more;
    more.add(0, 7, 1);
    more.add(1, 5, 1);
    std::vector<float> x = conf::random_vector(size_t(2) * E, 1.0f, rng), before = x;
    SpanBatch b;
    b.n_tok = 2;
    b.x = x.data();
    b.seq = more.seq.data();
    b.pos = more.pos.data();
    b.x_out = true;
    CHECK_FALSE(split.be->span_forward(split.span, b));
    CHECK(split.be->last_error() == "span_forward: forced failure (FISH_BACKEND_FAIL)");
    CHECK(x == before);
    CHECK(split.be->span_kv_len(split.span, 0) == 7);  // sequence 0 ran, then lost this batch's position
    CHECK(split.be->span_kv_len(split.span, 1) == 5);
  }
}
