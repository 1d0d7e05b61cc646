// The Jinja lexer (see jinja_lexer.h). It follows jinja2 3.1's lexer rule for
// rule, since the whitespace of a chat prompt is part of what the model sees.
#include "chat/jinja_lexer.h"

#include <algorithm>

#include "chat/jinja_error.h"
#include "chat/jinja_pystr.h"
#include "tokenizer/unicode.h"

namespace fish::chat::jinja {

namespace {

// jinja2 reads \r\n and \r as \n and drops one trailing newline.
std::string normalize(std::string_view src) {
  std::string s;
  s.reserve(src.size());
  for (size_t i = 0; i < src.size(); ++i) {
    if (src[i] == '\r') {
      s += '\n';
      if (i + 1 < src.size() && src[i + 1] == '\n') ++i;
    } else {
      s += src[i];
    }
  }
  if (!s.empty() && s.back() == '\n') s.pop_back();
  return s;
}

bool is_name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_name_char(char c) { return is_name_start(c) || (c >= '0' && c <= '9'); }
bool is_digit(char c) { return c >= '0' && c <= '9'; }

class Lexer {
 public:
  explicit Lexer(std::string_view src) : s_(normalize(src)) {
    line_starts_.push_back(0);
    for (size_t i = 0; i < s_.size(); ++i)
      if (s_[i] == '\n') line_starts_.push_back(i + 1);
  }

  std::vector<Token> run() {
    while (p_ < s_.size()) {
      const size_t tag = find_tag(p_);
      if (tag == std::string::npos) {
        emit_text(s_.substr(p_), p_);
        p_ = s_.size();
        break;
      }
      const char kind = s_[tag + 1];
      size_t after = tag + 2;
      char sign = 0;
      if (after < s_.size() && (s_[after] == '-' || s_[after] == '+')) sign = s_[after++];
      std::string text = s_.substr(p_, tag - p_);
      text = control_before(std::move(text), sign, kind != '{');
      emit_text(std::move(text), p_);
      size_t raw_body = 0;
      if (kind == '%' && raw_begin(after, raw_body)) lex_raw(tag, raw_body);
      else if (kind == '#') lex_comment(tag, after);
      else lex_tag(tag, after, kind == '%');
    }
    Token eof;
    eof.type = TokenType::Eof;
    position(s_.size(), eof.line, eof.col);
    out_.push_back(eof);
    return std::move(out_);
  }

 private:
  // Line and column of a byte offset. Tokens come in source order, so the
  // column is counted on from the previous token's (a long one-line template
  // stays linear); an earlier offset (an error) is counted from its line start.
  void position(size_t off, int& line, int& col) const {
    const auto it = std::upper_bound(line_starts_.begin(), line_starts_.end(), off);
    const size_t ls = *(it - 1);
    line = int(it - line_starts_.begin());
    size_t from = ls;
    int c = 1;
    if (pos_cache_off_ >= ls && pos_cache_off_ <= off) {
      from = pos_cache_off_;
      c = pos_cache_col_;
    }
    col = c + int(pystr::length(std::string_view(s_).substr(from, off - from)));
    pos_cache_off_ = off;
    pos_cache_col_ = col;
  }

  [[noreturn]] void fail(size_t off, const std::string& why) const {
    int line = 0, col = 0;
    position(std::min(off, s_.size()), line, col);
    throw Error(Error::Kind::Syntax, why, line, col);
  }

  // The next "{{", "{%" or "{#" at or after i.
  size_t find_tag(size_t i) const {
    while (true) {
      i = s_.find('{', i);
      if (i == std::string::npos || i + 1 >= s_.size()) return std::string::npos;
      const char c = s_[i + 1];
      if (c == '{' || c == '%' || c == '#') return i;
      ++i;
    }
  }

  // Python's \s* from i (Unicode whitespace).
  size_t skip_space(size_t i) const {
    while (i < s_.size()) {
      const auto c = fish::unicode::decode_utf8(s_.data() + i, s_.size() - i);
      if (!c.valid || !pystr::is_space(c.cp)) break;
      i += c.len;
    }
    return i;
  }

  static bool all_space(std::string_view t) {
    if (t.empty()) return false;
    for (size_t i = 0; i < t.size();) {
      const auto c = fish::unicode::decode_utf8(t.data() + i, t.size() - i);
      if (!c.valid || !pystr::is_space(c.cp)) return false;
      i += c.len;
    }
    return true;
  }

  // Whitespace control of the text before a tag: "-" strips all trailing
  // whitespace; otherwise lstrip_blocks strips a block's or comment's
  // indentation when only whitespace precedes it on its line.
  std::string control_before(std::string text, char sign, bool block_or_comment) const {
    if (sign == '-') return pystr::strip(text, std::nullopt, false, true);
    if (sign == '+' || !block_or_comment) return text;
    const size_t nl = text.rfind('\n');
    const size_t l_pos = nl == std::string::npos ? 0 : nl + 1;
    if ((l_pos > 0 || line_starting_) && all_space(std::string_view(text).substr(l_pos))) text.resize(l_pos);
    return text;
  }

  void emit_text(std::string text, size_t at) {
    if (text.empty()) return;
    Token t;
    t.type = TokenType::Text;
    t.text = std::move(text);
    position(at, t.line, t.col);
    out_.push_back(std::move(t));
  }

  void emit(TokenType type, std::string text, size_t at) {
    Token t;
    t.type = type;
    t.text = std::move(text);
    position(at, t.line, t.col);
    out_.push_back(std::move(t));
  }

  // The end of a block tag at i (after trim_blocks / "-" handling), or npos.
  size_t block_end_at(size_t i) const {
    if (s_.compare(i, 3, "+%}") == 0) return i + 3;
    if (s_.compare(i, 3, "-%}") == 0) return skip_space(i + 3);
    if (s_.compare(i, 2, "%}") == 0) return i + 2 + ((i + 2 < s_.size() && s_[i + 2] == '\n') ? 1 : 0);
    return std::string::npos;
  }

  size_t var_end_at(size_t i) const {
    if (s_.compare(i, 3, "-}}") == 0) return skip_space(i + 3);
    if (s_.compare(i, 2, "}}") == 0) return i + 2;
    return std::string::npos;
  }

  void finish_tag(size_t end) {
    line_starting_ = end > 0 && s_[end - 1] == '\n';
    p_ = end;
  }

  // "{% raw %}" (its "{%" and sign already read up to `after`): sets body to
  // where the raw text starts. Like jinja2, no trim_blocks after "raw %}".
  bool raw_begin(size_t after, size_t& body) const {
    size_t i = skip_space(after);
    if (s_.compare(i, 3, "raw") != 0) return false;
    i += 3;
    if (i < s_.size() && is_name_char(s_[i])) return false;
    i = skip_space(i);
    if (s_.compare(i, 3, "-%}") == 0) body = skip_space(i + 3);
    else if (s_.compare(i, 2, "%}") == 0) body = i + 2;
    else return false;
    return true;
  }

  void lex_raw(size_t tag, size_t body) {
    line_starting_ = body > 0 && s_[body - 1] == '\n';
    for (size_t k = find_tag(body); k != std::string::npos; k = find_tag(k + 1)) {
      if (s_[k + 1] != '%') continue;
      size_t i = k + 2;
      char sign = 0;
      if (i < s_.size() && (s_[i] == '-' || s_[i] == '+')) sign = s_[i++];
      i = skip_space(i);
      if (s_.compare(i, 6, "endraw") != 0) continue;
      i = skip_space(i + 6);
      const size_t end = block_end_at(i);
      if (end == std::string::npos) continue;
      emit_text(control_before(s_.substr(body, k - body), sign, true), body);
      finish_tag(end);
      return;
    }
    fail(tag, "missing end of raw directive ({% endraw %})");
  }

  void lex_comment(size_t tag, size_t after) {
    const size_t k = s_.find("#}", after);
    if (k == std::string::npos) fail(tag, "missing end of comment tag (#})");
    size_t end;
    if (k > after && s_[k - 1] == '-') end = skip_space(k + 2);
    else if (k > after && s_[k - 1] == '+') end = k + 2;
    else end = k + 2 + ((k + 2 < s_.size() && s_[k + 2] == '\n') ? 1 : 0);
    finish_tag(end);
  }

  void lex_tag(size_t tag, size_t after, bool block) {
    emit(block ? TokenType::BlockBegin : TokenType::VarBegin, block ? "{%" : "{{", tag);
    std::vector<char> balance;  // closers expected, innermost last
    size_t i = after;
    while (true) {
      if (i >= s_.size())
        fail(tag, block ? "unexpected end of template: '{%' is never closed with '%}'"
                        : "unexpected end of template: '{{' is never closed with '}}'");
      if (balance.empty()) {
        const size_t end = block ? block_end_at(i) : var_end_at(i);
        if (end != std::string::npos) {
          emit(block ? TokenType::BlockEnd : TokenType::VarEnd, block ? "%}" : "}}", i);
          finish_tag(end);
          return;
        }
      }
      const auto uc = fish::unicode::decode_utf8(s_.data() + i, s_.size() - i);
      if (uc.valid && pystr::is_space(uc.cp)) {
        i += uc.len;
        continue;
      }
      const char c = s_[i];
      if (is_digit(c)) {
        i = lex_number(i);
      } else if (is_name_start(c)) {
        size_t j = i;
        while (j < s_.size() && is_name_char(s_[j])) ++j;
        emit(TokenType::Name, s_.substr(i, j - i), i);
        i = j;
      } else if (c == '\'' || c == '"') {
        i = lex_string(i);
      } else {
        i = lex_operator(i, balance);
      }
    }
  }

  size_t lex_number(size_t i) {
    const size_t start = i;
    auto digits = [&](size_t& j) {  // (\d+_)*\d+
      const size_t s = j;
      while (j < s_.size() && (is_digit(s_[j]) || (s_[j] == '_' && j > s && j + 1 < s_.size() && is_digit(s_[j + 1]))))
        ++j;
      return j > s;
    };
    std::string clean;
    auto take = [&](size_t from, size_t to) {
      for (size_t k = from; k < to; ++k)
        if (s_[k] != '_') clean += s_[k];
    };
    // 0x / 0o / 0b integers.
    if (s_[i] == '0' && i + 1 < s_.size() && std::string_view("xXoObB").find(s_[i + 1]) != std::string_view::npos) {
      const char b = char(s_[i + 1] | 0x20);
      const int base = b == 'x' ? 16 : (b == 'o' ? 8 : 2);
      size_t j = i + 2;
      uint64_t v = 0;
      bool any = false;
      for (; j < s_.size(); ++j) {
        const char d = s_[j];
        if (d == '_') continue;
        int dv = -1;
        if (d >= '0' && d <= '9') dv = d - '0';
        else if ((d | 0x20) >= 'a' && (d | 0x20) <= 'f') dv = (d | 0x20) - 'a' + 10;
        if (dv < 0 || dv >= base) break;
        if (v > (uint64_t(INT64_MAX) - uint64_t(dv)) / uint64_t(base)) fail(start, "integer literal too large");
        v = v * uint64_t(base) + uint64_t(dv);
        any = true;
      }
      if (!any) fail(start, "bad integer literal");
      Token t;
      t.type = TokenType::Int;
      t.text = s_.substr(start, j - start);
      t.int_value = int64_t(v);
      position(start, t.line, t.col);
      out_.push_back(std::move(t));
      return j;
    }
    size_t j = i;
    digits(j);
    take(i, j);
    bool is_float = false;
    // A float needs a fraction or an exponent, and is never read right after a
    // '.' (so that x.0.1 is two integer subscripts, as in jinja2).
    const bool after_dot = start > 0 && s_[start - 1] == '.';
    if (!after_dot) {
      size_t k = j;
      if (k < s_.size() && s_[k] == '.' && k + 1 < s_.size() && is_digit(s_[k + 1])) {
        ++k;
        const size_t f0 = k;
        digits(k);
        clean += '.';
        take(f0, k);
        j = k;
        is_float = true;
      }
      if (j < s_.size() && (s_[j] == 'e' || s_[j] == 'E')) {
        size_t e = j + 1;
        if (e < s_.size() && (s_[e] == '+' || s_[e] == '-')) ++e;
        const size_t e0 = e;
        if (digits(e)) {
          clean += 'e';
          take(j + 1, e0);
          take(e0, e);
          j = e;
          is_float = true;
        }
      }
    }
    Token t;
    t.text = s_.substr(start, j - start);
    position(start, t.line, t.col);
    if (is_float) {
      t.type = TokenType::Float;
      t.float_value = std::strtod(clean.c_str(), nullptr);
    } else {
      t.type = TokenType::Int;
      uint64_t v = 0;
      for (char d : clean) {
        if (v > (uint64_t(INT64_MAX) - uint64_t(d - '0')) / 10) fail(start, "integer literal too large");
        v = v * 10 + uint64_t(d - '0');
      }
      t.int_value = int64_t(v);
    }
    out_.push_back(std::move(t));
    return j;
  }

  // A quoted string, unescaped as Python's unicode-escape does.
  size_t lex_string(size_t i) {
    const char q = s_[i];
    size_t j = i + 1;
    std::string v;
    while (true) {
      if (j >= s_.size()) fail(i, "unterminated string literal");
      const char c = s_[j];
      if (c == q) break;
      if (c != '\\') {
        v += c;
        ++j;
        continue;
      }
      if (j + 1 >= s_.size()) fail(i, "unterminated string literal");
      const char e = s_[j + 1];
      j += 2;
      auto hex_n = [&](int n) -> uint32_t {
        uint32_t cp = 0;
        for (int k = 0; k < n; ++k, ++j) {
          const char h = j < s_.size() ? s_[j] : '\0';
          int d = -1;
          if (h >= '0' && h <= '9') d = h - '0';
          else if ((h | 0x20) >= 'a' && (h | 0x20) <= 'f') d = (h | 0x20) - 'a' + 10;
          if (d < 0) fail(i, std::string("truncated \\") + e + " escape in a string literal");
          cp = cp * 16 + uint32_t(d);
        }
        return cp;
      };
      switch (e) {
        case '\n': break;  // line continuation
        case '\\': v += '\\'; break;
        case '\'': v += '\''; break;
        case '"': v += '"'; break;
        case 'a': v += '\a'; break;
        case 'b': v += '\b'; break;
        case 'f': v += '\f'; break;
        case 'n': v += '\n'; break;
        case 'r': v += '\r'; break;
        case 't': v += '\t'; break;
        case 'v': v += '\v'; break;
        case 'x': fish::unicode::append_utf8(v, hex_n(2)); break;
        case 'u':
        case 'U': {
          const uint32_t cp = hex_n(e == 'u' ? 4 : 8);
          if (cp > 0x10FFFF) fail(i, "\\U escape out of the Unicode range");
          fish::unicode::append_utf8(v, (cp >= 0xD800 && cp <= 0xDFFF) ? 0xFFFD : cp);
          break;
        }
        default:
          if (e >= '0' && e <= '7') {  // up to three octal digits
            uint32_t cp = uint32_t(e - '0');
            for (int k = 0; k < 2 && j < s_.size() && s_[j] >= '0' && s_[j] <= '7'; ++k, ++j)
              cp = cp * 8 + uint32_t(s_[j] - '0');
            fish::unicode::append_utf8(v, cp);
          } else {
            v += '\\';  // an unknown escape stays as written
            v += e;
          }
      }
    }
    emit(TokenType::String, std::move(v), i);
    return j + 1;
  }

  size_t lex_operator(size_t i, std::vector<char>& balance) {
    static const char* const kTwo[] = {"//", "**", "==", "!=", ">=", "<="};
    for (const char* op : kTwo)
      if (s_.compare(i, 2, op) == 0) {
        emit(TokenType::Op, op, i);
        return i + 2;
      }
    const char c = s_[i];
    if (std::string_view("+-/*%~[](){}<>=.:|,;").find(c) == std::string_view::npos) {
      const auto uc = fish::unicode::decode_utf8(s_.data() + i, s_.size() - i);
      fail(i, "unexpected character '" + s_.substr(i, uc.len) + "' in a tag");
    }
    if (c == '(') balance.push_back(')');
    else if (c == '[') balance.push_back(']');
    else if (c == '{') balance.push_back('}');
    else if (c == ')' || c == ']' || c == '}') {
      if (balance.empty()) fail(i, std::string("unexpected '") + c + "'");
      if (balance.back() != c) fail(i, std::string("unexpected '") + c + "', expected '" + balance.back() + "'");
      balance.pop_back();
    }
    emit(TokenType::Op, std::string(1, c), i);
    return i + 1;
  }

  std::string s_;
  std::vector<size_t> line_starts_;
  std::vector<Token> out_;
  size_t p_ = 0;
  bool line_starting_ = true;  // the previous match ended a line (lstrip_blocks)
  mutable size_t pos_cache_off_ = 0;  // position(): the last offset asked and its column
  mutable int pos_cache_col_ = 1;
};

}  // namespace

std::vector<Token> tokenize(std::string_view source) { return Lexer(source).run(); }

}  // namespace fish::chat::jinja
