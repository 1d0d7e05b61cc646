// Python str operations on UTF-8 (see jinja_pystr.h).
#include "chat/jinja_pystr.h"

#include <algorithm>

#include "chat/jinja_error.h"
#include "tokenizer/unicode.h"

namespace fish::chat::jinja::pystr {

namespace uc = fish::unicode;

namespace {

// One decoded character: its code point and its bytes in the source.
struct Ch {
  uint32_t cp;
  std::string_view bytes;
};

std::vector<Ch> chars_of(std::string_view s) {
  std::vector<Ch> out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    const uc::Utf8Char c = uc::decode_utf8(s.data() + i, s.size() - i);
    out.push_back({c.valid ? c.cp : 0xFFFFFFFFu, s.substr(i, c.len)});  // invalid bytes map to no character class
    i += c.len;
  }
  return out;
}

uint32_t upper_cp(uint32_t c) {
  if (c >= 'a' && c <= 'z') return c - 32;
  if (c < 0x80) return c;
  if ((c >= 0xE0 && c <= 0xFE && c != 0xF7)) return c - 32;
  if (c == 0xFF) return 0x178;
  if (c == 0xB5) return 0x39C;
  if (c >= 0x100 && c <= 0x17F && c != 0x130 && c != 0x131 && c != 0x138 && c != 0x149 && c != 0x17F) {
    // Latin Extended-A: pairs (even upper, odd lower) except 0x139..0x148 and 0x179..0x17E (odd upper).
    const bool odd_upper = (c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17E);
    if (odd_upper) return (c % 2 == 0) ? c - 1 : c;
    return (c % 2 == 1) ? c - 1 : c;
  }
  if (c >= 0x3B1 && c <= 0x3C9 && c != 0x3C2) return c - 32;
  if (c == 0x3C2) return 0x3A3;
  if (c >= 0x3AC && c <= 0x3AF) {
    static const uint32_t m[] = {0x386, 0x388, 0x389, 0x38A};
    return m[c - 0x3AC];
  }
  if (c >= 0x430 && c <= 0x44F) return c - 32;
  if (c >= 0x450 && c <= 0x45F) return c - 80;
  return c;
}

uint32_t lower_cp(uint32_t c) {
  if (c >= 'A' && c <= 'Z') return c + 32;
  if (c < 0x80) return c;
  if (c >= 0xC0 && c <= 0xDE && c != 0xD7) return c + 32;
  if (c == 0x178) return 0xFF;
  if (c >= 0x100 && c <= 0x17F && c != 0x130 && c != 0x131 && c != 0x138 && c != 0x149 && c != 0x17F) {
    const bool odd_upper = (c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17E);
    if (odd_upper) return (c % 2 == 1) ? c + 1 : c;
    return (c % 2 == 0) ? c + 1 : c;
  }
  if (c >= 0x391 && c <= 0x3A9 && c != 0x3A2) return c + 32;
  if (c == 0x386) return 0x3AC;
  if (c >= 0x388 && c <= 0x38A) return c + 37;
  if (c >= 0x410 && c <= 0x42F) return c + 32;
  if (c >= 0x400 && c <= 0x40F) return c + 80;
  return c;
}

void append_upper(std::string& out, const Ch& c) {
  if (c.cp == 0xDF) {  // ß -> SS, as Python's full case mapping does
    out += "SS";
    return;
  }
  const uint32_t u = upper_cp(c.cp);
  if (u == c.cp || c.cp == 0xFFFFFFFFu) out += c.bytes;
  else uc::append_utf8(out, u);
}

void append_lower(std::string& out, const Ch& c) {
  const uint32_t l = lower_cp(c.cp);
  if (l == c.cp || c.cp == 0xFFFFFFFFu) out += c.bytes;
  else uc::append_utf8(out, l);
}

bool in_chars(uint32_t cp, const std::vector<Ch>& set) {
  for (const Ch& c : set)
    if (c.cp == cp) return true;
  return false;
}

}  // namespace

std::vector<size_t> offsets(std::string_view s) {
  std::vector<size_t> off;
  off.reserve(s.size() + 1);
  for (size_t i = 0; i < s.size();) {
    off.push_back(i);
    i += uc::decode_utf8(s.data() + i, s.size() - i).len;
  }
  off.push_back(s.size());
  return off;
}

size_t length(std::string_view s) {
  size_t n = 0;
  for (size_t i = 0; i < s.size(); ++n) i += uc::decode_utf8(s.data() + i, s.size() - i).len;
  return n;
}

bool is_space(uint32_t cp) {
  if (cp == 0xFFFFFFFFu) return false;
  return (cp >= 0x1C && cp <= 0x1F) || uc::is_white_space(cp);
}

bool is_printable(uint32_t cp) {
  if (cp == ' ') return true;
  if (cp == 0xFFFFFFFFu) return false;
  switch (uc::category(cp)) {
    case uc::Category::Cc: case uc::Category::Cf: case uc::Category::Cs: case uc::Category::Co:
    case uc::Category::Cn: case uc::Category::Zl: case uc::Category::Zp: case uc::Category::Zs:
      return false;
    default:
      return true;
  }
}

std::string strip(std::string_view s, const std::optional<std::string>& chars, bool left, bool right) {
  const std::vector<Ch> cs = chars_of(s);
  const std::vector<Ch> set = chars ? chars_of(*chars) : std::vector<Ch>{};
  auto strippable = [&](const Ch& c) { return chars ? in_chars(c.cp, set) : is_space(c.cp); };
  size_t b = 0, e = cs.size();
  if (left)
    while (b < e && strippable(cs[b])) ++b;
  if (right)
    while (e > b && strippable(cs[e - 1])) --e;
  if (b == e) return "";
  const size_t from = size_t(cs[b].bytes.data() - s.data());
  const size_t to = size_t(cs[e - 1].bytes.data() - s.data()) + cs[e - 1].bytes.size();
  return std::string(s.substr(from, to - from));
}

std::vector<std::string> split(std::string_view s, const std::optional<std::string>& sep, int64_t maxsplit) {
  std::vector<std::string> out;
  if (sep) {
    if (sep->empty()) runtime_error("empty separator");
    size_t pos = 0;
    while (maxsplit < 0 || int64_t(out.size()) < maxsplit) {
      const size_t hit = s.find(*sep, pos);
      if (hit == std::string_view::npos) break;
      out.emplace_back(s.substr(pos, hit - pos));
      pos = hit + sep->size();
    }
    out.emplace_back(s.substr(pos));
    return out;
  }
  // Runs of whitespace separate; leading and trailing whitespace yields nothing.
  const std::vector<Ch> cs = chars_of(s);
  size_t i = 0;
  auto byte_at = [&](size_t k) { return k < cs.size() ? size_t(cs[k].bytes.data() - s.data()) : s.size(); };
  while (true) {
    while (i < cs.size() && is_space(cs[i].cp)) ++i;
    if (i >= cs.size()) break;
    if (maxsplit >= 0 && int64_t(out.size()) >= maxsplit) {
      out.emplace_back(s.substr(byte_at(i)));  // the rest, trailing whitespace included
      break;
    }
    size_t j = i;
    while (j < cs.size() && !is_space(cs[j].cp)) ++j;
    out.emplace_back(s.substr(byte_at(i), byte_at(j) - byte_at(i)));
    i = j;
  }
  return out;
}

std::vector<std::string> rsplit(std::string_view s, const std::optional<std::string>& sep, int64_t maxsplit) {
  std::vector<std::string> out;
  if (sep) {
    if (sep->empty()) runtime_error("empty separator");
    size_t end = s.size();
    while (maxsplit < 0 || int64_t(out.size()) < maxsplit) {
      if (end < sep->size()) break;
      const size_t hit = s.rfind(*sep, end - sep->size());
      if (hit == std::string_view::npos) break;
      out.emplace_back(s.substr(hit + sep->size(), end - hit - sep->size()));
      end = hit;
    }
    out.emplace_back(s.substr(0, end));
    std::reverse(out.begin(), out.end());
    return out;
  }
  const std::vector<Ch> cs = chars_of(s);
  auto byte_end = [&](size_t k) { return size_t(cs[k].bytes.data() - s.data()) + cs[k].bytes.size(); };
  size_t i = cs.size();  // one past the current character
  while (true) {
    while (i > 0 && is_space(cs[i - 1].cp)) --i;
    if (i == 0) break;
    if (maxsplit >= 0 && int64_t(out.size()) >= maxsplit) {
      out.emplace_back(s.substr(0, byte_end(i - 1)));
      break;
    }
    size_t j = i;
    while (j > 0 && !is_space(cs[j - 1].cp)) --j;
    const size_t from = size_t(cs[j].bytes.data() - s.data());
    out.emplace_back(s.substr(from, byte_end(i - 1) - from));
    i = j;
  }
  std::reverse(out.begin(), out.end());
  return out;
}

std::vector<std::string> splitlines(std::string_view s, bool keepends) {
  std::vector<std::string> out;
  const std::vector<Ch> cs = chars_of(s);
  size_t start = 0;  // byte offset of the current line
  for (size_t i = 0; i < cs.size(); ++i) {
    const uint32_t c = cs[i].cp;
    const bool brk = c == '\n' || c == '\r' || c == 0x0B || c == 0x0C || (c >= 0x1C && c <= 0x1E) || c == 0x85 ||
                     c == 0x2028 || c == 0x2029;
    if (!brk) continue;
    const size_t at = size_t(cs[i].bytes.data() - s.data());
    size_t end = at + cs[i].bytes.size();
    if (c == '\r' && i + 1 < cs.size() && cs[i + 1].cp == '\n') {
      ++i;
      end += 1;
    }
    out.emplace_back(s.substr(start, (keepends ? end : at) - start));
    start = end;
  }
  if (start < s.size()) out.emplace_back(s.substr(start));
  return out;
}

std::string upper(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (const Ch& c : chars_of(s)) append_upper(out, c);
  return out;
}

std::string lower(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (const Ch& c : chars_of(s)) append_lower(out, c);
  return out;
}

std::string swapcase(std::string_view s) {
  std::string out;
  for (const Ch& c : chars_of(s)) {
    if (is_upper_cp(c.cp)) append_lower(out, c);
    else if (is_lower_cp(c.cp)) append_upper(out, c);
    else out += c.bytes;
  }
  return out;
}

bool is_upper_cp(uint32_t cp) {
  return cp != 0xFFFFFFFFu && (uc::category(cp) == uc::Category::Lu || uc::category(cp) == uc::Category::Lt);
}
bool is_lower_cp(uint32_t cp) { return cp != 0xFFFFFFFFu && uc::category(cp) == uc::Category::Ll; }
bool is_cased_cp(uint32_t cp) { return is_upper_cp(cp) || is_lower_cp(cp); }
bool is_alpha_cp(uint32_t cp) { return cp != 0xFFFFFFFFu && uc::is_letter(cp); }
bool is_digit_cp(uint32_t cp) { return cp != 0xFFFFFFFFu && uc::category(cp) == uc::Category::Nd; }
bool is_alnum_cp(uint32_t cp) { return cp != 0xFFFFFFFFu && (uc::is_letter(cp) || uc::is_number(cp)); }

bool all_of(std::string_view s, bool (*pred)(uint32_t)) {
  const std::vector<Ch> cs = chars_of(s);
  if (cs.empty()) return false;
  for (const Ch& c : cs)
    if (!pred(c.cp)) return false;
  return true;
}

bool is_upper(std::string_view s) {
  bool cased = false;
  for (const Ch& c : chars_of(s)) {
    if (is_lower_cp(c.cp)) return false;
    cased = cased || is_upper_cp(c.cp);
  }
  return cased;
}

bool is_lower(std::string_view s) {
  bool cased = false;
  for (const Ch& c : chars_of(s)) {
    if (is_upper_cp(c.cp)) return false;
    cased = cased || is_lower_cp(c.cp);
  }
  return cased;
}

std::string title(std::string_view s) {
  // Python: a cased character after a cased one is lowered, else raised.
  std::string out;
  bool prev_cased = false;
  for (const Ch& c : chars_of(s)) {
    if (prev_cased) append_lower(out, c);
    else append_upper(out, c);
    prev_cased = is_cased_cp(c.cp);
  }
  return out;
}

std::string capitalize(std::string_view s) {
  std::string out;
  bool first = true;
  for (const Ch& c : chars_of(s)) {
    if (first) append_upper(out, c);
    else append_lower(out, c);
    first = false;
  }
  return out;
}

std::string jinja_title(std::string_view s) {
  // Jinja's filter: each word (split at runs of '-', whitespace, '(', '{', '[',
  // '<', kept) gets its first character raised and the rest lowered.
  std::string out;
  bool word_start = true;
  for (const Ch& c : chars_of(s)) {
    const bool sep = c.cp == '-' || c.cp == '(' || c.cp == '{' || c.cp == '[' || c.cp == '<' || is_space(c.cp);
    if (sep) {
      out += c.bytes;
      word_start = true;
    } else if (word_start) {
      append_upper(out, c);
      word_start = false;
    } else {
      append_lower(out, c);
    }
  }
  return out;
}

std::string replace(std::string_view s, std::string_view old, std::string_view with, int64_t count) {
  std::string out;
  if (old.empty()) {
    // Python inserts `with` before every character and at the end.
    const std::vector<Ch> cs = chars_of(s);
    int64_t n = 0;
    for (const Ch& c : cs) {
      if (count < 0 || n < count) {
        out += with;
        ++n;
      }
      out += c.bytes;
    }
    if (count < 0 || n < count) out += with;
    return out;
  }
  size_t pos = 0;
  int64_t n = 0;
  while (count < 0 || n < count) {
    const size_t hit = s.find(old, pos);
    if (hit == std::string_view::npos) break;
    out.append(s.substr(pos, hit - pos));
    out.append(with);
    pos = hit + old.size();
    ++n;
  }
  out.append(s.substr(pos));
  return out;
}

int64_t find(std::string_view s, std::string_view sub) {
  const size_t hit = s.find(sub);
  return hit == std::string_view::npos ? -1 : int64_t(length(s.substr(0, hit)));
}

int64_t rfind(std::string_view s, std::string_view sub) {
  const size_t hit = s.rfind(sub);
  return hit == std::string_view::npos ? -1 : int64_t(length(s.substr(0, hit)));
}

int64_t count(std::string_view s, std::string_view sub) {
  if (sub.empty()) return int64_t(length(s)) + 1;
  int64_t n = 0;
  for (size_t pos = s.find(sub); pos != std::string_view::npos; pos = s.find(sub, pos + sub.size())) ++n;
  return n;
}

std::string repr(std::string_view s) {
  const bool has_single = s.find('\'') != std::string_view::npos;
  const bool has_double = s.find('"') != std::string_view::npos;
  const char quote = (has_single && !has_double) ? '"' : '\'';
  std::string out(1, quote);
  static const char* hex = "0123456789abcdef";
  for (const Ch& c : chars_of(s)) {
    const uint32_t cp = c.cp;
    if (cp == uint32_t(quote) || cp == '\\') {
      out += '\\';
      out += char(cp);
    } else if (cp == '\t') {
      out += "\\t";
    } else if (cp == '\n') {
      out += "\\n";
    } else if (cp == '\r') {
      out += "\\r";
    } else if (cp == 0xFFFFFFFFu) {
      out += c.bytes;  // not UTF-8: kept as is
    } else if (is_printable(cp)) {
      out += c.bytes;
    } else if (cp <= 0xFF) {
      out += "\\x";
      out += hex[cp >> 4];
      out += hex[cp & 15];
    } else if (cp <= 0xFFFF) {
      out += "\\u";
      for (int sh = 12; sh >= 0; sh -= 4) out += hex[(cp >> sh) & 15];
    } else {
      out += "\\U";
      for (int sh = 28; sh >= 0; sh -= 4) out += hex[(cp >> sh) & 15];
    }
  }
  out += quote;
  return out;
}

}  // namespace fish::chat::jinja::pystr
