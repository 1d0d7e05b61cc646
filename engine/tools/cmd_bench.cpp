// fish bench: llama-bench-like prompt-processing (ppN) and generation (tgN)
// throughput, mean ± sd over repetitions, for every combination of the comma
// lists given (-p, -n, -d, -t). With a compute backend, the same
// model runs with auto placement and CPU-only in one process, and the ratio is
// printed. With no -m, a default model is synthesised (and cached).
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "bench_spec.h"
#include "cli_model.h"
#include "command.h"
#include "fish/fish_bench.h"
#include "fish/fish_spec.h"
#include "progress.h"

using namespace fish::cli;

namespace {

struct Result {
  std::string backend;
  int32_t threads = 0;
  int32_t gpu_layers = 0;
  std::string test;
  int64_t n_prompt = 0, n_gen = 0;
  int64_t n_par = 1;            // sequences run together (-np): the rate is their aggregate
  std::vector<double> samples;  // tok/s per repetition
  SpecBenchRow spec;            // speculative rows (--model-draft / --lookup): spec.kind is not empty
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

// Fills the KV cache of sequences 0..np-1 with `depth` tokens each (not
// timed), so a test runs at that context.
void fill_depth(fish_model* m, const std::vector<int32_t>& ctx, int64_t depth, int64_t np) {
  for (int32_t s = 0; s < int32_t(np); ++s) {
    fish_seq_truncate(m, s, 0);
    std::vector<int32_t> pos(512), seq(512, s);
    for (int64_t p = 0; p < depth; p += 512) {
      const int32_t c = int32_t(std::min<int64_t>(512, depth - p));
      for (int32_t i = 0; i < c; ++i) pos[size_t(i)] = int32_t(p) + i;
      fish_batch b{};
      b.struct_size = sizeof b;
      b.n_tokens = c, b.token = &ctx[size_t(p)], b.pos = pos.data(), b.seq_id = seq.data();
      if (fish_decode(m, &b) != 0) die(m, "depth fill");
    }
  }
}

// One step of np sequences: rows (toks[k + s], position pos0 + k, sequence s)
// for k < n and s < np, sequence by sequence; the last row of each kept.
void eval_parallel(fish_model* m, const std::vector<int32_t>& toks, int64_t n, int64_t pos0, int64_t np,
                   const char* what) {
  std::vector<int32_t> tok, pos, seq;
  std::vector<int8_t> keep;
  for (int32_t s = 0; s < int32_t(np); ++s)
    for (int64_t k = 0; k < n; ++k) {
      tok.push_back(toks[size_t((k + s) % int64_t(toks.size()))]);
      pos.push_back(int32_t(pos0 + k));
      seq.push_back(s);
      keep.push_back(k + 1 == n ? 1 : 0);
    }
  fish_batch b{};
  b.struct_size = sizeof b;
  b.n_tokens = int32_t(tok.size()), b.token = tok.data(), b.pos = pos.data(), b.seq_id = seq.data(),
  b.logits = keep.data();
  if (fish_decode(m, &b) != 0) die(m, what);
}

// One test (ppN or tgN at a depth) on a loaded model: a warm-up, then `reps`
// timed repetitions; progress reports both. The warm-up repeats (untimed)
// until it has run for kWarmSeconds: a GPU idling at a low clock takes that
// long to reach its speed (the H200 after one 23 ms warm-up pass: the 1B's
// pp512 at 12242 ± 10041 over -r 2, one repetition at a fraction of the
// other's speed; with the repeats 24041 ± 113). 0.3 s still left the first
// test of a process slow at times (H100, 1B pp512 10416 ± 1228, the next
// test 37277 ± 296; 8B 6129 ± 2029, then 7396 ± 4): 1 s.
// The backend that runs m's work now ("CPU" when none: also after a fallback).
std::string backend_now(const fish_model* m, fish_model_info* info) {
  info->struct_size = sizeof *info;
  fish_model_get_info(m, info);
  if (!(info->gpu_layers > 0 || info->gpu_output)) return "CPU";
  // The devices used: "vulkan (device 0)", or with several each one's layers
  // as device:first-last, "vulkan (0:0-15 0:16-31)".
  const std::string layers = info->gpu_device_layers ? info->gpu_device_layers : "";
  if (info->n_gpu_devices > 1) return std::string(info->backend) + " (" + layers + ")";
  return std::string(info->backend) + " (device " + layers.substr(0, layers.find(':')) + ")";
}

Result run_test(fish_model* m, bool prompt, int64_t n, int64_t depth, int64_t np, int reps, Progress& progress) {
  fish_model_info info{};
  const std::string backend = backend_now(m, &info);
  const std::string test = (prompt ? "pp" : "tg") + std::to_string(n) + (depth > 0 ? " @ d" + std::to_string(depth) : "") +
                           (np > 1 ? " x" + std::to_string(np) : "");
  Result r{backend, info.n_threads, info.gpu_layers, test, prompt ? n : 0, prompt ? 0 : n, np, {}, {}};
  const std::string where = test + " on " + backend + ", " + std::to_string(info.n_threads) + " threads";
  const std::vector<int32_t> ctx = bench_tokens(depth + 1, info.n_vocab);
  const std::vector<int32_t> toks = bench_tokens(n, info.n_vocab);
  // One repetition of n_run tokens (after the depth's fill): its seconds.
  const auto run_once = [&](int64_t n_run) {
    fill_depth(m, ctx, depth, np);
    const double t0 = now_s();
    if (np > 1) {  // np sequences in each forward: the prompt as one batch, generation a row per sequence
      if (prompt) eval_parallel(m, toks, n, depth, np, "prompt eval");
      else
        for (int64_t i = 0; i < n_run; ++i)
          eval_parallel(m, std::vector<int32_t>(toks.begin() + i, toks.begin() + i + 1), 1, depth + i, np,
                        "generation eval");
    } else if (prompt) {
      if (fish_eval(m, toks.data(), int32_t(n), int32_t(depth), 0) != 0) die(m, "prompt eval");
    } else {
      for (int64_t i = 0; i < n_run; ++i)
        if (fish_eval(m, &toks[size_t(i)], 1, int32_t(depth + i), 0) != 0) die(m, "generation eval");
    }
    return now_s() - t0;
  };
  constexpr double kWarmSeconds = 1.0;
  progress.update("warm-up: " + where, -1);
  const double warm_t0 = now_s();
  // Generation's warm-up passes are a few tokens, not the whole test.
  do run_once(prompt ? n : std::min<int64_t>(n, 4));
  while (now_s() - warm_t0 < kWarmSeconds);
  for (int rep = 0; rep < reps; ++rep) {
    progress.update(where, double(rep) / reps);
    r.samples.push_back(double(n * np) / run_once(n));
  }
  progress.update(where, 1.0);
  // A backend failure falls back to the CPU: the row names what ran at the end.
  fish_model_info after{};
  const std::string ran = backend_now(m, &after);
  if (ran != backend) {
    progress.finish();
    std::fprintf(stderr, "fish bench: the backend fell back to the CPU during %s; its row says %s\n", where.c_str(),
                 ran.c_str());
    r.backend = ran;
    r.gpu_layers = after.gpu_layers;
  }
  return r;
}

// Comma list of integers (llama-bench's -p 128,512); every value >= min_value.
std::vector<int64_t> int_list(Args& a, std::initializer_list<const char*> names, const char* what,
                              std::vector<int64_t> dflt, int64_t min_value) {
  std::string v;
  if (!a.value(names, v)) return dflt;
  std::vector<int64_t> out;
  size_t i = 0;
  for (;;) {
    const size_t j = v.find(',', i);
    const std::string item = v.substr(i, j == std::string::npos ? std::string::npos : j - i);
    char* end = nullptr;
    errno = 0;
    const long long x = std::strtoll(item.c_str(), &end, 10);
    if (item.empty() || *end || errno || x < min_value)
      a.fail(std::string(what) + ": '" + v + "' is not a comma list of integers >= " + std::to_string(min_value));
    out.push_back(x);
    if (j == std::string::npos) break;
    i = j + 1;
  }
  return out;
}

std::string default_model(int32_t threads, Progress& progress) {
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
                       "            into %s (once; reused afterwards)\n", path.c_str());
  fish_error* err = nullptr;
  if (fish_synth_file_progress("llama-1b", "Q4_K_M", path.c_str(), 1, threads, &Progress::callback, &progress, &err) != 0) {
    std::fprintf(stderr, "fish bench: synth failed: %s\n", fish_error_message(err));
    std::exit(1);
  }
  return path;
}

}  // namespace

static int cmd_bench(int argc, char** argv) {
  Args a(argc, argv);
  if (a.flag("-h", "--help")) {
    std::printf("usage: fish bench [-m MODEL] [-p 512] [-n 128] [-d 0] [-t N] [-r 5] [-ngl|--n-gpu-layers N]\n"
                "                  [-np 1] [--requant MODE] [--n-cpu-moe N] [--gpu-only] [--json]\n"
                "                  [-md|--model-draft M [--draft 8[,N...]]] [--lookup N[,N...]] [--prompt-file F]\n"
                "       fish bench --kernels [--types Q4_K,Q6_K] [--shapes 4096x14336,...] [-r N] [--json]\n"
                "  Prompt processing (ppN) and generation (tgN) tok/s, mean ± sd over -r repetitions;\n"
                "  -d runs them after DEPTH tokens of context (filled untimed). -p, -n, -d and -t take\n"
                "  comma lists (-p 128,512 -t 1,2), as llama-bench does; 0 skips that kind of test.\n"
                "  With a GPU plugin: auto placement and CPU-only rows, and their ratio (--gpu-only: no CPU rows).\n"
                "  -np N: N sequences at once (each its own prompt or generation, one forward for all rows);\n"
                "  the row's t/s is their aggregate (\"tg128 x8\"), and a line gives it per sequence.\n"
                "  Speculative decoding: --model-draft M (--draft N proposals per step) and/or --lookup N (n-gram\n"
                "  lookup) add rows per -n and -d: greedy generation from one prompt (--prompt-file's text, else\n"
                "  -d pseudo-random tokens after BOS) one token per forward (\"tg128 greedy\") and with proposals\n"
                "  (\"tg128 +draft8\", \"tg128 +lookup8\"); lines give the speed-up, the acceptance, whether the\n"
                "  text is the same, and what one forward of 1..16 tokens costs (verifying N - 1 proposals).\n"
                "  Without -m: a Llama-3.2-1B-shaped Q4_K_M model is synthesised once and cached.\n"
                "  Progress goes to stderr. FISH_GPU_PROFILE=2: the GPU's stage profile.\n"
                "  --kernels: the GPU backend's matmul kernels on large matrices (GB/s), next to the CPU's;\n"
                "  --shapes takes n_in x n_out matrices and MoE models by name (qwen3-30b-a3b, mixtral-8x7b).\n%s%s%s",
                kRequantHelp, kNCpuMoeHelp, kDeviceHelp);
    return 0;
  }
  std::string model;
  a.value("-m", "--model", model);
  int64_t reps = 5, ngl = -1;
  const std::vector<int64_t> n_ps = int_list(a, {"-p", "--n-prompt"}, "-p", {512}, 0);
  const std::vector<int64_t> n_gs = int_list(a, {"-n", "--n-gen"}, "-n", {128}, 0);
  const std::vector<int64_t> depths = int_list(a, {"-d", "--depth"}, "-d", {0}, 0);
  const std::vector<int64_t> threads = int_list(a, {"-t", "--threads"}, "-t", {0}, 1);
  const std::vector<int64_t> n_pars = int_list(a, {"-np", "--parallel"}, "-np", {1}, 1);
  const bool reps_given = a.int_value("-r", "--repetitions", reps);
  std::string draft_path, prompt_file;
  a.value({"-md", "--model-draft"}, draft_path);
  std::vector<int64_t> n_drafts = int_list(a, {"--draft", "--draft-max", "--draft-n"}, "--draft", {}, 1);
  const bool drafts_given = !n_drafts.empty();
  if (n_drafts.empty()) n_drafts = {8};
  const bool prompt_given = a.value(nullptr, "--prompt-file", prompt_file);
  const std::vector<int64_t> lookups = int_list(a, {"--lookup"}, "--lookup", {}, 1);
  a.int_value({"-ngl", "--gpu-layers", "--n-gpu-layers"}, ngl);
  int32_t requant = -1, n_cpu_moe = -1;
  requant_flag(a, requant);
  n_cpu_moe_flag(a, n_cpu_moe);
  std::string gpu_devices, tensor_split;
  device_flags(a, gpu_devices, tensor_split);
  const bool json = a.flag(nullptr, "--json");
  const bool gpu_only = a.flag(nullptr, "--gpu-only");
  if (a.flag(nullptr, "--kernels")) {  // the backend's kernels on large matrices, GB/s
    std::string types, shapes;
    a.value(nullptr, "--types", types);
    a.value(nullptr, "--shapes", shapes);
    if (!a.positional().empty()) a.fail("unexpected argument");
    fish_kernel_bench_params kp = fish_kernel_bench_default_params();
    kp.types = types.c_str();
    kp.shapes = shapes.c_str();
    kp.n_threads = int32_t(threads[0]);
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
  if (reps < 1) a.fail("-r must be >= 1");
  if (ngl < -1) a.fail("--gpu-layers must be >= 0");
  const auto any_positive = [](const std::vector<int64_t>& v) {
    return std::any_of(v.begin(), v.end(), [](int64_t x) { return x > 0; });
  };
  if (!any_positive(n_ps) && !any_positive(n_gs)) a.fail("nothing to measure: -p and -n are both 0");
  if (drafts_given && draft_path.empty()) a.fail("--draft N needs --model-draft M (--lookup N drafts without a model)");
  for (int64_t n : n_drafts)
    if (n > 256) a.fail("--draft: at most 256 proposals per step");
  for (int64_t n : lookups)
    if (n > 256) a.fail("--lookup: at most 256 proposals per step");
  std::vector<SpecMode> spec_modes;
  if (!draft_path.empty())
    for (int64_t n : n_drafts) spec_modes.push_back({false, n});
  for (int64_t n : lookups) spec_modes.push_back({true, n});
  const std::string prompt_text = prompt_given ? read_text_file(a, "--prompt-file", prompt_file) : "";
  if (prompt_given && spec_modes.empty()) a.fail("--prompt-file is the prompt of --model-draft / --lookup rows: give one");
  if (!spec_modes.empty() && !any_positive(n_gs)) a.fail("--model-draft / --lookup rows need a generation length: -n > 0");
  Progress progress("fish bench");
  if (model.empty()) model = default_model(int32_t(threads[0]), progress);

  const int64_t max_tok = std::max(*std::max_element(n_ps.begin(), n_ps.end()), *std::max_element(n_gs.begin(), n_gs.end()));
  fish_model_params p = fish_model_default_params();
  p.n_ctx = int32_t(*std::max_element(depths.begin(), depths.end()) + max_tok + 16);
  if (!spec_modes.empty()) {  // the prompt, generation, proposals
    int64_t max_draft = 16;
    for (const SpecMode& sm : spec_modes) max_draft = std::max(max_draft, sm.n_draft);
    // At most 3 tokens per byte of the prompt: SentencePiece writes a space as
    // U+2581 (3 bytes), which a vocabulary without it spells as 3 byte tokens.
    // (The KV cache grows in pages as it is used, so a generous n_ctx costs nothing.)
    const int64_t prompt_max = std::max<int64_t>(3 * int64_t(prompt_text.size()) + 2, *std::max_element(depths.begin(), depths.end()) + 1);
    p.n_ctx = int32_t(std::max<int64_t>(p.n_ctx, prompt_max + max_tok + max_draft + 16));
  }
  p.progress = &Progress::callback;
  p.progress_user = &progress;
  p.gpu_requant = requant;
  p.n_cpu_moe = n_cpu_moe;
  if (!gpu_devices.empty()) p.gpu_devices = gpu_devices.c_str();
  if (!tensor_split.empty()) p.tensor_split = tensor_split.c_str();
  p.n_seq = int32_t(*std::max_element(n_pars.begin(), n_pars.end()));
  std::vector<Result> results;  // per thread count: the GPU rows (if any), then the CPU rows
  std::vector<std::string> verify_lines;  // the cost of a forward of N tokens, per loaded model
  fish_model_info info{};
  std::string detail;
  bool any_gpu = false;
  // The speculative rows on a loaded target (sequence 0; -np does not apply):
  // the draft model loads with the same placement, per -d (or the prompt file)
  // and -n; then the cost of verifying, after the first of those prompts.
  auto run_spec = [&](fish_model* m, int32_t gpu_layers, int32_t n_threads) {
    fish_model* dm = nullptr;
    if (!draft_path.empty()) {
      fish_model_params dp = p;
      dp.gpu_layers = gpu_layers, dp.n_threads = n_threads, dp.n_seq = 1;
      fish_error* err = nullptr;
      dm = fish_model_load(draft_path.c_str(), &dp, &err);
      if (!dm) {
        progress.finish();
        std::fprintf(stderr, "fish bench: --model-draft: %s\n", fish_error_message(err));
        std::exit(1);
      }
      if (const char* why = fish_spec_vocab_check(m, dm)) {
        progress.finish();
        std::fprintf(stderr, "fish bench: --model-draft %s cannot draft for %s: %s\n", draft_path.c_str(),
                     model.c_str(), why);
        std::exit(1);
      }
    }
    fish_model_info ti{};
    const std::string backend = backend_now(m, &ti);
    std::vector<std::pair<std::vector<int32_t>, std::string>> prompts;  // (tokens, " @ dN")
    if (prompt_given) {
      std::vector<int32_t> t = tokenize_or_exit("bench", m, prompt_text, true, false);
      if (t.empty()) t.push_back(ti.bos >= 0 ? ti.bos : 0);
      prompts.emplace_back(t, " @ d" + std::to_string(t.size()));
    } else {
      for (int64_t d : depths) {
        std::vector<int32_t> t;
        if (ti.bos >= 0 || d == 0) t.push_back(ti.bos >= 0 ? ti.bos : 3);
        const std::vector<int32_t> rest = bench_tokens(d, ti.n_vocab);
        t.insert(t.end(), rest.begin(), rest.end());
        prompts.emplace_back(t, d > 0 ? " @ d" + std::to_string(d) : "");
      }
    }
    for (const auto& [toks, label] : prompts)
      for (int64_t n : n_gs) {
        if (n <= 0) continue;
        for (SpecBenchRow& row : bench_speculative(m, dm, spec_modes, toks, n, label, int(reps), progress)) {
          Result r{backend, ti.n_threads, ti.gpu_layers, row.test, 0, n, 1, row.samples, row};
          results.push_back(r);
        }
      }
    const auto costs = verify_costs(m, prompts.front().first, int(reps), progress);
    std::string line = "verify cost, " + backend + ", " + std::to_string(ti.n_threads) + " threads, after " +
                       std::to_string(prompts.front().first.size()) + " tokens: one forward of";
    char buf[96];
    for (const auto& [k, ms] : costs) {
      if (k == 1) std::snprintf(buf, sizeof buf, " 1 token %.3f ms", ms);
      else std::snprintf(buf, sizeof buf, ", %d: %.3f ms (%.2fx)", k, ms, costs.front().second > 0 ? ms / costs.front().second : 0.0);
      line += buf;
    }
    verify_lines.push_back(line);
    fish_model_free(dm);
  };
  // Every test on one loaded model (the thread count is fixed at load).
  auto run_all = [&](int32_t gpu_layers, int32_t n_threads) {
    p.gpu_layers = gpu_layers;
    p.n_threads = n_threads;
    fish_error* err = nullptr;
    fish_model* m = fish_model_load(model.c_str(), &p, &err);
    if (!m) {
      progress.finish();
      std::fprintf(stderr, "fish bench: %s\n", fish_error_message(err));
      std::exit(1);
    }
    info = fish_model_info{};
    info.struct_size = sizeof info;
    fish_model_get_info(m, &info);
    const bool on_gpu = info.gpu_layers > 0 || info.gpu_output;
    if (on_gpu) detail = info.gpu_detail;
    for (int64_t np : n_pars)
      for (int64_t d : depths) {
        for (int64_t n : n_ps)
          if (n > 0) results.push_back(run_test(m, true, n, d, np, int(reps), progress));
        for (int64_t n : n_gs)
          if (n > 0) results.push_back(run_test(m, false, n, d, np, int(reps), progress));
      }
    if (!spec_modes.empty()) run_spec(m, int32_t(gpu_layers), n_threads);
    if (on_gpu) {  // the backend's stage profile of these runs ("" unless the plugin profiles: FISH_GPU_PROFILE)
      char* prof = fish_backend_profile();
      if (prof && *prof) std::fprintf(stderr, "%s\n", prof);
      fish_free(prof);
    }
    fish_model_free(m);
    return on_gpu;
  };
  for (int64_t t : threads) {
    // Auto placement first; when a backend took work, the same model on the
    // CPU only, in the same process (when none did, those rows are the CPU's).
    const bool on_gpu = ngl != 0 && run_all(int32_t(ngl), int32_t(t));
    any_gpu = any_gpu || on_gpu;
    if ((on_gpu && !gpu_only) || ngl == 0) run_all(0, int32_t(t));
  }
  progress.finish();
  const std::string arch = info.arch, kernels = info.cpu_kernels;

  if (json) {
    std::printf("[\n");
    for (size_t i = 0; i < results.size(); ++i) {
      const Result& r = results[i];
      std::printf("  {\"model\": \"%s\", \"model_size\": %llu, \"model_n_params\": %lld, \"backend\": \"%s\", "
                  "\"gpu_layers\": %d, \"n_threads\": %d, \"cpu_kernels\": \"%s\", \"test\": \"%s\", \"n_prompt\": %lld, "
                  "\"n_gen\": %lld, \"n_parallel\": %lld, \"avg_ts\": %.4f, \"stddev_ts\": %.4f, \"samples_ts\": [",
                  model.c_str(), (unsigned long long)info.file_bytes, (long long)info.n_params, r.backend.c_str(),
                  r.gpu_layers, r.threads, kernels.c_str(), r.test.c_str(), (long long)r.n_prompt,
                  (long long)r.n_gen, (long long)r.n_par, r.mean(), r.sd());
      for (size_t k = 0; k < r.samples.size(); ++k) std::printf(k ? ", %.4f" : "%.4f", r.samples[k]);
      std::printf("]");
      if (!r.spec.kind.empty())
        std::printf(", \"spec\": \"%s\", \"n_draft\": %lld, \"proposed\": %lld, \"accepted\": %lld, "
                    "\"target_forwards\": %lld, \"same_text\": %s",
                    r.spec.kind.c_str(), (long long)r.spec.n_draft, (long long)r.spec.proposed,
                    (long long)r.spec.accepted, (long long)r.spec.steps, r.spec.same_text ? "true" : "false");
      std::printf("}%s\n", i + 1 < results.size() ? "," : "");
    }
    std::printf("]\n");
    return 0;
  }
  const double size_mib = double(info.file_bytes) / (1024.0 * 1024.0);
  const double params_b = double(info.n_params) / 1e9;
  std::printf("| model | size | params | backend | ngl | threads | test | t/s |\n");
  std::printf("| --- | ---: | ---: | --- | ---: | ---: | ---: | ---: |\n");
  char params_s[32];
  if (params_b >= 1.0) std::snprintf(params_s, sizeof params_s, "%.2f B", params_b);
  else std::snprintf(params_s, sizeof params_s, "%.2f M", params_b * 1e3);
  for (const Result& r : results)
    std::printf("| %s %s | %.2f MiB | %s | %s | %d | %d | %s | %.2f ± %.2f |\n", arch.c_str(), params_s, size_mib,
                params_s, r.backend == "CPU" ? ("CPU " + kernels).c_str() : r.backend.c_str(), r.gpu_layers,
                r.threads, r.test.c_str(), r.mean(), r.sd());
  for (const Result& r : results)
    if (r.n_par > 1)
      std::printf("%s, %s, %d threads: %.2f tok/s per sequence\n", r.test.c_str(),
                  r.backend == "CPU" ? "CPU" : r.backend.c_str(), r.threads, r.mean() / double(r.n_par));
  // Each speculative row against the greedy row before it (same prompt, backend, threads).
  const Result* greedy_row = nullptr;
  for (const Result& r : results) {
    if (r.spec.kind == "greedy") greedy_row = &r;
    if (r.spec.kind.empty() || r.spec.kind == "greedy" || !greedy_row) continue;
    const SpecBenchRow& sr = r.spec;
    std::printf("%s, %s, %d threads: %.2fx %s; %lld of %lld proposals accepted (%.1f%%), %.2f tokens per target "
                "forward; %s\n",
                r.test.c_str(), r.backend == "CPU" ? "CPU" : r.backend.c_str(), r.threads,
                greedy_row->mean() > 0 ? r.mean() / greedy_row->mean() : 0.0, greedy_row->test.c_str(),
                (long long)sr.accepted, (long long)sr.proposed,
                sr.proposed ? 100.0 * double(sr.accepted) / double(sr.proposed) : 0.0,
                sr.steps ? double(sr.generated) / double(sr.steps) : 0.0,
                sr.same_text ? "the same text" : "THE TEXT DIFFERS from greedy decoding");
  }
  for (const std::string& line : verify_lines) std::printf("%s\n", line.c_str());
  if (any_gpu) {
    std::printf("\n%s\n", detail.c_str());
    // Each GPU row against the CPU row of the same test and thread count.
    for (const Result& g : results) {
      if (g.backend == "CPU") continue;
      for (const Result& c : results)
        if (c.backend == "CPU" && c.test == g.test && c.threads == g.threads && c.mean() > 0)
          std::printf("GPU/CPU %s, %d threads: %.2fx\n", g.test.c_str(), g.threads, g.mean() / c.mean());
    }
  }
  return 0;
}

static const Command reg{"bench", "prompt/generation throughput (llama-bench style)", &cmd_bench};
