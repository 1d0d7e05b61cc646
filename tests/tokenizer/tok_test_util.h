// Helpers for the tokenizer tests: llama.cpp-style vocab test cases
// (<vocab>.gguf.inp / .out) and a minimal JSON string->int map reader.
#pragma once
#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace fish::test {

inline bool read_file(const std::string& path, std::string& out) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return false;
  std::ostringstream ss;
  ss << f.rdbuf();
  out = ss.str();
  return true;
}

// A vocab's test cases: .inp holds the strings joined by
// "\n__ggml_vocab_test__\n" (with one trailing separator); line i of .out holds
// the expected ids of string i, space separated, without BOS/EOS.
struct VocabCase {
  std::string text;
  std::vector<int32_t> ids;
};

inline bool read_vocab_cases(const std::string& inp_path, const std::string& out_path, std::vector<VocabCase>& cases,
                             std::string& error) {
  std::string inp, out;
  if (!read_file(inp_path, inp)) { error = "cannot read " + inp_path; return false; }
  if (!read_file(out_path, out)) { error = "cannot read " + out_path; return false; }
  const std::string sep = "\n__ggml_vocab_test__\n";
  std::vector<std::string> texts;
  size_t pos = 0;
  while (true) {
    const size_t k = inp.find(sep, pos);
    if (k == std::string::npos) {
      if (pos < inp.size()) texts.push_back(inp.substr(pos));
      break;
    }
    texts.push_back(inp.substr(pos, k - pos));
    pos = k + sep.size();
  }
  std::vector<std::vector<int32_t>> id_lines;
  std::istringstream lines(out);
  std::string line;
  while (std::getline(lines, line)) {
    std::istringstream ls(line);
    std::vector<int32_t> ids;
    long long v;
    while (ls >> v) ids.push_back(int32_t(v));
    id_lines.push_back(std::move(ids));
  }
  if (texts.size() != id_lines.size()) {
    error = inp_path + ": " + std::to_string(texts.size()) + " strings but " + std::to_string(id_lines.size()) +
            " lines of ids in " + out_path;
    return false;
  }
  cases.clear();
  for (size_t i = 0; i < texts.size(); ++i) cases.push_back({texts[i], id_lines[i]});
  return true;
}

// Appends the UTF-8 of cp.
inline void put_utf8(std::string& s, uint32_t cp) {
  if (cp < 0x80) {
    s.push_back(char(cp));
  } else if (cp < 0x800) {
    s.push_back(char(0xC0 | (cp >> 6)));
    s.push_back(char(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    s.push_back(char(0xE0 | (cp >> 12)));
    s.push_back(char(0x80 | ((cp >> 6) & 0x3F)));
    s.push_back(char(0x80 | (cp & 0x3F)));
  } else {
    s.push_back(char(0xF0 | (cp >> 18)));
    s.push_back(char(0x80 | ((cp >> 12) & 0x3F)));
    s.push_back(char(0x80 | ((cp >> 6) & 0x3F)));
    s.push_back(char(0x80 | (cp & 0x3F)));
  }
}

// Parses a flat JSON object of string keys and integer values (GPT-2 style
// encoder.json), handling the escapes \" \\ \/ \b \f \n \r \t \uXXXX (with
// surrogate pairs). Returns false with a message on anything else.
inline bool parse_json_string_int_map(const std::string& js, std::vector<std::pair<std::string, int64_t>>& out,
                                      std::string& error) {
  size_t i = 0;
  auto ws = [&] { while (i < js.size() && (js[i] == ' ' || js[i] == '\n' || js[i] == '\r' || js[i] == '\t')) ++i; };
  auto fail = [&](const std::string& why) { error = why + " at byte " + std::to_string(i); return false; };
  auto hex4 = [&](uint32_t& v) {
    if (i + 4 > js.size()) return false;
    v = 0;
    for (int k = 0; k < 4; ++k) {
      const char c = js[i++];
      v <<= 4;
      if (c >= '0' && c <= '9') v |= uint32_t(c - '0');
      else if (c >= 'a' && c <= 'f') v |= uint32_t(c - 'a' + 10);
      else if (c >= 'A' && c <= 'F') v |= uint32_t(c - 'A' + 10);
      else return false;
    }
    return true;
  };
  ws();
  if (i >= js.size() || js[i] != '{') return fail("expected '{'");
  ++i;
  ws();
  if (i < js.size() && js[i] == '}') return true;
  while (true) {
    ws();
    if (i >= js.size() || js[i] != '"') return fail("expected a string key");
    ++i;
    std::string key;
    while (true) {
      if (i >= js.size()) return fail("unterminated string");
      const char c = js[i++];
      if (c == '"') break;
      if (c != '\\') { key.push_back(c); continue; }
      if (i >= js.size()) return fail("bad escape");
      const char e = js[i++];
      switch (e) {
        case '"': key.push_back('"'); break;
        case '\\': key.push_back('\\'); break;
        case '/': key.push_back('/'); break;
        case 'b': key.push_back('\b'); break;
        case 'f': key.push_back('\f'); break;
        case 'n': key.push_back('\n'); break;
        case 'r': key.push_back('\r'); break;
        case 't': key.push_back('\t'); break;
        case 'u': {
          uint32_t v;
          if (!hex4(v)) return fail("bad \\u escape");
          if (v >= 0xD800 && v <= 0xDBFF) {
            uint32_t lo;
            if (i + 2 > js.size() || js[i] != '\\' || js[i + 1] != 'u') return fail("lone high surrogate");
            i += 2;
            if (!hex4(lo) || lo < 0xDC00 || lo > 0xDFFF) return fail("bad low surrogate");
            v = 0x10000 + ((v - 0xD800) << 10) + (lo - 0xDC00);
          }
          put_utf8(key, v);
          break;
        }
        default: return fail("unknown escape");
      }
    }
    ws();
    if (i >= js.size() || js[i] != ':') return fail("expected ':'");
    ++i;
    ws();
    bool neg = false;
    if (i < js.size() && js[i] == '-') { neg = true; ++i; }
    if (i >= js.size() || js[i] < '0' || js[i] > '9') return fail("expected an integer value");
    int64_t v = 0;
    while (i < js.size() && js[i] >= '0' && js[i] <= '9') v = v * 10 + (js[i++] - '0');
    out.emplace_back(std::move(key), neg ? -v : v);
    ws();
    if (i < js.size() && js[i] == ',') { ++i; continue; }
    if (i < js.size() && js[i] == '}') return true;
    return fail("expected ',' or '}'");
  }
}

}  // namespace fish::test
