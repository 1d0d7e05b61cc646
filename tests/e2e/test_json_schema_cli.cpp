// fish run --json-schema FILE on the real tiny models: the output parses as
// JSON, has the required keys with the schema's types and no others; a
// schema fish does not enforce is refused before the model loads.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "e2e_util.h"
#include "test_paths.h"

using namespace fish::test;

namespace {

std::string fish_cmd(const std::string& args, int* st, bool keep_stderr = false) {
  return run_command("FISH_GPU=0 " + bin_path("fish") + " " + args + (keep_stderr ? " 2>&1" : " 2>/dev/null"), st);
}

// A schema in a file of its own, removed at the end.
struct SchemaFile {
  std::string path;
  explicit SchemaFile(const std::string& text) : path("/tmp/fish-schema-" + std::to_string(::getpid()) + ".json") {
    std::ofstream(path) << text;
  }
  ~SchemaFile() { std::remove(path.c_str()); }
};

// JSON Schema's integer: a number with no fraction (nlohmann reads one past
// 64 bits as a float).
bool is_integer(const nlohmann::json& v) {
  return v.is_number_integer() || (v.is_number_float() && std::floor(v.get<double>()) == v.get<double>());
}

}  // namespace

TEST_CASE("fish run --json-schema: the output parses and has the required keys with their types", "[e2e][cli][json]") {
  // The tiny models pad with whitespace (runs of up to 32 between tokens), hence -n 3000.
  const SchemaFile f(R"({"type":"object","properties":{"name":{"type":"string","maxLength":12},)"
                     R"("age":{"type":"integer"},"ok":{"type":"boolean"},)"
                     R"("pet":{"enum":["cat","dog",null]},)"
                     R"("tags":{"type":"array","items":{"type":"string","maxLength":8},"maxItems":3}},)"
                     R"("required":["name","age","ok","pet"],"additionalProperties":false})");
  for (const char* model : {"stories260K.gguf", "synth-tiny-Q4_K_M.gguf"})
    for (int seed = 1; seed <= 3; ++seed) {
      int st = -1;
      const std::string out =
          fish_cmd(std::string("run -m ") + model_path(model) + " -p 'A person:' -n 3000 --temp 1 --seed " +
                       std::to_string(seed) + " --json-schema " + f.path + " -t 2 -ngl 0",
                   &st);
      INFO(model << " seed " << seed << ": " << out);
      REQUIRE(st == 0);
      nlohmann::json v;
      REQUIRE_NOTHROW(v = nlohmann::json::parse(out));  // the trailing newline fish run prints is whitespace
      REQUIRE(v.is_object());
      CHECK(v.contains("name"));
      CHECK(v.value("name", nlohmann::json()).is_string());
      CHECK(v.contains("age"));
      CHECK(is_integer(v.value("age", nlohmann::json())));
      CHECK(v.value("ok", nlohmann::json(1)).is_boolean());
      CHECK(v.contains("pet"));
      CHECK((v["pet"] == "cat" || v["pet"] == "dog" || v["pet"].is_null()));
      for (const auto& [k, x] : v.items()) CHECK((k == "name" || k == "age" || k == "ok" || k == "pet" || k == "tags"));
      if (v.contains("tags")) {
        CHECK(v["tags"].is_array());
        CHECK(v["tags"].size() <= 3);
      }
    }
}

TEST_CASE("fish run --json-schema: a top-level array, and greedy decoding", "[e2e][cli][json]") {
  const SchemaFile f(R"({"type":"array","items":{"type":"integer"},"minItems":2,"maxItems":4})");
  int st = -1;
  const std::string out =
      fish_cmd("run -m " + model_path("stories260K.gguf") + " -p 'Numbers:' -n 3000 --temp 0 --json-schema " + f.path +
                   " -t 2 -ngl 0",
               &st);
  INFO(out);
  REQUIRE(st == 0);
  nlohmann::json v;
  REQUIRE_NOTHROW(v = nlohmann::json::parse(out));
  REQUIRE(v.is_array());
  CHECK(v.size() >= 2);
  CHECK(v.size() <= 4);
  for (const auto& x : v) CHECK(is_integer(x));
}

TEST_CASE("fish run --json-schema: a schema fish does not enforce is refused, naming the keyword", "[e2e][cli][json]") {
  int st = 0;
  {
    const SchemaFile f(R"({"type":"object","properties":{"zip":{"type":"string","pattern":"^[0-9]{5}$"}}})");
    const std::string out = fish_cmd("run -m " + model_path("stories260K.gguf") + " --json-schema " + f.path, &st, true);
    CHECK(st == 2);
    CHECK(out.find("--json-schema " + f.path + ": keyword 'pattern' at /properties/zip/pattern is not supported") !=
          std::string::npos);
  }
  {
    const SchemaFile f(R"({"$ref":"#"})");
    const std::string out = fish_cmd("run -m " + model_path("stories260K.gguf") + " --json-schema " + f.path, &st, true);
    CHECK(st == 2);
    CHECK(out.find("describes no value") != std::string::npos);
  }
  std::string out = fish_cmd("run -m " + model_path("stories260K.gguf") + " --json-schema /nonexistent.json", &st, true);
  CHECK(st == 2);
  CHECK(out.find("--json-schema /nonexistent.json: cannot open") != std::string::npos);
  const SchemaFile f("{}");
  out = fish_cmd("run -m " + model_path("stories260K.gguf") + " --json --json-schema " + f.path, &st, true);
  CHECK(st == 2);
  CHECK(out.find("--json and --json-schema: choose one") != std::string::npos);
  out = fish_cmd("run -m " + model_path("stories260K.gguf") + " --lookup 4 --json-schema " + f.path, &st, true);
  CHECK(st == 2);
  CHECK(out.find("--json-schema does not combine with speculative decoding") != std::string::npos);
}
