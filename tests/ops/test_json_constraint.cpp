// JSON mode (model/json_constraint.h): the byte-level prefix check on valid
// and invalid texts, and the sampler drawing only tokens that keep its output
// one JSON object, then the end of generation.
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "model/json_constraint.h"
#include "model/sampling.h"

using namespace fish;

namespace {

// Feeds s byte by byte; the index of the first refused byte, or -1.
int first_refused(const std::string& s, JsonPrefix* out = nullptr) {
  JsonPrefix p;
  for (size_t i = 0; i < s.size(); ++i)
    if (!p.feed(uint8_t(s[i]))) {
      if (out) *out = p;
      return int(i);
    }
  if (out) *out = p;
  return -1;
}

}  // namespace

TEST_CASE("JSON prefix: whole objects are accepted and complete", "[sampling][json]") {
  for (const std::string s : {"{}", "  \n{ }", R"({"a": 1, "b": [true, false, null, -0.5e+3, 0, 12.25E-2, "x\u00e9\n\"\\\/"], "c": {}})",
                              R"({"k":[]})", R"({"k":[[1],[2,3],{"z":[{}]}]})", "{\"\xc3\xa9t\xc3\xa9\": \"\xe2\x82\xac\"}"}) {
    INFO(s);
    JsonPrefix p;
    CHECK(first_refused(s, &p) == -1);
    CHECK(p.complete());
    CHECK_FALSE(p.feed(uint8_t(' ')));  // nothing after the object
  }
  // Prefixes: accepted, not complete.
  for (const std::string s : {"{", R"({"a": [1, 2)", R"({"a": "unfinished \u00)", R"({"a": -)", R"({"a": tr)", R"({"a": 1.5e)"}) {
    INFO(s);
    JsonPrefix p;
    CHECK(first_refused(s, &p) == -1);
    CHECK_FALSE(p.complete());
  }
}

TEST_CASE("JSON prefix: the first byte that cannot continue an object is refused", "[sampling][json]") {
  const std::vector<std::pair<std::string, int>> cases = {
      {"[1]", 0},            {"x", 0},           {R"({"a" 1})", 5},      {R"({"a":01})", 6},
      {R"({"a":1,})", 7},    {"{,}", 1},         {R"({"a":tru})", 8},    {"{\"a\":\"\x01\"}", 6},
      {R"({"a":"\q"})", 7},  {R"({"a":1}})", 7}, {R"({"a":-})", 6},      {R"({"a":1.})", 7},
      {R"({"a":1e})", 7},    {R"({"a":[1,]})", 8}, {R"({"a":[,]})", 6},  {R"({1:2})", 1},
      {R"({"a":"\u12G4"})", 10}, {R"({"a":[}})", 6}, {R"({"a":{]})", 6}, {"{} ", 2}};
  for (const auto& [s, at] : cases) {
    INFO(s);
    CHECK(first_refused(s) == at);
  }
  // A refused run leaves the state as it was.
  JsonPrefix p;
  REQUIRE(p.feed(std::string_view(R"({"a":)")));
  CHECK_FALSE(p.feed(std::string_view("1x")));
  CHECK(p.feed(std::string_view("1}")));
  CHECK(p.complete());
  // Whitespace runs and nesting are bounded.
  JsonPrefix w;
  CHECK(w.feed(std::string_view(std::string(JsonPrefix::kMaxSpaceRun, ' '))));
  CHECK_FALSE(w.feed(uint8_t(' ')));
  CHECK(w.feed(uint8_t('{')));
  CHECK(w.feed(std::string_view(std::string(JsonPrefix::kMaxSpaceRun, '\n'))));  // a new run after '{'
  JsonPrefix d;
  std::string deep = R"({"a":)";
  for (int i = 1; i < JsonPrefix::kMaxDepth; ++i) deep += '[';
  CHECK(d.feed(std::string_view(deep)));
  CHECK_FALSE(d.feed(uint8_t('[')));
  CHECK(d.feed(uint8_t('1')));
}

TEST_CASE("sampler in JSON mode: only tokens that keep one object, then the end", "[sampling][json]") {
  // Tokens: 0 "x", 1 "{", 2 "}", 3 "\"a\"", 4 ":", 5 "1", 6 a control token (no text), 7 end of generation.
  auto v = std::make_shared<JsonVocab>();
  v->piece = {"x", "{", "}", "\"a\"", ":", "1", "", ""};
  v->eog = {0, 0, 0, 0, 0, 0, 0, 1};
  const std::vector<float> l{5.0f, 0.5f, 3.0f, 2.0f, 1.5f, 1.0f, 6.0f, 4.0f};
  SamplerParams gp;
  gp.temp = 0;
  Sampler g(gp);
  g.constrain_json(v);
  std::vector<int32_t> got;
  for (int i = 0; i < 3; ++i) got.push_back(g.sample(l.data(), 8));
  CHECK(got == std::vector<int32_t>{1, 2, 7});  // "{", then "}" (3.0 beats "\"a\"" 2.0), then the end

  // Sampling: every text up to the end is one object.
  SamplerParams sp;
  sp.temp = 1.5f, sp.top_k = 0, sp.top_p = 1, sp.min_p = 0, sp.seed = 5;
  int keys = 0;
  for (int run = 0; run < 100; ++run) {
    Sampler s(sp);
    s.constrain_json(v);
    sp.seed += 1;
    std::string text;
    JsonPrefix p;
    for (int i = 0; i < 200; ++i) {
      const int32_t t = s.sample(l.data(), 8);
      REQUIRE(t != 0);
      REQUIRE(t != 6);
      if (t == 7) break;
      text += v->piece[size_t(t)];
    }
    INFO(text);
    CHECK(first_refused(text, &p) == -1);
    CHECK(p.complete());
    keys += text.find("\"a\"") != std::string::npos;
  }
  CHECK(keys > 0);  // both "{}" and objects with keys come out

  // Past kJsonRedraws unfit draws, every unfit token is masked at once.
  auto many = std::make_shared<JsonVocab>();
  std::vector<float> ml;
  for (int i = 0; i < 40; ++i) many->piece.push_back("x"), many->eog.push_back(0), ml.push_back(10.0f - 0.1f * float(i));
  many->piece.push_back("{"), many->eog.push_back(0), ml.push_back(-5.0f);
  Sampler m(gp);
  m.constrain_json(many);
  CHECK(m.sample(ml.data(), 41) == 40);
  // Nothing fits and nothing ends the text: the unconstrained choice.
  CHECK(m.sample(ml.data(), 41) == 0);
}

// mask() (one pass with a first-byte table) refuses exactly the tokens
// allows() refuses, in every state a walk through an object passes.
TEST_CASE("JSON constraint: mask agrees with allows token by token", "[sampling][json]") {
  auto v = std::make_shared<JsonVocab>();
  for (const char* p : {"x", "{", "}", "\"a\"", ":", "1", "", "[", "]", ",", " ", "\n{", "\"", "ab\"", "\\n", "-2.5e3",
                        "true", "nul", "l", "}}", "\"k\": ", "\xe2\x82", "\xac", "  ", "{\"", "0", "01"}) {
    v->piece.push_back(p);
    v->eog.push_back(0);
  }
  v->piece.push_back(""), v->eog.push_back(1);
  const int32_t n = int32_t(v->piece.size());
  JsonConstraint c(v);
  // The walk: " " "\n{" "\"k\": " "[" "1" "," "\"" "ab\"" "," "true" "]" "}" then the end.
  for (int32_t step : {10, 11, 20, 7, 5, 9, 12, 13, 9, 16, 8, 2, -1}) {
    std::vector<float> l(size_t(n), 0.0f);
    c.mask(l.data(), n);
    for (int32_t i = 0; i < n; ++i) {
      INFO("token " << i << " '" << v->piece[size_t(i)] << "' before step " << step);
      CHECK((l[size_t(i)] == 0.0f) == c.allows(i));
    }
    if (step < 0) break;
    REQUIRE(c.allows(step));
    c.advance(step);
  }
  CHECK(c.complete());
  CHECK(c.allows(n - 1));
}
