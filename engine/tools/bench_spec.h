// fish bench's speculative-decoding rows (--model-draft / --lookup): greedy
// generation of n tokens from one prompt, one token per forward ("tgN
// greedy"), and with a draft's proposals verified in one forward ("tgN
// +draft8", "tgN +lookup8"): tok/s, acceptance, whether the text is the same;
// and what one forward of N = 1, 2, 4, 8, 16 tokens costs (verifying N - 1
// proposals), the number that decides whether drafting pays.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "fish/fish.h"
#include "progress.h"

namespace fish::cli {

struct SpecMode {
  bool lookup = false;  // else the draft model
  int64_t n_draft = 8;
};

struct SpecBenchRow {
  std::string test;             // "tg128 greedy", "tg128 +lookup8 @ d512"
  std::string kind;             // "greedy", "draft", "lookup"
  int64_t n_gen = 0, n_draft = 0;
  std::vector<double> samples;  // tok/s per repetition
  int64_t proposed = 0, accepted = 0, steps = 0, generated = 0;  // over the repetitions
  bool same_text = true;        // every repetition wrote the greedy row's tokens
};

// The greedy row, then one per mode. `depth_label`: " @ dN" or "".
std::vector<SpecBenchRow> bench_speculative(fish_model* target, fish_model* draft, const std::vector<SpecMode>& modes,
                                            const std::vector<int32_t>& prompt, int64_t n_gen,
                                            const std::string& depth_label, int reps, Progress& progress);

// Milliseconds of one forward of N tokens (every row's logits, as a
// verification takes them) after `prompt`, N = 1, 2, 4, 8, 16: the median of
// max(reps, 3). Pairs (N, ms).
std::vector<std::pair<int32_t, double>> verify_costs(fish_model* target, const std::vector<int32_t>& prompt, int reps,
                                                     Progress& progress);

}  // namespace fish::cli
