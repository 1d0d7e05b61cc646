// fish run: stream a continuation of a prompt, one token per forward or with
// speculative decoding (--model-draft / --lookup).
#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdio>
#include <random>
#include <string>

#include "cli_model.h"
#include "command.h"
#include "fish/fish_spec.h"
#include "json_flags.h"
#include "sampling_flags.h"

using namespace fish::cli;

namespace {

// Prints generated tokens: their text, or their ids (--ids).
struct Printer {
  const fish_model* m;
  bool ids_only;
  bool first = true;
  void emit(int32_t tok) {
    if (ids_only) {
      std::printf(first ? "%d" : " %d", tok);
      first = false;
    } else {
      const std::string p = piece(m, tok);
      std::fwrite(p.data(), 1, p.size(), stdout);
    }
    std::fflush(stdout);
  }
};

// Speculative decoding's flags (fish_spec.h).
struct SpecFlags {
  std::string draft_path;  // --model-draft
  int64_t n_draft = -1;    // --draft (-1: not given); then the proposals per step either way
  int64_t lookup = 0;      // --lookup N
  double p_min = 0;        // --draft-p-min
  int64_t gpu_layers = -2; // -ngld (-2: as the target's flag)
  bool on() const { return !draft_path.empty() || lookup > 0; }
};

// One-token forwards of the target at the end of the context, in seconds (the
// mean of eight after one untimed): what plain decoding pays per token, for
// the speed-up estimate.
double one_token_forward_s(fish_model* m, int32_t tok, int32_t pos) {
  double total = 0;
  for (int rep = -1; rep < 8; ++rep) {
    if (fish_kv_truncate(m, pos) != 0) return 0;
    const auto t0 = std::chrono::steady_clock::now();
    if (fish_eval(m, &tok, 1, pos, 0) != 0) return 0;
    if (rep >= 0) total += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  return total / 8;
}

}  // namespace


static int cmd_run(int argc, char** argv) {
  Args a(argc, argv);
  if (a.flag("-h", "--help")) {
    std::printf(
        "usage: fish run -m MODEL [-p PROMPT | -f FILE] [-n N] [sampling flags] [-t N] [-c CTX] [-ngl|--n-gpu-layers N]\n"
        "                [--keep N] [--no-context-shift] [--ids] [--special] [--json | --json-schema FILE]\n"
        "                [--verbose] [--requant MODE]\n"
        "                [-md|--model-draft M [--draft N] [--draft-p-min P] [-ngld N] | --lookup N]\n"
        "  Streams the continuation of PROMPT (BOS first when the model adds one) to stdout;\n"
        "  --ids prints the generated token ids instead. --temp 0 is greedy.\n"
        "  --json: JSON mode, the output is one JSON object (then generation ends).\n"
        "  --json-schema FILE: the output is one JSON value valid under the JSON Schema in FILE (then\n"
        "  generation ends). Enforced: type, properties, required, additionalProperties (absent beside\n"
        "  properties: no other keys), items, minItems, maxItems, minLength, maxLength, enum, const,\n"
        "  anyOf, oneOf, local $ref; annotations (title, description, format, ...) ignored; any other\n"
        "  keyword (pattern, minimum, allOf, ...) is refused, naming it.\n"
        "  When the context fills, the oldest half after the first --keep prompt tokens (and BOS;\n"
        "  -1: the whole prompt) is dropped and generation goes on; --no-context-shift stops instead.\n"
        "  --verbose: placement on stderr (layers, the backend, the re-quantisation mix).\n"
        "  Speculative decoding: a draft proposes up to N tokens, MODEL verifies them in one forward and\n"
        "  keeps those it would have chosen itself (greedy: the same text as without a draft; --temp > 0:\n"
        "  speculative sampling, the same distribution but other random draws).\n"
        "  --model-draft M: a smaller model of the same vocabulary drafts (--draft N, default 8; it stops\n"
        "  early at a token it gives less than --draft-p-min P; -ngld: its GPU layers, default as -ngl).\n"
        "  --lookup N: no draft model; proposes up to N tokens that followed the last 3, 2 or 1 tokens\n"
        "  earlier in the prompt and output (n-gram lookup: repetitive text, code, edits).\n"
        "  --verbose also reports proposed/accepted tokens and the speed-up over one token per forward.\n"
        "Sampling flags:\n%s%s%s%s",
        kSamplingHelp, kRequantHelp, kNCpuMoeHelp, kDeviceHelp);
    return 0;
  }
  ModelFlags mf = parse_model_flags(a);
  std::string prompt, prompt_file;
  const bool has_prompt = a.value("-p", "--prompt", prompt);
  if (a.value("-f", "--file", prompt_file)) {
    if (has_prompt) a.fail("give the prompt with -p or -f, not both");
    prompt = read_text_file(a, "-f", prompt_file);
  }
  int64_t n_predict = 128, keep = 0;
  a.int_value("-n", "--n-predict", n_predict);
  const fish_sampler_params sp = parse_sampling_flags(a);
  a.int_value(nullptr, "--keep", keep);
  const bool no_shift = a.flag(nullptr, "--no-context-shift");
  const bool ids_only = a.flag(nullptr, "--ids");
  const bool special = a.flag(nullptr, "--special");
  const JsonFlags jf = parse_json_flags(a);
  SpecFlags spf;
  a.value({"-md", "--model-draft"}, spf.draft_path);
  const bool draft_given = a.int_value({"--draft", "--draft-max", "--draft-n"}, spf.n_draft);
  const bool lookup_given = a.int_value(nullptr, "--lookup", spf.lookup);
  const bool p_min_given = a.float_value(nullptr, "--draft-p-min", spf.p_min);
  const bool ngld_given = a.int_value({"-ngld", "--gpu-layers-draft", "--n-gpu-layers-draft"}, spf.gpu_layers);
  if (draft_given && spf.draft_path.empty())
    a.fail("--draft N needs --model-draft M (--lookup N drafts without a model)");
  if ((p_min_given || ngld_given) && spf.draft_path.empty())
    a.fail(std::string(p_min_given ? "--draft-p-min" : "-ngld") + " needs --model-draft M");
  if (lookup_given && !spf.draft_path.empty()) a.fail("--lookup and --model-draft: choose one way of drafting");
  if (jf.on() && (lookup_given || !spf.draft_path.empty()))
    a.fail(std::string(jf.json ? "--json" : "--json-schema") +
           " does not combine with speculative decoding (--model-draft, --lookup)");
  if (draft_given && (spf.n_draft < 1 || spf.n_draft > 256)) a.fail("--draft must be between 1 and 256");
  if (lookup_given && (spf.lookup < 1 || spf.lookup > 256)) a.fail("--lookup must be between 1 and 256");
  if (!(spf.p_min >= 0 && spf.p_min <= 1)) a.fail("--draft-p-min must be between 0 and 1");
  if (ngld_given && spf.gpu_layers < 0) a.fail("-ngld must be >= 0");
  if (!a.positional().empty()) a.fail("unexpected argument (the prompt goes after -p)");
  if (n_predict < 0) a.fail("-n must be >= 0");
  if (keep < -1) a.fail("--keep must be >= -1");


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
  // The draft model: the target's flags, its context, its own GPU layers (-ngld).
  fish_model* dm = nullptr;
  fish_spec* spec = nullptr;
  if (spf.on()) {
    if (!spf.draft_path.empty()) {
      ModelFlags df = mf;
      df.path = spf.draft_path;
      df.params.n_ctx = info.n_ctx;
      if (spf.gpu_layers >= 0) df.params.gpu_layers = int32_t(spf.gpu_layers);
      dm = load_or_exit("run", df);
      if (const char* why = fish_spec_vocab_check(m, dm)) {
        std::fprintf(stderr, "fish run: --model-draft %s cannot draft for %s: %s\n", spf.draft_path.c_str(),
                     mf.path.c_str(), why);
        return 1;
      }
    }
    fish_spec_params spp = fish_spec_default_params();
    spp.draft = dm;
    if (dm && spf.n_draft < 0) spf.n_draft = spp.n_draft;
    if (!dm) spf.n_draft = spf.lookup;
    spp.n_draft = int32_t(spf.n_draft);
    spp.draft_p_min = float(spf.p_min);
    fish_error* err = nullptr;
    spec = fish_spec_new(m, &spp, &sp, &err);
    if (!spec) {
      std::fprintf(stderr, "fish run: %s\n", fish_error_message(err));
      fish_error_free(err);
      return 1;
    }
  }
  fish_sampler* s = spec ? nullptr : fish_sampler_new(&sp);
  if (s)
    for (int32_t t : toks) fish_sampler_accept(s, t);
  if (std::string why; s && !jf.apply(s, m, &why)) {
    std::fprintf(stderr, "fish run: %s\n", why.c_str());
    return 1;
  }

  auto fail_eval = [&](const char* lead) {
    std::fflush(stdout);
    std::fprintf(stderr, "%sfish run: %s\n", lead, spec ? fish_spec_last_error(spec) : fish_last_error(m));
    return 1;
  };
  Printer out{m, ids_only};
  using clock = std::chrono::steady_clock;
  const auto t_prompt = clock::now();
  // With a draft, the target evaluates all but the prompt's last token here:
  // the first step evaluates that one with the first proposals.
  if (spec ? fish_spec_start(spec, toks.data(), n_prompt) != 0 : fish_eval(m, toks.data(), n_prompt, 0, 0) != 0)
    return fail_eval("");
  const double prompt_s = std::chrono::duration<double>(clock::now() - t_prompt).count();
  const auto t_gen = clock::now();
  int64_t generated = 0, shifts = 0;
  bool stopped_full = false;
  if (spec) {
    // The context (prompt + output) ends with a token the target has not
    // evaluated; it needs a position: past n_ctx tokens the context shifts as
    // below (the same tokens dropped at the same moment).
    std::vector<int32_t> buf(size_t(spf.n_draft) + 1);
    bool done = false;
    while (!done && generated < n_predict) {
      const int32_t n_tok = fish_spec_n_tokens(spec);
      if (n_tok > info.n_ctx) {
        const int32_t n_discard = (n_tok - 1 - n_keep) / 2;
        if (no_shift || n_discard <= 0) {
          stopped_full = true;
          break;
        }
        if (fish_spec_shift(spec, n_keep, n_discard) != 0) return fail_eval("\n");
        ++shifts;
      }
      const int32_t cap = int32_t(std::min<int64_t>(int64_t(buf.size()), n_predict - generated));
      const int32_t got = fish_spec_step(spec, buf.data(), cap);
      if (got < 0) return fail_eval("\n");
      for (int32_t i = 0; i < got && !done; ++i) {
        if (fish_token_is_eog(m, buf[size_t(i)])) done = true;
        else {
          out.emit(buf[size_t(i)]);
          ++generated;
        }
      }
    }
  } else {
    // `toks` mirrors the KV cache: position i holds toks[i].
    for (; generated < n_predict; ++generated) {
      const int32_t tok = fish_sampler_sample(s, fish_get_logits(m, -1), info.n_vocab);
      if (fish_token_is_eog(m, tok)) break;
      fish_sampler_accept(s, tok);
      out.emit(tok);
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
  const double gen_rate = gen_s > 0 && generated > 1 ? double(generated - 1) / gen_s : 0.0;
  std::fprintf(stderr, "fish: prompt %d tokens, %.1f tok/s; generated %lld tokens, %.1f tok/s%s; backend %s (%d GPU layers%s)\n",
               n_prompt, prompt_s > 0 ? double(n_prompt) / prompt_s : 0.0, (long long)generated, gen_rate, shifted,
               info.backend, info.gpu_layers, fell_back.c_str());
  if (spec && mf.params.verbose) {
    fish_spec_stats ss{};
    ss.struct_size = sizeof ss;
    fish_spec_get_stats(spec, &ss);
    const std::string how = dm ? "draft " + spf.draft_path : "n-gram lookup (3..1)";
    std::fprintf(stderr,
                 "fish: speculative decoding, %s, up to %lld per step: %lld proposed, %lld accepted (%.1f%%); "
                 "%.2f tokens per target forward (%lld forwards); draft %.3f s%s, verify %.3f s\n",
                 how.c_str(), (long long)spf.n_draft,
                 (long long)ss.proposed, (long long)ss.accepted,
                 ss.proposed ? 100.0 * double(ss.accepted) / double(ss.proposed) : 0.0,
                 ss.steps ? double(ss.generated) / double(ss.steps) : 0.0, (long long)ss.steps, ss.draft_seconds,
                 dm ? (" (" + std::to_string(ss.draft_forwards) + " forwards)").c_str() : "", ss.verify_seconds);
    // Plain decoding pays one target forward per token: time a few at the end
    // of the context (the run is over; the target's KV is ours to use).
    const int32_t n_tok = fish_spec_n_tokens(spec);
    const int32_t pos = std::min(n_tok - 1, info.n_ctx - 1);
    const double t1 = generated > 1 ? one_token_forward_s(m, toks.empty() ? 0 : toks.back(), pos) : 0;
    if (t1 > 0 && gen_rate > 0)
      std::fprintf(stderr,
                   "fish: speed-up %.2fx over one token per forward (estimated: a one-token forward at depth %d "
                   "takes %.2f ms, %.1f tok/s)\n",
                   gen_rate * t1, pos, t1 * 1e3, 1.0 / t1);
  }
  fish_spec_free(spec);
  fish_sampler_free(s);
  fish_model_free(dm);
  fish_model_free(m);
  return 0;
}

static const Command reg{"run", "generate text from a prompt", &cmd_run};
