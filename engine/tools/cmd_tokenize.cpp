// fish tokenize: print the token ids of a text.
#include <cstdio>
#include <fstream>
#include <sstream>

#include "cli_model.h"
#include "command.h"

using namespace fish::cli;

static int cmd_tokenize(int argc, char** argv) {
  Args a(argc, argv);
  if (a.flag("-h", "--help")) {
    std::printf("usage: fish tokenize -m MODEL (-p TEXT | -f FILE) [--no-bos] [--special] [--pieces]\n"
                "  Prints the token ids of TEXT, space-separated (BOS first unless --no-bos);\n"
                "  --special parses control-token texts, --pieces prints id and piece per line.\n");
    return 0;
  }
  ModelFlags mf = parse_model_flags(a, /*gpu_default_off=*/true);
  std::string text, file;
  const bool has_p = a.value("-p", "--prompt", text);
  if (a.value("-f", "--file", file)) {
    text = read_text_file(a, "-f", file);
  } else if (!has_p) {
    a.fail("missing -p TEXT (or -f FILE)");
  }
  const bool no_bos = a.flag(nullptr, "--no-bos");
  const bool special = a.flag(nullptr, "--special");
  const bool pieces = a.flag(nullptr, "--pieces");
  if (!a.positional().empty()) a.fail("unexpected argument");
  mf.params.vocab_only = 1;  // only the tokenizer: works on vocab-only GGUFs too
  fish_model* m = load_or_exit("tokenize", mf);
  std::vector<int32_t> ids = tokenize_or_exit("tokenize", m, text, !no_bos, special);
  for (size_t i = 0; i < ids.size(); ++i) {
    if (pieces) {
      char buf[512];
      int32_t n = fish_token_to_piece(m, ids[i], buf, sizeof buf, 1);
      std::printf("%6d -> '%.*s'\n", ids[i], n > 0 ? n : 0, buf);
    } else {
      std::printf(i ? " %d" : "%d", ids[i]);
    }
  }
  if (!pieces) std::printf("\n");
  fish_model_free(m);
  return 0;
}

static const Command reg{"tokenize", "print the token ids of a text", &cmd_tokenize};
