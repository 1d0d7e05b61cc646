// fish test-gpu: the GPU validation tool (spec "Tests"). Kernels: the active
// backend's matmul on the model's blk.0 projections vs the CPU f32 reference.
// End to end: three runs on identical inputs, teacher-forced on the first run's
// greedy tokens: auto placement (span), FISH_GPU_SPAN=0 (per-matmul) and
// FISH_GPU_LAYERS=0 (CPU). Requires span ≡ per-matmul (same argmax at every
// step, max |Δlogit| <= 2% of max |logit|) and all device memory freed on
// unload; reports span vs CPU for information (or requires --min-agreement).
// Quality (--quality N): the CPU's greedy run of N tokens is the reference, the
// auto placement is teacher-forced on it; top-1 agreement must be >= 95% (or
// --min-agreement) and the mean / max KL(P_cpu || P_gpu) per step is reported.
// Re-quantisation (FISH_GPU_REQUANT or --requant MODE): each matrix the mode
// converts, its error against the GGUF's values and (blk.0) the backend's
// kernel on the converted bytes against the CPU's decode of them
// (fish_test_gpu_requant); the end-to-end and quality runs load with the mode,
// and their lines name it and the mix.
// Exit status: 0 pass, 1 fail, 77 skipped (no GPU backend).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "cli_model.h"
#include "command.h"

using namespace fish::cli;

namespace {

struct Run {
  std::string label;
  std::vector<std::vector<float>> logits;  // per step: [n_vocab]
  int32_t gpu_layers = 0, gpu_span = 0, gpu_output = 0;
  int32_t n_expert = 0, span_layers = 0, cpu_moe_layers = 0;
  std::string detail;
  std::string requant;  // "FISH_GPU_REQUANT=3: <mix>" or ""
  bool ok = true;
};

int failures = 0;

void report(bool pass, const std::string& what, const std::string& detail) {
  std::printf("%s %s%s%s\n", pass ? "PASS" : "FAIL", what.c_str(), detail.empty() ? "" : ": ", detail.c_str());
  if (!pass) ++failures;
}

int32_t argmax(const std::vector<float>& v) {
  return int32_t(std::max_element(v.begin(), v.end()) - v.begin());
}

// Evaluates prompt + forced tokens; records the logits before each forced token
// and after the last. With forced empty, generates n greedy tokens into *forced.
Run run_model(const std::string& label, const ModelFlags& base, int32_t gpu_layers, int32_t gpu_span,
              const std::vector<int32_t>& prompt, std::vector<int32_t>* forced, int n) {
  Run r;
  r.label = label;
  ModelFlags f = base;
  f.params.gpu_layers = gpu_layers;
  f.params.gpu_span = gpu_span;
  fish_model* m = load_or_exit("test-gpu", f);
  fish_model_info info{};
  info.struct_size = sizeof info;
  fish_model_get_info(m, &info);
  r.gpu_layers = info.gpu_layers;
  r.gpu_span = info.gpu_span;
  r.gpu_output = info.gpu_output;
  r.n_expert = info.n_expert;
  r.span_layers = info.gpu_span_layers;
  r.cpu_moe_layers = info.cpu_moe_layers;
  r.detail = info.gpu_detail;
  if (info.requant_detail && *info.requant_detail)
    r.requant = std::string("FISH_GPU_REQUANT=") + info.gpu_requant + ": " + info.requant_detail;
  const bool generate = forced->empty();
  int32_t pos = 0;
  auto eval = [&](const int32_t* t, int32_t k) {
    if (fish_eval(m, t, k, pos, 0) != 0) {
      report(false, label + " eval", fish_last_error(m));
      r.ok = false;
      return false;
    }
    pos += k;
    const float* lg = fish_get_logits(m, -1);
    r.logits.emplace_back(lg, lg + info.n_vocab);
    return true;
  };
  if (eval(prompt.data(), int32_t(prompt.size()))) {
    for (int i = 0; i < n; ++i) {
      int32_t t;
      if (generate) {
        t = argmax(r.logits.back());
        forced->push_back(t);
      } else {
        if (size_t(i) >= forced->size()) break;
        t = (*forced)[size_t(i)];
      }
      if (!eval(&t, 1)) break;
    }
  }
  fish_stats st{};
  st.struct_size = sizeof st;
  fish_get_stats(m, &st);
  if (st.gpu_fallbacks) r.detail += " (" + std::to_string(st.gpu_fallbacks) + " fallbacks to the CPU)";
  fish_model_free(m);
  return r;
}

struct Compare {
  int agree = 0, steps = 0;
  double max_delta = 0, max_rel = 0;  // max |Δlogit|, and max of |Δ| / max|logit| per step
};

Compare compare(const Run& a, const Run& b) {
  Compare c;
  const size_t n = std::min(a.logits.size(), b.logits.size());
  for (size_t s = 0; s < n; ++s) {
    const auto &x = a.logits[s], &y = b.logits[s];
    double d = 0, mx = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      d = std::max(d, double(std::fabs(x[i] - y[i])));
      mx = std::max(mx, double(std::fabs(y[i])));
    }
    c.max_delta = std::max(c.max_delta, d);
    c.max_rel = std::max(c.max_rel, mx > 0 ? d / mx : d);
    c.agree += argmax(x) == argmax(y);
    ++c.steps;
  }
  return c;
}

// KL(softmax(p) || softmax(q)) in nats, in double.
double kl_divergence(const std::vector<float>& p, const std::vector<float>& q) {
  const double mp = *std::max_element(p.begin(), p.end()), mq = *std::max_element(q.begin(), q.end());
  double zp = 0, zq = 0;
  for (size_t i = 0; i < p.size(); ++i) {
    zp += std::exp(double(p[i]) - mp);
    zq += std::exp(double(q[i]) - mq);
  }
  const double lzp = std::log(zp), lzq = std::log(zq);
  double kl = 0;
  for (size_t i = 0; i < p.size(); ++i) {
    const double lp = double(p[i]) - mp - lzp, lq = double(q[i]) - mq - lzq;
    kl += std::exp(lp) * (lp - lq);
  }
  return std::max(0.0, kl);
}

void print_check(const fish_plugin_check* c, void*) {
  const char* tag = c->outcome == FISH_CHECK_PASS ? "PASS" : c->outcome == FISH_CHECK_FAIL ? "FAIL" : "SKIP";
  std::printf("%s kernel %s: %s\n", tag, c->name, c->detail);
}

void print_requant(const fish_plugin_check* c, void*) {
  const char* tag = c->outcome == FISH_CHECK_PASS ? "PASS" : c->outcome == FISH_CHECK_FAIL ? "FAIL" : "SKIP";
  std::printf("%s %s: %s\n", tag, c->name, c->detail);
}

}  // namespace

static int cmd_test_gpu(int argc, char** argv) {
  // Whole lines on stdout, so that the loads' stderr lines (placement, the
  // re-quantisation cost) never land inside a result line of a pipe or a log.
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  Args a(argc, argv);
  if (a.flag("-h", "--help")) {
    std::printf(
        "usage: fish test-gpu MODEL [--no-kernels] [--no-e2e] [--no-cpu-compare] [-n 32] [-p PROMPT] [-t N]\n"
        "                     [--min-agreement F] [--max-cpu-delta F] [--quality N] [--requant MODE] [--n-cpu-moe N]\n"
        "  Kernels: blk.0 projections on the GPU vs the CPU f32 product (spec bound).\n"
        "  End to end: auto (span) / FISH_GPU_SPAN=0 / FISH_GPU_LAYERS=0, teacher-forced on the first\n"
        "  run's greedy tokens; span must equal per-matmul (argmax, |dlogit| <= 2%% of max |logit|),\n"
        "  device memory must be freed on unload. --quality N: the CPU's greedy N tokens as the reference,\n"
        "  the GPU teacher-forced on them: top-1 agreement >= 95%% (or --min-agreement) and KL(P_cpu||P_gpu).\n"
        "  With --requant MODE (or FISH_GPU_REQUANT): each matrix the mode converts, its relative RMS\n"
        "  error vs the GGUF's values (fails past 20%% FQ3 / 10%% Q4_K) and, for blk.0, the GPU kernel on\n"
        "  the converted bytes vs the CPU's decode of them; the runs above load with the mode.\n"
        "  Exit 0 pass, 1 fail, 77 skipped (no GPU).\n");
    return 0;
  }
  const bool no_kernels = a.flag(nullptr, "--no-kernels");
  const bool no_e2e = a.flag(nullptr, "--no-e2e");
  const bool no_cpu = a.flag(nullptr, "--no-cpu-compare");
  int64_t n = 32, quality = 0;
  a.int_value("-n", "--n-predict", n);
  a.int_value(nullptr, "--quality", quality);
  double min_agree = -1, max_cpu_delta = -1;
  a.float_value(nullptr, "--min-agreement", min_agree);
  a.float_value(nullptr, "--max-cpu-delta", max_cpu_delta);
  std::string prompt = "Once upon a time";
  a.value("-p", "--prompt", prompt);
  ModelFlags mf;
  int64_t t = 0;
  if (a.int_value("-t", "--threads", t)) mf.params.n_threads = int32_t(t);
  requant_flag(a, mf.params.gpu_requant);
  n_cpu_moe_flag(a, mf.params.n_cpu_moe);
  device_flags(a, mf.gpu_devices, mf.tensor_split);
  auto pos = a.positional();
  if (pos.size() != 1) a.fail("usage: fish test-gpu MODEL [options]");
  mf.path = pos[0];

  const char* be = fish_backend_active();
  if (!be) {
    std::printf("SKIPPED: no GPU backend: %s\n", fish_backend_reason());
    return 77;
  }
  std::printf("backend %s: %s\n", be, fish_backend_status());

  if (!no_kernels) {
    fish_error* err = nullptr;
    const int32_t f = fish_test_gpu_kernels(mf.path.c_str(), &print_check, nullptr, &err);
    if (f < 0) {
      report(false, "kernels", fish_error_message(err));
      fish_error_free(err);
    } else {
      failures += f;
    }
  }
  {
    fish_error* err = nullptr;
    const int32_t f = fish_test_gpu_requant(mf.path.c_str(), mf.params.gpu_requant, &print_requant, nullptr, &err);
    if (f < 0) {
      report(false, "requant", fish_error_message(err));
      fish_error_free(err);
    } else {
      failures += f;
    }
  }
  // The prompt's ids for the end-to-end and quality runs (the model's context length).
  std::vector<int32_t> prompt_ids;
  if (!no_e2e || quality > 0) {
    mf.params.n_ctx = 0;
    fish_model* tm = load_or_exit("test-gpu", [&] { ModelFlags c = mf; c.params.gpu_layers = 0; return c; }());
    prompt_ids = tokenize_or_exit("test-gpu", tm, prompt, true, false);
    fish_model_free(tm);
    if (prompt_ids.empty()) prompt_ids.push_back(0);
  }
  if (!no_e2e) {
    const uint64_t resident0 = fish_backend_bytes_resident();
    std::vector<int32_t> toks;
    Run span = run_model("auto", mf, -1, -1, prompt_ids, &toks, int(n));
    const uint64_t after_a = fish_backend_bytes_resident();
    report(after_a == resident0, "device memory freed after the auto run",
           std::to_string(after_a) + " bytes resident vs " + std::to_string(resident0) + " before");
    std::string moe_where;
    if (span.n_expert > 0)
      moe_where = " (MoE: " + std::to_string(span.span_layers) + " layers' experts in the span, " +
                  std::to_string(span.cpu_moe_layers) + " in host memory)";
    std::printf("auto placement: %d layers%s%s%s; %s\n", span.gpu_layers, span.gpu_output ? " + output" : "",
                span.gpu_span ? " as one span" : " per matmul", moe_where.c_str(), span.detail.c_str());
    // MoE under a re-quantisation mode: the span holds converted expert
    // stacks, per matmul the CPU multiplies the experts from host memory;
    // FISH_TEST_REQUANT_HOST_EXPERTS gives it the same converted bytes, so the
    // two runs compare the same weights.
    ModelFlags pmf = mf;
    if (span.n_expert > 0 && !span.requant.empty()) pmf.params.config = "FISH_TEST_REQUANT_HOST_EXPERTS=1";
    Run pm = run_model("per-matmul", pmf, -1, 0, prompt_ids, &toks, int(n));
    const uint64_t after_b = fish_backend_bytes_resident();
    report(after_b == resident0, "device memory freed after the per-matmul run",
           std::to_string(after_b) + " bytes resident vs " + std::to_string(resident0) + " before");
    Run cpu;
    if (!no_cpu) {
      std::vector<int32_t> forced = toks;
      cpu = run_model("cpu", mf, 0, 0, prompt_ids, &forced, int(n));
    }
    // How far two ways of rounding activations move this model's argmax by
    // themselves: the per-matmul run against the CPU's (neither has a span).
    const Compare floor = no_cpu ? Compare{} : compare(pm, cpu);
    if (!span.gpu_span) {
      std::printf("SKIP span == per-matmul: the backend placed no span (%s)\n", span.detail.c_str());
    } else {
      const Compare c = compare(span, pm);
      char buf[160];
      std::snprintf(buf, sizeof buf, "argmax equal at %d/%d steps, max |dlogit| %.4g (%.3f%% of max |logit|)", c.agree,
                    c.steps, c.max_delta, c.max_rel * 100);
      // The spec's criterion (every argmax equal, 2%) is for f32 activations.
      // A backend that quantises activations to int8 (as the CPU does;
      // fish_vulkan on devices with accelerated int8 dot products) turns
      // ulp-level differences between the fused span and the per-matmul path
      // into int8 rounding flips: measured 2.6% (1B) / 3.4% (8B) on the H200,
      // the size of the CPU's own difference from an f32 product (3.2% on the
      // 1B), so 5% there; and as two logit vectors within d of each other can
      // only disagree on an argmax whose top-2 gap is <= 2d, near-ties may
      // flip: at least 90% of the argmaxes equal (random-weight synth-tiny:
      // 95/101 on the H200; 25/25 on the 1B and 8B).
      const bool int8 = std::string(fish_backend_status()).find("matmul: int8") != std::string::npos;
      // MoE: per matmul the experts run on the CPU (int8 activations for
      // quantised experts) and in the span on the device, and a routing
      // decision near a tie can go either way, which changes that token's
      // FFN entirely: the logits of a whole model are then not comparable
      // (random-weight tiny-qwen3moe Q4_K_M: 18% of max |logit| with 30/33
      // argmax equal). So for MoE the argmax criterion alone, max |dlogit|
      // reported; tests/moe checks F32 models, where the paths differ only in
      // summation order, against 2%. How many argmaxes rounding alone moves
      // depends on the model: on the synthesised Qwen3-30B-A3B (48 layers of
      // 8 of 128 experts, random routers; H100) the per-matmul run and the
      // CPU's agree at 27/33 steps (26/33 with FISH_VK_INT8=0), the span and
      // per-matmul at 23/33 (28/33) (docs/experiments/vulkan-moe-decode.md).
      // The span path rounds in two places where those two runs differ in
      // one (the attention's matmuls, and the experts), so it may miss twice
      // as often as that floor, and at least 10% of the steps (10% without
      // the CPU run). A span that computes the wrong thing misses most steps.
      const bool moe = span.n_expert > 0;
      const double floor_miss = floor.steps > 0 ? 1.0 - double(floor.agree) / floor.steps : 0.0;
      const double moe_need = 1.0 - std::max(0.1, 2.0 * floor_miss);
      const bool ok = moe    ? c.agree >= moe_need * c.steps
                      : int8 ? c.agree >= 0.9 * c.steps && c.max_rel <= 0.05
                             : c.agree == c.steps && c.max_rel <= 0.02;
      char what[160];
      if (moe)
        std::snprintf(what, sizeof what, "span == per-matmul (MoE, experts on the host per matmul: >= %ld%% argmax%s)",
                      std::lround(moe_need * 100), floor.steps > 0 ? ", twice the per-matmul vs CPU misses" : "");
      else
        std::snprintf(what, sizeof what, "span == per-matmul%s", int8 ? " (int8 activations: >= 90% argmax, 5%)" : "");
      report(ok && span.ok && pm.ok, what, buf);
    }
    if (!no_cpu) {
      const Compare c = compare(span, cpu);
      char buf[160];
      std::snprintf(buf, sizeof buf, "top-1 agreement %d/%d (%.1f%%), max |dlogit| %.4g (%.3f%% of max |logit|)",
                    c.agree, c.steps, 100.0 * c.agree / std::max(1, c.steps), c.max_delta, c.max_rel * 100);
      if (min_agree >= 0)
        report(c.agree >= min_agree * c.steps, "GPU vs CPU agreement (required >= " + std::to_string(min_agree) + ")", buf);
      if (max_cpu_delta >= 0)
        report(c.max_rel <= max_cpu_delta, "GPU vs CPU max |dlogit| (required <= " + std::to_string(max_cpu_delta) +
                                               " of max |logit|)", buf);
      if (min_agree < 0 && max_cpu_delta < 0) std::printf("INFO GPU vs CPU: %s\n", buf);
      std::printf("INFO per-matmul vs CPU: top-1 agreement %d/%d (%.1f%%), max |dlogit| %.4g (%.3f%% of max |logit|)\n",
                  floor.agree, floor.steps, 100.0 * floor.agree / std::max(1, floor.steps), floor.max_delta,
                  floor.max_rel * 100);
    }
  }
  if (quality > 0) {
    std::vector<int32_t> ref_toks;
    Run cpu = run_model("cpu", mf, 0, 0, prompt_ids, &ref_toks, int(quality));
    Run gpu = run_model("auto", mf, -1, -1, prompt_ids, &ref_toks, int(quality));
    const Compare c = compare(gpu, cpu);
    double kl_sum = 0, kl_max = 0;
    const size_t steps = std::min(gpu.logits.size(), cpu.logits.size());
    for (size_t i = 0; i < steps; ++i) {
      const double kl = kl_divergence(cpu.logits[i], gpu.logits[i]);
      kl_sum += kl;
      kl_max = std::max(kl_max, kl);
    }
    const double need = min_agree >= 0 ? min_agree : 0.95;
    char buf[200];
    std::snprintf(buf, sizeof buf, "top-1 agreement %d/%d (%.1f%%), KL(P_cpu||P_gpu) mean %.3g max %.3g nats; %d GPU layers%s",
                  c.agree, c.steps, 100.0 * c.agree / std::max(1, c.steps), steps ? kl_sum / double(steps) : 0.0, kl_max,
                  gpu.gpu_layers, gpu.gpu_span ? " (span)" : "");
    report(gpu.ok && cpu.ok && c.steps > 0 && c.agree >= need * c.steps,
           "quality vs the CPU's greedy run (required >= " + std::to_string(need) + ")",
           buf + (gpu.requant.empty() ? std::string() : "; " + gpu.requant));
  }
  std::printf("%s: %d failure%s\n", failures ? "FAIL" : "PASS", failures, failures == 1 ? "" : "s");
  return failures ? 1 : 0;
}

static const Command reg{"test-gpu", "validate the GPU backend on a model (kernels + end to end)", &cmd_test_gpu};
