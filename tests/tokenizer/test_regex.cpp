// UnicodeRegex: Perl-style leftmost-first backtracking semantics over code points.
#include <catch2/catch.hpp>

#include <memory>

#include "common/error.h"
#include "tokenizer/unicode_regex.h"

using namespace fish;

namespace {

// All matches, left to right, as strings (what a split would isolate).
std::vector<std::string> matches(const char* pattern, const std::string& text) {
  UnicodeRegex re(pattern);
  std::vector<uint32_t> cps, offs;
  unicode::decode_utf8_all(text, cps, offs);
  UnicodeRegex::Scratch s;
  std::vector<std::string> out;
  size_t from = 0, mb = 0, me = 0;
  while (from <= cps.size() && re.search(cps.data(), 0, cps.size(), from, mb, me, s)) {
    out.push_back(text.substr(offs[mb], offs[me] - offs[mb]));
    from = me > mb ? me : mb + 1;
  }
  return out;
}

using V = std::vector<std::string>;

}  // namespace

TEST_CASE("regex: alternation is ordered, not longest", "[tokenizer][regex]") {
  CHECK(matches("a|ab", "ab") == V{"a"});
  CHECK(matches("ab|a", "ab") == V{"ab"});
  CHECK(matches("'s|'t|'re", "it's 're") == V{"'s", "'re"});
}

TEST_CASE("regex: greedy and lazy quantifiers backtrack", "[tokenizer][regex]") {
  CHECK(matches("a+ab", "aaab") == V{"aaab"});
  CHECK(matches("a+?", "aaa") == V{"a", "a", "a"});
  CHECK(matches("a*?b", "aab") == V{"aab"});
  CHECK(matches("\\p{N}{1,3}", "12345") == V{"123", "45"});
  CHECK(matches("[0-9][0-9][0-9]", "1234567") == V{"123", "456"});
  CHECK(matches("x{2}", "xxxxx") == V{"xx", "xx"});
  CHECK(matches("(?:ab){2,}", "abababx") == V{"ababab"});
  CHECK(matches("(?:ab)?c", "abc c") == V{"abc", "c"});
  CHECK(matches("(?:a|b)+?c", "abac") == V{"abac"});
  CHECK(matches("(?:ab){1,2}?", "abab") == V{"ab", "ab"});
}

TEST_CASE("regex: the whitespace-run lookahead (not followed by non-space) leaves the last space to the next word", "[tokenizer][regex]") {
  CHECK(matches("\\s+(?!\\S)|\\s+", "   x") == V{"  ", " "});
  CHECK(matches("\\s+(?!\\S)", "   x") == V{"  "});
  CHECK(matches("\\s+(?!\\S)", "a   ") == V{"   "});   // at the end: all of it
  CHECK(matches("\\s+(?!\\S)", "\nx").empty());         // one space before a word: no match
  CHECK(matches("a(?=b)", "ac ab") == V{"a"});
  CHECK(matches("\\s*[\\r\\n]+", "  \n\n  x") == V{"  \n\n"});
}

TEST_CASE("regex: classes, Unicode properties and escapes", "[tokenizer][regex]") {
  CHECK(matches("\\p{L}+", "\xc3\x84pfel 12") == V{"\xc3\x84pfel"});
  CHECK(matches("[^\\s\\p{L}\\p{N}]+", "a!?  b..") == V{"!?", ".."});
  CHECK(matches("\\p{Lu}", "aBc\xc3\x84") == V{"B", "\xc3\x84"});
  CHECK(matches("\\P{L}+", "ab12cd") == V{"12"});
  CHECK(matches("[\\p{P}\\$\\+<=>\\^~\\|`]+", "a+b, c`") == V{"+", ",", "`"});
  CHECK(matches("\\x{1F999}", "a\xF0\x9F\xA6\x99") == V{"\xF0\x9F\xA6\x99"});
  CHECK(matches("[\\x{4E00}-\\x{9FA5}]+", "ab\xe4\xb8\x96\xe7\x95\x8c!") == V{"\xe4\xb8\x96\xe7\x95\x8c"});
  CHECK(matches("\\d+", "a\xd9\xa3" "4") == V{"\xd9\xa3" "4"});  // Arabic-Indic three is Nd
  CHECK(matches("\\w+", "ab_1 c") == V{"ab_1", "c"});
  CHECK(matches("[a\\-z]+", "a-zb") == V{"a-z"});
  CHECK(matches(".", "\n") == V{});
  CHECK(matches("[\\r\\n]", "a\r\nb") == V{"\r", "\n"});
}

TEST_CASE("regex: case-insensitive groups and anchors", "[tokenizer][regex]") {
  CHECK(matches("(?i:'s|'ll)", "'S 'lL 'x") == V{"'S", "'lL"});
  CHECK(matches("(?i:'s)", "'\xc5\xbf") == V{"'\xc5\xbf"});  // U+017F long s folds to s
  CHECK(matches("(?i:[a-c]+)", "xAbCx") == V{"AbC"});
  CHECK(matches("\\s+$", "a  ") == V{"  "});
  CHECK(matches("\\s+$", "  a").empty());
  CHECK(matches("^a", "aa") == V{"a"});
}

TEST_CASE("regex: invalid patterns are refused with the pattern in the message", "[tokenizer][regex]") {
  for (const char* bad : {"(", "a)", "a**", "[z-a]", "\\p{Foo}", "(?:a*)*", "[abc", "*a", "a{3,1}", "(?<x>a)",
                          "\\q", "a++", "(?=a)+"}) {
    INFO(bad);
    try {
      UnicodeRegex re(bad);
      FAIL("accepted: " << bad);
    } catch (const Error& e) {
      CHECK(std::string(e.what()).find(std::string("'") + bad + "'") != std::string::npos);
    }
  }
  // A '{' that does not start a repeat is a literal.
  CHECK(matches("a{x", "a{x") == V{"a{x"});
}

TEST_CASE("regex: searches stay linear on long runs", "[tokenizer][regex]") {
  // \s+$ over 200k spaces and a digit: a naive search retries every start
  // (quadratic, ~2e10 steps); the run skip makes it one pass.
  std::string text(200000, ' ');
  text += "1";
  CHECK(matches("\\s+$", text).empty());
  CHECK(matches("\\s+$", text + " ") == V{" "});
  CHECK(matches("\\p{N}+x", std::string(100000, '7')).empty());
  CHECK(matches("\\s+(?!\\S)|\\s+", text) == V{std::string(199999, ' '), " "});
}

TEST_CASE("regex: random patterns either compile or throw fish::Error", "[tokenizer][regex]") {
  // Fixed-seed fuzzing of the parser and matcher: no crash, no out-of-range
  // match, whatever the syntax. (Run under -DFISH_SANITIZE=ON in CI.)
  const std::vector<std::string> atoms = {"a", "b", "(", ")", "[", "]", "^", "-", "|", "*", "+", "?", "{", "}",
                                          ",", "1", "2", "\\s", "\\S", "\\p{L}", "\\P{N}", "\\", ".", "$", "(?:",
                                          "(?=", "(?!", "(?i:", "\\x{41}", "\xc3\xa4", "'", " "};
  const std::string text_chars[] = {"a", "b", " ", "1", "A", "\xc3\xa4", "'", "\n", "-"};
  uint64_t state = 99;
  auto next = [&] {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return uint32_t(state >> 33);
  };
  int compiled = 0, refused = 0;
  for (int i = 0; i < 3000; ++i) {
    std::string pat;
    for (uint32_t k = 0, n = 1 + next() % 8; k < n; ++k) pat += atoms[next() % atoms.size()];
    std::unique_ptr<UnicodeRegex> re;
    try {
      re = std::make_unique<UnicodeRegex>(pat);
      ++compiled;
    } catch (const Error&) {
      ++refused;
      continue;
    }
    std::string text;
    for (uint32_t k = 0, n = next() % 10; k < n; ++k) text += text_chars[next() % 9];
    std::vector<uint32_t> cps, offs;
    unicode::decode_utf8_all(text, cps, offs);
    UnicodeRegex::Scratch s;
    size_t from = 0, mb = 0, me = 0;
    while (from <= cps.size() && re->search(cps.data(), 0, cps.size(), from, mb, me, s)) {
      REQUIRE(mb >= from);
      REQUIRE(mb <= me);
      REQUIRE(me <= cps.size());
      from = me > mb ? me : mb + 1;
    }
  }
  CHECK(compiled > 300);
  CHECK(refused > 300);
}
