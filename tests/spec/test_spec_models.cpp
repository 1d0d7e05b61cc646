// Speculative decoding through the C API (fish_spec.h) on every test model of
// ../shared/models: greedy text identical to plain decoding with the model as
// its own draft, with n-gram lookup, and with another model of the same
// vocabulary (TinyStories-656K Q4_0 <-> Q8_0); refusals with their reasons.
#include <cstddef>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>
#include <catch2/catch.hpp>

#include "fish/fish.h"
#include "fish/fish_spec.h"
#include "test_model.h"
#include "test_paths.h"


namespace {

const char* const kModels[] = {"stories260K.gguf", "TinyStories-656K-Q8_0.gguf", "TinyStories-656K-Q4_0.gguf",
                               "llama-2-tiny-random.gguf", "synth-tiny-Q4_K_M.gguf"};

// A repetitive prompt: lookup finds the pattern in it and in what follows.
const char* const kPrompt =
    "One day, Tom and Sue went to the park. Tom said: \"Hi Sue!\" Sue said: \"Hi Tom!\" "
    "One day, Tom and Sue went to the park. Tom said: \"Hi Sue!\" Sue said: \"Hi Tom!\" "
    "One day, Tom and Sue went to the park. Tom said:";

struct Model {
  fish_model* m = nullptr;
  explicit Model(const std::string& name, int32_t n_ctx = 256, int32_t gpu_layers = 0) {
    fish_model_params p = fish_model_default_params();
    p.n_threads = 2;
    p.gpu_layers = gpu_layers;
    p.n_ctx = n_ctx;
    m = fish::test::require_model(name, p);
  }
  ~Model() { fish_model_free(m); }
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;
};

std::vector<int32_t> tokenize(fish_model* m, const std::string& text) {
  std::vector<int32_t> ids(text.size() + 8);
  const int32_t n = fish_tokenize(m, text.data(), text.size(), 1, 0, ids.data(), int32_t(ids.size()));
  REQUIRE(n > 0);
  ids.resize(size_t(n));
  return ids;
}

fish_sampler_params greedy() {
  fish_sampler_params sp = fish_sampler_default_params();
  sp.temp = 0;
  return sp;
}

// Plain decoding: one token per fish_eval, the sampler's choice; stops at an end token.
std::vector<int32_t> plain(fish_model* m, const std::vector<int32_t>& prompt, int n) {
  fish_model_info info{};
  info.struct_size = sizeof info;
  fish_model_get_info(m, &info);
  const fish_sampler_params sp = greedy();
  fish_sampler* s = fish_sampler_new(&sp);
  REQUIRE(fish_kv_truncate(m, 0) == 0);
  REQUIRE(fish_eval(m, prompt.data(), int32_t(prompt.size()), 0, 0) == 0);
  std::vector<int32_t> out;
  for (int i = 0; i < n; ++i) {
    int32_t tok = fish_sampler_sample(s, fish_get_logits(m, -1), info.n_vocab);
    if (fish_token_is_eog(m, tok)) break;
    out.push_back(tok);
    REQUIRE(fish_eval(m, &tok, 1, int32_t(prompt.size() + out.size()) - 1, 0) == 0);
  }
  fish_sampler_free(s);
  return out;
}

struct SpecRun {
  std::vector<int32_t> tokens;
  fish_spec_stats stats{};
};

SpecRun speculative(fish_model* target, fish_model* draft, int32_t n_draft, const std::vector<int32_t>& prompt, int n,
                    const fish_sampler_params& sp = greedy()) {
  fish_spec_params p = fish_spec_default_params();
  p.draft = draft;
  p.n_draft = n_draft;
  fish_error* err = nullptr;
  fish_spec* s = fish_spec_new(target, &p, &sp, &err);
  INFO((err ? fish_error_message(err) : ""));
  REQUIRE(s);
  REQUIRE(fish_spec_start(s, prompt.data(), int32_t(prompt.size())) == 0);
  SpecRun r;
  std::vector<int32_t> buf(size_t(n_draft) + 1);
  bool done = false;
  while (!done && int(r.tokens.size()) < n) {
    const int32_t got = fish_spec_step(s, buf.data(), std::min<int32_t>(int32_t(buf.size()), n - int32_t(r.tokens.size())));
    INFO(fish_spec_last_error(s));
    REQUIRE(got >= 1);
    for (int32_t i = 0; i < got && !done; ++i)
      if (fish_token_is_eog(target, buf[size_t(i)])) done = true;
      else r.tokens.push_back(buf[size_t(i)]);
  }
  CHECK(fish_spec_n_tokens(s) >= int32_t(prompt.size() + r.tokens.size()));
  r.stats.struct_size = sizeof r.stats;
  fish_spec_get_stats(s, &r.stats);
  fish_spec_free(s);
  return r;
}

}  // namespace

TEST_CASE("greedy speculative decoding gives plain decoding's text on every test model", "[spec][models]") {
  for (const char* name : kModels) {
    INFO(name);
    Model target(name), self_draft(name);
    const std::vector<int32_t> prompt = tokenize(target.m, kPrompt);
    const std::vector<int32_t> want = plain(target.m, prompt, 48);
    REQUIRE(want.size() > 8);
    for (const int32_t n_draft : {1, 4, 9}) {
      INFO("n_draft " << n_draft);
      // The model as its own draft: every proposal is the target's own choice.
      const SpecRun d = speculative(target.m, self_draft.m, n_draft, prompt, 48);
      CHECK(d.tokens == want);
      CHECK(d.stats.proposed > 0);
      CHECK(d.stats.accepted == d.stats.proposed);
      CHECK(d.stats.steps <= (int64_t(want.size()) + n_draft) / (n_draft + 1) + 1);
      const SpecRun l = speculative(target.m, nullptr, n_draft, prompt, 48);
      CHECK(l.tokens == want);
      CHECK(l.stats.draft_forwards == 0);
      CHECK(l.stats.accepted > 0);  // the prompt repeats itself, and so do these models
      std::printf("%-28s n_draft %d: lookup %lld/%lld accepted, %lld forwards for %zu tokens\n", name, n_draft,
                  (long long)l.stats.accepted, (long long)l.stats.proposed, (long long)l.stats.steps, want.size());
    }
  }
}

// Greedy with the penalties on: plain decoding remembers the prompt and every
// token it takes (as fish run does), the speculative decoder its context, so
// both penalise the same window and choose the same text.
TEST_CASE("greedy speculative decoding keeps plain decoding's text with presence and frequency penalties",
          "[spec][models]") {
  fish_sampler_params sp = greedy();
  sp.presence_penalty = 0.4f, sp.frequency_penalty = 0.25f, sp.repeat_last_n = 32;
  for (const char* name : {"stories260K.gguf", "synth-tiny-Q4_K_M.gguf"}) {
    INFO(name);
    Model target(name), self_draft(name);
    const std::vector<int32_t> prompt = tokenize(target.m, kPrompt);
    fish_model_info info{};
    info.struct_size = sizeof info;
    fish_model_get_info(target.m, &info);
    fish_sampler* s = fish_sampler_new(&sp);
    REQUIRE(s);
    for (int32_t t : prompt) fish_sampler_accept(s, t);
    REQUIRE(fish_kv_truncate(target.m, 0) == 0);
    REQUIRE(fish_eval(target.m, prompt.data(), int32_t(prompt.size()), 0, 0) == 0);
    std::vector<int32_t> want;
    for (int i = 0; i < 48; ++i) {
      int32_t tok = fish_sampler_sample(s, fish_get_logits(target.m, -1), info.n_vocab);
      if (fish_token_is_eog(target.m, tok)) break;
      fish_sampler_accept(s, tok);
      want.push_back(tok);
      REQUIRE(fish_eval(target.m, &tok, 1, int32_t(prompt.size() + want.size()) - 1, 0) == 0);
    }
    fish_sampler_free(s);
    REQUIRE(want.size() > 8);
    CHECK(want != plain(target.m, prompt, int(want.size())));  // the penalties change this text
    CHECK(speculative(target.m, self_draft.m, 4, prompt, 48, sp).tokens == want);
    CHECK(speculative(target.m, nullptr, 4, prompt, 48, sp).tokens == want);
  }
}

// The sampler's C parameters: the penalties are range-checked by name, and a
// caller built before they existed (a smaller struct_size) gets them off
// whatever follows its struct in memory.
TEST_CASE("fish_sampler_params: penalties checked, and an older caller's smaller struct leaves them off", "[spec][sampling]") {
  fish_sampler_params sp = greedy();
  sp.presence_penalty = 3;
  CHECK(std::string(fish_sampler_params_check(&sp)) == "presence_penalty = 3.000000: expected a number in [-2, 2] (0: off)");
  CHECK(fish_sampler_new(&sp) == nullptr);
  sp.presence_penalty = 2;
  const float logits[2] = {2.0f, 1.9f};
  for (const bool old_caller : {false, true}) {
    INFO("old caller " << old_caller);
    fish_sampler_params p = sp;
    if (old_caller) p.struct_size = uint32_t(offsetof(fish_sampler_params, presence_penalty));
    fish_sampler* s = fish_sampler_new(&p);
    REQUIRE(s);
    fish_sampler_accept(s, 0);
    CHECK(fish_sampler_sample(s, logits, 2) == (old_caller ? 0 : 1));  // 2.0 - 2 = 0 < 1.9
    fish_sampler_free(s);
  }
}

// JSON mode through the C API on a real vocabulary: greedy on stories260K
// (no JSON of its own) the text starts an object after at most 32 whitespace
// bytes, and a missing sampler or model is an error, not a crash.
TEST_CASE("fish_sampler_constrain_json: the text starts one JSON object, and bad arguments are errors", "[spec][sampling]") {
  fish_error* err = nullptr;
  CHECK(fish_sampler_constrain_json(nullptr, nullptr, &err) != 0);
  REQUIRE(err);
  CHECK(std::string(fish_error_message(err)) == "fish_sampler_constrain_json: no sampler or no model");
  fish_error_free(err);
  Model m("stories260K.gguf");
  fish_model_info info{};
  info.struct_size = sizeof info;
  fish_model_get_info(m.m, &info);
  const fish_sampler_params sp = greedy();
  fish_sampler* s = fish_sampler_new(&sp);
  REQUIRE(fish_sampler_constrain_json(s, m.m, nullptr) == 0);
  const std::vector<int32_t> prompt = tokenize(m.m, "Once upon a time");
  REQUIRE(fish_eval(m.m, prompt.data(), int32_t(prompt.size()), 0, 0) == 0);
  std::string text;
  for (int i = 0; i < 60; ++i) {
    int32_t tok = fish_sampler_sample(s, fish_get_logits(m.m, -1), info.n_vocab);
    REQUIRE(!fish_token_is_eog(m.m, tok));  // stories260K never closes its object this soon
    char buf[64];
    const int32_t n = fish_token_to_piece(m.m, tok, buf, sizeof buf, 0);
    REQUIRE(n > 0);
    text.append(buf, size_t(n));
    REQUIRE(fish_eval(m.m, &tok, 1, int32_t(prompt.size()) + i, 0) == 0);
  }
  fish_sampler_free(s);
  const size_t first = text.find_first_not_of(" \t\r\n");
  INFO(text);
  REQUIRE(first != std::string::npos);
  CHECK(first <= 32);
  CHECK(text[first] == '{');
}

// A JSON schema through the C API: greedy on stories260K the text is one of
// the enum's values, then the end; a refused schema is an error naming the
// keyword that leaves the sampler as it was; bad arguments are errors.
TEST_CASE("fish_sampler_constrain_json_schema: the text follows the schema, refusals name the keyword", "[spec][sampling]") {
  fish_error* err = nullptr;
  CHECK(fish_sampler_constrain_json_schema(nullptr, nullptr, "{}", &err) != 0);
  REQUIRE(err);
  CHECK(std::string(fish_error_message(err)) == "fish_sampler_constrain_json_schema: no sampler, model or schema");
  fish_error_free(err);
  CHECK(fish_json_schema_check(R"({"type":"string"})", nullptr) == 0);
  REQUIRE(fish_json_schema_check(R"({"type":"integer","minimum":0})", &err) != 0);
  CHECK(std::string(fish_error_message(err)) == "keyword 'minimum' at /minimum is not supported");
  fish_error_free(err);
  CHECK(fish_json_schema_check(nullptr, nullptr) != 0);

  Model m("stories260K.gguf");
  fish_model_info info{};
  info.struct_size = sizeof info;
  fish_model_get_info(m.m, &info);
  const std::vector<int32_t> prompt = tokenize(m.m, "Once upon a time");
  // Generates up to n tokens; true when an end-of-generation token came.
  const auto generate = [&](fish_sampler* s, int n, std::string* text) {
    REQUIRE(fish_kv_truncate(m.m, 0) == 0);
    REQUIRE(fish_eval(m.m, prompt.data(), int32_t(prompt.size()), 0, 0) == 0);
    for (int i = 0; i < n; ++i) {
      int32_t tok = fish_sampler_sample(s, fish_get_logits(m.m, -1), info.n_vocab);
      if (fish_token_is_eog(m.m, tok)) return true;
      char buf[64];
      const int32_t k = fish_token_to_piece(m.m, tok, buf, sizeof buf, 0);
      REQUIRE(k > 0);
      text->append(buf, size_t(k));
      REQUIRE(fish_eval(m.m, &tok, 1, int32_t(prompt.size()) + i, 0) == 0);
    }
    return false;
  };
  const fish_sampler_params sp = greedy();
  fish_sampler* s = fish_sampler_new(&sp);
  REQUIRE(fish_sampler_constrain_json_schema(s, m.m, R"({"enum":["yes","no"],"title":"answer"})", nullptr) == 0);
  std::string text;
  CHECK(generate(s, 300, &text));
  INFO(text);
  const size_t first = text.find_first_not_of(" \t\r\n");
  REQUIRE(first != std::string::npos);
  CHECK(first <= 32);
  CHECK((text.substr(first) == "\"yes\"" || text.substr(first) == "\"no\""));
  fish_sampler_free(s);

  // JSON mode, then a refused schema: still JSON mode.
  s = fish_sampler_new(&sp);
  REQUIRE(fish_sampler_constrain_json(s, m.m, nullptr) == 0);
  REQUIRE(fish_sampler_constrain_json_schema(s, m.m, R"({"allOf":[{}]})", &err) != 0);
  CHECK(std::string(fish_error_message(err)) == "keyword 'allOf' at /allOf is not supported");
  fish_error_free(err);
  text.clear();
  generate(s, 40, &text);
  const size_t brace = text.find_first_not_of(" \t\r\n");
  REQUIRE(brace != std::string::npos);
  CHECK(text[brace] == '{');
  fish_sampler_free(s);
}

TEST_CASE("TinyStories-656K Q4_0 drafts for Q8_0 and back with the target's greedy text", "[spec][models]") {
  for (const auto& [t, d] : {std::pair<const char*, const char*>{"TinyStories-656K-Q8_0.gguf", "TinyStories-656K-Q4_0.gguf"},
                             {"TinyStories-656K-Q4_0.gguf", "TinyStories-656K-Q8_0.gguf"}}) {
    INFO(t << " drafted by " << d);
    Model target(t), draft(d);
    CHECK(fish_spec_vocab_check(target.m, draft.m) == nullptr);
    const std::vector<int32_t> prompt = tokenize(target.m, "Once upon a time");
    const std::vector<int32_t> want = plain(target.m, prompt, 64);
    const SpecRun r = speculative(target.m, draft.m, 6, prompt, 64);
    CHECK(r.tokens == want);
    CHECK(r.stats.accepted > 0);
    std::printf("%s drafted by %s: %lld/%lld accepted\n", t, d, (long long)r.stats.accepted,
                (long long)r.stats.proposed);
  }
}

TEST_CASE("sampled speculative decoding is reproducible for a seed and stays in the vocabulary", "[spec][models]") {
  Model target("TinyStories-656K-Q8_0.gguf"), draft("TinyStories-656K-Q4_0.gguf");
  const std::vector<int32_t> prompt = tokenize(target.m, "Once upon a time");
  fish_sampler_params sp = fish_sampler_default_params();
  sp.temp = 0.8f;
  sp.seed = 11;
  for (fish_model* d : {draft.m, static_cast<fish_model*>(nullptr)}) {
    const SpecRun a = speculative(target.m, d, 5, prompt, 60, sp), b = speculative(target.m, d, 5, prompt, 60, sp);
    CHECK(a.tokens == b.tokens);
    for (int32_t t : a.tokens) CHECK((t >= 0 && t < 2048));
  }
}

TEST_CASE("fish_spec refuses a draft it cannot use, naming why", "[spec][models]") {
  Model small("stories260K.gguf"), other("TinyStories-656K-Q8_0.gguf"), random("llama-2-tiny-random.gguf");
  const char* why = fish_spec_vocab_check(other.m, small.m);
  REQUIRE(why);
  CHECK(std::string(why) == "n_vocab 2048 in the target, 512 in the draft");
  fish_spec_params p = fish_spec_default_params();
  p.draft = small.m;
  fish_error* err = nullptr;
  CHECK(fish_spec_new(other.m, &p, nullptr, &err) == nullptr);
  REQUIRE(err);
  CHECK(std::string(fish_error_message(err)) ==
        "the draft model's vocabulary is not the target's: n_vocab 2048 in the target, 512 in the draft");
  fish_error_free(err);
  err = nullptr;
  p.draft = other.m;
  CHECK(fish_spec_new(other.m, &p, nullptr, &err) == nullptr);
  REQUIRE(err);
  CHECK(std::string(fish_error_message(err)).find("load the file a second time") != std::string::npos);
  fish_error_free(err);
  err = nullptr;
  p.draft = nullptr;
  p.n_draft = 0;
  CHECK(fish_spec_new(other.m, &p, nullptr, &err) == nullptr);
  REQUIRE(err);
  CHECK(std::string(fish_error_message(err)) == "speculative decoding: n_draft must be >= 1 (it is 0)");
  fish_error_free(err);
  CHECK(fish_spec_new(nullptr, nullptr, nullptr, nullptr) == nullptr);

  p = fish_spec_default_params();
  fish_spec* s = fish_spec_new(random.m, &p, nullptr, nullptr);
  REQUIRE(s);
  int32_t out[4];
  CHECK(fish_spec_step(s, out, 4) == -1);
  CHECK(std::string(fish_spec_last_error(s)) == "speculative decoding: no context (start one first)");
  const int32_t bad[2] = {1, 32000};
  CHECK(fish_spec_start(s, bad, 2) != 0);
  CHECK(std::string(fish_spec_last_error(s)).find("token 32000 at 1 is outside the vocabulary") != std::string::npos);
  CHECK(fish_spec_start(s, bad, 1) == 0);
  CHECK(fish_spec_step(s, out, 0) == -1);
  CHECK(fish_spec_step(s, out, 4) >= 1);
  CHECK(fish_spec_shift(s, 0, 5) != 0);
  fish_spec_free(s);
  fish_spec_free(nullptr);
  CHECK(fish_spec_step(nullptr, out, 4) == -1);
}

#ifdef FISH_TEST_REFERENCE
TEST_CASE("speculative decoding on the reference plugin's span gives its plain greedy text", "[spec][models][plugin]") {
  // The verify forward of several rows and the truncation of the device's KV
  // through a backend (the reference plugin stands in for a GPU).
  fish_backend_use_file(FISH_TEST_REFERENCE);
  for (const char* name : {"stories260K.gguf", "synth-tiny-Q4_K_M.gguf"}) {
    INFO(name);
    Model target(name, 256, -1), self_draft(name, 256, -1);
    fish_model_info info{};
    info.struct_size = sizeof info;
    fish_model_get_info(target.m, &info);
    CHECK(info.gpu_layers == info.n_layer);
    const std::vector<int32_t> prompt = tokenize(target.m, kPrompt);
    const std::vector<int32_t> want = plain(target.m, prompt, 32);
    const SpecRun d = speculative(target.m, self_draft.m, 4, prompt, 32);
    CHECK(d.tokens == want);
    CHECK(d.stats.accepted == d.stats.proposed);
    CHECK(speculative(target.m, nullptr, 4, prompt, 32).tokens == want);
  }
  fish_backend_use_file(nullptr);
}
#endif
