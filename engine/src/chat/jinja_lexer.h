// The Jinja lexer: template text -> tokens, with jinja2's whitespace rules.
//
// Hugging Face renders chat templates with trim_blocks=True and
// lstrip_blocks=True, and every template is written for that, so both are on:
//  - trim_blocks: the first newline right after a block tag (%}) or a comment
//    (#}) is removed;
//  - lstrip_blocks: spaces and tabs from the start of a line up to a block tag
//    or comment are removed (not before {{ }});
//  - {%- / {{- / {#- remove all whitespace before the tag, -%} / -}} / -#} all
//    whitespace after it; {%+ keeps the line's indentation, +%} its newline.
// As jinja2 does, \r\n and \r are read as \n, and one newline at the very end
// of the template is dropped (keep_trailing_newline=False).
// {% raw %}...{% endraw %} becomes one Text token. Comments produce no token.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace fish::chat::jinja {

enum class TokenType : uint8_t {
  Text,        // template text, after whitespace control
  VarBegin,    // {{
  VarEnd,      // }}
  BlockBegin,  // {%
  BlockEnd,    // %}
  Name,        // identifier or keyword (for, in, not, true, ...)
  String,      // a string literal, unescaped
  Int,
  Float,
  Op,          // operator or punctuation: + - * / // % ** ~ == != < <= > >= = . : | , ( ) [ ] { }
  Eof,
};

struct Token {
  TokenType type = TokenType::Eof;
  std::string text;  // Text: the text; Name/Op: as written; String: the unescaped value
  int64_t int_value = 0;
  double float_value = 0;
  int line = 0, col = 0;  // 1-based; columns count code points
};

// Throws jinja::Error (Syntax, with line and column) for an unclosed tag,
// comment, string or bracket, or a character that is no token.
std::vector<Token> tokenize(std::string_view source);

}  // namespace fish::chat::jinja
