// The Jinja lexer: tokens with their positions, literals, and the whitespace
// rules of jinja2 with trim_blocks and lstrip_blocks (checked through whole
// renderings, against jinja2's output).
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "chat/jinja_lexer.h"
#include "chat_test_util.h"

using fish::chat::jinja::Token;
using fish::chat::jinja::TokenType;
using fish::chat::jinja::tokenize;
using namespace fish::test;

namespace {

struct Tok {
  TokenType type;
  std::string text;
  int line, col;
};

std::vector<Tok> toks(const std::string& src) {
  std::vector<Tok> out;
  for (const Token& t : tokenize(src)) out.push_back({t.type, t.text, t.line, t.col});
  return out;
}

bool same(const std::vector<Tok>& got, const std::vector<Tok>& want) {
  if (got.size() != want.size()) return false;
  for (size_t i = 0; i < got.size(); ++i)
    if (got[i].type != want[i].type || got[i].text != want[i].text || got[i].line != want[i].line ||
        got[i].col != want[i].col)
      return false;
  return true;
}

}  // namespace

TEST_CASE("chat lexer: tokens, texts and 1-based line:column", "[chat][lexer]") {
  using T = TokenType;
  const auto got = toks("Hi {{ name|upper }}!\n{% if x %}yes{% endif %}");
  CHECK(same(got, {{T::Text, "Hi ", 1, 1},
                   {T::VarBegin, "{{", 1, 4},
                   {T::Name, "name", 1, 7},
                   {T::Op, "|", 1, 11},
                   {T::Name, "upper", 1, 12},
                   {T::VarEnd, "}}", 1, 18},
                   {T::Text, "!\n", 1, 20},
                   {T::BlockBegin, "{%", 2, 1},
                   {T::Name, "if", 2, 4},
                   {T::Name, "x", 2, 7},
                   {T::BlockEnd, "%}", 2, 9},
                   {T::Text, "yes", 2, 11},
                   {T::BlockBegin, "{%", 2, 14},
                   {T::Name, "endif", 2, 17},
                   {T::BlockEnd, "%}", 2, 23},
                   {T::Eof, "", 2, 25}}));
  // Columns count code points, not bytes.
  const auto u = toks("\xc3\xa9\xe4\xb8\x96{{ x }}");
  REQUIRE(u.size() >= 3);
  CHECK(u[1].type == T::VarBegin);
  CHECK(u[1].col == 3);
  CHECK(u[2].col == 6);
}

TEST_CASE("chat lexer: operators, longest match first", "[chat][lexer]") {
  using T = TokenType;
  CHECK(same(toks("{{a//b**c!=d<=e}}"), {{T::VarBegin, "{{", 1, 1},
                                          {T::Name, "a", 1, 3},
                                          {T::Op, "//", 1, 4},
                                          {T::Name, "b", 1, 6},
                                          {T::Op, "**", 1, 7},
                                          {T::Name, "c", 1, 9},
                                          {T::Op, "!=", 1, 10},
                                          {T::Name, "d", 1, 12},
                                          {T::Op, "<=", 1, 13},
                                          {T::Name, "e", 1, 15},
                                          {T::VarEnd, "}}", 1, 16},
                                          {T::Eof, "", 1, 18}}));
  // A '}}' inside braces closes the braces, not the tag.
  const auto t = tokenize("{{ {'a': {'b': 1}} }}");
  CHECK(t[t.size() - 2].type == T::VarEnd);
  CHECK(t[t.size() - 3].text == "}");
}

TEST_CASE("chat lexer: number literals", "[chat][lexer]") {
  const auto t = tokenize("{{ 1_000 1.5 2e3 0x1F 0o17 0b101 7 }}");
  REQUIRE(t.size() == 10);
  CHECK((t[1].type == TokenType::Int && t[1].int_value == 1000));
  CHECK((t[2].type == TokenType::Float && t[2].float_value == 1.5));
  CHECK((t[3].type == TokenType::Float && t[3].float_value == 2000.0));
  CHECK((t[4].type == TokenType::Int && t[4].int_value == 31));
  CHECK((t[5].type == TokenType::Int && t[5].int_value == 15));
  CHECK((t[6].type == TokenType::Int && t[6].int_value == 5));
  CHECK((t[7].type == TokenType::Int && t[7].int_value == 7));
  // x.0.1 is two integer subscripts, never the float 0.1 (as in jinja2).
  const auto s = tokenize("{{ x.0.1 }}");
  CHECK(s[3].type == TokenType::Int);
  CHECK(s[5].type == TokenType::Int);
  CHECK(render("{{ x.0.1 }}", R"({"x": [[1, 2]]})") == "2");
}

TEST_CASE("chat lexer: string literals unescape as Python's unicode-escape", "[chat][lexer]") {
  CHECK(render(R"({{ "x\ty\\z\u00e9\x41\101\q\'" }})") == "x\ty\\z\xc3\xa9" "AA\\q'");
  CHECK(render(R"({{ 'single "double"' ~ "double 'single'" }})") == "single \"double\"double 'single'");
  CHECK(render("{{ 'line one\nline two' }}") == "line one\nline two");
  CHECK(render(R"({{ "\U0001F41F" }})") == "\xf0\x9f\x90\x9f");
  CHECK(render(R"({{ "a" 'b' "c" }})") == "abc");  // adjacent literals join
}

TEST_CASE("chat lexer: trim_blocks, lstrip_blocks and whitespace control as jinja2", "[chat][lexer]") {
  CHECK(render("{% if true %}\nyes\n{% endif %}\nafter") == "yes\nafter");
  CHECK(render("  {% if true %}\n    indented\n  {% endif %}\ndone") == "    indented\ndone");
  CHECK(render("a   {%- if true %}  b  {% endif -%}   c") == "a  b  c");
  CHECK(render("{{ \"x\" }}\n{{ \"y\" }}") == "x\ny");
  CHECK(render("  {{ \"var lines keep their indentation\" }}") == "  var lines keep their indentation");
  CHECK(render("line1\n    {# a comment #}\nline2") == "line1\nline2");
  CHECK(render("   {%+ if true %}keep indentation{% endif %}") == "   keep indentation");
  CHECK(render("{% if true +%}\nkeep newline\n{% endif %}") == "\nkeep newline\n");
  CHECK(render("{%- if true -%}\n   {{- \"tight\" -}}\n   {%- endif -%}   ") == "tight");
  CHECK(render("x {% if true %}   not at line start{% endif %}") == "x    not at line start");
  CHECK(render("{#- trimmed comment -#}   text") == "text");
  CHECK(render("a {#- c #} b {# c -#} c") == "a b c");
  CHECK(render("{% for i in [1, 2] %}\n  - {{ i }}\n{% endfor %}") == "  - 1\n  - 2\n");
  CHECK(render("{{ \"a\" -}}\n   \n   b") == "ab");
  CHECK(render("text {{- \" v \" -}} text\n") == "text v text");
}

TEST_CASE("chat lexer: newlines: one trailing newline dropped, CR LF and CR read as LF", "[chat][lexer]") {
  CHECK(render("text\n") == "text");
  CHECK(render("text\n\n") == "text\n");
  CHECK(render("a\r\nb\r{% if true %}\r\nc\r\n{% endif %}\r\n") == "a\nb\nc\n");
}

TEST_CASE("chat lexer: raw blocks", "[chat][lexer]") {
  CHECK(render("{% raw %}{{ not rendered }} {% if %}{% endraw %}") == "{{ not rendered }} {% if %}");
  CHECK(render("  {% raw %}\n  raw {{ x }}\n  {% endraw %}\nend") == "\n  raw {{ x }}\nend");
}

TEST_CASE("chat lexer: malformed input is a syntax error at its line and column", "[chat][lexer]") {
  auto f = failure("ok\n  {{ \"abc }}");
  REQUIRE(is_syntax(f));
  CHECK(f->message == "template syntax error at line 2, column 6: unterminated string literal");
  f = failure("{{ x");
  REQUIRE(is_syntax(f));
  CHECK(f->message == "template syntax error at line 1, column 1: unexpected end of template: '{{' is never closed with '}}'");
  f = failure("a\n{% if x");
  REQUIRE(is_syntax(f));
  CHECK(f->message == "template syntax error at line 2, column 1: unexpected end of template: '{%' is never closed with '%}'");
  f = failure("{# unclosed");
  REQUIRE(is_syntax(f));
  CHECK(f->message == "template syntax error at line 1, column 1: missing end of comment tag (#})");
  f = failure("{{ x $ y }}");
  REQUIRE(is_syntax(f));
  CHECK(f->message == "template syntax error at line 1, column 6: unexpected character '$' in a tag");
  f = failure("{{ (1] }}");
  REQUIRE(is_syntax(f));
  CHECK(f->message == "template syntax error at line 1, column 6: unexpected ']', expected ')'");
  f = failure("{% raw %}never ends");
  REQUIRE(is_syntax(f));
  CHECK(f->message == "template syntax error at line 1, column 1: missing end of raw directive ({% endraw %})");
  f = failure("{{ 99999999999999999999 }}");
  REQUIRE(is_syntax(f));
  CHECK(f->message == "template syntax error at line 1, column 4: integer literal too large");
}
