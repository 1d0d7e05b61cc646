// Llama 3.1's built-in tool calls: see python_call.h.
#include "serve/python_call.h"

#include <algorithm>
#include <cstdint>

namespace fish::serve {

using ojson = nlohmann::ordered_json;

namespace {

constexpr size_t kMaxName = 64;
constexpr std::string_view kCallOpen = ".call(";

bool is_space(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool ident_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool ident_char(char c) { return ident_start(c) || is_digit(c); }
bool is_quote(char c) { return c == '"' || c == '\''; }

int hex_value(char c) {
  if (is_digit(c)) return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// A code point as UTF-8. Python strings may hold lone surrogates (an escape
// like \ud800), which UTF-8 cannot: they become U+FFFD, as they would when
// Python encodes the string with errors="replace".
void put_utf8(uint32_t cp, std::string* out) {
  if (cp >= 0xD800 && cp <= 0xDFFF) cp = 0xFFFD;
  if (cp < 0x80) {
    out->push_back(char(cp));
  } else if (cp < 0x800) {
    out->push_back(char(0xC0 | (cp >> 6)));
    out->push_back(char(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(char(0xE0 | (cp >> 12)));
    out->push_back(char(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(char(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(char(0xF0 | (cp >> 18)));
    out->push_back(char(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(char(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(char(0x80 | (cp & 0x3F)));
  }
}

// A recursive descent over the call's text; every method leaves p_ after
// what it read and returns false when the text is not what it reads.
class Reader {
 public:
  Reader(std::string_view s, int max_depth) : s_(s), max_depth_(max_depth) {}

  std::optional<PythonCall> call() {
    PythonCall c;
    c.arguments = ojson::object();
    space();
    if (!ident(&c.name) || c.name.size() > kMaxName || s_.substr(p_, kCallOpen.size()) != kCallOpen) return std::nullopt;
    p_ += kCallOpen.size();
    space();
    for (;;) {
      if (eat(')')) break;
      std::string key;
      // A keyword given twice is Python's SyntaxError, not a choice to make.
      if (!ident(&key) || c.arguments.contains(key)) return std::nullopt;
      space();
      if (!eat('=')) return std::nullopt;
      space();
      ojson v;
      if (!value(&v, 2)) return std::nullopt;  // the call's parentheses are level 1
      c.arguments[key] = std::move(v);
      space();
      if (eat(',')) {
        space();
        continue;
      }
      if (eat(')')) break;
      return std::nullopt;
    }
    space();
    if (p_ != s_.size()) return std::nullopt;
    return c;
  }

 private:
  bool more() const { return p_ < s_.size(); }
  void space() {
    while (more() && is_space(s_[p_])) ++p_;
  }
  bool eat(char c) {
    if (!more() || s_[p_] != c) return false;
    ++p_;
    return true;
  }
  bool ident(std::string* out) {
    if (!more() || !ident_start(s_[p_])) return false;
    const size_t b = p_;
    while (more() && ident_char(s_[p_])) ++p_;
    *out = std::string(s_.substr(b, p_ - b));
    return true;
  }
  // A string literal starts here: a quote, or an r / u prefix and a quote.
  bool at_string() const {
    if (!more()) return false;
    const char c = s_[p_];
    if (is_quote(c)) return true;
    return (c == 'r' || c == 'R' || c == 'u' || c == 'U') && p_ + 1 < s_.size() && is_quote(s_[p_ + 1]);
  }

  bool value(ojson* out, int depth) {
    if (!more()) return false;
    const char c = s_[p_];
    if (c == '[') return list(out, depth);
    if (c == '{') return dict(out, depth);
    if (at_string()) {
      std::string text;
      if (!string(&text)) return false;
      *out = std::move(text);
      return true;
    }
    if (is_digit(c) || c == '.' || c == '-' || c == '+') return number(out);
    return word(out);
  }

  // One literal or several side by side ("a" "b" is "ab" in Python).
  bool string(std::string* out) {
    if (!one_string(out)) return false;
    for (;;) {
      const size_t save = p_;
      space();
      if (!at_string()) {
        p_ = save;
        return true;
      }
      if (!one_string(out)) return false;
    }
  }

  bool one_string(std::string* out) {
    bool raw = false;
    if (s_[p_] == 'r' || s_[p_] == 'R') raw = true;
    if (!is_quote(s_[p_])) ++p_;  // the prefix
    const char q = s_[p_];
    const std::string_view q3 = q == '"' ? std::string_view("\"\"\"") : std::string_view("'''");
    const bool triple = s_.substr(p_, 3) == q3;
    p_ += triple ? 3 : 1;
    for (;;) {
      if (!more()) return false;
      const char c = s_[p_];
      if (c == q && (!triple || s_.substr(p_, 3) == q3)) {
        p_ += triple ? 3 : 1;
        return true;
      }
      if (c == '\n' && !triple) return false;  // Python's SyntaxError: the string never closed on its line
      if (c != '\\') {
        out->push_back(c);
        ++p_;
        continue;
      }
      if (p_ + 1 >= s_.size()) return false;
      const char e = s_[p_ + 1];
      p_ += 2;
      if (raw) {  // the backslash stays, and the character after it cannot end the string
        out->push_back('\\');
        out->push_back(e);
        continue;
      }
      if (!escape(e, out)) return false;
    }
  }

  // The escape \e (p_ is past e): what Python's string literal makes of it.
  bool escape(char e, std::string* out) {
    switch (e) {
      case '\n': return true;  // a backslash at the end of a line continues the string
      case '\\': case '\'': case '"': out->push_back(e); return true;
      case 'a': out->push_back('\a'); return true;
      case 'b': out->push_back('\b'); return true;
      case 'f': out->push_back('\f'); return true;
      case 'n': out->push_back('\n'); return true;
      case 'r': out->push_back('\r'); return true;
      case 't': out->push_back('\t'); return true;
      case 'v': out->push_back('\v'); return true;
      case 'x': return hex_escape(2, out);
      case 'u': return hex_escape(4, out);
      case 'U': return hex_escape(8, out);
      default: break;
    }
    if (e >= '0' && e <= '7') {  // octal: up to three digits, this one included
      uint32_t cp = uint32_t(e - '0');
      for (int i = 0; i < 2 && more() && s_[p_] >= '0' && s_[p_] <= '7'; ++i) cp = cp * 8 + uint32_t(s_[p_++] - '0');
      put_utf8(cp, out);
      return true;
    }
    // Any other escape keeps its backslash, as Python does. \N{NAME} is one:
    // Python looks the name up in the Unicode database, which fish does not carry.
    out->push_back('\\');
    out->push_back(e);
    return true;
  }

  // \x, \u, \U: exactly n hex digits (fewer is Python's SyntaxError).
  bool hex_escape(int n, std::string* out) {
    uint32_t cp = 0;
    for (int i = 0; i < n; ++i) {
      const int h = more() ? hex_value(s_[p_]) : -1;
      if (h < 0) return false;
      cp = cp * 16 + uint32_t(h);
      ++p_;
    }
    if (cp > 0x10FFFF) return false;
    put_utf8(cp, out);
    return true;
  }

  // Decimal digits, '_' allowed between two of them (1_000); true if any.
  bool digits(std::string* out) {
    const size_t b = out->size();
    while (more()) {
      const char c = s_[p_];
      if (is_digit(c)) {
        out->push_back(c);
      } else if (c == '_' && out->size() > b && p_ + 1 < s_.size() && is_digit(s_[p_ + 1])) {
        // a separator: dropped
      } else {
        break;
      }
      ++p_;
    }
    return out->size() > b;
  }

  // A decimal number written as JSON: 5 -> 5, 5. -> 5.0, .5 -> 0.5, 1e3 ->
  // 1000.0, -0 -> -0. Hex, octal and binary literals are not taken.
  bool number(ojson* out) {
    std::string sign, ip, fp, ex;
    if (s_[p_] == '-' || s_[p_] == '+') sign = s_[p_++] == '-' ? "-" : "";
    digits(&ip);
    bool dot = false;
    if (eat('.')) {
      dot = true;
      digits(&fp);
    }
    if (ip.empty() && fp.empty()) return false;
    if (more() && (s_[p_] == 'e' || s_[p_] == 'E')) {
      ++p_;
      ex = "e";
      if (more() && (s_[p_] == '-' || s_[p_] == '+')) ex += s_[p_++];
      if (!digits(&ex)) return false;
    }
    if (more() && (ident_char(s_[p_]) || s_[p_] == '.')) return false;  // 0x1F, 1j, 1.2.3
    ip.erase(0, std::min(ip.find_first_not_of('0'), ip.size()));
    std::string t = sign + (ip.empty() ? "0" : ip);
    if (dot) t += "." + (fp.empty() ? std::string("0") : fp);
    t += ex;
    *out = ojson::parse(t, nullptr, false);
    return !out->is_discarded();
  }

  bool word(ojson* out) {
    std::string w;
    if (!ident(&w)) return false;
    if (w == "True" || w == "true") *out = true;
    else if (w == "False" || w == "false") *out = false;
    else if (w == "None" || w == "null") *out = nullptr;
    else return false;  // a variable or a call: an expression, not a literal
    return true;
  }

  bool list(ojson* out, int depth) {
    if (depth > max_depth_) return false;
    ++p_;  // '['
    *out = ojson::array();
    space();
    for (;;) {
      if (eat(']')) return true;
      ojson v;
      if (!value(&v, depth + 1)) return false;
      out->push_back(std::move(v));
      space();
      if (eat(',')) {
        space();
        continue;
      }
      return eat(']');
    }
  }

  // Keys are strings (a JSON object has no others); a repeated key keeps its
  // first place and takes its last value, as a Python dict does.
  bool dict(ojson* out, int depth) {
    if (depth > max_depth_) return false;
    ++p_;  // '{'
    *out = ojson::object();
    space();
    for (;;) {
      if (eat('}')) return true;
      std::string key;
      if (!at_string() || !string(&key)) return false;
      space();
      if (!eat(':')) return false;
      space();
      ojson v;
      if (!value(&v, depth + 1)) return false;
      (*out)[key] = std::move(v);
      space();
      if (eat(',')) {
        space();
        continue;
      }
      return eat('}');
    }
  }

  std::string_view s_;
  size_t p_ = 0;
  int max_depth_;
};

}  // namespace

CallHead python_call_head(std::string_view s) {
  if (s.empty()) return CallHead::kMaybe;
  if (!ident_start(s[0])) return CallHead::kNo;
  size_t n = 1;
  while (n < s.size() && ident_char(s[n])) {
    if (++n > kMaxName) return CallHead::kNo;
  }
  const std::string_view rest = s.substr(n);
  if (rest.size() >= kCallOpen.size()) return rest.substr(0, kCallOpen.size()) == kCallOpen ? CallHead::kYes : CallHead::kNo;
  return kCallOpen.substr(0, rest.size()) == rest ? CallHead::kMaybe : CallHead::kNo;
}

std::optional<PythonCall> parse_python_call(std::string_view s, int max_depth) { return Reader(s, max_depth).call(); }

}  // namespace fish::serve
