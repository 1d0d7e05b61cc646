// fish run: stream a continuation of a prompt.
#include <chrono>
#include <cstdio>
#include <random>

#include "cli_model.h"
#include "command.h"

using namespace fish::cli;

static int cmd_run(int argc, char** argv) {
  Args a(argc, argv);
  if (a.flag("-h", "--help")) {
    std::printf(
        "usage: fish run -m MODEL [-p PROMPT] [-n N] [--temp T] [--top-k K] [--top-p P] [--min-p P]\n"
        "                [--repeat-penalty R] [--seed S] [-t N] [-c CTX] [--gpu-layers N] [--ids] [--special]\n"
        "  Streams the continuation of PROMPT (BOS first when the model adds one) to stdout;\n"
        "  --ids prints the generated token ids instead. --temp 0 is greedy.\n");
    return 0;
  }
  ModelFlags mf = parse_model_flags(a);
  std::string prompt;
  a.value("-p", "--prompt", prompt);
  int64_t n_predict = 128, top_k = 40, seed = -1, last_n = 64;
  double temp = 0.8, top_p = 0.95, min_p = 0.05, rep = 1.0;
  a.int_value("-n", "--n-predict", n_predict);
  a.float_value(nullptr, "--temp", temp);
  a.int_value(nullptr, "--top-k", top_k);
  a.float_value(nullptr, "--top-p", top_p);
  a.float_value(nullptr, "--min-p", min_p);
  a.float_value(nullptr, "--repeat-penalty", rep);
  a.int_value(nullptr, "--repeat-last-n", last_n);
  a.int_value("-s", "--seed", seed);
  const bool ids_only = a.flag(nullptr, "--ids");
  const bool special = a.flag(nullptr, "--special");
  if (!a.positional().empty()) a.fail("unexpected argument (the prompt goes after -p)");
  if (n_predict < 0) a.fail("-n must be >= 0");

  fish_model* m = load_or_exit("run", mf);
  fish_model_info info{};
  info.struct_size = sizeof info;
  fish_model_get_info(m, &info);

  std::vector<int32_t> toks = tokenize_or_exit("run", m, prompt, true, special);
  if (toks.empty()) {
    std::fprintf(stderr, "fish run: the prompt is empty and the model adds no BOS token\n");
    return 1;
  }
  if (int64_t(toks.size()) + n_predict > info.n_ctx) {
    std::fprintf(stderr, "fish run: prompt (%zu tokens) + %lld new tokens exceed the context (%d); use -c\n",
                 toks.size(), (long long)n_predict, info.n_ctx);
    return 1;
  }
  fish_sampler_params sp = fish_sampler_default_params();
  sp.temp = float(temp);
  sp.top_k = int32_t(top_k);
  sp.top_p = float(top_p);
  sp.min_p = float(min_p);
  sp.repeat_penalty = float(rep);
  sp.repeat_last_n = int32_t(last_n);
  sp.seed = seed >= 0 ? uint64_t(seed) : std::random_device{}();
  fish_sampler* s = fish_sampler_new(&sp);
  for (int32_t t : toks) fish_sampler_accept(s, t);

  using clock = std::chrono::steady_clock;
  const auto t_prompt = clock::now();
  if (fish_eval(m, toks.data(), int32_t(toks.size()), 0, 0) != 0) {
    std::fprintf(stderr, "fish run: %s\n", fish_last_error(m));
    return 1;
  }
  const double prompt_s = std::chrono::duration<double>(clock::now() - t_prompt).count();
  const auto t_gen = clock::now();
  int32_t pos = int32_t(toks.size());
  int64_t generated = 0;
  bool first_id = true;
  for (; generated < n_predict; ++generated) {
    const int32_t tok = fish_sampler_sample(s, fish_get_logits(m, -1), info.n_vocab);
    if (fish_token_is_eog(m, tok)) break;
    fish_sampler_accept(s, tok);
    if (ids_only) {
      std::printf(first_id ? "%d" : " %d", tok);
      first_id = false;
    } else {
      const std::string p = piece(m, tok);
      std::fwrite(p.data(), 1, p.size(), stdout);
    }
    std::fflush(stdout);
    if (generated + 1 == n_predict) {
      ++generated;
      break;
    }
    if (fish_eval(m, &tok, 1, pos++, 0) != 0) {
      std::fprintf(stderr, "\nfish run: %s\n", fish_last_error(m));
      return 1;
    }
  }
  std::printf("\n");
  const double gen_s = std::chrono::duration<double>(clock::now() - t_gen).count();
  std::fprintf(stderr, "fish: prompt %zu tokens, %.1f tok/s; generated %lld tokens, %.1f tok/s; backend %s (%d GPU layers)\n",
               toks.size(), prompt_s > 0 ? double(toks.size()) / prompt_s : 0.0, (long long)generated,
               gen_s > 0 && generated > 1 ? double(generated - 1) / gen_s : 0.0, info.backend, info.gpu_layers);
  fish_sampler_free(s);
  fish_model_free(m);
  return 0;
}

static const Command reg{"run", "generate text from a prompt", &cmd_run};
