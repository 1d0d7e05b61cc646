// fish template: render one conversation with a chat template (a .jinja file
// or a GGUF's tokenizer.chat_template), for debugging templates and for tests
// and tools that need the exact prompt text.
#include <cstdio>
#include <iostream>
#include <iterator>
#include <string>

#include "cli_model.h"
#include "command.h"
#include "fish/fish_chat.h"

using namespace fish::cli;

static int cmd_template(int argc, char** argv) {
  Args a(argc, argv);
  if (a.flag("-h", "--help")) {
    std::printf(
        "usage: fish template FILE.jinja|MODEL.gguf --json INPUT.json [--fallback]\n"
        "  Renders one conversation as Hugging Face's apply_chat_template does and prints\n"
        "  it to stdout exactly (no newline added). A GGUF supplies tokenizer.chat_template\n"
        "  and its BOS/EOS token texts; any other file is the template itself.\n"
        "  INPUT.json ('-': stdin): {\"messages\": [{\"role\": \"user\", \"content\": \"Hi\"}],\n"
        "    \"add_generation_prompt\": true, \"tools\": [...], \"bos_token\": \"<s>\",\n"
        "    \"eos_token\": \"</s>\", \"now\": \"2026-12-01T12:00:00\"}; messages is required,\n"
        "    bos_token/eos_token override the model's, now fixes strftime_now (default: the\n"
        "    local clock), any other key is one more template variable.\n"
        "  --fallback  a model without a template gets ChatML instead of an error.\n"
        "  Exit status: 0 rendered; 1 the template raised an error (its message alone on\n"
        "  stderr), is malformed or has none; 2 bad usage.\n");
    return 0;
  }
  std::string json_path;
  if (!a.value(nullptr, "--json", json_path)) a.fail("missing --json INPUT.json");
  const bool fallback = a.flag(nullptr, "--fallback");
  const auto pos = a.positional();
  if (pos.size() != 1) a.fail("expects exactly one FILE.jinja or MODEL.gguf");
  std::string input;
  if (json_path == "-") input.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
  else input = read_text_file(a, "--json", json_path);

  fish_error* err = nullptr;
  fish_chat_template* t = nullptr;
  int st = fish_chat_template_load(pos[0].c_str(), fallback ? FISH_CHAT_TEMPLATE_FALLBACK : 0u, &t, &err);
  if (st != FISH_CHAT_OK) {
    std::fprintf(stderr, "fish template: %s%s\n", fish_error_message(err),
                 st == FISH_CHAT_NO_TEMPLATE ? "; --fallback renders ChatML instead" : "");
    fish_error_free(err);
    return 1;
  }
  if (fish_chat_template_is_fallback(t))
    std::fprintf(stderr, "fish template: %s has no chat template; rendering the ChatML fallback\n", pos[0].c_str());
  char* out = nullptr;
  size_t n = 0;
  st = fish_chat_template_render_json(t, input.data(), input.size(), &out, &n, &err);
  fish_chat_template_free(t);
  if (st == FISH_CHAT_RAISED) {
    std::fprintf(stderr, "%s\n", fish_error_message(err));  // the template's words, for the user
    fish_error_free(err);
    return 1;
  }
  if (st != FISH_CHAT_OK) {
    std::fprintf(stderr, "fish template: %s\n", fish_error_message(err));
    fish_error_free(err);
    return 1;
  }
  const bool ok = std::fwrite(out, 1, n, stdout) == n && std::fflush(stdout) == 0;
  fish_free(out);
  if (!ok) {
    std::fprintf(stderr, "fish template: cannot write the output\n");
    return 1;
  }
  return 0;
}

static const Command reg{"template", "render a conversation with a chat template (.jinja or a GGUF's)", &cmd_template};
