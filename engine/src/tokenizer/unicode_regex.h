// UnicodeRegex: a small backtracking regular-expression engine over code points,
// for the pre-tokenizer split patterns of byte-level BPE vocabularies.
//
// Semantics are those of Perl-style engines (PCRE, Oniguruma as used by the
// HuggingFace tokenizers, Python `regex`): leftmost match, alternatives tried
// in order, greedy quantifiers give back one code point at a time, lookaheads
// are atomic. Supported syntax:
//   literals (UTF-8), .  ^  $  |  (...)  (?:...)  (?i:...)  (?=...)  (?!...)
//   quantifiers ? * + {n} {n,} {n,m}, each optionally lazy (??, *?, ...)
//   classes [...] / [^...] with ranges, escapes and \p{..} inside
//   \s \S \d \D \w \W \p{X} \P{X} (X: L Lu Ll Lt Lm Lo M Mn Mc Me N Nd Nl No
//   P Pc Pd Ps Pe Pi Pf Po S Sm Sc Sk So Z Zs Zl Zp C Cc Cf Cs Co Cn)
//   \t \n \r \f \v \xHH \x{H..} \uHHHH and escaped punctuation.
// \s is the Unicode White_Space property, \d is \p{Nd}, \w is [\p{L}\p{M}\p{Nd}\p{Pc}].
// (?i:...) folds ASCII letters (plus U+017F ſ ~ s and U+212A K ~ k, the two
// non-ASCII code points whose simple case folding is an ASCII letter).
// ^ and $ are the start and end of the subject (a pre-tokenizer piece).
// A repeat of a sub-expression that can match the empty string is refused at
// compile time (it could loop); possessive quantifiers and back-references are
// not supported. Errors throw fish::Error naming the pattern and the offset.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/unicode.h"

namespace fish {

class UnicodeRegex {
 public:
  explicit UnicodeRegex(std::string_view pattern);

  // Reusable backtracking stack: one per thread (a search allocates nothing once warm).
  struct Scratch {
    struct Frame { int32_t pc; int64_t count; size_t pos; };
    std::vector<Frame> stack;
  };

  // Leftmost match inside the subject cps[begin, end) that starts at or after
  // `from`. On success sets [match_begin, match_end) (possibly empty).
  bool search(const uint32_t* cps, size_t begin, size_t end, size_t from, size_t& match_begin,
              size_t& match_end, Scratch& scratch) const;

  // Match anchored at `at`; sets match_end.
  bool match_at(const uint32_t* cps, size_t begin, size_t end, size_t at, size_t& match_end,
                Scratch& scratch) const;

  const std::string& pattern() const { return pattern_; }

  // One character class: membership is precomputed for ASCII; otherwise
  // (category in cat_mask) or (White_Space test) or (in ranges), then negation.
  struct CharClass {
    bool negated = false;
    uint32_t cat_mask = 0;
    bool space = false;      // \s item
    bool not_space = false;  // \S item
    std::vector<unicode::CodepointRange> ranges;
    uint64_t ascii[2] = {0, 0};  // final membership of code points 0..127

    bool contains_slow(uint32_t cp, const unicode::CodepointInfo& info) const;
    bool contains(uint32_t cp, const unicode::CodepointInfo& info) const {
      if (cp < 128) return (ascii[cp >> 6] >> (cp & 63)) & 1;
      return contains_slow(cp, info);
    }
    void finalize();  // fills `ascii`
  };

  enum class Op : uint8_t {
    Class,   // one code point of class `cls`
    Repeat,  // cls{min,max} (max < 0: unbounded), greedy or lazy, one frame on the stack
    Split,   // try `a` first, on failure `b`
    Jump,    // to `a`
    Look,    // zero-width lookahead: sub-program `a`, negated when `negate`
    Begin,   // ^
    End,     // $
    Match,
  };
  struct Inst {
    Op op = Op::Match;
    bool greedy = true;
    bool negate = false;
    int32_t a = 0, b = 0;
    int32_t cls = -1;
    int32_t min = 0, max = 0;
  };
  using Program = std::vector<Inst>;

 private:
  bool run(int prog, const uint32_t* cps, size_t begin, size_t end, size_t at, size_t& match_end,
           Scratch& scratch) const;

  std::string pattern_;
  std::vector<CharClass> classes_;
  std::vector<Program> programs_;  // [0] is the main program, others are lookaheads
  const unicode::CodepointInfo* info_ = nullptr;

  friend class RegexCompiler;
};

}  // namespace fish
