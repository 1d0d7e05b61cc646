// The Jinja parser: operator precedence as jinja2 has it (checked through
// renderings against jinja2's output), the shape of the tree, and syntax
// errors with line, column and reason.
#include <catch2/catch.hpp>
#include <string>

#include "chat/jinja_ast.h"
#include "chat/jinja_parser.h"
#include "chat_test_util.h"

using fish::chat::jinja::Expr;
using fish::chat::jinja::Stmt;
using fish::chat::jinja::parse;
using namespace fish::test;

TEST_CASE("chat parser: the tree of a statement and an expression", "[chat][parser]") {
  const auto tpl = parse("a{% for m in messages if m.role != 'system' %}{{ '<' + m.content | trim }}{% endfor %}");
  REQUIRE(tpl.body.size() == 2);
  CHECK(tpl.body[0]->kind == Stmt::Kind::Text);
  const Stmt& loop = *tpl.body[1];
  REQUIRE(loop.kind == Stmt::Kind::For);
  CHECK(loop.targets == std::vector<std::string>{"m"});
  CHECK(loop.expr->kind == Expr::Kind::Name);
  REQUIRE(loop.cond);
  CHECK(loop.cond->kind == Expr::Kind::Compare);
  CHECK(loop.cond->ops == std::vector<std::string>{"!="});
  REQUIRE(loop.body.size() == 1);
  const Expr& out = *loop.body[0]->expr;
  // '<' + (m.content | trim): the filter binds tighter than +.
  REQUIRE(out.kind == Expr::Kind::Binary);
  CHECK(out.name == "+");
  REQUIRE(out.args[1]->kind == Expr::Kind::Filter);
  CHECK(out.args[1]->name == "trim");
  CHECK(out.args[1]->args[0]->kind == Expr::Kind::GetAttr);
  CHECK(out.args[1]->args[0]->name == "content");
  CHECK(out.line == 1);
  CHECK(out.col == 54);
}

TEST_CASE("chat parser: precedence and associativity as jinja2", "[chat][parser]") {
  CHECK(render("{{ \"\\n\" + s | trim + \"!\" }}", R"({"s": "  hi  "})") == "\nhi!");
  CHECK(render("{{ 1 + 2 * 3 - 4 / 2 }}") == "5.0");
  CHECK(render("{{ 2 ** 3 ** 2 }}") == "64");  // left-associative in jinja2
  CHECK(render("{{ -2 ** 2 }}") == "4");       // unary minus binds tighter
  CHECK(render("{{ not 1 == 2 }}") == "True");
  CHECK(render("{{ not x is defined }}") == "True");
  CHECK(render("{{ x is not none and x > 1 or \"small\" }}", R"({"x": 0})") == "small");
  CHECK(render("{{ 1 < 2 < 3 }} {{ 3 > 2 > 1 > 5 }}") == "True False");
  CHECK(render("{{ \"yes\" if 1 in [1, 2] else \"no\" }} {{ \"a\" if false else \"b\" if true else \"c\" }}") ==
        "yes b");
  CHECK(render("{{ x | length > 1 }}", R"({"x": [1, 2]})") == "True");
  CHECK(render("{{ -x | abs }}", R"({"x": 3})") == "3");
  CHECK(is_runtime(failure("{{ \"a\" ~ 1 + 2 }}")));  // ("a" ~ 1) + 2
}

TEST_CASE("chat parser: literals, subscripts, calls and tests", "[chat][parser]") {
  CHECK(render("{{ (1, 2) }} {{ (1,) }} {{ () }} {{ [1, 2,] }} {{ {\"a\": 1,} }}") == "(1, 2) (1,) () [1, 2] {'a': 1}");
  CHECK(render("{{ 1, \"a\" }}") == "(1, 'a')");
  CHECK(render("{{ x.y[0].z }} {{ x[\"y\"][0][\"z\"] }} {{ x.y.0.z }}", R"({"x": {"y": [{"z": "deep"}]}})") ==
        "deep deep deep");
  CHECK(render("{{ x[1:] }} {{ x[:2] }} {{ x[::2] }} {{ x[::-1] }} {{ x[-2:] }}", R"({"x": [1, 2, 3, 4]})") ==
        "[2, 3, 4] [1, 2] [1, 3] [4, 3, 2, 1] [3, 4]");
  CHECK(render("{{ \"abc\".upper() ~ \"x\"|upper }}") == "ABCX");
  CHECK(render("{{ [1, 2, 3] | map(\"string\") | join(\"-\") }}") == "1-2-3");
  CHECK(render("{{ x is divisibleby 3 }} {{ x is divisibleby(4) }} {{ x is sameas false }}", R"({"x": 9})") ==
        "True False False");
}

TEST_CASE("chat parser: statements", "[chat][parser]") {
  CHECK(render("{% for k, v in x.items() if k != \"b\" %}{{ k }}={{ v }};{% endfor %}",
               R"({"x": {"a": 1, "b": 2, "c": 3}})") == "a=1;c=3;");
  CHECK(render("{% set a, b = 1, 2 %}{{ b }}{{ a }}") == "21");
  CHECK(render("{% set ns = namespace(n=0) %}{% set ns.n = ns.n + 5 %}{{ ns.n }}") == "5");
  CHECK(render("{% macro m(a, b=2) %}{{ a }}/{{ b }}{% endmacro %}{{ m(1) }} {{ m(1, b=3) }}") == "1/2 1/3");
  CHECK(render("{% macro m() %}x{% endmacro m %}{{ m() }}") == "x");
  CHECK(render("{% if a %}A{% elif b %}B{% elif c %}C{% else %}D{% endif %}", R"({"c": 1})") == "C");
  CHECK(render("{% generation %}kept{% endgeneration %}") == "kept");
}

TEST_CASE("chat parser: malformed templates give the line, column and reason", "[chat][parser]") {
  struct Case {
    const char* src;
    const char* message;
  };
  const Case cases[] = {
      {"{% if x %}", "template syntax error at line 1, column 11: unexpected end of template: the 'if' block from "
                     "line 1 is never closed (expected 'endif')"},
      {"{% for x in y %}\n{% if x %}\n{% endfor %}",
       "template syntax error at line 3, column 4: unexpected 'endfor' (the innermost open block is 'if' from line 2)"},
      {"{% endfor %}", "template syntax error at line 1, column 4: unexpected 'endfor' (no block is open)"},
      {"{% foo %}", "template syntax error at line 1, column 4: unknown tag 'foo'"},
      {"{% include 'x' %}",
       "template syntax error at line 1, column 4: the 'include' tag is not supported by fish's template engine"},
      {"{{ x | }}", "template syntax error at line 1, column 8: expected a filter name, got end of print statement ('}}')"},
      {"{{ 1 + }}", "template syntax error at line 1, column 8: expected an expression, got end of print statement ('}}')"},
      {"{{ }}", "template syntax error at line 1, column 4: expected an expression, got end of print statement ('}}')"},
      {"{% if %}{% endif %}",
       "template syntax error at line 1, column 7: expected an expression, got end of statement block ('%}')"},
      {"{{ x.1a }}", "template syntax error at line 1, column 7: expected end of print statement ('}}'), got 'a'"},
      {"{% set %}", "template syntax error at line 1, column 8: expected a variable name, got end of statement block ('%}')"},
      {"{% for in x %}{% endfor %}", "template syntax error at line 1, column 11: expected 'in', got 'x'"},
      {"{% break %}", "template syntax error at line 1, column 4: 'break' outside of a for loop"},
      {"{% for x in y %}{% macro m() %}{% continue %}{% endmacro %}{% endfor %}",
       "template syntax error at line 1, column 35: 'continue' outside of a for loop"},
      {"{% macro m(a=1, b) %}{% endmacro %}",
       "template syntax error at line 1, column 17: non-default argument 'b' follows default argument"},
      {"{{ f(a=1, 2) }}", "template syntax error at line 1, column 11: positional argument follows keyword argument"},
      {"{% for x in y recursive %}{% endfor %}",
       "template syntax error at line 1, column 15: recursive loops are not supported by fish's template engine"},
      {"{{ x is }}", "template syntax error at line 1, column 9: expected a test name, got end of print statement ('}}')"},
      {"{% if x %}{% else %}{% else %}{% endif %}",
       "template syntax error at line 1, column 24: unexpected 'else' (the innermost open block is 'if' from line 1)"},
      {"{{ x[] }}", "template syntax error at line 1, column 5: empty subscript"},
      {"{{ f(*a) }}", "template syntax error at line 1, column 6: *args and **kwargs in calls are not supported"},
  };
  for (const Case& c : cases) {
    INFO(c.src);
    const auto f = failure(c.src);
    REQUIRE(is_syntax(f));
    CHECK(f->message == c.message);
  }
}

TEST_CASE("chat parser: a syntax error is found before anything renders", "[chat][parser]") {
  // The error is in the else branch that would never run: still an error.
  const auto f = failure("{% if true %}ok{% else %}{{ 1 + }}{% endif %}");
  REQUIRE(is_syntax(f));
  CHECK(f->line == 1);
  CHECK(f->col == 33);
}
