// Values with Python's semantics: str() and repr() as Python prints them,
// float repr, truthiness, equality and ordering, arithmetic; JSON in (key
// order, int vs float) and out (json.dumps as HF's tojson calls it); Python's
// str operations on UTF-8. Expected texts are jinja2's / Python's.
#include <catch2/catch.hpp>
#include <string>

#include "chat/jinja_json.h"
#include "chat/jinja_pystr.h"
#include "chat/jinja_value.h"
#include "chat_test_util.h"
#include "common/error.h"

namespace j = fish::chat::jinja;
using namespace fish::test;

TEST_CASE("chat values: str() and repr() as Python prints them", "[chat][values]") {
  CHECK(render("{{ [1, 2.5, \"a\", none, true, false] }} {{ {\"k\": [1, {\"n\": none}], \"b\": 1.0} }} {{ (1, \"x\") }}") ==
        "[1, 2.5, 'a', None, True, False] {'k': [1, {'n': None}], 'b': 1.0} (1, 'x')");
  CHECK(render("{{ [\"tab\\t\", \"nl\\n\", \"it's\", 'say \"x\"', \"both ' \\\"\", \"back\\\\slash\", \"\\x01\\x7f\", "
               "\"é\\u00a0\\u200b\\u2028\", \"🐟\"] }}") ==
        "['tab\\t', 'nl\\n', \"it's\", 'say \"x\"', 'both \\' \"', 'back\\\\slash', '\\x01\\x7f', "
        "'é\\xa0\\u200b\\u2028', '🐟']");
  CHECK(render("{{ x }} {{ y }} {{ z }} {{ w }}", R"({"x": 1, "y": 1.0, "z": -0.0, "w": 12345678901234567})") ==
        "1 1.0 -0.0 12345678901234567");
  CHECK(render("{{ none }}|{{ undefined_name }}|{{ true }}") == "None||True");
}

TEST_CASE("chat values: float repr is Python's shortest round-trip text", "[chat][values]") {
  CHECK(render("{{ [1.0, 0.1, 1e20, 1e-5, -0.0, 3.14159, 100.0, 1e16, 1e15, 123456789.123, 0.0001, 1.5e-7, 2.5e-300] }}") ==
        "[1.0, 0.1, 1e+20, 1e-05, -0.0, 3.14159, 100.0, 1e+16, 1000000000000000.0, 123456789.123, 0.0001, 1.5e-07, "
        "2.5e-300]");
  CHECK(render("{{ 0.1 + 0.2 }} {{ 1 / 3 }} {{ 2 / 2 }} {{ 10 ** 18 / 7 }}") ==
        "0.30000000000000004 0.3333333333333333 1.0 1.4285714285714286e+17");
  CHECK(j::float_repr(1.0 / 0.0) == "inf");
  CHECK(j::float_repr(-1.0 / 0.0) == "-inf");
  CHECK(j::float_repr(5e-324) == "5e-324");
  CHECK(j::float_repr(1.7976931348623157e308) == "1.7976931348623157e+308");
}

TEST_CASE("chat values: truthiness, equality and ordering as Python", "[chat][values]") {
  CHECK(render("{% for v in [0, 1, 0.0, \"\", \"a\", [], [0], {}, none] %}{{ \"T\" if v else \"F\" }}{% endfor %}"
               "{{ \"T\" if x else \"F\" }}") == "FTFFTFTFFF");
  CHECK(render("{{ 1 == 1.0 }} {{ true == 1 }} {{ true + 1 }} {{ [1] == (1,) }} {{ {\"a\": 1, \"b\": 2} == "
               "{\"b\": 2, \"a\": 1.0} }} {{ none == none }} {{ x == y }}") == "True True 2 False True True True");
  CHECK(render("{{ \"b\" > \"a\" }} {{ \"é\" > \"z\" }} {{ [1, 2] < [1, 3] }} {{ [1, 2] < [1, 2, 0] }} "
               "{{ (2,) > (1, 9) }} {{ 1.5 < 2 }}") == "True True True True True True");
  const auto f = failure("{{ \"a\" < 1 }}");
  REQUIRE(is_runtime(f));
  CHECK(f->message == "template error at line 1, column 4: '<' not supported between instances of 'str' and 'int'");
}

TEST_CASE("chat values: arithmetic as Python (floor division, modulo sign, int/float)", "[chat][values]") {
  CHECK(render("{{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % -3 }} {{ -7 % 3 }} {{ 7.5 // 2 }} {{ -7.5 % 2 }} {{ 2 ** -1 }} "
               "{{ 2 ** 62 }} {{ 5 / 2 }}") == "3 -4 -2 2 3.0 0.5 0.5 4611686018427387904 2.5");
  CHECK(render("{{ \"ab\" * 3 }} {{ [0] * 3 }} {{ 3 * \"x\" }} {{ \"a\" ~ 1 ~ none ~ true ~ x }} {{ [1] + [2] }} "
               "{{ (1,) + (2,) }}") == "ababab [0, 0, 0] xxx a1NoneTrue [1, 2] (1, 2)");
  auto f = failure("{{ \"a\" + 1 }}");
  REQUIRE(is_runtime(f));
  CHECK(f->message == "template error at line 1, column 8: can only concatenate str (not \"int\") to str");
  f = failure("{{ 1 // 0 }}");
  REQUIRE(is_runtime(f));
  CHECK(f->message == "template error at line 1, column 6: integer division or modulo by zero");
  f = failure("{{ 9223372036854775807 + 1 }}");
  REQUIRE(is_runtime(f));
  CHECK(f->message == "template error at line 1, column 24: integer overflow (beyond 64 bits)");
}

TEST_CASE("chat values: tojson is json.dumps(ensure_ascii=False) with indent, separators, sort_keys", "[chat][values][json]") {
  CHECK(render("{{ x|tojson }}", R"({"x": {"b": [1, 2.5, null, true], "a": "é\"\\\n\t\u0001\u007f</tag>&'", "c": {}, "d": []}})") ==
        "{\"b\": [1, 2.5, null, true], \"a\": \"é\\\"\\\\\\n\\t\\u0001\x7f"
        "</tag>&'\", \"c\": {}, \"d\": []}");
  CHECK(render("{{ x|tojson(indent=2) }}", R"({"x": {"b": [1, 2.5, null, true], "a": "s", "c": {}, "d": [], "e": {"f": [[]]}}})") ==
        "{\n  \"b\": [\n    1,\n    2.5,\n    null,\n    true\n  ],\n  \"a\": \"s\",\n  \"c\": {},\n  \"d\": [],\n"
        "  \"e\": {\n    \"f\": [\n      []\n    ]\n  }\n}");
  CHECK(render("{{ x|tojson(indent=4, sort_keys=true) }}", R"({"x": {"b": 1, "a": {"d": 1, "c": 2}}})") ==
        "{\n    \"a\": {\n        \"c\": 2,\n        \"d\": 1\n    },\n    \"b\": 1\n}");
  CHECK(render("{{ x|tojson(separators=(\",\", \":\")) }} {{ x|tojson(indent=\"\\t\") }} {{ x|tojson(indent=0) }}",
               R"({"x": {"a": [1, 2]}})") == "{\"a\":[1,2]} {\n\t\"a\": [\n\t\t1,\n\t\t2\n\t]\n} {\n\"a\": [\n1,\n2\n]\n}");
  CHECK(render("{{ x|tojson(ensure_ascii=true) }}", R"({"x": "Grüße 世界 🐟"})") ==
        "\"Gr\\u00fc\\u00dfe \\u4e16\\u754c \\ud83d\\udc1f\"");
  CHECK(render("{{ \"s\"|tojson }} {{ 1|tojson }} {{ 1.0|tojson }} {{ 1e20|tojson }} {{ none|tojson }} "
               "{{ true|tojson }} {{ (1, \"t\")|tojson }} {{ {1: \"int key\", none: \"n\", true: \"b\"}|tojson }}") ==
        "\"s\" 1 1.0 1e+20 null true [1, \"t\"] {\"1\": \"b\", \"null\": \"n\"}");
  CHECK(render("{{ x|tojson }}", R"({"x": [1e400, -1e400]})") == "[Infinity, -Infinity]");
  const auto f = failure("{{ undefined_name|tojson }}");
  REQUIRE(is_runtime(f));
  CHECK(f->message == "template error at line 1, column 19: Object of type Undefined is not JSON serializable");
}

TEST_CASE("chat values: JSON input keeps key order, int vs float, last duplicate", "[chat][values][json]") {
  CHECK(render("{{ x }} {{ x|tojson }}", R"({"x": {"z": 1, "a": 2, "z2": 3}})") ==
        "{'z': 1, 'a': 2, 'z2': 3} {\"z\": 1, \"a\": 2, \"z2\": 3}");
  CHECK(render("{{ x }}", R"({"x": {"dup": 1, "other": 2, "dup": 3}})") == "{'dup': 3, 'other': 2}");
  const j::Value v = j::parse_json(R"( {"s": "\ud83d\udc1f\u00e9\/", "n": -12, "f": 1.5e3, "l": [true, null]} )");
  REQUIRE(v.is_dict());
  CHECK(v.dict().find("s")->get_string() == "\xf0\x9f\x90\x9f\xc3\xa9/");
  CHECK(v.dict().find("n")->get_int() == -12);
  CHECK(v.dict().find("f")->get_float() == 1500.0);
  CHECK(v.dict().find("l")->items()[1].is_none());
}

TEST_CASE("chat values: malformed JSON input names line, column and reason", "[chat][values][json]") {
  auto msg = [](const std::string& text) {
    try {
      j::parse_json(text);
    } catch (const fish::Error& e) {
      return std::string(e.what());
    }
    return std::string("parsed");
  };
  CHECK(msg("{\"a\": 1,\n \"b\" 2}") == "invalid JSON at line 2, column 6: expected ':'");
  CHECK(msg("[1, 2") == "invalid JSON at line 1, column 6: expected ',' or ']'");
  CHECK(msg("{\"a\": tru}") == "invalid JSON at line 1, column 7: unexpected character 't'");
  CHECK(msg("\"\x01\"") == "invalid JSON at line 1, column 3: control character in a string");
  CHECK(msg("1 2") == "invalid JSON at line 1, column 3: unexpected text after the value");
  CHECK(msg("99999999999999999999") == "invalid JSON at line 1, column 21: integer out of the 64-bit range");
  CHECK(msg(std::string(100000, '[')) == "invalid JSON at line 1, column 201: nested deeper than 200 levels");
}

TEST_CASE("chat values: Python str operations on UTF-8", "[chat][values][pystr]") {
  namespace p = j::pystr;
  CHECK(p::length("Gr\xc3\xbc\xc3\x9f" "e \xe4\xb8\x96\xf0\x9f\x90\x9f") == 8);
  CHECK(p::strip("\xe3\x80\x80 x\t\n", std::nullopt, true, true) == "x");  // U+3000 is whitespace
  CHECK(p::strip("xxaxx", std::string("x"), true, false) == "axx");
  CHECK(p::split(" a  b ", std::nullopt, -1) == std::vector<std::string>{"a", "b"});
  CHECK(p::split("a b c ", std::nullopt, 1) == std::vector<std::string>{"a", "b c "});
  CHECK(p::rsplit(" a b c", std::nullopt, 1) == std::vector<std::string>{" a b", "c"});
  CHECK(p::split("a,,b", std::string(","), -1) == std::vector<std::string>{"a", "", "b"});
  CHECK(p::rsplit("a,b,c", std::string(","), 1) == std::vector<std::string>{"a,b", "c"});
  CHECK(p::splitlines("a\nb\r\nc\rd", false) == std::vector<std::string>{"a", "b", "c", "d"});
  CHECK(p::title("hello wORLD 1st") == "Hello World 1St");
  CHECK(p::jinja_title("hello wORLD-foo 1st") == "Hello World-Foo 1st");
  CHECK(p::capitalize("hELLO") == "Hello");
  CHECK(p::upper("stra\xc3\x9f" "e \xc3\xa9") == "STRASSE \xc3\x89");
  CHECK(p::lower("\xc3\x80\xc3\x89 \xd0\x96") == "\xc3\xa0\xc3\xa9 \xd0\xb6");
  CHECK(p::replace("aaa", "a", "b", 2) == "bba");
  CHECK(p::replace("ab", "", "-", -1) == "-a-b-");
  CHECK(p::find("\xc3\xa9x", "x") == 1);  // an index in code points
  CHECK(p::repr("it's") == "\"it's\"");
  CHECK(p::repr("\x01\xc2\xa0") == "'\\x01\\xa0'");
}
