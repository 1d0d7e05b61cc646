// fish run: stream a continuation of a prompt.
#include <chrono>
#include <climits>
#include <cstdio>
#include <random>
#include <string>

#include "cli_model.h"
#include "command.h"

using namespace fish::cli;


static int cmd_run(int argc, char** argv) {
  Args a(argc, argv);
  if (a.flag("-h", "--help")) {
    std::printf(
        "usage: fish run -m MODEL [-p PROMPT | -f FILE] [-n N] [--temp T] [--top-k K] [--top-p P] [--min-p P]\n"
        "                [--repeat-penalty R] [--seed S] [-t N] [-c CTX] [-ngl|--n-gpu-layers N]\n"
        "                [--keep N] [--no-context-shift] [--ids] [--special] [--verbose] [--requant MODE]\n"
        "  Streams the continuation of PROMPT (BOS first when the model adds one) to stdout;\n"
        "  --ids prints the generated token ids instead. --temp 0 is greedy.\n"
        "  When the context fills, the oldest half after the first --keep prompt tokens (and BOS;\n"
        "  -1: the whole prompt) is dropped and generation goes on; --no-context-shift stops instead.\n"
        "  --verbose: placement on stderr (layers, the backend, the re-quantisation mix).\n%s",
        kRequantHelp);
    return 0;
  }
  ModelFlags mf = parse_model_flags(a);
  std::string prompt, prompt_file;
  const bool has_prompt = a.value("-p", "--prompt", prompt);
  if (a.value("-f", "--file", prompt_file)) {
    if (has_prompt) a.fail("give the prompt with -p or -f, not both");
    prompt = read_text_file(a, "-f", prompt_file);
  }
  int64_t n_predict = 128, top_k = 40, seed = -1, last_n = 64, keep = 0;
  double temp = 0.8, top_p = 0.95, min_p = 0.05, rep = 1.0;
  a.int_value("-n", "--n-predict", n_predict);
  a.float_value(nullptr, "--temp", temp);
  a.int_value(nullptr, "--top-k", top_k);
  a.float_value(nullptr, "--top-p", top_p);
  a.float_value(nullptr, "--min-p", min_p);
  a.float_value(nullptr, "--repeat-penalty", rep);
  a.int_value(nullptr, "--repeat-last-n", last_n);
  a.int_value("-s", "--seed", seed);
  a.int_value(nullptr, "--keep", keep);
  const bool no_shift = a.flag(nullptr, "--no-context-shift");
  const bool ids_only = a.flag(nullptr, "--ids");
  const bool special = a.flag(nullptr, "--special");
  if (!a.positional().empty()) a.fail("unexpected argument (the prompt goes after -p)");
  if (n_predict < 0) a.fail("-n must be >= 0");
  if (keep < -1) a.fail("--keep must be >= -1");
  if (top_k < INT32_MIN || top_k > INT32_MAX) a.fail("--top-k: out of range");
  if (last_n < -1 || last_n > INT32_MAX) a.fail("--repeat-last-n must be between -1 and 2147483647");

  fish_sampler_params sp = fish_sampler_default_params();
  sp.temp = float(temp);
  sp.top_k = int32_t(top_k);
  sp.top_p = float(top_p);
  sp.min_p = float(min_p);
  sp.repeat_penalty = float(rep);
  sp.repeat_last_n = int32_t(last_n);
  sp.seed = seed >= 0 ? uint64_t(seed) : std::random_device{}();
  if (const char* why = fish_sampler_params_check(&sp)) {  // "top_p = 2.000000: expected ..." -> --top-p
    std::string flag = std::string(why).substr(0, std::string(why).find(' '));
    for (char& c : flag) c = c == '_' ? '-' : c;
    a.fail("--" + flag + std::string(why).substr(flag.size()));
  }

  fish_model* m = load_or_exit("run", mf);
  fish_model_info info{};
  info.struct_size = sizeof info;
  fish_model_get_info(m, &info);

  std::vector<int32_t> toks = tokenize_or_exit("run", m, prompt, true, special);
  if (toks.empty()) {
    std::fprintf(stderr, "fish run: the prompt is empty and the model adds no BOS token\n");
    return 1;
  }
  if (int64_t(toks.size()) >= info.n_ctx) {
    std::fprintf(stderr, "fish run: the prompt (%zu tokens) does not fit the context (%d); use -c\n", toks.size(),
                 info.n_ctx);
    return 1;
  }
  // Tokens kept at the front when the context shifts (llama.cpp's --keep: BOS
  // counts extra; -1 or more than the prompt keeps the whole prompt).
  const int32_t n_prompt = int32_t(toks.size());
  const int32_t with_bos = info.bos >= 0 && toks[0] == info.bos ? 1 : 0;
  const int32_t n_keep = keep < 0 || keep + with_bos > n_prompt ? n_prompt : int32_t(keep) + with_bos;
  fish_sampler* s = fish_sampler_new(&sp);
  for (int32_t t : toks) fish_sampler_accept(s, t);

  auto fail_eval = [&](const char* lead) {
    std::fflush(stdout);
    std::fprintf(stderr, "%sfish run: %s\n", lead, fish_last_error(m));
    return 1;
  };
  using clock = std::chrono::steady_clock;
  const auto t_prompt = clock::now();
  if (fish_eval(m, toks.data(), n_prompt, 0, 0) != 0) return fail_eval("");
  const double prompt_s = std::chrono::duration<double>(clock::now() - t_prompt).count();
  const auto t_gen = clock::now();
  // `toks` mirrors the KV cache: position i holds toks[i].
  int64_t generated = 0, shifts = 0;
  bool first_id = true, stopped_full = false;
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
    if (int64_t(toks.size()) >= info.n_ctx) {
      // The context is full: drop the oldest half after the kept tokens and
      // evaluate the rest again at their new positions (exact, on any backend).
      const int32_t n_discard = (int32_t(toks.size()) - n_keep) / 2;
      if (no_shift || n_discard <= 0) {
        ++generated;
        stopped_full = true;
        break;
      }
      toks.erase(toks.begin() + n_keep, toks.begin() + n_keep + n_discard);
      if (fish_kv_truncate(m, n_keep) != 0 ||
          fish_eval(m, toks.data() + n_keep, int32_t(toks.size()) - n_keep, n_keep, 0) != 0)
        return fail_eval("\n");
      ++shifts;
    }
    toks.push_back(tok);
    if (fish_eval(m, &tok, 1, int32_t(toks.size()) - 1, 0) != 0) return fail_eval("\n");
  }
  std::printf("\n");
  std::fflush(stdout);  // the text's newline before the stats line, also when both go to one pipe
  const double gen_s = std::chrono::duration<double>(clock::now() - t_gen).count();
  if (stopped_full)
    std::fprintf(stderr, "fish run: the context (%d tokens) is full; stopped (--no-context-shift)\n", info.n_ctx);
  char shifted[64] = "";
  if (shifts) std::snprintf(shifted, sizeof shifted, " (context shifted %lld times)", (long long)shifts);
  // The backend as it is now: a GPU failure during the run moved the work to the CPU.
  const std::string loaded_on = info.backend;
  fish_model_get_info(m, &info);
  fish_stats st{};
  st.struct_size = sizeof st;
  fish_get_stats(m, &st);
  const std::string fell_back = st.gpu_fallbacks ? ", after falling back from " + loaded_on : "";
  std::fprintf(stderr, "fish: prompt %d tokens, %.1f tok/s; generated %lld tokens, %.1f tok/s%s; backend %s (%d GPU layers%s)\n",
               n_prompt, prompt_s > 0 ? double(n_prompt) / prompt_s : 0.0, (long long)generated,
               gen_s > 0 && generated > 1 ? double(generated - 1) / gen_s : 0.0, shifted, info.backend,
               info.gpu_layers, fell_back.c_str());
  fish_sampler_free(s);
  fish_model_free(m);
  return 0;
}

static const Command reg{"run", "generate text from a prompt", &cmd_run};
