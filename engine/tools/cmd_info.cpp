// fish info: describe a GGUF file (architecture, hyper-parameters, tokenizer,
// tensor types, sizes) from its header, without loading the model.
#include <cstdio>

#include "args.h"
#include "command.h"
#include "fish/fish.h"

using namespace fish::cli;

static int cmd_info(int argc, char** argv) {
  Args a(argc, argv);
  if (a.flag("-h", "--help")) {
    std::printf("usage: fish info MODEL.gguf\n"
                "  Describes any valid GGUF file: architecture, hyper-parameters, tokenizer,\n"
                "  tensor count per type, tensor bytes and parameters, file size, version.\n");
    return 0;
  }
  std::string model;
  a.value("-m", "--model", model);
  const auto pos = a.positional();
  if (model.empty() && pos.size() == 1) model = pos[0];
  else if (!pos.empty()) a.fail("expects exactly one MODEL argument");
  if (model.empty()) a.fail("missing MODEL (fish info MODEL.gguf)");
  fish_error* err = nullptr;
  char* text = fish_describe_file(model.c_str(), &err);
  if (!text) {
    std::fprintf(stderr, "fish info: %s\n", fish_error_message(err));
    fish_error_free(err);
    return 1;
  }
  std::fputs(text, stdout);
  fish_free(text);
  return 0;
}

static const Command reg{"info", "describe a GGUF file (hyper-parameters, tensor types, sizes)", &cmd_info};
