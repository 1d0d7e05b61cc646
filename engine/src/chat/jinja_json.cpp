// JSON parsing into Value and Python's json.dumps (see jinja_json.h).
#include "chat/jinja_json.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <unordered_set>

#include "chat/jinja_error.h"
#include "common/error.h"
#include "tokenizer/unicode.h"

namespace fish::chat::jinja {

namespace {

class JsonParser {
 public:
  explicit JsonParser(std::string_view t) : t_(t) {}

  Value parse_document() {
    Value v = parse_value(0);
    skip_ws();
    if (p_ != t_.size()) fail("unexpected text after the value");
    return v;
  }

 private:
  [[noreturn]] void fail(const std::string& why) const {
    int line = 1, col = 1;
    for (size_t i = 0; i < p_ && i < t_.size(); ++i) {
      if (t_[i] == '\n') {
        ++line;
        col = 1;
      } else if ((static_cast<unsigned char>(t_[i]) & 0xC0) != 0x80) {
        ++col;
      }
    }
    throw fish::Error("invalid JSON at line " + std::to_string(line) + ", column " + std::to_string(col) + ": " + why);
  }

  void skip_ws() {
    while (p_ < t_.size() && (t_[p_] == ' ' || t_[p_] == '\t' || t_[p_] == '\n' || t_[p_] == '\r')) ++p_;
  }

  bool eat_word(std::string_view w) {
    if (t_.substr(p_, w.size()) != w) return false;
    p_ += w.size();
    return true;
  }

  Value parse_value(int depth) {
    // Nesting is bounded here, before recursing, so that hostile input such as
    // a million '[' cannot exhaust the stack.
    if (depth >= kMaxJsonDepth) fail("nested deeper than " + std::to_string(kMaxJsonDepth) + " levels");
    skip_ws();
    if (p_ >= t_.size()) fail("unexpected end of input");
    const char c = t_[p_];
    if (c == '{') return parse_object(depth);
    if (c == '[') return parse_array(depth);
    if (c == '"') return Value(parse_string());
    if (eat_word("true")) return Value(true);
    if (eat_word("false")) return Value(false);
    if (eat_word("null")) return Value::none();
    if (eat_word("NaN")) return Value(std::nan(""));
    if (eat_word("Infinity")) return Value(HUGE_VAL);
    if (eat_word("-Infinity")) return Value(-HUGE_VAL);
    if (c == '-' || (c >= '0' && c <= '9')) return parse_number();
    fail(std::string("unexpected character '") + c + "'");
  }

  Value parse_object(int depth) {
    ++p_;  // {
    DictData d;
    std::unordered_set<std::string> seen;
    skip_ws();
    if (p_ < t_.size() && t_[p_] == '}') {
      ++p_;
      return Value::dict(std::move(d));
    }
    while (true) {
      skip_ws();
      if (p_ >= t_.size() || t_[p_] != '"') fail("expected a string key");
      std::string key = parse_string();
      skip_ws();
      if (p_ >= t_.size() || t_[p_] != ':') fail("expected ':'");
      ++p_;
      Value v = parse_value(depth + 1);
      // A repeated key keeps its first position and takes the last value (Python's dict).
      if (seen.insert(key).second) d.entries.emplace_back(Value(std::move(key)), std::move(v));
      else d.set(Value(std::move(key)), std::move(v));
      skip_ws();
      if (p_ < t_.size() && t_[p_] == ',') {
        ++p_;
        continue;
      }
      if (p_ < t_.size() && t_[p_] == '}') {
        ++p_;
        return Value::dict(std::move(d));
      }
      fail("expected ',' or '}'");
    }
  }

  Value parse_array(int depth) {
    ++p_;  // [
    std::vector<Value> items;
    skip_ws();
    if (p_ < t_.size() && t_[p_] == ']') {
      ++p_;
      return Value::list(std::move(items));
    }
    while (true) {
      items.push_back(parse_value(depth + 1));
      skip_ws();
      if (p_ < t_.size() && t_[p_] == ',') {
        ++p_;
        continue;
      }
      if (p_ < t_.size() && t_[p_] == ']') {
        ++p_;
        return Value::list(std::move(items));
      }
      fail("expected ',' or ']'");
    }
  }

  uint32_t hex4() {
    if (p_ + 4 > t_.size()) fail("truncated \\u escape");
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) {
      const char h = t_[p_++];
      v <<= 4;
      if (h >= '0' && h <= '9') v |= uint32_t(h - '0');
      else if (h >= 'a' && h <= 'f') v |= uint32_t(h - 'a' + 10);
      else if (h >= 'A' && h <= 'F') v |= uint32_t(h - 'A' + 10);
      else fail("bad \\u escape");
    }
    return v;
  }

  std::string parse_string() {
    ++p_;  // "
    std::string out;
    while (true) {
      if (p_ >= t_.size()) fail("unterminated string");
      const char c = t_[p_++];
      if (c == '"') return out;
      if (static_cast<unsigned char>(c) < 0x20) fail("control character in a string");
      if (c != '\\') {
        out += c;
        continue;
      }
      if (p_ >= t_.size()) fail("unterminated string");
      const char e = t_[p_++];
      switch (e) {
        case '"': out += '"'; break;
        case '\\': out += '\\'; break;
        case '/': out += '/'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'u': {
          uint32_t cp = hex4();
          if (cp >= 0xD800 && cp <= 0xDBFF && t_.substr(p_, 2) == "\\u") {
            const size_t save = p_;
            p_ += 2;
            const uint32_t lo = hex4();
            if (lo >= 0xDC00 && lo <= 0xDFFF) cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            else p_ = save;
          }
          // A lone surrogate cannot be written as UTF-8: U+FFFD stands for it.
          if (cp >= 0xD800 && cp <= 0xDFFF) cp = 0xFFFD;
          fish::unicode::append_utf8(out, cp);
          break;
        }
        default: fail(std::string("bad escape '\\") + e + "'");
      }
    }
  }

  Value parse_number() {
    const size_t start = p_;
    if (t_[p_] == '-') ++p_;
    auto digits = [&] {
      const size_t s = p_;
      while (p_ < t_.size() && t_[p_] >= '0' && t_[p_] <= '9') ++p_;
      return p_ - s;
    };
    if (digits() == 0) fail("bad number");
    bool is_float = false;
    if (p_ < t_.size() && t_[p_] == '.') {
      ++p_;
      if (digits() == 0) fail("bad number");
      is_float = true;
    }
    if (p_ < t_.size() && (t_[p_] == 'e' || t_[p_] == 'E')) {
      ++p_;
      if (p_ < t_.size() && (t_[p_] == '+' || t_[p_] == '-')) ++p_;
      if (digits() == 0) fail("bad number");
      is_float = true;
    }
    const char* b = t_.data() + start;
    const char* e = t_.data() + p_;
    if (!is_float) {
      int64_t i = 0;
      const auto r = std::from_chars(b, e, i);
      if (r.ec == std::errc() && r.ptr == e) return Value(i);
      fail("integer out of the 64-bit range");
    }
    double f = 0;
    const auto r = std::from_chars(b, e, f);
    if (r.ec == std::errc::result_out_of_range) {
      // Python reads an overflowing float as inf and an underflowing one as 0.
      const bool neg = *b == '-';
      const bool tiny = std::string_view(b, size_t(e - b)).find("e-") != std::string_view::npos ||
                        std::string_view(b, size_t(e - b)).find("E-") != std::string_view::npos;
      return Value(tiny ? (neg ? -0.0 : 0.0) : (neg ? -HUGE_VAL : HUGE_VAL));
    }
    if (r.ec != std::errc() || r.ptr != e) fail("bad number");
    return Value(f);
  }

  std::string_view t_;
  size_t p_ = 0;
};

void json_string(std::string& out, const std::string& s, bool ensure_ascii) {
  static const char* hex = "0123456789abcdef";
  auto u_escape = [&](uint32_t v) {
    out += "\\u";
    for (int sh = 12; sh >= 0; sh -= 4) out += hex[(v >> sh) & 15];
  };
  out += '"';
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      switch (c) {
        case '"': out += "\\\""; break;
        case '\\': out += "\\\\"; break;
        case '\n': out += "\\n"; break;
        case '\r': out += "\\r"; break;
        case '\t': out += "\\t"; break;
        case '\b': out += "\\b"; break;
        case '\f': out += "\\f"; break;
        default:
          if (c < 0x20) u_escape(c);
          else out += char(c);
      }
      ++i;
      continue;
    }
    const auto ch = fish::unicode::decode_utf8(s.data() + i, s.size() - i);
    if (ensure_ascii && ch.valid) {
      if (ch.cp >= 0x10000) {
        const uint32_t v = ch.cp - 0x10000;
        u_escape(0xD800 + (v >> 10));
        u_escape(0xDC00 + (v & 0x3FF));
      } else {
        u_escape(ch.cp);
      }
    } else {
      out.append(s, i, ch.len);
    }
    i += ch.len;
  }
  out += '"';
}

[[noreturn]] void not_serializable(const Value& v) {
  runtime_error("Object of type " + v.type_name() + " is not JSON serializable");
}

// A dict key as json.dumps writes it: strings as they are, numbers, bools and None as text.
std::string key_text(const Value& k) {
  switch (k.type()) {
    case Value::Type::String: return k.get_string();
    case Value::Type::Bool: return k.get_bool() ? "true" : "false";
    case Value::Type::None: return "null";
    case Value::Type::Int: return std::to_string(k.get_int());
    case Value::Type::Float: {
      const double f = k.get_float();
      if (std::isnan(f)) return "NaN";
      if (std::isinf(f)) return f < 0 ? "-Infinity" : "Infinity";
      return float_repr(f);
    }
    default: runtime_error("keys must be str, int, float, bool or None, not " + k.type_name());
  }
}

class JsonWriter {
 public:
  explicit JsonWriter(const JsonOptions& o) : o_(o) {}
  std::string out;

  void write(const Value& v, int level) {
    switch (v.type()) {
      case Value::Type::None: out += "null"; return;
      case Value::Type::Bool: out += v.get_bool() ? "true" : "false"; return;
      case Value::Type::Int: out += std::to_string(v.get_int()); return;
      case Value::Type::Float: {
        const double f = v.get_float();
        if (std::isnan(f)) out += "NaN";
        else if (std::isinf(f)) out += f < 0 ? "-Infinity" : "Infinity";
        else out += float_repr(f);
        return;
      }
      case Value::Type::String: json_string(out, v.get_string(), o_.ensure_ascii); return;
      case Value::Type::List: {
        const auto& items = v.items();
        if (items.empty()) {
          out += "[]";
          return;
        }
        out += '[';
        for (size_t i = 0; i < items.size(); ++i) {
          if (i) out += o_.item_sep;
          newline(level + 1);
          write(items[i], level + 1);
        }
        newline(level);
        out += ']';
        return;
      }
      case Value::Type::Dict: {
        const DictData& d = v.dict();
        if (d.size() == 0) {
          out += "{}";
          return;
        }
        std::vector<const std::pair<Value, Value>*> entries;
        for (const auto& e : d.entries) entries.push_back(&e);
        if (o_.sort_keys)
          std::stable_sort(entries.begin(), entries.end(),
                           [](auto* a, auto* b) { return compare(a->first, b->first, "<") < 0; });
        out += '{';
        for (size_t i = 0; i < entries.size(); ++i) {
          if (i) out += o_.item_sep;
          newline(level + 1);
          json_string(out, key_text(entries[i]->first), o_.ensure_ascii);
          out += o_.key_sep;
          write(entries[i]->second, level + 1);
        }
        newline(level);
        out += '}';
        return;
      }
      default: not_serializable(v);
    }
  }

 private:
  void newline(int level) {
    if (!o_.indent) return;
    out += '\n';
    for (int i = 0; i < level; ++i) out += *o_.indent;
  }
  const JsonOptions& o_;
};

}  // namespace

Value parse_json(std::string_view text) { return JsonParser(text).parse_document(); }

std::string to_json(const Value& v, const JsonOptions& options) {
  JsonWriter w(options);
  w.write(v, 0);
  return std::move(w.out);
}

}  // namespace fish::chat::jinja
