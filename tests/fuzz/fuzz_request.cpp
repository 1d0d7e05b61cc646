// The HTTP request-body libFuzzer target (built with -DFISH_FUZZ=ON and
// clang): every input is the body of a POST to fish serve, taken as the
// server takes it (serve/http_server.cpp's generation route, up to the
// scheduler): parse_request_body, then parse_chat_request (rendered with
// Qwen2.5's template, which reads tools, and tokenized on stories260K's
// vocabulary) and parse_completion_request (its text tokenized, its token ids
// checked). An ApiError is the expected refusal. An exception escaping (the
// HTTP library would answer 500 instead of the 400 the body deserves), a
// crash, a hang or a sanitizer report is a finding.
// tests/fuzz/run-campaign.sh BUILD_DIR SECONDS request runs it.
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "fish/fish.h"
#include "fish/fish_chat.h"
#include "serve/openai_request.h"
#include "serve/openai_response.h"

namespace {

fish_model* g_vocab = nullptr;
fish_chat_template* g_tmpl = nullptr;

[[noreturn]] void die(const std::string& why) {
  std::fprintf(stderr, "fuzz_request: %s\n", why.c_str());
  std::exit(2);
}

void tokenize(const std::string& text) {
  std::vector<int32_t> ids(text.size() + 16);
  int32_t n = fish_tokenize(g_vocab, text.data(), text.size(), true, true, ids.data(), int32_t(ids.size()));
  if (n < 0 && n != -INT32_MAX) {
    ids.assign(size_t(-n), 0);
    n = fish_tokenize(g_vocab, text.data(), text.size(), true, true, ids.data(), int32_t(ids.size()));
  }
}

void run(const std::string& body) {
  using namespace fish::serve;
  nlohmann::json j;
  if (parse_request_body(body, &j)) return;
  const fish_sampler_params defaults = fish_sampler_default_params();
  ParsedRequest pr;
  if (!parse_chat_request(j, defaults, false, &pr)) {
    const std::string in = dump(pr.template_input);
    char* out = nullptr;
    size_t n = 0;
    fish_error* err = nullptr;
    if (fish_chat_template_render_json(g_tmpl, in.data(), in.size(), &out, &n, &err) == FISH_CHAT_OK) {
      tokenize(std::string(out, n));
      fish_free(out);
    } else {
      (void)fish_error_message(err);
      fish_error_free(err);
    }
  }
  ParsedRequest pc;
  if (!parse_completion_request(j, defaults, false, &pc) && !pc.prompt_is_tokens) tokenize(pc.prompt_text);
}

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) die("cannot read " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  setenv("FISH_GPU", "0", 1);
  const std::string shared = FISH_SHARED_DIR;
  fish_model_params p = fish_model_default_params();
  p.vocab_only = 1;
  fish_error* err = nullptr;
  g_vocab = fish_model_load((shared + "/models/stories260K.gguf").c_str(), &p, &err);
  if (!g_vocab) die(fish_error_message(err));
  const std::string src = slurp(shared + "/models/templates/Qwen-Qwen2.5-7B-Instruct.jinja");
  if (fish_chat_template_parse(src.data(), src.size(), &g_tmpl, &err) != FISH_CHAT_OK) die(fish_error_message(err));
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    run(std::string(reinterpret_cast<const char*>(data), size));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fish fuzz: an exception escaped the request path: %s\n", e.what());
    std::abort();
  }
  return 0;
}
