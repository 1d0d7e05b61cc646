// Rendering: loops and loop.*, loop controls, jinja2's scoping, namespaces,
// macros, block set, filter blocks, the globals (strftime_now with an injected
// time, raise_exception). Expected texts are jinja2's.
#include <catch2/catch.hpp>
#include <string>

#include "chat/jinja_parser.h"
#include "chat/jinja_render.h"
#include "chat_test_util.h"

namespace j = fish::chat::jinja;
using namespace fish::test;

TEST_CASE("chat render: for loops and loop.*", "[chat][render]") {
  CHECK(render("{% for m in msgs %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.revindex0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }} {% endfor %}", R"({"msgs": ["a", "b", "c"]})") ==
        "1032TrueFalse3 2121FalseFalse3 3210FalseTrue3 ");
  CHECK(render("{% for m in msgs %}{{ loop.previtem }}<{{ m }}>{{ loop.nextitem }} {{ loop.cycle(\"odd\", \"even\") }};{% endfor %}", R"({"msgs": ["a", "b", "c"]})") ==
        "<a>b odd;a<b>c even;b<c> odd;");
  CHECK(render("{% for m in msgs if m != \"b\" %}{{ loop.index }}/{{ loop.length }}:{{ m }}{{ \".\" if loop.last }} {% endfor %}", R"({"msgs": ["a", "b", "c"]})") ==
        "1/2:a 2/2:c. ");
  CHECK(render("{% for i in [1, 2] %}{% for j in [3, 4] %}{{ loop.index }}{{ i }}{{ j }} {% endfor %}{{ loop.index }};{% endfor %}") ==
        "113 214 1;123 224 2;");
  CHECK(render("{% for i in [] %}x{% else %}empty{% endfor %}|{% for i in nothing %}x{% else %}undefined is empty{% endfor %}|{% for c in \"héé\" %}[{{ c }}]{% endfor %}|{% for k in {\"a\": 1, \"b\": 2} %}{{ k }}{% endfor %}") ==
        "empty|undefined is empty|[h][é][é]|ab");
}

TEST_CASE("chat render: break and continue (loopcontrols)", "[chat][render]") {
  CHECK(render("{% for i in range(10) %}{% if i == 2 %}{% continue %}{% endif %}{% if i == 6 %}{% break %}{% endif %}{{ i }}{% endfor %}|{% for i in [1, 2] %}{% for j in [1, 2, 3] %}{% if j == 2 %}{% break %}{% endif %}{{ i }}{{ j }} {% endfor %}{% endfor %}") ==
        "01345|11 21 ");
}

TEST_CASE("chat render: scoping: a loop body's set stays in its iteration, if has no scope", "[chat][render]") {
  CHECK(render("{% set x = 1 %}{% for i in [1, 2] %}{% set x = x + i %}{{ x }}{% endfor %}|{{ x }}") ==
        "23|1");
  CHECK(render("{% for i in [1, 2, 3] %}{{ y|default(\"u\") }}{% set y = i %}{% endfor %}|{{ y|default(\"gone\") }}") ==
        "uuu|gone");
  CHECK(render("{% if true %}{% set inside_if = \"leaks out of if\" %}{% endif %}{{ inside_if }}") ==
        "leaks out of if");
}

TEST_CASE("chat render: namespace() carries values out of loops", "[chat][render]") {
  CHECK(render("{% set ns = namespace(total=0, found=false, items=[]) %}{% for i in [3, 4, 5] %}{% set ns.total = ns.total + i %}{% if i == 4 %}{% set ns.found = true %}{% endif %}{% set ns.items = ns.items + [i * 2] %}{% endfor %}{{ ns.total }} {{ ns.found }} {{ ns.items }}") ==
        "12 True [6, 8, 10]");
  CHECK(render("{% set ns = namespace() %}{% set ns.index = 0 %}{% for r in [\"u\", \"a\", \"u\"] %}{% if (r == \"u\") != (ns.index % 2 == 0) %}bad{% endif %}{% set ns.index = ns.index + 1 %}{% endfor %}{{ ns.index }}") ==
        "3");
}

TEST_CASE("chat render: macros: defaults, keywords, varargs, kwargs, call-time scope, recursion", "[chat][render]") {
  CHECK(render("{% macro greet(name, greeting=\"Hello\") %}{{ greeting }}, {{ name }}!{% endmacro %}{{ greet(\"A\") }} {{ greet(\"B\", \"Hi\") }} {{ greet(greeting=\"Yo\", name=\"C\") }} {{ greet() }}|") ==
        "Hello, A! Hi, B! Yo, C! Hello, !|");
  CHECK(render("{% macro m(a) %}[{{ a }}|{{ varargs }}|{{ kwargs }}]{% endmacro %}{{ m(1, 2, 3, k=4) }}") ==
        "[1|(2, 3)|{'k': 4}]");
  CHECK(render("{% macro show() %}{{ late }}{% endmacro %}{% set late = 1 %}{{ show() }}{% set late = 2 %}{{ show() }}") ==
        "12");
  CHECK(render("{% macro fact(n) %}{% if n <= 1 %}1{% else %}{{ n * fact(n - 1)|int }}{% endif %}{% endmacro %}{{ fact(6) }}") ==
        "720");
  CHECK(render("{% macro wrap(x) %}<{{ x }}>{% endmacro %}{{ [\"a\", \"b\"]|map(\"upper\")|list|join(wrap(\"|\")) }} {{ wrap(wrap(1)) }}") ==
        "A<|>B <<1>>");
}

TEST_CASE("chat render: block set, filter blocks, with", "[chat][render]") {
  CHECK(render("{% set block %}inner {{ 1 + 1 }}{% endset %}[{{ block }}]{% set shout | upper | trim %}  quiet  {% endset %}[{{ shout }}]") ==
        "[inner 2][QUIET]");
  CHECK(render("{% filter upper %}abc {{ \"def\" }}{% endfilter %}|{% filter replace(\"a\", \"o\") | title %}banana split{% endfilter %}") ==
        "ABC DEF|Bonono Split");
  CHECK(render("{% with a = 1, b = 2 %}{{ a + b }}{% endwith %}[{{ a }}]") ==
        "3[]");
  CHECK(render("{% set a = 5 %}{% with a = 1, b = a %}{{ a }}{{ b }}{% endwith %}{{ a }}") == "155");
}

TEST_CASE("chat render: globals: strftime_now with the injected time, range, dict, namespace", "[chat][render]") {
  CHECK(render("{{ strftime_now(\"%Y-%m-%d %H:%M:%S\") }}|{{ strftime_now(\"%d %b %Y\") }}|{{ strftime_now(\"%B %d, %Y\") }}|{{ strftime_now(\"%A %a %j %y %p %I %%\") }}") ==
        "2026-12-01 12:00:00|01 Dec 2026|December 01, 2026|Tuesday Tue 335 26 PM 12 %");
  CHECK(render("{{ range(4)|list }} {{ range(2, 10, 3)|list }} {{ range(5, 0, -2)|list }} {{ dict(a=1, b=[2]) }} {{ namespace(a=1).a }} {{ namespace({\"k\": \"v\"}).k }}") ==
        "[0, 1, 2, 3] [2, 5, 8] [5, 3, 1] {'a': 1, 'b': [2]} 1 v");
}

TEST_CASE("chat render: lists are values, and missing keys and items are undefined, not errors", "[chat][render]") {
  CHECK(render("{% set a = [1, 2] %}{% set b = a + [3] %}{{ a }} {{ b }}") ==
        "[1, 2] [1, 2, 3]");
  CHECK(render("{{ x.y }}|{{ x.y is defined }}|{{ x[\"y\"] is defined }}|{{ x.items is defined }}", R"({"x": {"z": 1}})") ==
        "|False|False|True");
  CHECK(render("{{ msgs[5] is defined }}|{{ msgs[5] }}|{{ msgs[-1] }}|{{ \"abc\"[5] is defined }}", R"({"msgs": ["a", "b"]})") ==
        "False||b|False");
  CHECK(render("{{ msgs|selectattr(\"role\", \"equalto\", \"user\")|list|last == msgs[2] }} {{ msgs[0] == {\"content\": \"x\", \"role\": \"user\"} }}", R"({"msgs": [{"role": "user", "content": "x"}, {"role": "assistant", "content": "y"}, {"role": "user", "content": "z"}]})") ==
        "True True");
}

TEST_CASE("chat render: raise_exception is a Raised error carrying the template's message", "[chat][render]") {
  const auto f = failure("a{% if x > 1 %}{{ raise_exception('x is ' ~ x ~ ', too big') }}{% endif %}", R"({"x": 5})");
  REQUIRE(f);
  CHECK(f->kind == j::Error::Kind::Raised);
  CHECK(f->message == "x is 5, too big");  // nothing added: it is meant for the user
  CHECK(render("a{% if x > 1 %}{{ raise_exception('no') }}{% endif %}", R"({"x": 1})") == "a");
}

TEST_CASE("chat render: strftime_now without an injected time formats the local clock", "[chat][render]") {
  j::RenderContext ctx;  // no ctx.now
  const std::string year = j::render(j::parse("{{ strftime_now('%Y') }}"), ctx);
  REQUIRE(year.size() == 4);
  CHECK(year >= "2024");
}

TEST_CASE("chat render: the injected time: ISO parsing and Python's strftime", "[chat][render]") {
  auto t = j::parse_iso_datetime("2024-02-29T23:59:58.25");
  REQUIRE(t);
  CHECK(j::py_strftime("%Y-%m-%d %H:%M:%S.%f %A %j|%z%Z|%-d %e", *t) == "2024-02-29 23:59:58.250000 Thursday 060||29 29");
  CHECK(j::parse_iso_datetime("2026-12-01"));
  CHECK(j::parse_iso_datetime("2026-12-01 08:30"));
  CHECK(j::parse_iso_datetime("2026-12-01T08:30:00Z"));
  CHECK(j::parse_iso_datetime("2026-12-01T08:30:00+02:00"));
  CHECK_FALSE(j::parse_iso_datetime("2026-02-30"));
  CHECK_FALSE(j::parse_iso_datetime("2026-12-01T25:00"));
  CHECK_FALSE(j::parse_iso_datetime("yesterday"));
}
