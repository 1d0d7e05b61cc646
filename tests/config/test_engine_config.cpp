// The engine's configuration (engine/src/common/engine_config.h): every
// variable's accepted values, a refused value warned of with what is accepted
// and the default kept, the "NAME=VALUE" overlay of the C API, the README's
// table, and the effect through a model load and the fish command line
// (FISH_GPU_SPAN=off really runs the layers per matmul).
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "common/engine_config.h"
#include "fish/fish.h"
#include "readme_table.h"
#include "test_paths.h"

using fish::CpuKernels;
using fish::EngineConfig;
using namespace fish::test;

namespace {

struct Parsed {
  EngineConfig c;
  std::vector<std::string> warnings;
};

Parsed parse(const std::map<std::string, std::string>& vars) {
  Parsed p;
  p.c = EngineConfig::parse(vars, [&](const std::string& m) { p.warnings.push_back(m); });
  return p;
}

bool contains(const std::string& hay, const std::string& needle) { return hay.find(needle) != std::string::npos; }

struct Run {
  int status = -1;
  std::string out, err;
};

// `env fish args` through the shell, stdout and stderr apart.
Run fish_cli(const std::string& env, const std::string& args) {
  const std::string base = "/tmp/fish-config-" + std::to_string(::getpid());
  const std::string cmd = "env -u FISH_GPU -u FISH_BACKEND -u FISH_GPU_VERBOSE -u FISH_GPU_SPAN -u FISH_GPU_LAYERS " + env +
                          " " + FISH_TEST_FISH + " " + args + " >" + base + ".out 2>" + base + ".err";
  Run r;
  const int st = std::system(cmd.c_str());
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  for (auto [file, into] : {std::pair{base + ".out", &r.out}, std::pair{base + ".err", &r.err}}) {
    std::ifstream f(file);
    std::stringstream ss;
    ss << f.rdbuf();
    *into = ss.str();
    std::remove(file.c_str());
  }
  return r;
}

}  // namespace

TEST_CASE("engine config: defaults, and every variable's good values", "[config]") {
  const Parsed none = parse({});
  CHECK(none.warnings.empty());
  const EngineConfig& d = none.c;
  CHECK((!d.gpu_off && d.gpu.empty() && d.backend.empty() && d.plugin_deny.empty() && d.plugin_isolate));
  CHECK(d.plugin_timeout_s == 10.0);
  CHECK((d.backend_fail.empty() && d.gpu_layers == -1 && d.gpu_span && d.gpu_span_head && d.gpu_logits_view));
  CHECK((d.gpu_verbose == 0 && d.test_span_fail_at == -1 && d.cpu_repack && d.cpu_kernels == CpuKernels::Auto));
  CHECK((d.gpu_requant == fish::RequantMode::Off && d.gpu_requant_cache));

  const Parsed p = parse({{"FISH_GPU", "cpu"},
                          {"FISH_BACKEND", "vendor-x_2"},
                          {"FISH_GPU_LAYERS", "7"},
                          {"FISH_GPU_SPAN", "off"},
                          {"FISH_GPU_SPAN_HEAD", "0"},
                          {"FISH_GPU_LOGITS_VIEW", "No"},
                          {"FISH_GPU_VERBOSE", "2"},
                          {"FISH_GPU_REQUANT", "3"},
                          {"FISH_GPU_REQUANT_CACHE", "off"},
                          {"FISH_CPU_REPACK", "false"},
                          {"FISH_CPU_KERNELS", "avx2"},
                          {"FISH_PLUGIN_DENY", "vulkan,,fault-x"},
                          {"FISH_PLUGIN_ISOLATE", "0"},
                          {"FISH_PLUGIN_TIMEOUT", "0.5"},
                          {"FISH_BACKEND_FAIL", "span_forward:5,open"},
                          {"FISH_TEST_SPAN_FAIL_AT", "12"},
                          {"FISH_VK_INT8", "banana"},      // a plugin's: not the engine's to judge
                          {"FISH_TEST_MARKER", "/tmp/x"},  // a test's
                          {"FISH_GPU_DEVICE", ""}});
  CHECK(p.warnings.empty());
  const EngineConfig& c = p.c;
  CHECK((!c.gpu_off && c.gpu == "cpu" && c.backend == "vendor-x_2" && c.gpu_layers == 7));
  CHECK((!c.gpu_span && !c.gpu_span_head && !c.gpu_logits_view && c.gpu_verbose == 2));
  CHECK((!c.cpu_repack && c.cpu_kernels == CpuKernels::Avx2));
  CHECK(c.plugin_deny == std::vector<std::string>{"vulkan", "fault-x"});
  CHECK((!c.plugin_isolate && c.plugin_timeout_s == 0.5));
  CHECK((c.backend_fail == "span_forward:5,open" && c.test_span_fail_at == 12));
  CHECK((c.gpu_requant == fish::RequantMode::Mixed && !c.gpu_requant_cache));
  const std::pair<const char*, fish::RequantMode> modes[] = {
      {"0", fish::RequantMode::Off},   {"off", fish::RequantMode::Off},   {"1", fish::RequantMode::AllFq3},
      {"2", fish::RequantMode::ToQ4K}, {"3", fish::RequantMode::Mixed},   {"auto", fish::RequantMode::Auto},
      {"AUTO", fish::RequantMode::Auto}};
  for (const auto& [text, mode] : modes) {
    INFO(text);
    CHECK(parse({{"FISH_GPU_REQUANT", text}}).c.gpu_requant == mode);
  }
  for (const char* off : {"0", "off", "OFF", "false", "no"}) {
    INFO(off);
    CHECK(parse({{"FISH_GPU", off}}).c.gpu_off);
    CHECK_FALSE(parse({{"FISH_GPU_SPAN", off}}).c.gpu_span);  // "off" used to mean on
  }
  for (const char* on : {"1", "on", "true", "YES"}) {
    INFO(on);
    CHECK_FALSE(parse({{"FISH_GPU", on}}).c.gpu_off);
    CHECK(parse({{"FISH_GPU_SPAN", on}}).c.gpu_span);
  }
  CHECK(parse({{"FISH_GPU_SPAN", ""}}).c.gpu_span);  // set but empty: as if unset
  CHECK(parse({{"FISH_CPU_KERNELS", "scalar"}}).c.cpu_kernels == CpuKernels::Scalar);
  CHECK(parse({{"FISH_CPU_KERNELS", "avx512"}}).c.cpu_kernels == CpuKernels::Avx512);
  CHECK(parse({{"FISH_CPU_KERNELS", "avxvnni"}}).c.cpu_kernels == CpuKernels::AvxVnni);
  CHECK(parse({{"FISH_GPU_LAYERS", "0"}}).c.gpu_layers == 0);
}

TEST_CASE("engine config: device lists, tensor split, per-device budgets, a span failure on one device", "[config]") {
  CHECK(parse({{"FISH_GPU_DEVICE", "0,1"}}).c.gpu_devices == std::vector<int>{0, 1});
  CHECK(parse({{"FISH_GPU_DEVICE", "0,0"}}).c.gpu_devices == std::vector<int>{0, 0});
  CHECK(parse({{"FISH_GPU_DEVICE", "3"}}).c.gpu_devices == std::vector<int>{3});
  CHECK(parse({{"FISH_TENSOR_SPLIT", "3,1"}}).c.tensor_split == std::vector<double>{3, 1});
  CHECK(parse({{"FISH_TENSOR_SPLIT", "0.5,0,2"}}).c.tensor_split == std::vector<double>{0.5, 0, 2});
  CHECK(parse({{"FISH_VRAM_BUDGET_MB", "100,200"}}).c.vram_budget_mb == std::vector<uint64_t>{100, 200});
  const EngineConfig f = parse({{"FISH_TEST_SPAN_FAIL_AT", "12@1"}}).c;
  CHECK((f.test_span_fail_at == 12 && f.test_span_fail_device == 1));
  const EngineConfig g = parse({{"FISH_TEST_SPAN_FAIL_AT", "7"}}).c;
  CHECK((g.test_span_fail_at == 7 && g.test_span_fail_device == -1));
  std::string err;
  EngineConfig().with("FISH_GPU_DEVICE=0,x", &err);
  CHECK(err == "FISH_GPU_DEVICE='0,x' is not a device index or a comma list of them (0,1; 0,0: one device opened twice)");
}

TEST_CASE("engine config: a refused value is a warning naming the variable and what it accepts, and the default stays", "[config]") {
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"FISH_GPU", "maybe"},          {"FISH_BACKEND", "../x"},       {"FISH_BACKEND", "a b"},
      {"FISH_GPU_LAYERS", "abc"},     {"FISH_GPU_LAYERS", "-1"},      {"FISH_GPU_SPAN", "banana"},
      {"FISH_GPU_SPAN_HEAD", "2"},    {"FISH_GPU_LOGITS_VIEW", "y"},  {"FISH_GPU_VERBOSE", "3"},
      {"FISH_GPU_VERBOSE", "yes"},    {"FISH_CPU_REPACK", "maybe"},   {"FISH_CPU_KERNELS", "bogus"},
      {"FISH_CPU_KERNELS", "AVX2"},   {"FISH_PLUGIN_DENY", ","},      {"FISH_PLUGIN_DENY", "a;b"},
      {"FISH_PLUGIN_ISOLATE", "2"},   {"FISH_PLUGIN_TIMEOUT", "0"},   {"FISH_PLUGIN_TIMEOUT", "-1"},
      {"FISH_PLUGIN_TIMEOUT", "1e3"}, {"FISH_PLUGIN_TIMEOUT", "5000"}, {"FISH_BACKEND_FAIL", "span_forward:0"},
      {"FISH_BACKEND_FAIL", ":3"},    {"FISH_BACKEND_FAIL", "open:x"}, {"FISH_TEST_SPAN_FAIL_AT", "-2"},
      {"FISH_GPU_REQUANT", "4"},      {"FISH_GPU_REQUANT", "fq3"},    {"FISH_GPU_REQUANT", "-1"},
      {"FISH_GPU_REQUANT_CACHE", "2"},
      {"FISH_GPU_DEVICE", "0,x"},     {"FISH_GPU_DEVICE", "0,,1"},    {"FISH_GPU_DEVICE", "-1"},
      {"FISH_GPU_DEVICE", "1,"},      {"FISH_TENSOR_SPLIT", "1,-1"},  {"FISH_TENSOR_SPLIT", "0,0"},
      {"FISH_TENSOR_SPLIT", "a,1"},   {"FISH_VRAM_BUDGET_MB", "0"},   {"FISH_VRAM_BUDGET_MB", "100,x"},
      {"FISH_TEST_SPAN_FAIL_AT", "3@"}, {"FISH_TEST_SPAN_FAIL_AT", "3@x"},
  };
  const EngineConfig dflt;
  for (const auto& [name, value] : bad) {
    const Parsed p = parse({{name, value}});
    INFO(name << "=" << value);
    REQUIRE(p.warnings.size() == 1);
    INFO(p.warnings[0]);
    CHECK(p.warnings[0].rfind(name + "='" + value + "' is not ", 0) == 0);
    CHECK(contains(p.warnings[0], "; using the default ("));
    // Everything as if the variable were unset.
    const EngineConfig& c = p.c;
    CHECK((c.gpu_off == dflt.gpu_off && c.gpu == dflt.gpu && c.backend == dflt.backend));
    CHECK((c.gpu_layers == dflt.gpu_layers && c.gpu_span == dflt.gpu_span && c.gpu_span_head == dflt.gpu_span_head));
    CHECK((c.gpu_logits_view == dflt.gpu_logits_view && c.gpu_verbose == dflt.gpu_verbose));
    CHECK((c.cpu_repack == dflt.cpu_repack && c.cpu_kernels == dflt.cpu_kernels && c.plugin_deny.empty()));
    CHECK((c.plugin_isolate && c.plugin_timeout_s == 10.0 && c.backend_fail.empty() && c.test_span_fail_at == -1));
    CHECK((c.gpu_requant == dflt.gpu_requant && c.gpu_requant_cache));
  }
  CHECK(parse({{"FISH_GPU_REQUANT", "4"}}).warnings[0] ==
        "FISH_GPU_REQUANT='4' is not 0 (off), 1, 2, 3 or auto; using the default (0)");
  // The exact sentences of two of them.
  CHECK(parse({{"FISH_GPU_SPAN", "banana"}}).warnings[0] ==
        "FISH_GPU_SPAN='banana' is not 0, off, false, no, 1, on, true or yes; using the default (on)");
  CHECK(parse({{"FISH_CPU_KERNELS", "bogus"}}).warnings[0] ==
        "FISH_CPU_KERNELS='bogus' is not scalar, avx2, avxvnni or avx512; using the default (the widest this CPU runs)");
  // Names in the engine's own prefixes that it does not read (typos) are warned of; others are not its business.
  const Parsed typo = parse({{"FISH_CPU_REPAK", "0"}, {"FISH_PLUGIN_DENNY", "x"}, {"FISH_GPU_LAYER", "3"}});
  REQUIRE(typo.warnings.size() == 2);
  CHECK(typo.warnings[0].rfind("FISH_CPU_REPAK is not a fish variable (the engine reads FISH_GPU, FISH_BACKEND, ", 0) == 0);
  CHECK(typo.warnings[1].rfind("FISH_PLUGIN_DENNY is not a fish variable", 0) == 0);
}

TEST_CASE("engine config: NAME=VALUE items on top of a configuration, strictly", "[config]") {
  const EngineConfig base = parse({{"FISH_GPU_VERBOSE", "1"}, {"FISH_CPU_REPACK", "0"}}).c;
  std::string err = "stale";
  const EngineConfig c = base.with("FISH_GPU_SPAN_HEAD=0\n  FISH_GPU_LOGITS_VIEW=off\tFISH_CPU_REPACK=1", &err);
  CHECK(err.empty());
  CHECK((!c.gpu_span_head && !c.gpu_logits_view && c.cpu_repack && c.gpu_verbose == 1));
  CHECK(base.with("", &err).gpu_verbose == 1);
  CHECK(err.empty());
  const std::pair<const char*, const char*> refused[] = {
      {"FISH_GPU_SPAN=banana", "FISH_GPU_SPAN='banana' is not 0, off, false, no, 1, on, true or yes"},
      {"FISH_GPU_SPAN_HEAD=0 FISH_NOPE=1", "FISH_NOPE is not an engine variable (the engine reads FISH_GPU, "},
      {"FISH_GPU_SPAN_HEAD", "'FISH_GPU_SPAN_HEAD' is not NAME=VALUE"},
  };
  for (const auto& [items, why] : refused) {
    INFO(items);
    const EngineConfig r = base.with(items, &err);
    CHECK(err.rfind(why, 0) == 0);
    CHECK((r.gpu_span && r.gpu_span_head && !r.cpu_repack));  // unchanged
  }
}

// README.md's configuration table is the list the parser reads.
TEST_CASE("engine config: the README's configuration table lists exactly the variables the parser reads", "[config]") {
  const std::set<std::string> readme = fish::test::readme_table_variables(source_path("README.md"), "### Configuration");
  REQUIRE_FALSE(readme.empty());
  const std::vector<std::string> names = EngineConfig::variable_names();
  const std::set<std::string> parser(names.begin(), names.end());
  CHECK(parser.size() == names.size());
  CHECK(names.size() == 20);
  for (const std::string& n : parser) {
    INFO(n);
    CHECK(readme.count(n) == 1);
  }
  for (const std::string& n : readme) {
    INFO(n);
    CHECK(parser.count(n) == 1);
  }
}

TEST_CASE("engine config: a model load takes its configuration from the caller", "[config]") {
  // The reference plugin: spans by default, per matmul with FISH_GPU_SPAN=off
  // in the load's configuration, CPU only with FISH_GPU=off.
  fish_backend_use_file(FISH_TEST_REFERENCE);
  auto load = [](const char* config, fish_model_info* info, std::string* err) {
    fish_model_params p = fish_model_default_params();
    p.n_ctx = 64;
    p.config = config;
    fish_error* e = nullptr;
    fish_model* m = fish_model_load(model_path("stories260K.gguf").c_str(), &p, &e);
    if (!m) {
      *err = fish_error_message(e);
      fish_error_free(e);
      return false;
    }
    info->struct_size = sizeof *info;
    fish_model_get_info(m, info);
    fish_model_free(m);
    return true;
  };
  fish_model_info span{}, per{}, off{};
  std::string err;
  REQUIRE(load(nullptr, &span, &err));
  CHECK(std::string(span.backend) == "reference");
  CHECK(span.gpu_span == 1);
  REQUIRE(load("FISH_GPU_SPAN=off", &per, &err));
  CHECK(std::string(per.backend) == "reference");
  CHECK(per.gpu_layers == per.n_layer);
  CHECK(per.gpu_span == 0);
  REQUIRE(load("FISH_GPU=off", &off, &err));
  CHECK(std::string(off.backend) == "cpu");
  CHECK(off.gpu_layers == 0);
  fish_model_info bad{};
  CHECK_FALSE(load("FISH_GPU_SPAN=banana", &bad, &err));
  CHECK(err == "fish_model_params.config: FISH_GPU_SPAN='banana' is not 0, off, false, no, 1, on, true or yes");
  fish_error* e = nullptr;
  CHECK(fish_backend_use_file_config(FISH_TEST_REFERENCE, "FISH_BACKEND_FAIL=nope:0", &e) == -1);
  REQUIRE(e);
  CHECK(std::string(fish_error_message(e)) ==
        "fish_backend_use_file_config: FISH_BACKEND_FAIL='nope:0' is not a comma list of CALL or CALL:N (a backend "
        "method, N >= 1)");
  fish_error_free(e);
  fish_backend_use_file(nullptr);
}

TEST_CASE("engine config: the fish command line warns once, FISH_GPU_SPAN=off runs per matmul, a missing FISH_BACKEND is a warning", "[config][e2e]") {
  const std::string run = "run -m " + model_path("stories260K.gguf") + " -p hi -n 4 --temp 0";
  const Run off = fish_cli("FISH_BACKEND=reference FISH_GPU_VERBOSE=1 FISH_GPU_SPAN=off", run);
  INFO(off.err);
  CHECK(off.status == 0);
  CHECK(contains(off.err, "fish: reference: 5 of 5 layers + output per matmul, "));
  const Run banana = fish_cli("FISH_BACKEND=reference FISH_GPU_VERBOSE=1 FISH_GPU_SPAN=banana", run);
  INFO(banana.err);
  CHECK(banana.status == 0);
  CHECK(contains(banana.err, "fish: reference: 5 of 5 layers + output (in the span) as one span, "));
  const std::string warning =
      "fish: warning: FISH_GPU_SPAN='banana' is not 0, off, false, no, 1, on, true or yes; using the default (on)\n";
  CHECK(banana.err.find(warning) != std::string::npos);
  CHECK(banana.err.find(warning) == banana.err.rfind(warning));  // read once
  // A plugin named but not there: the run goes on on the CPU, and says why.
  const Run named = fish_cli("FISH_BACKEND=nonexistent", run);
  INFO(named.err);
  CHECK(named.status == 0);
  CHECK(contains(named.err, "fish [loader] warning: FISH_BACKEND=nonexistent: no plugin file named fish_nonexistent in "));
  CHECK(contains(named.err, "; backend cpu (0 GPU layers)\n"));
  const Run kernels = fish_cli("FISH_GPU=0 FISH_CPU_KERNELS=bogus", run);
  INFO(kernels.err);
  CHECK(kernels.status == 0);
  CHECK(contains(kernels.err, "fish: warning: FISH_CPU_KERNELS='bogus' is not scalar, avx2, avxvnni or avx512; using the "
                              "default (the widest this CPU runs)\n"));
  CHECK_FALSE(kernels.out.empty());
}
