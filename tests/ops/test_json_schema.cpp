// JSON Schema constrained generation (model/json_schema.h,
// model/json_schema_prefix.h): the compiler's refusals, the byte-level
// recognizer on valid and invalid texts per keyword (the first refused byte),
// hostile schemas, and the sampler drawing only texts the schema accepts.
#include <catch2/catch.hpp>
#include <chrono>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "common/error.h"
#include "model/json_schema.h"
#include "model/json_schema_prefix.h"
#include "model/sampling.h"

using namespace fish;

namespace {

std::shared_ptr<const JsonSchema> schema(const std::string& text) { return JsonSchema::compile(text); }

// Feeds text byte by byte; the index of the first refused byte, or -1.
// *complete: whether the bytes accepted form a whole value.
int first_refused(const std::shared_ptr<const JsonSchema>& s, const std::string& text, bool* complete = nullptr) {
  JsonSchemaPrefix p(s);
  int at = -1;
  for (size_t i = 0; i < text.size() && at < 0; ++i)
    if (!p.feed(uint8_t(text[i]))) at = int(i);
  if (complete) *complete = p.complete();
  return at;
}

// Each text accepted whole and complete.
void accepts(const std::string& schema_text, std::initializer_list<std::string> texts) {
  const auto s = schema(schema_text);
  for (const std::string& t : texts) {
    INFO("schema " << schema_text << "\ntext " << t);
    bool done = false;
    CHECK(first_refused(s, t, &done) == -1);
    CHECK(done);
  }
}

// Each text refused at the given byte.
void refuses(const std::string& schema_text, std::initializer_list<std::pair<std::string, int>> cases) {
  const auto s = schema(schema_text);
  for (const auto& [t, at] : cases) {
    INFO("schema " << schema_text << "\ntext " << t);
    CHECK(first_refused(s, t) == at);
  }
}

std::string compile_error(const std::string& text) {
  try {
    JsonSchema::compile(text);
  } catch (const Error& e) {
    return e.what();
  }
  return "(compiled)";
}

}  // namespace

TEST_CASE("JSON schema: types, a list of types, integer against number", "[sampling][json][schema]") {
  accepts(R"({"type":"string"})", {R"("abc")", R"(  "x\n\"\u00e9")", "\"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\""});
  refuses(R"({"type":"string"})", {{"1", 0}, {R"("a"")", 3}, {"\"a\" ", 3}, {"\"\x01\"", 1}});
  accepts(R"({"type":["string","null"]})", {R"("a")", "null"});
  refuses(R"({"type":["string","null"]})", {{"1", 0}, {"true", 0}, {"nul1", 3}});
  accepts(R"({"type":"integer"})", {"0", "-12", "9007199254740993"});
  refuses(R"({"type":"integer"})", {{"1.5", 1}, {"1e3", 1}, {"01", 1}, {"-", -1}, {"\"1\"", 0}});
  accepts(R"({"type":"number"})", {"0", "-1.5e+3", "2E-2", "7"});
  refuses(R"({"type":"number"})", {{"1.", -1}, {"1.x", 2}, {"--1", 1}});
  accepts(R"({"type":"boolean"})", {"true", "false"});
  refuses(R"({"type":"boolean"})", {{"null", 0}, {"tru e", 3}});
  accepts(R"({"type":"null"})", {"null"});
  accepts(R"({})", {"1", R"({"any":[1,{"k":null}]})", R"("s")", "[]"});
  accepts("true", {"[1,2]"});
  // A top-level number is complete after each digit and may go on.
  const auto num = schema(R"({"type":"integer"})");
  JsonSchemaPrefix p(num);
  CHECK_FALSE(p.complete());
  REQUIRE(p.feed(uint8_t('4')));
  CHECK(p.complete());
  REQUIRE(p.feed(uint8_t('2')));
  CHECK(p.complete());
  CHECK_FALSE(p.feed(uint8_t(' ')));  // nothing after the value
  bool done = true;
  CHECK(first_refused(num, "-", &done) == -1);
  CHECK_FALSE(done);
}

TEST_CASE("JSON schema: strings are UTF-8 and JSON, lengths in code points", "[sampling][json][schema]") {
  // Invalid UTF-8 (a bad continuation, an encoded surrogate, an overlong form) and unpaired surrogate escapes.
  refuses(R"({"type":"string"})", {{"\"\xc3\x28\"", 2},
                                   {"\"\xed\xa0\x80\"", 2},
                                   {"\"\xc0\xaf\"", 1},
                                   {"\"\x80\"", 1},
                                   {R"("\udc00")", 4},
                                   {R"("\ud83dx")", 7},
                                   {R"("\ud83d\n")", 8},
                                   {R"("\q")", 2}});
  const std::string s = R"({"type":"string","minLength":2,"maxLength":3})";
  accepts(s, {R"("ab")", R"("abc")", "\"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\"", R"("\ud83d\ude00ab")", R"("\n\t")"});
  refuses(s, {{R"("a")", 2}, {R"("abcd")", 4}, {R"("\ud83d\ude00abc")", 15}, {"\"\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\"", 7},
              {R"("abc\n")", 4}});
}

TEST_CASE("JSON schema: properties, required keys before the end, no other keys", "[sampling][json][schema]") {
  const std::string person =
      R"({"type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer"}},)"
      R"("required":["name"],"additionalProperties":false})";
  accepts(person, {R"({"name":"a","age":3})", R"({"age":3,"name":"a"})", R"({"name":"a"})",
                   R"(  { "name" : "a" ,
                        "age":3 })"});
  refuses(person, {{R"({"age":3})", 8},              // '}' before the required "name"
                   {R"({})", 1},
                   {R"({"nam":1})", 5},              // a key that is no property, byte by byte
                   {R"({"extra":1})", 2},
                   {R"({"name":"a","name":"b"})", 13},  // each key once
                   {R"({"name":"a","age":1.5})", 19},
                   {R"({"name":"a",})", 12},
                   {R"({"name":"a","age":1,)", 19},  // no key left to write: no ','
                   {R"({"name":1})", 8},
                   {R"({"name":"a"} )", 12}});
  // additionalProperties true: other keys with any values, each once; a property's name is the property.
  const std::string open = R"({"type":"object","properties":{"name":{"type":"string"}},"additionalProperties":true})";
  accepts(open, {R"({"name":"a","zzz":[1,{"q":null}],"na":2,"names":3})", R"({"a\"b\\c":1})"});
  refuses(open, {{R"({"k":1,"k":2})", 9},
                 {R"({"name":1})", 8},
                 {R"({"n\u0061me":1})", 4},  // other keys use no \u escapes: equal keys are equal texts
                 {R"({"a\/b":1})", 4}});
  // additionalProperties as a schema.
  accepts(R"({"type":"object","additionalProperties":{"type":"integer"}})", {R"({"x":1,"y":-2})", "{}"});
  refuses(R"({"type":"object","additionalProperties":{"type":"integer"}})", {{R"({"x":"s"})", 5}});
  // Absent: beside "properties", no other keys; without, any keys.
  refuses(R"({"type":"object","properties":{"a":{}}})", {{R"({"b":1})", 2}});
  accepts(R"({"type":"object"})", {R"({"b":1})"});
  // A required key the properties leave out takes any value (additionalProperties absent).
  accepts(R"({"type":"object","properties":{"a":{}},"required":["b"]})", {R"({"b":[true]})", R"({"a":1,"b":2})"});
  refuses(R"({"type":"object","properties":{"a":{}},"required":["b"]})", {{R"({"a":1})", 6}});
  // Property names with escapes match as JSON writes them.
  accepts(R"({"type":"object","properties":{"a\"b":{},"é":{}},"additionalProperties":false})",
          {R"({"a\"b":1})", "{\"\xc3\xa9\":2}"});
}

TEST_CASE("JSON schema: items, minItems and maxItems", "[sampling][json][schema]") {
  const std::string s = R"({"type":"array","items":{"type":"integer"},"minItems":1,"maxItems":2})";
  accepts(s, {"[1]", "[1,2]", "[ 1 , 2 ]"});
  refuses(s, {{"[]", 1}, {"[1,2,", 4}, {R"(["a"])", 1}, {"[1,]", 3}, {"[,1]", 1}});
  accepts(R"({"type":"array","maxItems":0})", {"[]"});
  refuses(R"({"type":"array","maxItems":0})", {{"[1]", 1}});
  accepts(R"({"type":"array"})", {R"([1,"a",{},[null]])"});
}

TEST_CASE("JSON schema: enum and const as compact JSON, filtered by the keywords beside them", "[sampling][json][schema]") {
  const std::string s = R"({"enum":["red","green",1,null,{"a":[1]},15]})";
  accepts(s, {R"("red")", R"("green")", "1", "15", "null", R"({"a":[1]})", R"(  "red")"});
  refuses(s, {{R"("blue")", 1}, {R"({"a": [1]})", 5}, {"12", 1}, {R"("re")", 3}, {"true", 0}});
  accepts(R"({"type":"object","properties":{"c":{"enum":[1,12]}}})", {R"({"c":1})", R"({"c":12})", R"({"c":1 })"});
  refuses(R"({"type":"object","properties":{"c":{"enum":[1,12]}}})", {{R"({"c":13})", 6}});
  refuses(R"({"type":"string","enum":["a",1]})", {{"1", 0}});
  accepts(R"({"const":"x"})", {R"("x")"});
  refuses(R"({"const":"x"})", {{R"("y")", 1}});
  accepts(R"({"const":{"k":[true,null]}})", {R"({"k":[true,null]})"});
  refuses(R"({"enum":["ab","abc"],"maxLength":2})", {{R"("abc")", 3}});
}

TEST_CASE("JSON schema: anyOf and oneOf run in parallel, $ref recursion", "[sampling][json][schema]") {
  const std::string any = R"({"anyOf":[{"type":"integer"},)"
                          R"({"type":"object","properties":{"a":{"type":"string"}},"required":["a"]}]})";
  accepts(any, {"5", R"({"a":"x"})"});
  refuses(any, {{R"("s")", 0}, {R"({"a":5})", 5}});
  const std::string shapes =
      R"({"oneOf":[)"
      R"({"type":"object","properties":{"kind":{"const":"circle"},"r":{"type":"number"}},"required":["kind","r"]},)"
      R"({"type":"object","properties":{"kind":{"const":"square"},"side":{"type":"number"}},"required":["kind","side"]}]})";
  accepts(shapes, {R"({"kind":"circle","r":1})", R"({"kind":"square","side":2})", R"({"r":1,"kind":"circle"})"});
  refuses(shapes, {{R"({"kind":"circle","side":1})", 18}, {R"({"kind":"circle"})", 16}});
  // A tree through $defs, and the same through definitions and "#".
  const std::string tree =
      R"({"$defs":{"node":{"type":"object","properties":{"value":{"type":"integer"},)"
      R"("children":{"type":"array","items":{"$ref":"#/$defs/node"}}},"required":["value"],"additionalProperties":false}},)"
      R"("$ref":"#/$defs/node"})";
  accepts(tree, {R"({"value":1,"children":[{"value":2},{"value":3,"children":[{"value":4,"children":[]}]}]})"});
  refuses(tree, {{R"({"value":1,"children":[{"value":"x"}]})", 32}, {R"({"value":1,"children":[{}]})", 24}});
  accepts(R"({"definitions":{"s":{"type":"string"}},"type":"array","items":{"$ref":"#/definitions/s"}})", {R"(["a","b"])"});
  const std::string list = R"({"type":["object","null"],"properties":{"next":{"$ref":"#"}},"required":["next"]})";
  accepts(list, {"null", R"({"next":{"next":null}})"});
  refuses(list, {{R"({"next":{}})", 9}});
  // Nullable through anyOf, as pydantic writes Optional.
  accepts(R"({"anyOf":[{"type":"string"},{"type":"null"}],"default":null,"title":"X"})", {"null", R"("a")"});
}

TEST_CASE("JSON schema: keywords it does not enforce are refused with their path", "[sampling][json][schema]") {
  CHECK(compile_error(R"({"type":"string","pattern":"a+"})") == "keyword 'pattern' at /pattern is not supported");
  CHECK(compile_error(R"({"properties":{"a":{"minimum":1}}})") ==
        "keyword 'minimum' at /properties/a/minimum is not supported");
  CHECK(compile_error(R"({"$defs":{"x/y":{"type":"array","uniqueItems":true}},"$ref":"#/$defs/x~1y"})") ==
        "keyword 'uniqueItems' at /$defs/x~1y/uniqueItems is not supported");
  for (const char* k : {"maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "allOf", "not", "if", "then",
                        "else", "patternProperties", "dependentRequired", "propertyNames", "prefixItems", "contains",
                        "minProperties", "maxProperties", "unevaluatedProperties", "$anchor", "nullable", "requried"}) {
    const std::string msg = compile_error(std::string(R"({"type":"object","items":{")") + k + R"(":1}})");
    CHECK(msg == std::string("keyword '") + k + "' at /items/" + k + " is not supported");
  }
  CHECK(compile_error(R"({"items":[{"type":"string"}]})") ==
        "'items' at /items as an array (tuple validation) is not supported");
  CHECK(compile_error(R"({"$ref":"#/$defs/a","type":"object"})") ==
        "'$ref' at /$ref beside 'type' is not supported (put the other keywords inside each alternative)");
  CHECK(compile_error(R"({"anyOf":[{}],"oneOf":[{}]})").find("'anyOf' at /anyOf beside 'oneOf'") == 0);
  CHECK(compile_error(R"({"$ref":"https://example.com/s.json"})").find("only references inside the schema") !=
        std::string::npos);
  CHECK(compile_error(R"({"$ref":"#/$defs/missing"})") == "'$ref' '#/$defs/missing' (at /$ref) names no part of the schema");
  CHECK(compile_error(R"({"type":"strin"})") == "'type' at /type: \"strin\" is not a JSON type");
  CHECK(compile_error(R"({"minLength":-1})") == "'minLength' at /minLength must be a non-negative integer");
  CHECK(compile_error(R"({"maxItems":1.5})") == "'maxItems' at /maxItems must be a non-negative integer");
  CHECK(compile_error(R"({"anyOf":[]})") == "'anyOf' at /anyOf must be a non-empty array");
  CHECK(compile_error("[1]") == "the schema at the root must be an object or a boolean");
  CHECK(compile_error("{\"type\":").find("the schema is not valid JSON: ") == 0);
  CHECK(compile_error(R"({"minLength":1e999})").find("the schema is not valid JSON: number overflow") == 0);
  // Annotations and x- keywords are ignored.
  CHECK(compile_error(R"({"title":"t","description":"d","default":1,"examples":[1],"$schema":"s","$id":"i",)"
                      R"("format":"date","$comment":"c","x-order":1,"type":"string"})") == "(compiled)");
  // No value possible.
  for (const char* s : {R"({"enum":[]})", R"({"type":"array","minItems":3,"maxItems":2})",
                        R"({"type":"string","enum":[1]})", R"({"type":"object","required":["a"],"additionalProperties":false})",
                        R"({"type":"object","properties":{"a":{"$ref":"#"}},"required":["a"]})"}) {
    INFO(s);
    CHECK(compile_error(s).find("no JSON value satisfies the schema") == 0);
  }
}

TEST_CASE("JSON schema: hostile schemas are refused or bounded, never hang", "[sampling][json][schema]") {
  const auto t0 = std::chrono::steady_clock::now();
  // References that never describe a value.
  for (const char* s : {R"({"$ref":"#"})", R"({"anyOf":[{"$ref":"#"}]})", "false",
                        R"({"$defs":{"a":{"$ref":"#/$defs/b"},"b":{"$ref":"#/$defs/a"}},"$ref":"#/$defs/a"})"}) {
    INFO(s);
    CHECK(compile_error(s).find("describes no value") != std::string::npos);
  }
  // A cycle beside a real alternative is only that alternative.
  accepts(R"({"anyOf":[{"$ref":"#"},{"type":"null"}]})", {"null"});
  // Deep text, deep subschemas, too many nodes, too many alternatives.
  CHECK(compile_error(std::string(100000, '[')).find("deeper than 256 levels") != std::string::npos);
  std::string deep = "{}";
  for (int i = 0; i < 100; ++i) deep = R"({"items":)" + deep + "}";
  CHECK(compile_error(deep).find("the schema nests deeper than 64 levels at /items/items") == 0);
  std::string wide = R"({"properties":{)";
  for (int i = 0; i < 5000; ++i) wide += (i ? ",\"p" : "\"p") + std::to_string(i) + "\":{}";
  CHECK(compile_error(wide + "}}").find("the schema is too large") == 0);
  std::string alts = R"({"anyOf":[)";
  for (int i = 0; i < 65; ++i) alts += std::string(i ? "," : "") + R"({"type":"string","maxLength":)" + std::to_string(i) + "}";
  CHECK(compile_error(alts + "]}").find("more than 64 alternatives") != std::string::npos);
  // Alternatives of alternatives through $refs (2^30 paths): expanded once each, merged.
  std::string chain = R"({"$defs":{)";
  for (int i = 0; i < 30; ++i) {
    if (i) chain += ',';
    chain += "\"d" + std::to_string(i) + R"(":{"anyOf":[{"$ref":"#/$defs/d)" + std::to_string(i + 1) +
             R"("},{"$ref":"#/$defs/d)" + std::to_string(i + 1) + "\"}]}";
  }
  chain += R"(,"d30":{"type":"string"}},"$ref":"#/$defs/d0"})";
  accepts(chain, {R"("x")"});
  // Threads at a position with many alternatives nested in another: bounded.
  std::string many = R"({"$defs":{"s":{"anyOf":[)";
  for (int i = 0; i < 60; ++i) many += std::string(i ? "," : "") + R"({"type":"array","maxItems":)" + std::to_string(i + 1) + R"(,"items":{"$ref":"#/$defs/s"}})";
  many += R"(,{"type":"integer"}]}},"$ref":"#/$defs/s"})";
  const auto ms = schema(many);
  JsonSchemaPrefix p(ms);
  for (int i = 0; i < 20; ++i) {
    REQUIRE(p.feed(uint8_t('[')));
    CHECK(p.n_threads() <= JsonSchemaPrefix::kMaxThreads);
  }
  CHECK(p.feed(std::string_view("1]]")));
  // Nesting is bounded at run time too.
  const auto any = schema("{}");
  JsonSchemaPrefix d(any);
  CHECK(d.feed(std::string_view(std::string(JsonSchemaPrefix::kMaxDepth, '['))));
  CHECK_FALSE(d.feed(uint8_t('[')));
  CHECK(d.feed(uint8_t('1')));
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(20));
}

namespace {

// The example schema's rules, checked on a parsed value: what the sampler's
// texts must satisfy.
bool valid_person(const nlohmann::json& v, std::string* why) {
  const auto no = [&](const std::string& w) {
    *why = w;
    return false;
  };
  if (!v.is_object()) return no("not an object");
  for (const auto& [k, x] : v.items())
    if (k != "name" && k != "age" && k != "tags" && k != "ok" && k != "kind") return no("other key " + k);
  if (!v.contains("name") || !v["name"].is_string()) return no("name");
  std::string name = v["name"];
  size_t points = 0;
  for (const char c : name) points += (uint8_t(c) & 0xC0) != 0x80;
  if (points > 5) return no("name too long");
  if (!v.contains("age") || !v["age"].is_number_integer()) return no("age");
  if (v.contains("tags")) {
    if (!v["tags"].is_array() || v["tags"].size() > 3) return no("tags");
    for (const auto& t : v["tags"])
      if (t != "x" && t != "y") return no("tag");
  }
  if (v.contains("ok") && !v["ok"].is_boolean() && !v["ok"].is_null()) return no("ok");
  if (v.contains("kind") && !(v["kind"].is_number_integer() || (v["kind"].is_object() && v["kind"].contains("z") &&
                                                               v["kind"].size() == 1 && v["kind"]["z"].is_null())))
    return no("kind");
  return true;
}

const char* kPerson =
    R"({"type":"object","properties":{"name":{"type":"string","maxLength":5},"age":{"type":"integer"},)"
    R"("tags":{"type":"array","items":{"enum":["x","y"]},"maxItems":3},"ok":{"type":["boolean","null"]},)"
    R"("kind":{"anyOf":[{"type":"integer"},{"type":"object","properties":{"z":{"type":"null"}},"required":["z"]}]}},)"
    R"("required":["name","age"],"additionalProperties":false})";

std::shared_ptr<JsonVocab> made_up_vocab() {
  auto v = std::make_shared<JsonVocab>();
  for (const char* p : {"{", "}", "[", "]", ",", ":", " ", "\n", "\"", "\"name\"", "\"age\"", "\"tags\"", "\"ok\"",
                        "\"kind\"", "\"na", "me\"", "a", "bc", "\\n", "\\u00e9", "\xc3", "\xa9", "\xe2\x82\xac", "1",
                        "23", "-", "0", ".5", "e3", "true", "false", "null", "nu", "ll", "\"x\"", "\"y\"", "\"z\"",
                        "\"z\": null}", "{\"", "\":", "\",", "x", "}}", "\"}", ""}) {
    v->piece.push_back(p);
    v->eog.push_back(0);
  }
  // Every other letter alone, as real vocabularies have every byte: a
  // text begun with "a" can become "age" ("{\"a", then "g", "e", "\"").
  for (char c = 'b'; c <= 'z'; ++c)
    if (c != 'x') v->piece.push_back(std::string(1, c)), v->eog.push_back(0);
  v->piece.push_back(""), v->eog.push_back(1);  // the end of generation
  return v;
}

}  // namespace

TEST_CASE("sampler with a JSON schema: every sampled text parses and follows the schema", "[sampling][json][schema]") {
  const auto s = schema(kPerson);
  const auto v = made_up_vocab();
  const int32_t n = int32_t(v->piece.size());
  std::mt19937 rng(7);
  std::normal_distribution<float> logit(0.0f, 2.0f);
  std::vector<float> l(static_cast<size_t>(n));
  int with_tags = 0, with_kind_object = 0, finished = 0;
  for (uint64_t seed = 1; seed <= 60; ++seed) {
    SamplerParams sp;
    sp.temp = 1.2f, sp.top_k = 0, sp.top_p = 1, sp.min_p = 0, sp.seed = seed;
    Sampler smp(sp);
    smp.constrain(std::make_unique<JsonSchemaConstraint>(v, JsonSchemaPrefix(s)));
    std::string text;
    bool ended = false;
    for (int i = 0; i < 3000 && !ended; ++i) {
      for (float& x : l) x = logit(rng);
      const int32_t t = smp.sample(l.data(), n);
      REQUIRE(t >= 0);
      REQUIRE(t < n);
      REQUIRE((!v->piece[size_t(t)].empty() || v->eog[size_t(t)]));  // never the control token
      if (v->eog[size_t(t)]) ended = true;
      else text += v->piece[size_t(t)];
    }
    INFO("seed " << seed << ": " << text);
    REQUIRE(ended);
    ++finished;
    nlohmann::json j;
    REQUIRE_NOTHROW(j = nlohmann::json::parse(text));
    std::string why;
    CHECK(valid_person(j, &why));
    INFO(why);
    with_tags += j.contains("tags");
    with_kind_object += j.contains("kind") && j["kind"].is_object();
  }
  CHECK(finished == 60);
  CHECK(with_tags > 0);  // the optional parts come out too
  CHECK(with_kind_object > 0);

  // Greedy: the likeliest allowed token each time.
  SamplerParams gp;
  gp.temp = 0;
  Sampler g(gp);
  g.constrain(std::make_unique<JsonSchemaConstraint>(v, JsonSchemaPrefix(s)));
  std::vector<float> flat(size_t(n), 0.0f);
  flat[0] = 1.0f;                   // "{"
  CHECK(g.sample(flat.data(), n) == 0);
  flat[0] = 0, flat[1] = 5.0f;      // "}" is likeliest but "name" and "age" are required
  flat[9] = 1.0f;                   // "\"name\""
  CHECK(g.sample(flat.data(), n) == 9);
}

// mask() (one pass with a first-byte table) refuses exactly the tokens
// allows() refuses, in every state a walk through a value passes.
TEST_CASE("JSON schema constraint: mask agrees with allows token by token", "[sampling][json][schema]") {
  const auto v = made_up_vocab();
  const int32_t n = int32_t(v->piece.size());
  JsonSchemaConstraint c(v, JsonSchemaPrefix(schema(kPerson)));
  // The walk: {"name":"a\n","age":-0,"tags":["x"],"kind":{"z": null}} in tokens.
  const std::vector<std::string> walk = {"{", "\"na", "me\"", ":", "\"", "a", "\\n", "\"", ",", "\"age\"", ":", "-",
                                         "0", ",", "\"tags\"", ":", "[", "\"x\"", "]", ",", "\"kind\"", ":", "{\"",
                                         "z", "\":", " ", "null", "}}"};
  for (size_t step = 0; step <= walk.size(); ++step) {
    std::vector<float> l(size_t(n), 0.0f);
    c.mask(l.data(), n);
    for (int32_t i = 0; i < n; ++i) {
      INFO("token " << i << " '" << v->piece[size_t(i)] << "' before step " << step);
      CHECK((l[size_t(i)] == 0.0f) == c.allows(i));
    }
    if (step == walk.size()) break;
    const auto it = std::find(v->piece.begin(), v->piece.end(), walk[step]);
    REQUIRE(it != v->piece.end());
    const int32_t t = int32_t(it - v->piece.begin());
    INFO("step " << step << " '" << walk[step] << "'");
    REQUIRE(c.allows(t));
    c.advance(t);
  }
  CHECK(c.complete());
  CHECK(c.allows(n - 1));
  CHECK_FALSE(c.allows(0));
}
