// The sampling flags (--temp, --top-k, --top-p, --min-p, --repeat-penalty,
// --repeat-last-n, --presence-penalty, --frequency-penalty, --seed) of the
// commands that sample: fish run, fish chat, and fish serve's defaults for
// requests that leave them out.
#pragma once
#include <climits>
#include <cstdint>
#include <random>
#include <string>

#include "args.h"
#include "fish/fish.h"

namespace fish::cli {

constexpr const char* kSamplingHelp =
    "  --temp T (0.8; 0: greedy)  --top-k K (40; 0: off)  --top-p P (0.95; 1: off)  --min-p P (0.05; 0: off)\n"
    "  --repeat-penalty R (1: off)  --repeat-last-n N (64)  -s|--seed S (-1: random, the default)\n"
    "  --presence-penalty P  --frequency-penalty F (0: off; in [-2, 2]: a token seen c times in the last\n"
    "    --repeat-last-n loses c * F + P from its logit)\n";

// Parses the flags into sampler parameters, or exits 2 naming the flag; a
// seed not given (or -1) is random (*seed_given false).
inline fish_sampler_params parse_sampling_flags(Args& a, bool* seed_given = nullptr) {
  int64_t top_k = 40, seed = -1, last_n = 64;
  double temp = 0.8, top_p = 0.95, min_p = 0.05, rep = 1.0, presence = 0.0, frequency = 0.0;
  a.float_value(nullptr, "--temp", temp);
  a.int_value(nullptr, "--top-k", top_k);
  a.float_value(nullptr, "--top-p", top_p);
  a.float_value(nullptr, "--min-p", min_p);
  a.float_value(nullptr, "--repeat-penalty", rep);
  a.int_value(nullptr, "--repeat-last-n", last_n);
  a.float_value(nullptr, "--presence-penalty", presence);
  a.float_value(nullptr, "--frequency-penalty", frequency);
  const bool has_seed = a.int_value("-s", "--seed", seed) && seed != -1;
  if (top_k < INT32_MIN || top_k > INT32_MAX) a.fail("--top-k: out of range");
  if (last_n < -1 || last_n > INT32_MAX) a.fail("--repeat-last-n must be between -1 and 2147483647");
  if (seed < -1) a.fail("--seed must be >= 0 (-1: random)");
  fish_sampler_params sp = fish_sampler_default_params();
  sp.temp = float(temp);
  sp.top_k = int32_t(top_k);
  sp.top_p = float(top_p);
  sp.min_p = float(min_p);
  sp.repeat_penalty = float(rep);
  sp.repeat_last_n = int32_t(last_n);
  sp.presence_penalty = float(presence);
  sp.frequency_penalty = float(frequency);
  sp.seed = has_seed ? uint64_t(seed) : std::random_device{}();
  if (const char* why = fish_sampler_params_check(&sp)) {  // "top_p = 2.000000: expected ..." -> --top-p
    std::string flag = std::string(why).substr(0, std::string(why).find(' '));
    for (char& c : flag) c = c == '_' ? '-' : c;
    a.fail("--" + flag + std::string(why).substr(flag.size()));
  }
  if (seed_given) *seed_given = has_seed;
  return sp;
}

}  // namespace fish::cli
