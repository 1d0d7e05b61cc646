// UnicodeRegex: parser, compiler and backtracking matcher (see unicode_regex.h).
//
// Pipeline: the pattern (UTF-8) is decoded to code points, parsed by recursive
// descent into a small tree (Node), then compiled to a linear program of Inst.
// A repeat of a single class compiles to one Repeat instruction (one stack frame
// per repeat instead of one per code point): the pre-tokenizer patterns are
// mostly such runs (\p{L}+, \s+, [^\s\p{L}\p{N}]+).
#include "tokenizer/unicode_regex.h"

#include <algorithm>

#include "common/error.h"

namespace fish {

using unicode::CodepointRange;

bool UnicodeRegex::CharClass::contains_slow(uint32_t cp, const unicode::CodepointInfo& info) const {
  const uint8_t b = info.info(cp);
  bool in = ((cat_mask >> (b & 0x1F)) & 1) != 0;
  if (!in && (space || not_space)) {
    const bool ws = (b & unicode::CodepointInfo::kSpaceBit) != 0;
    in = (space && ws) || (not_space && !ws);
  }
  if (!in) {
    for (const auto& r : ranges) {
      if (cp >= r.first && cp <= r.last) {
        in = true;
        break;
      }
    }
  }
  return in != negated;
}

void UnicodeRegex::CharClass::finalize() {
  const auto& info = unicode::CodepointInfo::get();
  ascii[0] = ascii[1] = 0;
  for (uint32_t cp = 0; cp < 128; ++cp)
    if (contains_slow(cp, info)) ascii[cp >> 6] |= uint64_t(1) << (cp & 63);
}

// --- parser and compiler ---

class RegexCompiler {
 public:
  RegexCompiler(UnicodeRegex& re, std::string_view pattern) : re_(re) {
    std::vector<uint32_t> offsets;
    unicode::decode_utf8_all(pattern, p_, offsets);
  }

  void compile() {
    const int root = parse_alt(false);
    if (i_ < p_.size()) fail("unmatched ')'");
    re_.programs_.emplace_back();
    emit(0, root);
    re_.programs_[0].push_back({UnicodeRegex::Inst{}});  // Match
    for (auto& c : re_.classes_) c.finalize();
  }

 private:
  enum class Kind { Empty, Class, Concat, Alt, Repeat, Look, Begin, End };
  struct Node {
    Kind kind = Kind::Empty;
    int cls = -1;
    std::vector<int> kids;
    int min = 0, max = 0;  // Repeat; max < 0 = unbounded
    bool greedy = true;
    bool negate = false;   // Look
  };

  [[noreturn]] void fail(const std::string& why) const {
    throw Error("regex '" + re_.pattern_ + "': " + why + " at code point " + std::to_string(i_));
  }
  bool at_end() const { return i_ >= p_.size(); }
  uint32_t peek() const { return p_[i_]; }
  bool eat(uint32_t c) {
    if (!at_end() && p_[i_] == c) {
      ++i_;
      return true;
    }
    return false;
  }
  int add(Node n) {
    nodes_.push_back(std::move(n));
    return int(nodes_.size()) - 1;
  }
  int add_class(UnicodeRegex::CharClass c) {
    re_.classes_.push_back(std::move(c));
    Node n;
    n.kind = Kind::Class;
    n.cls = int(re_.classes_.size()) - 1;
    return add(std::move(n));
  }

  // Case-insensitive fold for ASCII letters: the other case, plus the two
  // non-ASCII code points whose simple case fold is s / k (CaseFolding.txt).
  static void add_folded(UnicodeRegex::CharClass& c, uint32_t lo, uint32_t hi) {
    for (uint32_t cp = std::max<uint32_t>(lo, 'A'); cp <= std::min<uint32_t>(hi, 'z'); ++cp) {
      uint32_t other = 0;
      if (cp >= 'A' && cp <= 'Z') other = cp + 32;
      else if (cp >= 'a' && cp <= 'z') other = cp - 32;
      else continue;
      c.ranges.push_back({other, other});
      if (cp == 's' || cp == 'S') c.ranges.push_back({0x017F, 0x017F});
      if (cp == 'k' || cp == 'K') c.ranges.push_back({0x212A, 0x212A});
    }
  }

  int parse_alt(bool icase) {
    std::vector<int> alts{parse_seq(icase)};
    while (eat('|')) alts.push_back(parse_seq(icase));
    if (alts.size() == 1) return alts[0];
    Node n;
    n.kind = Kind::Alt;
    n.kids = std::move(alts);
    return add(std::move(n));
  }

  int parse_seq(bool icase) {
    Node n;
    n.kind = Kind::Concat;
    while (!at_end() && peek() != '|' && peek() != ')') {
      int atom = parse_atom(icase);
      atom = parse_quantifier(atom);
      n.kids.push_back(atom);
    }
    if (n.kids.size() == 1) return n.kids[0];
    if (n.kids.empty()) return add(Node{});
    return add(std::move(n));
  }

  bool parse_number(int& v) {
    size_t start = i_;
    v = 0;
    while (!at_end() && peek() >= '0' && peek() <= '9') {
      v = v * 10 + int(peek() - '0');
      if (v > 100000) fail("repeat count too large");
      ++i_;
    }
    return i_ > start;
  }

  int parse_quantifier(int atom) {
    if (at_end()) return atom;
    int min = 0, max = 0;
    const size_t save = i_;
    const uint32_t c = peek();
    if (c == '?') { min = 0; max = 1; ++i_; }
    else if (c == '*') { min = 0; max = -1; ++i_; }
    else if (c == '+') { min = 1; max = -1; ++i_; }
    else if (c == '{') {
      ++i_;
      if (!parse_number(min)) { i_ = save; return atom; }  // a literal '{'
      if (eat(',')) {
        if (!parse_number(max)) max = -1;
      } else {
        max = min;
      }
      if (!eat('}')) { i_ = save; return atom; }
      if (max >= 0 && max < min) fail("repeat {n,m} with m < n");
    } else {
      return atom;
    }
    bool greedy = true;
    if (eat('?')) greedy = false;
    else if (!at_end() && peek() == '+') fail("possessive quantifiers are not supported");
    if (!at_end() && (peek() == '*' || peek() == '+' || (peek() == '?' && !greedy))) fail("nested quantifier");
    const Kind k = nodes_[size_t(atom)].kind;
    if (k == Kind::Look || k == Kind::Begin || k == Kind::End) fail("quantifier on a zero-width assertion");
    Node n;
    n.kind = Kind::Repeat;
    n.kids = {atom};
    n.min = min;
    n.max = max;
    n.greedy = greedy;
    if (nullable(atom) && (max < 0 || max > 1)) fail("repeat of an expression that can match the empty string");
    return add(std::move(n));
  }

  int parse_atom(bool icase) {
    const uint32_t c = p_[i_++];
    switch (c) {
      case '(': return parse_group(icase);
      case '[': return parse_class(icase);
      case '.': {
        UnicodeRegex::CharClass cl;
        cl.negated = true;
        cl.ranges.push_back({'\n', '\n'});
        return add_class(std::move(cl));
      }
      case '^': { Node n; n.kind = Kind::Begin; return add(std::move(n)); }
      case '$': { Node n; n.kind = Kind::End; return add(std::move(n)); }
      case '*': case '+': case '?': --i_; fail("quantifier without an operand");
      case '\\': {
        UnicodeRegex::CharClass cl;
        if (at_end()) fail("trailing backslash");
        parse_escape(cl, icase);
        return add_class(std::move(cl));
      }
      default: {
        UnicodeRegex::CharClass cl;
        cl.ranges.push_back({c, c});
        if (icase) add_folded(cl, c, c);
        return add_class(std::move(cl));
      }
    }
  }

  int parse_group(bool icase) {
    Node look;
    bool is_look = false;
    bool inner_icase = icase;
    if (eat('?')) {
      if (eat(':')) {
      } else if (eat('=')) {
        is_look = true;
      } else if (eat('!')) {
        is_look = true;
        look.negate = true;
      } else if (eat('i')) {
        if (!eat(':')) fail("only (?i:...) is supported among inline flags");
        inner_icase = true;
      } else {
        fail("unsupported group syntax");
      }
    }
    const int body = parse_alt(inner_icase);
    if (!eat(')')) fail("missing ')'");
    if (!is_look) return body;
    look.kind = Kind::Look;
    look.kids = {body};
    return add(std::move(look));
  }

  static uint32_t hex_value(uint32_t c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return 16;
  }
  uint32_t parse_hex(int digits) {
    uint32_t v = 0;
    for (int k = 0; k < digits; ++k) {
      if (at_end() || hex_value(peek()) > 15) fail("bad hex escape");
      v = v * 16 + hex_value(p_[i_++]);
    }
    return v;
  }

  // Parses the escape after a backslash into `cl` (adds an item). Returns the
  // literal code point for single-character escapes (for ranges in a class),
  // or -1 when the escape is a set (\s, \p{L}, ...).
  int64_t parse_escape(UnicodeRegex::CharClass& cl, bool icase) {
    const uint32_t c = p_[i_++];
    auto literal = [&](uint32_t v) -> int64_t {
      cl.ranges.push_back({v, v});
      if (icase) add_folded(cl, v, v);
      return v;
    };
    switch (c) {
      case 's': cl.space = true; return -1;
      case 'S': cl.not_space = true; return -1;
      case 'd': cl.cat_mask |= unicode::cat_bit(unicode::Category::Nd); return -1;
      case 'D': cl.cat_mask |= unicode::kMaskAll & ~unicode::cat_bit(unicode::Category::Nd); return -1;
      case 'w': cl.cat_mask |= kWordMask; return -1;
      case 'W': cl.cat_mask |= unicode::kMaskAll & ~kWordMask; return -1;
      case 'p': case 'P': {
        std::string name;
        if (eat('{')) {
          while (!at_end() && peek() != '}') name.push_back(char(p_[i_++]));
          if (!eat('}')) fail("missing '}' in \\p{...}");
        } else {
          if (at_end()) fail("missing property name");
          name.push_back(char(p_[i_++]));
        }
        bool neg = c == 'P';
        if (!name.empty() && name[0] == '^') { neg = !neg; name.erase(0, 1); }
        uint32_t mask = 0;
        if (!unicode::category_mask_from_name(name, mask)) fail("unknown Unicode property '" + name + "'");
        cl.cat_mask |= neg ? (unicode::kMaskAll & ~mask) : mask;
        return -1;
      }
      case 't': return literal('\t');
      case 'n': return literal('\n');
      case 'r': return literal('\r');
      case 'f': return literal('\f');
      case 'v': return literal('\v');
      case 'a': return literal(0x07);
      case 'e': return literal(0x1B);
      case 'x': {
        if (eat('{')) {
          uint32_t v = 0;
          int n = 0;
          while (!at_end() && peek() != '}') {
            if (hex_value(peek()) > 15 || ++n > 6) fail("bad \\x{...} escape");
            v = v * 16 + hex_value(p_[i_++]);
          }
          if (!eat('}') || n == 0 || v > unicode::kMaxCodepoint) fail("bad \\x{...} escape");
          return literal(v);
        }
        return literal(parse_hex(2));
      }
      case 'u': return literal(parse_hex(4));
      case 'U': return literal(parse_hex(8));
      default:
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))
          fail(std::string("unsupported escape \\") + char(c));
        return literal(c);  // escaped punctuation or any other symbol
    }
  }

  int parse_class(bool icase) {
    UnicodeRegex::CharClass cl;
    if (eat('^')) cl.negated = true;
    bool first = true;
    while (true) {
      if (at_end()) fail("missing ']'");
      const uint32_t c = p_[i_++];
      if (c == ']' && !first) break;
      first = false;
      int64_t lo = c;
      if (c == '\\') {
        if (at_end()) fail("trailing backslash");
        UnicodeRegex::CharClass item;
        lo = parse_escape(item, false);
        if (lo < 0) {  // a set escape: merge it into the class
          cl.cat_mask |= item.cat_mask;
          cl.space = cl.space || item.space;
          cl.not_space = cl.not_space || item.not_space;
          cl.ranges.insert(cl.ranges.end(), item.ranges.begin(), item.ranges.end());
          continue;
        }
      }
      int64_t hi = lo;
      // A range lo-hi: '-' followed by something other than ']'.
      if (i_ + 1 < p_.size() && peek() == '-' && p_[i_ + 1] != ']') {
        ++i_;
        const uint32_t d = p_[i_++];
        hi = d;
        if (d == '\\') {
          if (at_end()) fail("trailing backslash");
          UnicodeRegex::CharClass tmp;
          hi = parse_escape(tmp, false);
          if (hi < 0) fail("a class range cannot end in a set escape");
        }
        if (hi < lo) fail("class range out of order");
      }
      cl.ranges.push_back({uint32_t(lo), uint32_t(hi)});
      if (icase) add_folded(cl, uint32_t(lo), uint32_t(hi));
    }
    return add_class(std::move(cl));
  }

  bool nullable(int id) const {
    const Node& n = nodes_[size_t(id)];
    switch (n.kind) {
      case Kind::Class: return false;
      case Kind::Concat:
        for (int k : n.kids) if (!nullable(k)) return false;
        return true;
      case Kind::Alt:
        for (int k : n.kids) if (nullable(k)) return true;
        return false;
      case Kind::Repeat: return n.min == 0 || nullable(n.kids[0]);
      default: return true;
    }
  }

  // Emits node `id` into program `prog`.
  void emit(size_t prog, int id) {
    using Inst = UnicodeRegex::Inst;
    using Op = UnicodeRegex::Op;
    const Node& n = nodes_[size_t(id)];  // nodes_ is fixed while emitting; programs_ may grow
    auto P = [&]() -> UnicodeRegex::Program& { return re_.programs_[prog]; };
    auto here = [&]() { return int32_t(P().size()); };
    switch (n.kind) {
      case Kind::Empty: return;
      case Kind::Class: {
        Inst in;
        in.op = Op::Class;
        in.cls = n.cls;
        P().push_back(in);
        return;
      }
      case Kind::Begin: { Inst in; in.op = Op::Begin; P().push_back(in); return; }
      case Kind::End: { Inst in; in.op = Op::End; P().push_back(in); return; }
      case Kind::Concat:
        for (int k : n.kids) emit(prog, k);
        return;
      case Kind::Alt: {
        std::vector<int32_t> jumps;
        for (size_t k = 0; k < n.kids.size(); ++k) {
          if (k + 1 == n.kids.size()) {
            emit(prog, n.kids[k]);
            break;
          }
          const int32_t split = here();
          Inst s;
          s.op = Op::Split;
          s.a = split + 1;
          P().push_back(s);
          emit(prog, n.kids[k]);
          jumps.push_back(here());
          Inst j;
          j.op = Op::Jump;
          P().push_back(j);
          P()[size_t(split)].b = here();
        }
        for (int32_t j : jumps) P()[size_t(j)].a = here();
        return;
      }
      case Kind::Look: {
        const size_t sub = re_.programs_.size();
        re_.programs_.emplace_back();
        emit(sub, n.kids[0]);
        re_.programs_[sub].push_back(Inst{});  // Match
        Inst in;
        in.op = Op::Look;
        in.a = int32_t(sub);
        in.negate = n.negate;
        P().push_back(in);
        return;
      }
      case Kind::Repeat: {
        const Node& kid = nodes_[size_t(n.kids[0])];
        if (kid.kind == Kind::Class) {
          Inst in;
          in.op = Op::Repeat;
          in.cls = kid.cls;
          in.min = n.min;
          in.max = n.max;
          in.greedy = n.greedy;
          P().push_back(in);
          return;
        }
        for (int k = 0; k < n.min; ++k) emit(prog, n.kids[0]);
        if (n.max < 0) {
          // L: Split(body, out); body; Jump L; out:
          const int32_t loop = here();
          Inst s;
          s.op = Op::Split;
          P().push_back(s);
          emit(prog, n.kids[0]);
          Inst j;
          j.op = Op::Jump;
          j.a = loop;
          P().push_back(j);
          const int32_t body = loop + 1, out = here();
          P()[size_t(loop)].a = n.greedy ? body : out;
          P()[size_t(loop)].b = n.greedy ? out : body;
          return;
        }
        std::vector<int32_t> splits;
        for (int k = n.min; k < n.max; ++k) {
          splits.push_back(here());
          Inst s;
          s.op = Op::Split;
          P().push_back(s);
          emit(prog, n.kids[0]);
        }
        const int32_t out = here();
        for (int32_t s : splits) {
          P()[size_t(s)].a = n.greedy ? s + 1 : out;
          P()[size_t(s)].b = n.greedy ? out : s + 1;
        }
        return;
      }
    }
  }

  static constexpr uint32_t kWordMask = unicode::kMaskL | unicode::kMaskM |
                                        unicode::cat_bit(unicode::Category::Nd) |
                                        unicode::cat_bit(unicode::Category::Pc);

  UnicodeRegex& re_;
  std::vector<uint32_t> p_;
  size_t i_ = 0;
  std::vector<Node> nodes_;
};

UnicodeRegex::UnicodeRegex(std::string_view pattern) : pattern_(pattern), info_(&unicode::CodepointInfo::get()) {
  RegexCompiler(*this, pattern).compile();
}

// --- matcher ---

// Backtracking over the program. Stack frames: count < 0 is an alternative
// (resume at pc with pos); count >= 0 is a Repeat at pc that started at pos and
// should next be retried with `count` code points.
bool UnicodeRegex::run(int prog, const uint32_t* cps, size_t begin, size_t end, size_t at, size_t& match_end,
                       Scratch& scratch) const {
  const Program& code = programs_[size_t(prog)];
  auto& stack = scratch.stack;
  const size_t base = stack.size();
  const auto& info = *info_;
  int32_t pc = 0;
  size_t pos = at;
  while (true) {
    const Inst& in = code[size_t(pc)];
    bool ok = true;
    switch (in.op) {
      case Op::Class:
        if (pos < end && classes_[size_t(in.cls)].contains(cps[pos], info)) {
          ++pos;
          ++pc;
        } else {
          ok = false;
        }
        break;
      case Op::Repeat: {
        const CharClass& cl = classes_[size_t(in.cls)];
        const size_t limit = in.max < 0 ? end - pos : std::min(end - pos, size_t(in.max));
        if (in.greedy) {
          size_t k = 0;
          while (k < limit && cl.contains(cps[pos + k], info)) ++k;
          if (k < size_t(in.min)) { ok = false; break; }
          if (k > size_t(in.min)) stack.push_back({pc, int64_t(k - 1), pos});
          pos += k;
        } else {
          size_t k = 0;
          while (k < size_t(in.min) && k < limit && cl.contains(cps[pos + k], info)) ++k;
          if (k < size_t(in.min)) { ok = false; break; }
          if (k < limit) stack.push_back({pc, int64_t(k + 1), pos});
          pos += k;
        }
        ++pc;
        break;
      }
      case Op::Split:
        stack.push_back({in.b, -1, pos});
        pc = in.a;
        break;
      case Op::Jump:
        pc = in.a;
        break;
      case Op::Look: {
        size_t sub_end = 0;
        const bool m = run(in.a, cps, begin, end, pos, sub_end, scratch);
        if (m != in.negate) ++pc;
        else ok = false;
        break;
      }
      case Op::Begin:
        if (pos == begin) ++pc;
        else ok = false;
        break;
      case Op::End:
        if (pos == end) ++pc;
        else ok = false;
        break;
      case Op::Match:
        match_end = pos;
        stack.resize(base);  // a match (or a lookahead) is atomic
        return true;
    }
    if (ok) continue;
    // Backtrack.
    while (true) {
      if (stack.size() == base) return false;
      const Scratch::Frame f = stack.back();
      stack.pop_back();
      if (f.count < 0) {
        pc = f.pc;
        pos = f.pos;
        break;
      }
      const Inst& rep = code[size_t(f.pc)];
      const size_t k = size_t(f.count);
      if (rep.greedy) {
        if (k > size_t(rep.min)) stack.push_back({f.pc, int64_t(k - 1), f.pos});
      } else {
        // Extend the lazy run by one code point, if it matches.
        const size_t p = f.pos + k - 1;
        if (p >= end || !classes_[size_t(rep.cls)].contains(cps[p], info)) continue;
        const size_t limit = rep.max < 0 ? end - f.pos : std::min(end - f.pos, size_t(rep.max));
        if (k < limit) stack.push_back({f.pc, int64_t(k + 1), f.pos});
      }
      pc = f.pc + 1;
      pos = f.pos + k;
      break;
    }
  }
}

bool UnicodeRegex::match_at(const uint32_t* cps, size_t begin, size_t end, size_t at, size_t& match_end,
                            Scratch& scratch) const {
  return run(0, cps, begin, end, at, match_end, scratch);
}

bool UnicodeRegex::search(const uint32_t* cps, size_t begin, size_t end, size_t from, size_t& match_begin,
                          size_t& match_end, Scratch& scratch) const {
  // A pattern that starts with an unbounded run C{m,} (\s+$, \p{N}+, ...): if no
  // match starts at s, none starts inside the same run of C either. From s+1 the
  // rest of the pattern is tried at a subset of the positions it was tried at
  // from s (the rest only looks forward). Skipping the run keeps such searches
  // linear instead of quadratic in the run length.
  const Inst& first = programs_[0][0];
  const CharClass* run_class =
      first.op == Op::Repeat && first.max < 0 ? &classes_[size_t(first.cls)] : nullptr;
  for (size_t s = from; s <= end;) {
    if (run(0, cps, begin, end, s, match_end, scratch)) {
      match_begin = s;
      return true;
    }
    size_t next = s + 1;
    if (run_class && s < end && run_class->contains(cps[s], *info_)) {
      while (next < end && run_class->contains(cps[next], *info_)) ++next;
    }
    s = next;
  }
  return false;
}

}  // namespace fish
