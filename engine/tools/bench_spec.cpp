#include "bench_spec.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "fish/fish_spec.h"

namespace fish::cli {

namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

[[noreturn]] void die(const char* what, const char* why) {
  std::fprintf(stderr, "fish bench: %s: %s\n", what, why);
  std::exit(1);
}

// Greedy tokens one per forward; the prompt but its last token untimed (as
// fish_spec_start does), then n_gen forwards and choices. Returns the seconds.
double plain_greedy(fish_model* m, const std::vector<int32_t>& prompt, int64_t n_gen, std::vector<int32_t>& out) {
  fish_model_info info{};
  info.struct_size = sizeof info;
  fish_model_get_info(m, &info);
  if (fish_kv_truncate(m, 0) != 0) die("greedy generation", fish_last_error(m));
  const int32_t n = int32_t(prompt.size());
  if (n > 1 && fish_eval(m, prompt.data(), n - 1, 0, 0) != 0) die("greedy generation", fish_last_error(m));
  fish_sampler_params sp = fish_sampler_default_params();
  sp.temp = 0;
  fish_sampler* s = fish_sampler_new(&sp);
  out.clear();
  int32_t tok = prompt.back();
  const double t0 = now_s();
  for (int64_t i = 0; i < n_gen; ++i) {
    if (fish_eval(m, &tok, 1, n - 1 + int32_t(i), 0) != 0) die("greedy generation", fish_last_error(m));
    tok = fish_sampler_sample(s, fish_get_logits(m, -1), info.n_vocab);
    out.push_back(tok);
  }
  const double dt = now_s() - t0;
  fish_sampler_free(s);
  return dt;
}

}  // namespace

std::vector<SpecBenchRow> bench_speculative(fish_model* target, fish_model* draft, const std::vector<SpecMode>& modes,
                                            const std::vector<int32_t>& prompt, int64_t n_gen,
                                            const std::string& depth_label, int reps, Progress& progress) {
  std::vector<SpecBenchRow> rows;
  const std::string tg = "tg" + std::to_string(n_gen);
  SpecBenchRow base{tg + " greedy" + depth_label, "greedy", n_gen, 0, {}, 0, 0, 0, 0, true};
  std::vector<int32_t> want, got;
  for (int rep = -1; rep < reps; ++rep) {  // rep -1 warms up
    progress.update((rep < 0 ? "warm-up: " : "") + base.test, rep < 0 ? -1 : double(rep) / reps);
    const double dt = plain_greedy(target, prompt, rep < 0 ? std::min<int64_t>(n_gen, 4) : n_gen, got);
    if (rep >= 0) base.samples.push_back(double(n_gen) / dt);
    if (rep == 0) want = got;
  }
  base.steps = base.generated = n_gen * reps;
  rows.push_back(base);

  fish_sampler_params sp = fish_sampler_default_params();
  sp.temp = 0;
  for (const SpecMode& mode : modes) {
    SpecBenchRow r{tg + (mode.lookup ? " +lookup" : " +draft") + std::to_string(mode.n_draft) + depth_label,
                   mode.lookup ? "lookup" : "draft", n_gen, mode.n_draft, {}, 0, 0, 0, 0, true};
    std::vector<int32_t> buf(size_t(mode.n_draft) + 1);
    for (int rep = -1; rep < reps; ++rep) {
      progress.update((rep < 0 ? "warm-up: " : "") + r.test, rep < 0 ? -1 : double(rep) / reps);
      // A fresh fish_spec each time: the greedy rows used the target's sequence 0 meanwhile.
      if (fish_kv_truncate(target, 0) != 0 || (draft && fish_kv_truncate(draft, 0) != 0))
        die(r.test.c_str(), "cannot reset the KV cache");
      fish_spec_params p = fish_spec_default_params();
      p.draft = mode.lookup ? nullptr : draft;
      p.n_draft = int32_t(mode.n_draft);
      fish_error* err = nullptr;
      fish_spec* s = fish_spec_new(target, &p, &sp, &err);
      if (!s) die(r.test.c_str(), fish_error_message(err));
      if (fish_spec_start(s, prompt.data(), int32_t(prompt.size())) != 0) die(r.test.c_str(), fish_spec_last_error(s));
      // The warm-up (rep -1) generates as much as a timed run: verifies of every
      // length the run meets (1..n_draft + 1 rows) have then created their GPU
      // pipelines (on the H200 a first +draft4 row ran at 0.24x, the +draft8
      // after it at 0.76x).
      got.clear();
      const double t0 = now_s();
      while (int64_t(got.size()) < n_gen) {
        const int32_t k = fish_spec_step(s, buf.data(), int32_t(std::min<int64_t>(int64_t(buf.size()), n_gen - int64_t(got.size()))));
        if (k < 1) die(r.test.c_str(), fish_spec_last_error(s));
        got.insert(got.end(), buf.begin(), buf.begin() + k);
      }
      const double dt = now_s() - t0;
      if (rep >= 0) {
        r.samples.push_back(double(n_gen) / dt);
        fish_spec_stats st{};
        st.struct_size = sizeof st;
        fish_spec_get_stats(s, &st);
        r.proposed += st.proposed, r.accepted += st.accepted, r.steps += st.steps, r.generated += st.generated;
        r.same_text = r.same_text && got == want;
      }
      fish_spec_free(s);
    }
    rows.push_back(r);
  }
  return rows;
}

std::vector<std::pair<int32_t, double>> verify_costs(fish_model* target, const std::vector<int32_t>& prompt, int reps,
                                                     Progress& progress) {
  std::vector<std::pair<int32_t, double>> out;
  const int32_t n = int32_t(prompt.size());
  if (fish_kv_truncate(target, 0) != 0 || fish_eval(target, prompt.data(), n, 0, 0) != 0)
    die("verify cost", fish_last_error(target));
  std::vector<int32_t> toks(16);
  for (int32_t i = 0; i < 16; ++i) toks[size_t(i)] = prompt[size_t(i) % prompt.size()];
  reps = std::max(reps, 3);
  for (const int32_t k : {1, 2, 4, 8, 16}) {
    progress.update("verify cost: a forward of " + std::to_string(k) + " tokens", -1);
    std::vector<double> ms;
    for (int rep = -1; rep < reps; ++rep) {
      if (fish_kv_truncate(target, n) != 0) die("verify cost", fish_last_error(target));
      const double t0 = now_s();
      if (fish_eval(target, toks.data(), k, n, 1) != 0) die("verify cost", fish_last_error(target));
      if (rep >= 0) ms.push_back((now_s() - t0) * 1e3);
    }
    std::sort(ms.begin(), ms.end());
    out.emplace_back(k, ms[ms.size() / 2]);
  }
  return out;
}

}  // namespace fish::cli
