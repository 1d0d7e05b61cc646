// Model-level conformance through the public C API (fish.h) on stories260K:
// the GPU layers as one span ≡ the same layers per matmul, and a span failure
// in the middle of a generation falls back to the CPU with unchanged results.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include <catch2/catch.hpp>

#include "fish/fish.h"
#include "plugin_test_util.h"
#include "test_model.h"
#include "test_paths.h"


namespace {

struct Model {
  fish_model* m = nullptr;
  fish_model_info info{};
  // config: engine variables for this load ("NAME=VALUE ...", or null).
  Model(int gpu_layers, int gpu_span, const char* config = nullptr) {
    fish_model_params p = fish_model_default_params();
    p.gpu_layers = gpu_layers;
    p.gpu_span = gpu_span;
    p.config = config;
    p.n_ctx = 128;
    m = fish::test::require_model("stories260K.gguf", p);
    info.struct_size = sizeof info;
    fish_model_get_info(m, &info);
  }
  ~Model() { fish_model_free(m); }
  int32_t n_vocab() const { return info.n_vocab; }
  // Evaluates tokens[pos..pos+n) and returns the last token's logits.
  std::vector<float> eval(const std::vector<int32_t>& toks, int32_t pos, int32_t n) {
    REQUIRE(fish_eval(m, toks.data() + pos, n, pos, 0) == 0);
    const float* l = fish_get_logits(m, -1);
    REQUIRE(l);
    return std::vector<float>(l, l + n_vocab());
  }
};

int argmax(const std::vector<float>& v) { return int(std::max_element(v.begin(), v.end()) - v.begin()); }

// Prompt + greedy continuation on the CPU, and its logits at each step.
struct Trace {
  std::vector<int32_t> toks;
  int32_t n_prompt = 0;
  std::vector<std::vector<float>> logits;  // after the prompt, then after each generated token
};

Trace cpu_trace(int n_gen) {
  Model cpu(0, 0);
  Trace t;
  t.toks.resize(64);
  const char* prompt = "Once upon a time";
  t.n_prompt = fish_tokenize(cpu.m, prompt, 16, 1, 0, t.toks.data(), 64);
  REQUIRE(t.n_prompt > 0);
  t.toks.resize(size_t(t.n_prompt));
  t.logits.push_back(cpu.eval(t.toks, 0, t.n_prompt));
  for (int i = 0; i < n_gen; ++i) {
    t.toks.push_back(argmax(t.logits.back()));
    t.logits.push_back(cpu.eval(t.toks, int32_t(t.toks.size()) - 1, 1));
  }
  return t;
}

// Teacher-forced run of the trace's tokens through a model: logits at each step.
std::vector<std::vector<float>> forced(Model& m, const Trace& t) {
  std::vector<std::vector<float>> out;
  out.push_back(m.eval(t.toks, 0, t.n_prompt));
  for (size_t p = size_t(t.n_prompt); p + 1 <= t.toks.size() - 0 && out.size() < t.logits.size(); ++p)
    out.push_back(m.eval(t.toks, int32_t(p), 1));
  return out;
}

struct Agreement {
  int steps = 0, same_argmax = 0;
  double max_diff = 0, max_abs = 0;
};
Agreement compare(const std::vector<std::vector<float>>& a, const std::vector<std::vector<float>>& b) {
  Agreement g;
  for (size_t s = 0; s < std::min(a.size(), b.size()); ++s) {
    ++g.steps;
    g.same_argmax += argmax(a[s]) == argmax(b[s]);
    for (size_t i = 0; i < a[s].size(); ++i) {
      g.max_diff = std::max(g.max_diff, double(std::fabs(a[s][i] - b[s][i])));
      g.max_abs = std::max(g.max_abs, double(std::fabs(b[s][i])));
    }
  }
  return g;
}

}  // namespace

TEST_CASE("model - span equals per-matmul on the same layers (reference plugin on stories260K)", "[plugin][model]") {
  fish_backend_use_file(FISH_TEST_REFERENCE);
  const Trace t = cpu_trace(24);
  Model span(-1, 1), per(-1, 0);
  CHECK(std::string(span.info.backend) == "reference");
  CHECK(span.info.gpu_layers == span.info.n_layer);
  CHECK(span.info.gpu_span == 1);
  CHECK(per.info.gpu_layers == per.info.n_layer);
  CHECK(per.info.gpu_span == 0);
  const auto ls = forced(span, t), lp = forced(per, t);
  REQUIRE(ls.size() == t.logits.size());
  const Agreement g = compare(ls, lp);
  const Agreement cpu = compare(ls, t.logits);
  std::printf("span vs per-matmul: argmax %d/%d, max |dlogit| %.3g (%.3g%% of max |logit| %.3g)\n", g.same_argmax,
              g.steps, g.max_diff, 100 * g.max_diff / g.max_abs, g.max_abs);
  std::printf("span vs CPU (int8 activations, for information): argmax %d/%d, max |dlogit| %.3g%%\n",
              cpu.same_argmax, cpu.steps, 100 * cpu.max_diff / cpu.max_abs);
  CHECK(g.same_argmax == g.steps);
  CHECK(g.max_diff <= 0.02 * g.max_abs);
  fish_backend_use_file(nullptr);
}

TEST_CASE("model - a span failure mid-generation falls back to the CPU", "[plugin][model]") {
  const Trace t = cpu_trace(12);
  // The prompt + 3 tokens run on the span, then its 5th forward fails: with
  // the output head as its own submission (x out), with the head in the span
  // and the logits copied (FISH_GPU_LOGITS_VIEW=0), and read in place (the
  // default). The variables are passed in: the load's, and the backend's
  // (FISH_BACKEND_FAIL, read when it opens).
  struct Mode {
    const char* name;
    const char* config;
  };
  for (const Mode& mode : {Mode{"head apart", "FISH_GPU_SPAN_HEAD=0 FISH_GPU_LOGITS_VIEW=1"},
                           Mode{"head in the span, copied", "FISH_GPU_SPAN_HEAD=1 FISH_GPU_LOGITS_VIEW=0"},
                           Mode{"head in the span, viewed", "FISH_GPU_SPAN_HEAD=1 FISH_GPU_LOGITS_VIEW=1"}}) {
    INFO("mode: " << mode.name);
    fish_error* err = nullptr;
    REQUIRE(fish_backend_use_file_config(FISH_TEST_REFERENCE, "FISH_BACKEND_FAIL=span_forward:5", &err) == 0);
    {
      Model m(-1, 1, mode.config);
      REQUIRE(m.info.gpu_span == 1);
      const auto l = forced(m, t);
      fish_stats st{};
      st.struct_size = sizeof st;
      fish_get_stats(m.m, &st);
      CHECK(st.gpu_fallbacks == 1);
      fish_model_info after{};
      after.struct_size = sizeof after;
      fish_model_get_info(m.m, &after);
      CHECK(after.gpu_layers == 0);
      // From the failed step on, everything ran on the CPU after a replay of the
      // history: the logits are the CPU's own.
      REQUIRE(l.size() == t.logits.size());
      const std::vector<std::vector<float>> tail_l(l.begin() + 4, l.end()), tail_c(t.logits.begin() + 4, t.logits.end());
      const Agreement g = compare(tail_l, tail_c);
      std::printf("after the forced failure vs CPU: argmax %d/%d, max |dlogit| %.3g\n", g.same_argmax, g.steps, g.max_diff);
      CHECK(g.same_argmax == g.steps);
      CHECK(g.max_diff <= 1e-4 * g.max_abs);
    }
  }
  fish_backend_use_file(nullptr);
}

TEST_CASE("model - a head giving only the last row's logits: the other rows come from x and matmul", "[plugin][model]") {
  // fish_refoneseq refuses logits of rows other than the last (FISH_E_UNSUPPORTED):
  // an all-logits eval then asks for x back and runs the head through matmul,
  // with no fallback to the CPU and no position lost; the last-row decode keeps
  // the head in the span. Against the reference plugin, whose head gives every row.
  auto all_logits = [](const char* plugin, const std::vector<int32_t>& toks, std::vector<std::vector<float>>& rows,
                       std::vector<float>& next, fish_stats& st) {
    fish_backend_use_file(plugin);
    Model m(-1, 1);
    REQUIRE(m.info.gpu_span == 1);
    REQUIRE(fish_eval(m.m, toks.data(), int32_t(toks.size()), 0, 1) == 0);
    for (int32_t i = 0; i < int32_t(toks.size()); ++i) {
      const float* l = fish_get_logits(m.m, i);
      REQUIRE(l);
      rows.emplace_back(l, l + m.n_vocab());
    }
    const int32_t tok = argmax(rows.back());
    REQUIRE(fish_eval(m.m, &tok, 1, int32_t(toks.size()), 0) == 0);
    const float* l = fish_get_logits(m.m, -1);
    next.assign(l, l + m.n_vocab());
    CHECK(fish_kv_len(m.m) == int32_t(toks.size()) + 1);
    st.struct_size = sizeof st;
    fish_get_stats(m.m, &st);
  };
  const Trace t = cpu_trace(0);
  std::vector<std::vector<float>> ref_rows, narrow_rows;
  std::vector<float> ref_next, narrow_next;
  fish_stats ref_st{}, narrow_st{};
  all_logits(FISH_TEST_REFERENCE, t.toks, ref_rows, ref_next, ref_st);
  all_logits(fish::test::test_plugin("refoneseq").c_str(), t.toks, narrow_rows, narrow_next, narrow_st);
  fish_backend_use_file(nullptr);
  CHECK(narrow_st.gpu_fallbacks == 0);
  CHECK(narrow_st.gpu_submits == ref_st.gpu_submits + 2);  // the retry with x out, then the head's matmul
  // The same layers; the head's norm here in the engine instead of in the plugin.
  const Agreement g = compare(narrow_rows, ref_rows);
  INFO("all rows: argmax " << g.same_argmax << "/" << g.steps << ", max |dlogit| " << g.max_diff);
  CHECK(g.same_argmax == g.steps);
  CHECK(g.max_diff <= 1e-5 * g.max_abs);
  CHECK(narrow_next == ref_next);  // the decoded token: the head in the span on both
}

TEST_CASE("model - a span the plugin does not implement leaves the layers per matmul", "[plugin][model]") {
  // fish_refnoqk refuses qwen3's q/k norm roles at span_create
  // (FISH_E_UNSUPPORTED): the engine keeps the layers it placed and runs them
  // per matmul on the same plugin, with the reference plugin's per-matmul logits.
  fish::test::TempDir dir("qwen3");
  const std::string file = (dir.path() / "tiny-qwen3.gguf").string();
  const fish::test::ProcResult syn =
      fish::test::run_process({FISH_TEST_FISH, "synth", "--shape", "tiny-qwen3", "--type", "F32", "-o", file}, dir.str());
  INFO(syn.err);
  REQUIRE(syn.status == 0);
  auto run = [&](const std::string& plugin, int gpu_span, fish_model_info* info) {
    fish_backend_use_file(plugin.c_str());
    fish_model_params p = fish_model_default_params();
    p.gpu_span = gpu_span;
    p.n_ctx = 64;
    fish_error* err = nullptr;
    fish_model* m = fish_model_load(file.c_str(), &p, &err);
    INFO((err ? fish_error_message(err) : ""));
    fish_error_free(err);
    REQUIRE(m);
    info->struct_size = sizeof *info;
    fish_model_get_info(m, info);
    const int32_t toks[6] = {1, 17, 42, 99, 7, 300};
    REQUIRE(fish_eval(m, toks, 6, 0, 0) == 0);
    const float* l = fish_get_logits(m, -1);
    std::vector<float> out(l, l + info->n_vocab);
    fish_model_free(m);
    return out;
  };
  fish_model_info narrow{}, per{};
  const std::vector<float> a = run(fish::test::test_plugin("refnoqk"), -1, &narrow);
  const std::vector<float> b = run(FISH_TEST_REFERENCE, 0, &per);
  fish_backend_use_file(nullptr);
  CHECK(narrow.gpu_span == 0);
  CHECK(narrow.gpu_layers == narrow.n_layer);
  CHECK(per.gpu_layers == per.n_layer);
  CHECK(a == b);  // the same plugin code per matmul: equal bit for bit
}
