// The HTTP request-body libFuzzer target (built with -DFISH_FUZZ=ON and
// clang): every input is the body of a POST to fish serve, taken as the
// server takes it (serve/http_server.cpp's generation route, up to the
// scheduler): parse_request_body, then parse_chat_request (rendered with
// Qwen2.5's template, which reads tools, and tokenized on stories260K's
// vocabulary), parse_completion_request (its text tokenized, its token ids
// checked) and parse_embedding_request (its texts tokenized, the answer
// written as floats or base64); a JSON schema the parser took (response_format) is put on a
// sampler as the scheduler does and 64 tokens are drawn under it. Tool
// fields: the conversation adapted for each tool-call family, a forced
// tool_choice's schema built for each (and sampled like the others), and the
// body's own text run through each family's reply parser, whole and in
// pieces (the two must agree). An ApiError is the expected refusal. An exception escaping (the
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
#include "serve/python_call.h"
#include "serve/tool_call_parser.h"
#include "serve/tool_request.h"

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

// A schema the parser took: compiled again for a sampler (as the scheduler
// does; a refusal now is a finding) and up to 64 tokens drawn on
// stories260K's vocabulary from fixed pseudo-random logits, so that the
// recognizer reads texts the schema allows.
void sample_schema(const std::string& schema) {
  fish_sampler_params sp = fish_sampler_default_params();
  sp.temp = 1, sp.top_k = 0, sp.top_p = 1, sp.min_p = 0, sp.seed = 1;
  fish_sampler* s = fish_sampler_new(&sp);
  fish_error* err = nullptr;
  if (fish_sampler_constrain_json_schema(s, g_vocab, schema.c_str(), &err) != 0) {
    std::fprintf(stderr, "fuzz_request: a schema the request parser took is refused: %s\n", fish_error_message(err));
    std::abort();
  }
  fish_model_info info{};
  info.struct_size = sizeof info;
  fish_model_get_info(g_vocab, &info);
  std::vector<float> logits(size_t(info.n_vocab));
  uint32_t x = 12345;
  for (int i = 0; i < 64; ++i) {
    for (float& l : logits) {
      x = x * 1664525u + 1013904223u;
      l = float(x >> 8) / float(1u << 24) * 8.0f;
    }
    const int32_t t = fish_sampler_sample(s, logits.data(), info.n_vocab);
    if (t < 0 || fish_token_is_eog(g_vocab, t)) break;
  }
  fish_sampler_free(s);
}

constexpr fish::serve::ToolFamily kFamilies[] = {fish::serve::ToolFamily::kHermes, fish::serve::ToolFamily::kLlama3,
                                                 fish::serve::ToolFamily::kMistral, fish::serve::ToolFamily::kGranite,
                                                 fish::serve::ToolFamily::kNone};

// A reply's text through a family's parser: all at once, and in pieces of
// 1..7 bytes; content and calls must come out the same. names: the request's
// tools (a "python" one makes Llama 3.1's code after <|python_tag|> a call).
void parse_reply(fish::serve::ToolFamily f, const std::string& text, size_t max_calls,
                 const std::vector<std::string>& names = {}) {
  using namespace fish::serve;
  auto run_parser = [&](size_t piece, std::string* content, std::string* calls) {
    ToolCallParser p(f, max_calls, false, names);
    auto take = [&](std::vector<ToolEvent> evs) {
      for (const ToolEvent& e : evs) {
        if (e.is_call) *calls += e.call.name + '\0' + e.call.arguments + '\0';
        else *content += e.content;
      }
    };
    for (size_t at = 0; at < text.size(); at += piece) take(p.push(text.substr(at, piece)));
    take(p.finish());
  };
  std::string c1, k1, c2, k2;
  run_parser(text.size() + 1, &c1, &k1);
  run_parser(1 + text.size() % 7, &c2, &k2);
  if (c1 != c2 || k1 != k2) {
    std::fprintf(stderr, "fuzz_request: the %s parser streamed and whole disagree\n", tool_family_name(f));
    std::abort();
  }
}

void run(const std::string& body) {
  using namespace fish::serve;
  const fish_sampler_params defaults = fish_sampler_default_params();
  for (ToolFamily f : kFamilies) parse_reply(f, body, f == ToolFamily::kHermes ? 1 : SIZE_MAX);
  // Llama 3.1's built-in calls and code: the text after the tag, with and
  // without a code tool offered, and the call syntax on its own.
  for (const auto& names : {std::vector<std::string>{}, std::vector<std::string>{"python", "brave_search"}}) {
    parse_reply(ToolFamily::kLlama3, body, SIZE_MAX, names);
    parse_reply(ToolFamily::kLlama3, "<|python_tag|>" + body, SIZE_MAX, names);
  }
  if (auto c = parse_python_call(body, 128)) (void)dump(c->arguments);
  nlohmann::ordered_json j;
  if (parse_request_body(body, &j)) return;
  ParsedRequest pr;
  if (!parse_chat_request(j, defaults, false, &pr)) {
    if (!pr.gen.json_schema.empty()) sample_schema(pr.gen.json_schema);
    for (ToolFamily f : kFamilies) {
      nlohmann::ordered_json msgs = pr.template_input["messages"];
      adapt_tool_messages(f, msgs);
      (void)dump(msgs);
      std::string schema;
      if (pr.tools.forced() && f != ToolFamily::kNone && !forced_schema_for(f, pr.tools, &schema)) sample_schema(schema);
    }
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
  // /v1/embeddings: the inputs' texts tokenized, and the answer's shape
  // (floats or base64) written for their count.
  EmbeddingRequest er;
  if (!parse_embedding_request(j, &er)) {
    for (const EmbeddingInput& in : er.inputs)
      if (!in.is_tokens) tokenize(in.text);
    const std::vector<float> v(er.inputs.size() * 4, 0.5f);
    (void)dump(embeddings_response("m", v, 4, er.base64, int64_t(er.inputs.size())));
  }
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
