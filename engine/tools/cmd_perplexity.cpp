// fish perplexity: llama-perplexity's method. The text is tokenized with BOS;
// it is cut into chunks of CTX tokens, each evaluated from an empty cache with
// its first token replaced by BOS; the second half of each chunk is scored.
#include <cmath>
#include <cstdio>

#include "cli_model.h"
#include "command.h"

using namespace fish::cli;

static int cmd_perplexity(int argc, char** argv) {
  Args a(argc, argv);
  if (a.flag("-h", "--help")) {
    std::printf("usage: fish perplexity -m MODEL -f TEXTFILE [-c CTX] [-t N] [--chunks N] [--requant MODE]\n"
                "  Chunks of CTX tokens (default 512), second half of each scored; last line: PPL = <value>\n%s%s%s",
                kRequantHelp, kNCpuMoeHelp, kDeviceHelp);
    return 0;
  }
  ModelFlags mf = parse_model_flags(a);
  std::string path;
  if (!a.value("-f", "--file", path)) a.fail("missing -f TEXTFILE");
  int64_t max_chunks = -1;
  a.int_value(nullptr, "--chunks", max_chunks);
  if (!a.positional().empty()) a.fail("unexpected argument");
  const int32_t n_ctx = mf.params.n_ctx > 0 ? mf.params.n_ctx : 512;
  mf.params.n_ctx = n_ctx;
  if (n_ctx < 4) a.fail("-c must be at least 4");

  const std::string text = read_text_file(a, "-f", path);

  fish_model* m = load_or_exit("perplexity", mf);
  fish_model_info info{};
  info.struct_size = sizeof info;
  fish_model_get_info(m, &info);
  std::vector<int32_t> toks = tokenize_or_exit("perplexity", m, text, true, false);
  if (int64_t(toks.size()) < 2 * int64_t(n_ctx)) {
    std::fprintf(stderr, "fish perplexity: %s has %zu tokens; at least %d (2 x CTX) are needed with -c %d\n",
                 path.c_str(), toks.size(), 2 * n_ctx, n_ctx);
    return 1;
  }
  int64_t n_chunks = int64_t(toks.size()) / n_ctx;
  if (max_chunks > 0 && max_chunks < n_chunks) n_chunks = max_chunks;
  const bool add_bos = info.bos >= 0 && !toks.empty() && toks[0] == info.bos;
  const int32_t first = n_ctx / 2;
  double nll = 0, nll2 = 0;
  int64_t count = 0;
  std::fprintf(stderr, "fish perplexity: %zu tokens, %lld chunks of %d\n", toks.size(), (long long)n_chunks, n_ctx);
  for (int64_t c = 0; c < n_chunks; ++c) {
    std::vector<int32_t> chunk(toks.begin() + c * n_ctx, toks.begin() + (c + 1) * n_ctx);
    if (add_bos) chunk[0] = info.bos;
    if (fish_eval(m, chunk.data(), n_ctx, 0, 1) != 0) {
      std::fprintf(stderr, "fish perplexity: %s\n", fish_last_error(m));
      return 1;
    }
    for (int32_t j = first; j < n_ctx - 1; ++j) {
      const float* lg = fish_get_logits(m, j);
      float mx = lg[0];
      for (int32_t i = 1; i < info.n_vocab; ++i) mx = lg[i] > mx ? lg[i] : mx;
      double sum = 0;
      for (int32_t i = 0; i < info.n_vocab; ++i) sum += std::exp(double(lg[i] - mx));
      const int32_t next = toks[size_t(c * n_ctx + j + 1)];
      const double lp = double(lg[next] - mx) - std::log(sum);
      nll -= lp;
      nll2 += lp * lp;
      ++count;
    }
    std::fprintf(stderr, "[%lld]%.4f,", (long long)(c + 1), std::exp(nll / double(count)));
    std::fflush(stderr);
  }
  const double mean = nll / double(count);
  const double var = nll2 / double(count) - mean * mean;
  const double ppl = std::exp(mean);
  const double err = count > 1 && var > 0 ? ppl * std::sqrt(var / double(count - 1)) : 0.0;
  std::fprintf(stderr, "\nFinal estimate: PPL = %.4f +/- %.5f\n", ppl, err);
  std::printf("PPL = %.4f\n", ppl);
  fish_model_free(m);
  return 0;
}

static const Command reg{"perplexity", "perplexity of a text file (llama-perplexity's method)", &cmd_perplexity};
