// fish embed: the embedding vector of each input text (fish_embed_tokens).
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "cli_model.h"
#include "command.h"

using namespace fish::cli;

static int cmd_embed(int argc, char** argv) {
  Args a(argc, argv);
  if (a.flag("-h", "--help")) {
    std::printf(
        "usage: fish embed -m MODEL (-p TEXT | -f FILE) [--pooling mean|last|first] [--no-normalize]\n"
        "                  [--batch-seqs N] [-t N] [-c CTX] [-ngl N]\n"
        "  Prints one JSON object per input, one per line (JSON Lines):\n"
        "    {\"index\": I, \"n_tokens\": N, \"dim\": D, \"embedding\": [D numbers]}\n"
        "  The vector is the final hidden state after the output norm (no LM head), pooled over the\n"
        "  input's tokens (BOS first) and scaled to unit length.\n"
        "  -p, --prompt TEXT      the input (index 0)\n"
        "  -f, --file FILE        one input per line (blank lines skipped), after -p's\n"
        "  --pooling MODE         mean (default), last (the last token's) or first (the first token's; a\n"
        "                         causal model's first token sees only itself, so BOS gives one vector)\n"
        "  --no-normalize         the pooled vector as it is (not scaled to unit length)\n"
        "  --batch-seqs N         inputs evaluated together, each on a sequence of its own, their rows in\n"
        "                         one forward (8; 1: one after another); the vectors are the same\n");
    return 0;
  }
  ModelFlags mf = parse_model_flags(a);
  std::vector<std::string> inputs;
  std::string prompt;
  if (a.value("-p", "--prompt", prompt)) inputs.push_back(prompt);
  std::string file;
  if (a.value("-f", "--file", file)) {
    const std::string text = read_text_file(a, "-f", file);
    size_t at = 0;
    while (at <= text.size()) {
      size_t nl = text.find('\n', at);
      if (nl == std::string::npos) nl = text.size();
      std::string line = text.substr(at, nl - at);
      if (!line.empty() && line.back() == '\r') line.pop_back();
      if (line.find_first_not_of(" \t") != std::string::npos) inputs.push_back(line);
      at = nl + 1;
    }
    if (inputs.empty()) a.fail("-f " + file + ": no input lines");
  }
  if (inputs.empty()) a.fail("missing -p TEXT (or -f FILE)");
  fish_embed_params ep = fish_embed_default_params();
  std::string pooling = "mean";
  if (a.value(nullptr, "--pooling", pooling)) {
    if (pooling == "mean") ep.pooling = FISH_POOLING_MEAN;
    else if (pooling == "last") ep.pooling = FISH_POOLING_LAST;
    else if (pooling == "first" || pooling == "cls") ep.pooling = FISH_POOLING_FIRST;
    else a.fail("--pooling: '" + pooling + "' is not mean, last or first");
  }
  if (a.flag(nullptr, "--no-normalize")) ep.normalize = 0;
  int32_t batch_seqs = 8;  // short inputs (RAG chunks) packed 8 to a forward: the weights read once for them
  embed_seqs_flag(a, "--batch-seqs", batch_seqs);
  if (!a.positional().empty()) a.fail("unexpected argument (the inputs go after -p or in -f FILE)");

  // No more sequences than inputs: each holds one input at a time.
  ep.n_seq = std::min(batch_seqs, int32_t(std::min<size_t>(inputs.size(), 256)));
  mf.params.n_seq = ep.n_seq;
  fish_model* m = load_or_exit("embed", mf);
  const int32_t dim = fish_n_embd(m);
  std::vector<const char*> texts;
  for (const std::string& s : inputs) texts.push_back(s.c_str());
  std::vector<float> out(inputs.size() * size_t(dim));
  std::vector<int32_t> n_tok(inputs.size());
  if (fish_embed_texts(m, texts.data(), int32_t(texts.size()), &ep, out.data(), n_tok.data()) != 0) {
    std::fprintf(stderr, "fish embed: %s\n", fish_last_error(m));
    fish_model_free(m);
    return 1;
  }
  std::string line;
  for (size_t i = 0; i < inputs.size(); ++i) {
    line = "{\"index\": " + std::to_string(i) + ", \"n_tokens\": " + std::to_string(n_tok[i]) +
           ", \"dim\": " + std::to_string(dim) + ", \"embedding\": [";
    char buf[32];
    for (int32_t j = 0; j < dim; ++j) {
      std::snprintf(buf, sizeof buf, j ? ", %.9g" : "%.9g", double(out[i * size_t(dim) + size_t(j)]));
      line += buf;
    }
    line += "]}\n";
    std::fputs(line.c_str(), stdout);
  }
  std::fprintf(stderr, "fish embed: %zu input(s), dimension %d, pooling %s%s, %d at a time\n", inputs.size(), dim,
               pooling == "cls" ? "first" : pooling.c_str(), ep.normalize ? ", unit length" : "", ep.n_seq);
  fish_model_free(m);
  return 0;
}

static const Command reg{"embed", "print the embedding vector of texts (pooled final hidden state)", &cmd_embed};
