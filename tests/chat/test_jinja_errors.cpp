// Errors: runtime errors name the line and column of the failing expression;
// pathological input (deep nesting, runaway loops and recursion, huge
// strings) is an error, never a crash or a hang; mangled real templates
// either render or fail with a template error.
#include <catch2/catch.hpp>
#include <fstream>
#include <random>
#include <sstream>
#include <string>

#include "chat/chat_template.h"
#include "chat_test_util.h"
#include "test_paths.h"
#include "test_skip.h"

namespace j = fish::chat::jinja;
using namespace fish::test;

namespace {

std::string repeat(const std::string& s, int n) {
  std::string out;
  for (int i = 0; i < n; ++i) out += s;
  return out;
}

}  // namespace

TEST_CASE("chat errors: using an undefined value names it and where", "[chat][errors]") {
  struct Case {
    const char* src;
    const char* vars;
    const char* message;
  };
  const Case cases[] = {
      {"{{ foo.bar }}", "{}", "template error at line 1, column 7: 'foo' is undefined"},
      {"line 1\n{{ 1 + foo }}", "{}", "template error at line 2, column 6: 'foo' is undefined"},
      {"{{ m.missing.x }}", R"({"m": {"a": 1}})", "template error at line 1, column 13: 'dict object' has no attribute 'missing'"},
      {"{{ l[3].x }}", R"({"l": [1]})", "template error at line 1, column 8: list object has no element 3"},
      {"{{ foo() }}", "{}", "template error at line 1, column 7: 'foo' is undefined"},
      {"{{ 'x'() }}", "{}", "template error at line 1, column 7: 'str' object is not callable"},
      {"{% for x in 5 %}{% endfor %}", "{}", "template error at line 1, column 4: 'int' object is not iterable"},
      {"{% set x = 1 %}{% set x.y = 2 %}", "{}", "template error at line 1, column 19: cannot assign attribute on non-namespace object"},
      {"{% set a, b = [1] %}", "{}", "template error at line 1, column 4: not enough values to unpack (expected 2, got 1)"},
      {"{{ 1 in 'abc' }}", "{}", "template error at line 1, column 4: 'in <string>' requires string as left operand, not int"},
  };
  for (const Case& c : cases) {
    INFO(c.src);
    const auto f = failure(c.src, c.vars);
    REQUIRE(is_runtime(f));
    CHECK(f->message == c.message);
  }
}

TEST_CASE("chat errors: deep nesting is refused, without exhausting the stack", "[chat][errors]") {
  const int n = 100000;
  struct Case {
    std::string src;
    const char* reason;
  };
  const Case cases[] = {
      {"{{ " + repeat("(", n) + "1" + repeat(")", n) + " }}", "expressions nested deeper than 64 levels"},
      {"{{ " + repeat("[", n) + repeat("]", n) + " }}", "expressions nested deeper than 64 levels"},
      {"{{ " + repeat("not ", n) + "1 }}", "expressions nested deeper than 64 levels"},
      {"{{ " + repeat("- ", n) + "1 }}", "expressions nested deeper than 64 levels"},
      {"{{ " + repeat("1 if 1 else ", n) + "1 }}", "expressions nested deeper than 64 levels"},
      {repeat("{% if true %}", n) + repeat("{% endif %}", n), "blocks nested deeper than 64 levels"},
      {repeat("{% for x in [1] %}", n) + repeat("{% endfor %}", n), "blocks nested deeper than 64 levels"},
      {"{{ 1" + repeat("|string", n) + " }}", "expression nested deeper than 256 levels"},
      {"{{ 1" + repeat(" + 1", n) + " }}", "expression nested deeper than 256 levels"},
      {"{{ x" + repeat(".a", n) + " }}", "expression nested deeper than 256 levels"},
      {"{{ f" + repeat("()", n) + " }}", "expression nested deeper than 256 levels"},
  };
  for (const Case& c : cases) {
    INFO(c.src.substr(0, 40));
    const auto f = failure(c.src);
    REQUIRE(is_syntax(f));
    CHECK(f->message.find(c.reason) != std::string::npos);
  }
  // Deep JSON input is refused too.
  CHECK_THROWS_AS(render("{{ x }}", "{\"x\": " + repeat("[", n) + repeat("]", n) + "}"), fish::Error);
}

TEST_CASE("chat errors: runaway templates stop with an error", "[chat][errors]") {
  auto f = failure("{% macro m(n) %}{{ m(n + 1) }}{% endmacro %}{{ m(0) }}");
  REQUIRE(is_runtime(f));
  CHECK(f->message.find("macro calls nested deeper than 64 levels") != std::string::npos);
  f = failure("{% macro m(n) %}" + repeat("{% if true %}", 60) + "{{ m(n + 1) }}" + repeat("{% endif %}", 60) +
              "{% endmacro %}{{ m(0) }}");
  REQUIRE(is_runtime(f));
  CHECK(f->message.find("template nesting too deep at run time (over 1000 levels)") != std::string::npos);
  f = failure("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}");
  REQUIRE(is_runtime(f));
  CHECK(f->message.find("more than 1000000 loop iterations in one rendering") != std::string::npos);
  f = failure("{% set ns = namespace(s='ab') %}{% for i in range(40) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}");
  REQUIRE(is_runtime(f));
  CHECK(f->message.find("string longer than 256 MiB") != std::string::npos);
  f = failure("{{ 'a' * 1000000000 }}");
  REQUIRE(is_runtime(f));
  CHECK(f->message.find("string longer than 256 MiB") != std::string::npos);
  f = failure("{% set ns = namespace(x=[]) %}{% for i in range(1000) %}{% set ns.x = [ns.x] %}{% endfor %}");
  REQUIRE(is_runtime(f));
  CHECK(f->message.find("value nested deeper than 256 levels") != std::string::npos);
  // A namespace inside a namespace would be a reference cycle.
  f = failure("{% set ns = namespace() %}{% set ns.me = ns %}");
  REQUIRE(is_runtime(f));
  CHECK(f->message.find("a namespace cannot hold a namespace") != std::string::npos);
}

TEST_CASE("chat errors: mangled real templates render or fail cleanly", "[chat][errors]") {
  const std::string dir = shared_path("models/templates/");
  std::ifstream probe(dir + "cases.json");
  if (!probe) FISH_SKIP("no " + dir + "cases.json (the shared model data is not here)");
  const char* names[] = {"meta-llama-Llama-3.1-8B-Instruct.jinja", "Qwen-Qwen3-0.6B.jinja",
                         "mistralai-Mistral-Nemo-Instruct-2407.jinja", "ibm-granite-granite-3.3-2B-Instruct.jinja"};
  std::mt19937 rng(25);
  const std::string input = R"({"messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}],
                                "add_generation_prompt": true, "tools": [{"type": "function", "function": {"name": "f"}}]})";
  int rendered = 0, failed = 0;
  for (const char* name : names) {
    std::ifstream in(dir + name, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    const std::string src = ss.str();
    REQUIRE(!src.empty());
    for (int k = 0; k < 150; ++k) {
      std::string m = src;
      // Delete, duplicate or replace a few random bytes (braces, quotes and % are favoured).
      for (int e = 0; e < 3; ++e) {
        const size_t at = rng() % m.size();
        const char pick = "{}%#\"'()[]-+|.x \n"[rng() % 17];
        switch (rng() % 3) {
          case 0: m.erase(at, 1 + rng() % 3); break;
          case 1: m.insert(at, 1, pick); break;
          default: m[at] = pick;
        }
        if (m.empty()) m.push_back('x');
      }
      try {
        const fish::chat::ChatTemplate t(m);
        t.render(fish::chat::parse_chat_input(input));
        ++rendered;
      } catch (const j::Error&) {
        ++failed;  // a template error with its reason: what must happen
      }
    }
  }
  CHECK(rendered + failed == 600);
  CHECK(failed > 0);
}
