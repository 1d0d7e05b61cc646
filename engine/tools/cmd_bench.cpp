// fish bench: llama-bench-like prompt-processing (ppN) and generation (tgN)
// throughput, mean ± sd over repetitions. With a compute backend, the same
// model runs with auto placement and CPU-only in one process, and the ratio is
// printed. With no -m, a default model is synthesised (and cached).
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "cli_model.h"
#include "command.h"
#include "fish/fish_bench.h"

using namespace fish::cli;

namespace {

struct Result {
  std::string backend;
  int32_t threads = 0;
  int32_t gpu_layers = 0;
  std::string test;
  int64_t n_prompt = 0, n_gen = 0;
  std::vector<double> samples;  // tok/s per repetition
  double mean() const {
    double s = 0;
    for (double x : samples) s += x;
    return samples.empty() ? 0 : s / double(samples.size());
  }
  double sd() const {
    if (samples.size() < 2) return 0;
    double m = mean(), s = 0;
    for (double x : samples) s += (x - m) * (x - m);
    return std::sqrt(s / double(samples.size() - 1));
  }
};

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

[[noreturn]] void die(fish_model* m, const char* what) {
  std::fprintf(stderr, "fish bench: %s: %s\n", what, fish_last_error(m));
  std::exit(1);
}

// Deterministic pseudo-random token ids (not special tokens).
std::vector<int32_t> bench_tokens(int64_t n, int32_t n_vocab) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  uint64_t s = 0x9E3779B97F4A7C15ull;
  for (auto& x : t) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    x = int32_t(3 + (s >> 33) % uint64_t(n_vocab > 3 ? n_vocab - 3 : 1));
  }
  return t;
}

// Fills the KV cache with `depth` tokens (not timed), so a test runs at that context.
void fill_depth(fish_model* m, const std::vector<int32_t>& ctx, int64_t depth) {
  fish_kv_truncate(m, 0);
  for (int64_t p = 0; p < depth; p += 512) {
    const int32_t c = int32_t(std::min<int64_t>(512, depth - p));
    if (fish_eval(m, &ctx[size_t(p)], c, int32_t(p), 0) != 0) die(m, "depth fill");
  }
}

void run_tests(fish_model* m, const fish_model_info& info, int64_t n_p, int64_t n_g, int64_t depth, int reps,
               std::vector<Result>& out) {
  const std::vector<int32_t> ctx = bench_tokens(depth + 1, info.n_vocab);
  const std::string at = depth > 0 ? " @ d" + std::to_string(depth) : "";
  const std::string backend = info.gpu_layers > 0 || info.gpu_output ? std::string(info.backend) : "CPU";
  if (n_p > 0) {
    Result r{backend, info.n_threads, info.gpu_layers, "pp" + std::to_string(n_p) + at, n_p, 0, {}};
    std::vector<int32_t> toks = bench_tokens(n_p, info.n_vocab);
    for (int rep = -1; rep < reps; ++rep) {  // rep -1 warms up
      fill_depth(m, ctx, depth);
      const double t0 = now_s();
      if (fish_eval(m, toks.data(), int32_t(n_p), int32_t(depth), 0) != 0) die(m, "prompt eval");
      const double dt = now_s() - t0;
      if (rep >= 0) r.samples.push_back(double(n_p) / dt);
    }
    out.push_back(r);
  }
  if (n_g > 0) {
    Result r{backend, info.n_threads, info.gpu_layers, "tg" + std::to_string(n_g) + at, 0, n_g, {}};
    std::vector<int32_t> toks = bench_tokens(n_g, info.n_vocab);
    for (int rep = -1; rep < reps; ++rep) {
      fill_depth(m, ctx, depth);
      const int64_t n = rep < 0 ? std::min<int64_t>(n_g, 4) : n_g;
      const double t0 = now_s();
      for (int64_t i = 0; i < n; ++i)
        if (fish_eval(m, &toks[size_t(i)], 1, int32_t(depth + i), 0) != 0) die(m, "generation eval");
      const double dt = now_s() - t0;
      if (rep >= 0) r.samples.push_back(double(n) / dt);
    }
    out.push_back(r);
  }
}

std::string default_model(int32_t threads) {
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  const char* home = std::getenv("HOME");
  std::string dir = xdg && *xdg ? std::string(xdg) + "/fish" : std::string(home && *home ? home : "/tmp") + "/.cache/fish";
  std::string path = dir + "/synth-llama-1b-Q4_K_M.gguf";
  struct stat st {};
  if (stat(path.c_str(), &st) == 0) return path;
  std::string mk = "mkdir -p '" + dir + "'";
  if (std::system(mk.c_str()) != 0) {
    std::fprintf(stderr, "fish bench: cannot create %s\n", dir.c_str());
    std::exit(1);
  }
  std::fprintf(stderr, "fish bench: no -m given: synthesising the default model (Llama-3.2-1B shapes, Q4_K_M, random weights)\n"
                       "            into %s (once; reused afterwards)...\n", path.c_str());
  fish_error* err = nullptr;
  if (fish_synth_file("llama-1b", "Q4_K_M", path.c_str(), 1, threads, &err) != 0) {
    std::fprintf(stderr, "fish bench: synth failed: %s\n", fish_error_message(err));
    std::exit(1);
  }
  return path;
}

}  // namespace

static int cmd_bench(int argc, char** argv) {
  Args a(argc, argv);
  if (a.flag("-h", "--help")) {
    std::printf("usage: fish bench [-m MODEL] [-p 512] [-n 128] [-d DEPTH] [-t N] [-r 5] [--gpu-layers N] [--json]\n"
                "       fish bench --kernels [--types Q4_K,Q6_K] [--shapes 4096x14336,...] [-r N] [--json]\n"
                "  Prompt processing (ppN) and generation (tgN) tok/s, mean ± sd over -r repetitions;\n"
                "  -d runs them after DEPTH tokens of context (filled untimed). FISH_GPU_PROFILE=2: stage profile.\n"
                "  With a GPU plugin: auto placement and CPU-only rows, and their ratio.\n"
                "  Without -m: a Llama-3.2-1B-shaped Q4_K_M model is synthesised once and cached.\n"
                "  --kernels: the GPU backend's matmul kernels on large matrices (GB/s), next to the CPU's.\n");
    return 0;
  }
  std::string model;
  a.value("-m", "--model", model);
  int64_t n_p = 512, n_g = 128, reps = 5, threads = 0, ngl = -1, depth = 0;
  a.int_value("-p", "--n-prompt", n_p);
  a.int_value("-n", "--n-gen", n_g);
  const bool reps_given = a.int_value("-r", "--repetitions", reps);
  a.int_value("-t", "--threads", threads);
  a.int_value("-d", "--depth", depth);
  a.int_value("-ngl", "--gpu-layers", ngl);
  const bool json = a.flag(nullptr, "--json");
  if (a.flag(nullptr, "--kernels")) {  // the backend's kernels on large matrices, GB/s
    std::string types, shapes;
    a.value(nullptr, "--types", types);
    a.value(nullptr, "--shapes", shapes);
    if (!a.positional().empty()) a.fail("unexpected argument");
    fish_kernel_bench_params kp = fish_kernel_bench_default_params();
    kp.types = types.c_str();
    kp.shapes = shapes.c_str();
    kp.n_threads = int32_t(threads);
    kp.json = json;
    if (reps_given) kp.reps = int32_t(reps);
    fish_error* kerr = nullptr;
    char* report = fish_kernel_bench(&kp, &kerr);
    if (!report) {
      std::fprintf(stderr, "fish bench --kernels: %s\n", fish_error_message(kerr));
      fish_error_free(kerr);
      return 1;
    }
    std::fputs(report, stdout);
    if (*report && report[std::strlen(report) - 1] != '\n') std::fputc('\n', stdout);
    fish_free(report);
    return 0;
  }
  if (!a.positional().empty()) a.fail("unexpected argument");
  if (n_p < 0 || n_g < 0 || reps < 1 || threads < 0 || depth < 0) a.fail("-p/-n/-d must be >= 0, -r >= 1, -t >= 1");
  if (model.empty()) model = default_model(int32_t(threads));

  fish_model_params p = fish_model_default_params();
  p.n_threads = int32_t(threads);
  p.n_ctx = int32_t(depth + std::max<int64_t>(n_p, n_g) + 16);
  p.gpu_layers = int32_t(ngl);
  std::vector<Result> results;
  fish_error* err = nullptr;
  fish_model* m = fish_model_load(model.c_str(), &p, &err);
  if (!m) {
    std::fprintf(stderr, "fish bench: %s\n", fish_error_message(err));
    return 1;
  }
  fish_model_info info{};
  info.struct_size = sizeof info;
  fish_model_get_info(m, &info);
  const std::string arch = info.arch, detail = info.gpu_detail, kernels = info.cpu_kernels;
  const double size_mib = double(info.file_bytes) / (1024.0 * 1024.0);
  const double params_b = double(info.n_params) / 1e9;
  const bool on_gpu = info.gpu_layers > 0 || info.gpu_output;
  run_tests(m, info, n_p, n_g, depth, int(reps), results);
  if (on_gpu && std::getenv("FISH_GPU_PROFILE")) {  // the backend's stage profile of these runs
    char* prof = fish_backend_profile();
    if (prof && *prof) std::fprintf(stderr, "%s\n", prof);
    fish_free(prof);
  }
  fish_model_free(m);
  if (on_gpu) {  // the same model on the CPU only, same process
    p.gpu_layers = 0;
    m = fish_model_load(model.c_str(), &p, &err);
    if (!m) {
      std::fprintf(stderr, "fish bench: %s\n", fish_error_message(err));
      return 1;
    }
    fish_model_info ci{};
    ci.struct_size = sizeof ci;
    fish_model_get_info(m, &ci);
    run_tests(m, ci, n_p, n_g, depth, int(reps), results);
    fish_model_free(m);
  }

  if (json) {
    std::printf("[\n");
    for (size_t i = 0; i < results.size(); ++i) {
      const Result& r = results[i];
      std::printf("  {\"model\": \"%s\", \"model_size\": %llu, \"model_n_params\": %lld, \"backend\": \"%s\", "
                  "\"gpu_layers\": %d, \"n_threads\": %d, \"cpu_kernels\": \"%s\", \"test\": \"%s\", \"n_prompt\": %lld, "
                  "\"n_gen\": %lld, \"avg_ts\": %.4f, \"stddev_ts\": %.4f, \"samples_ts\": [",
                  model.c_str(), (unsigned long long)info.file_bytes, (long long)info.n_params, r.backend.c_str(),
                  r.gpu_layers, r.threads, kernels.c_str(), r.test.c_str(), (long long)r.n_prompt,
                  (long long)r.n_gen, r.mean(), r.sd());
      for (size_t k = 0; k < r.samples.size(); ++k) std::printf(k ? ", %.4f" : "%.4f", r.samples[k]);
      std::printf("]}%s\n", i + 1 < results.size() ? "," : "");
    }
    std::printf("]\n");
    return 0;
  }
  std::printf("| model | size | params | backend | ngl | threads | test | t/s |\n");
  std::printf("| --- | ---: | ---: | --- | ---: | ---: | ---: | ---: |\n");
  char params_s[32];
  if (params_b >= 1.0) std::snprintf(params_s, sizeof params_s, "%.2f B", params_b);
  else std::snprintf(params_s, sizeof params_s, "%.2f M", params_b * 1e3);
  for (const Result& r : results)
    std::printf("| %s %s | %.2f MiB | %s | %s | %d | %d | %s | %.2f ± %.2f |\n", arch.c_str(), params_s, size_mib,
                params_s, r.backend == "CPU" ? ("CPU " + kernels).c_str() : r.backend.c_str(), r.gpu_layers,
                r.threads, r.test.c_str(), r.mean(), r.sd());
  if (on_gpu) {
    std::printf("\n%s\n", detail.c_str());
    const size_t half = results.size() / 2;
    for (size_t i = 0; i < half; ++i)
      std::printf("GPU/CPU %s: %.2fx\n", results[i].test.c_str(), results[i].mean() / results[i + half].mean());
  }
  return 0;
}

static const Command reg{"bench", "prompt/generation throughput (llama-bench style)", &cmd_bench};
