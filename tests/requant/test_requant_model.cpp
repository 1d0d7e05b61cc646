// Whole loads with online re-quantisation through the C API (fish.h), on
// synth-tiny (Q4_K_M) and the reference plugin: the mix the load reports, the
// disk cache (the second load reads every entry; one corrupted byte and one
// truncated entry are rejected and rebuilt, and the logits stay identical to
// the bit), FISH_GPU_REQUANT_CACHE=0, a plugin from before ABI 2.1 (no FQ3),
// auto on a small device, and the parameter's checks and struct growth.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "convert/scratch_dir.h"
#include "fish/fish.h"
#include "test_model.h"
#include "test_paths.h"

namespace fs = std::filesystem;
using fish::test::model_path;

namespace {

const std::string kModel = "synth-tiny-Q4_K_M.gguf";

struct Loaded {
  fish_model_info info{};
  std::string detail, mode, gpu_detail;
  std::vector<float> logits;  // the last token's, after a fixed prompt and two decode steps
};

// Loads kModel with this re-quantisation mode and config (null: none), runs a
// fixed token sequence, and keeps what the checks need.
Loaded load(int32_t mode, const char* config = nullptr, uint32_t struct_size = sizeof(fish_model_params)) {
  fish_model_params p = fish_model_default_params();
  p.gpu_requant = mode;
  p.config = config;
  p.n_ctx = 64;
  p.n_threads = 2;
  p.struct_size = struct_size;
  fish_model* m = fish::test::require_model(kModel, p);
  Loaded r;
  r.info.struct_size = sizeof r.info;
  fish_model_get_info(m, &r.info);
  r.detail = r.info.requant_detail;
  r.mode = r.info.gpu_requant;
  r.gpu_detail = r.info.gpu_detail;
  const int32_t toks[] = {1, 450, 2107, 3, 99, 1200, 7, 4000};
  REQUIRE(fish_eval(m, toks, 6, 0, 0) == 0);
  REQUIRE(fish_eval(m, toks + 6, 1, 6, 0) == 0);
  REQUIRE(fish_eval(m, toks + 7, 1, 7, 0) == 0);
  const float* l = fish_get_logits(m, -1);
  r.logits.assign(l, l + r.info.n_vocab);
  fish_model_free(m);
  return r;
}

std::string load_error(int32_t mode, const char* config) {
  fish_model_params p = fish_model_default_params();
  p.gpu_requant = mode;
  p.config = config;
  fish_error* err = nullptr;
  fish_model* m = fish_model_load(model_path(kModel).c_str(), &p, &err);
  fish_model_free(m);
  const std::string msg = err ? fish_error_message(err) : "(loaded)";
  fish_error_free(err);
  return msg;
}

double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double d = 0;
  for (size_t i = 0; i < a.size(); ++i) d = std::max(d, double(std::fabs(a[i] - b[i])));
  return d;
}

// The cache entries of the one model folder under root.
std::vector<fs::path> entries(const std::string& root) {
  std::vector<fs::path> out;
  for (const auto& dir : fs::directory_iterator(root + "/fish/requant"))
    for (const auto& e : fs::directory_iterator(dir.path()))
      if (e.path().extension() == ".rq") out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

// The process's cache folder pointed at a scratch one for the case's life.
struct CacheHome {
  fish::test::ScratchDir dir;
  std::string old;
  bool had = false;
  explicit CacheHome(const std::string& tag) : dir(tag) {
    if (const char* v = std::getenv("XDG_CACHE_HOME")) {
      had = true;
      old = v;
    }
    setenv("XDG_CACHE_HOME", root().c_str(), 1);
  }
  ~CacheHome() {
    if (had) setenv("XDG_CACHE_HOME", old.c_str(), 1);
    else unsetenv("XDG_CACHE_HOME");
  }
  std::string root() const { return dir.file("xdg"); }
};

// synth-tiny's mix in mode 3 (the output's Q6_K first, then the layers' from
// the last: 4 layers x 6 Q4_K + 4 Q6_K ffn_down/attn_v ... as the file holds them).
const char* kMixed = "5 x Q6_K->Q4_K 0.85 MB (from 1.2), 24 x Q4_K->FQ3 1.2 MB (from 1.5)";

}  // namespace

TEST_CASE("requant model: the second load reads the cache, damaged entries are rebuilt with identical logits",
          "[requant][cache]") {
  fish_backend_use_file(FISH_TEST_REFERENCE);
  CacheHome home("rq_model");
  const Loaded plain = load(0);
  CHECK(plain.detail.empty());
  CHECK(plain.mode == std::string("0"));

  const Loaded first = load(3);
  CHECK(first.mode == std::string("3"));
  CHECK(first.detail == kMixed);
  CHECK(first.gpu_detail.find(std::string("; re-quantised (FISH_GPU_REQUANT=3): ") + kMixed) != std::string::npos);
  CHECK((first.info.requant_converted == 29 && first.info.requant_cached == 0 && first.info.requant_rejected == 0));
  CHECK(first.info.requant_seconds > 0);
  CHECK(first.info.requant_ns_per_weight > 0);
  CHECK(first.info.gpu_layers == 4);
  // The device copies really are other weights: the logits move (3-bit
  // weights on a random-weight model: by a few percent of the largest).
  CHECK(max_abs_diff(first.logits, plain.logits) > 1e-3);

  const Loaded second = load(3);
  CHECK((second.info.requant_converted == 0 && second.info.requant_cached == 29 && second.info.requant_rejected == 0));
  CHECK(second.logits == first.logits);
  CHECK(second.detail == kMixed);

  // One byte of one entry flipped, another entry cut short.
  const std::vector<fs::path> es = entries(home.root());
  REQUIRE(es.size() == 29);
  {
    std::fstream f(es[3], std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(std::streamoff(fs::file_size(es[3]) / 2));
    char c = 0;
    f.read(&c, 1);
    c = char(c ^ 0x20);
    f.seekp(std::streamoff(fs::file_size(es[3]) / 2));
    f.write(&c, 1);
  }
  fs::resize_file(es[17], fs::file_size(es[17]) / 2);
  const Loaded third = load(3);
  CHECK((third.info.requant_rejected == 2 && third.info.requant_converted == 2 && third.info.requant_cached == 27));
  CHECK(third.logits == first.logits);
  const Loaded fourth = load(3);
  CHECK((fourth.info.requant_rejected == 0 && fourth.info.requant_converted == 0 && fourth.info.requant_cached == 29));
  CHECK(fourth.logits == first.logits);

  // FISH_GPU_REQUANT_CACHE=0: converted every time, nothing read; same logits.
  const Loaded uncached = load(3, "FISH_GPU_REQUANT_CACHE=0");
  CHECK((uncached.info.requant_converted == 29 && uncached.info.requant_cached == 0));
  CHECK(uncached.logits == first.logits);

  // Mode 2 reuses mode 3's Q6_K -> Q4_K entries (keyed by conversion, not mode).
  const Loaded two = load(2);
  CHECK((two.info.requant_cached == 5 && two.info.requant_converted == 0));
  CHECK(two.detail == "5 x Q6_K->Q4_K 0.85 MB (from 1.2)");
  fish_backend_use_file(nullptr);
}

TEST_CASE("requant model: a plugin without FQ3 keeps working, Q6_K -> Q4_K only", "[requant]") {
  CacheHome home("rq_nofq3");
  const std::string nofq3 = std::string(FISH_TEST_PLUGIN_DIR) + "/libfish_refnofq3.so";
  fish_backend_use_file(nofq3.c_str());
  const Loaded one = load(1), three = load(3);
  fish_backend_use_file(FISH_TEST_REFERENCE);
  const Loaded two = load(2);
  fish_backend_use_file(nullptr);
  // Modes 1 and 3 fall back to what mode 2 does: the same device weights, the same logits.
  CHECK(one.detail == "5 x Q6_K->Q4_K 0.85 MB (from 1.2)");
  CHECK(three.detail == one.detail);
  CHECK(one.info.gpu_layers == 4);
  CHECK(one.logits == two.logits);
  CHECK(three.logits == two.logits);
  CHECK(one.gpu_detail.find("FQ3") == std::string::npos);
}

TEST_CASE("requant model: auto takes the mildest mode that puts everything on a small device", "[requant][auto]") {
  CacheHome home("rq_auto");
  // refmid: the reference plugin with a 2.5 MB "device". synth-tiny's 4 layers
  // and output take 2.75 MB as the file holds them, 2.36 MB in mode 2, 2.02 MB
  // in mode 3 and 1.97 MB in mode 1, and a span of 4 layers wants 0.28 MB
  // beside them (KV for 64 positions): only modes 3 and 1 fit everything.
  fish_backend_use_file((std::string(FISH_TEST_PLUGIN_DIR) + "/libfish_refmid.so").c_str());
  const Loaded off = load(0), two = load(2), autom = load(4), three = load(3);
  fish_backend_use_file(nullptr);
  INFO("off: " << off.info.gpu_layers << " layers, output " << off.info.gpu_output << "; 2: " << two.info.gpu_layers
               << "; auto: mode " << autom.mode << ", " << autom.info.gpu_layers << " layers, output "
               << autom.info.gpu_output);
  CHECK(off.info.gpu_layers < 4);
  CHECK(two.info.gpu_layers < 4);
  CHECK(autom.mode == std::string("3"));
  CHECK((autom.info.gpu_layers == 4 && autom.info.gpu_output == 1));
  CHECK(autom.detail == kMixed);
  CHECK(autom.logits == three.logits);  // auto's mode 3 is mode 3
}

TEST_CASE("requant model: bad values are load errors, an older caller's struct takes FISH_GPU_REQUANT", "[requant]") {
  CacheHome home("rq_params");
  fish_backend_use_file(FISH_TEST_REFERENCE);
  CHECK_THAT(load_error(5, nullptr), Catch::Contains("fish_model_params.gpu_requant: 5 is not"));
  CHECK_THAT(load_error(-2, nullptr), Catch::Contains("gpu_requant"));
  CHECK_THAT(load_error(-1, "FISH_GPU_REQUANT=7"), Catch::Contains("FISH_GPU_REQUANT='7' is not 0 (off), 1, 2, 3 or auto"));
  // A caller built before the field (struct_size ends before it): -1, so the
  // configuration's FISH_GPU_REQUANT decides.
  const Loaded old = load(0, "FISH_GPU_REQUANT=2", uint32_t(offsetof(fish_model_params, gpu_requant)));
  CHECK(old.mode == std::string("2"));
  CHECK(old.detail == "5 x Q6_K->Q4_K 0.85 MB (from 1.2)");
  // The field wins over the configuration when set.
  CHECK(load(0, "FISH_GPU_REQUANT=2").detail.empty());
  fish_backend_use_file(nullptr);
}
