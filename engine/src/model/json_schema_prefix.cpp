#include "model/json_schema_prefix.h"

#include <algorithm>

namespace fish {

namespace {

using Node = JsonSchema::Node;

bool is_space(uint8_t c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }
bool is_digit(uint8_t c) { return c >= '0' && c <= '9'; }
int hex_value(uint8_t c) {
  if (is_digit(c)) return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Where in an object / array a frame is.
enum Obj : uint8_t { KeyOrEnd, Key, InKey, Colon, Value, ObjCommaOrEnd };
enum Arr : uint8_t { ItemOrEnd, Item, ArrCommaOrEnd };
// A number's parts, as JsonPrefix reads them.
enum Num : uint8_t { Minus, Zero, Int, Dot, Frac, E, ESign, Exp };
constexpr const char* kWords[] = {"true", "false", "null"};

// Narrows [lo, hi) of sorted texts that share their first `at` bytes to those
// whose byte `at` is c. Texts of exactly `at` bytes sort first in the range.
void narrow(const std::vector<std::string>& v, uint32_t& lo, uint32_t& hi, uint32_t at, uint8_t c) {
  const auto first = v.begin() + lo, last = v.begin() + hi;
  const auto a = std::partition_point(first, last, [&](const std::string& s) { return s.size() <= at || uint8_t(s[at]) < c; });
  const auto b = std::partition_point(a, last, [&](const std::string& s) { return uint8_t(s[at]) == c; });
  lo = uint32_t(a - v.begin());
  hi = uint32_t(b - v.begin());
}

bool seen_bit(const std::vector<uint64_t>& bits, size_t i) { return (bits[i / 64] >> (i % 64)) & 1; }

}  // namespace

JsonSchemaPrefix::JsonSchemaPrefix(std::shared_ptr<const JsonSchema> schema, int32_t start)
    : s_(std::move(schema)), start_(start < 0 ? s_->root() : start), threads_(1) {}

bool JsonSchemaPrefix::feed(uint8_t c) {
  std::vector<Thread> keep = threads_;
  if (feed_one(c)) return true;
  threads_ = std::move(keep);
  return false;
}

bool JsonSchemaPrefix::feed(std::string_view bytes) {
  std::vector<Thread> keep = threads_;
  for (const char ch : bytes)
    if (!feed_one(uint8_t(ch))) {
      threads_ = std::move(keep);
      return false;
    }
  return true;
}

bool JsonSchemaPrefix::scan(std::string_view bytes) {
  for (const char ch : bytes)
    if (!feed_one(uint8_t(ch))) return false;
  return true;
}

bool JsonSchemaPrefix::complete() const {
  const auto& nodes = s_->nodes();
  for (const Thread& t : threads_) {
    if (t.done) return true;
    if (t.stack.size() != 1) continue;
    // A top-level number or enum literal ends with the text, not with a byte of its own.
    const Frame& f = t.stack[0];
    if (f.kind == Frame::Kind::Number && (f.st == Zero || f.st == Int || f.st == Frac || f.st == Exp)) return true;
    if (f.kind == Frame::Kind::Enum && nodes[size_t(f.node)].literals[f.lo].size() == f.count) return true;
  }
  return false;
}

// Steps every thread in place (a failed one is dropped), adds the threads
// split off at a value with alternatives, merges identical ones.
bool JsonSchemaPrefix::feed_one(uint8_t c) {
  std::vector<Thread> forks;
  size_t kept = 0;
  for (size_t i = 0; i < threads_.size(); ++i)
    if (step(threads_[i], c, forks)) {
      if (kept != i) threads_[kept] = std::move(threads_[i]);
      ++kept;
    }
  threads_.erase(threads_.begin() + std::ptrdiff_t(kept), threads_.end());
  for (Thread& f : forks) threads_.push_back(std::move(f));
  if (threads_.empty()) return false;
  if (threads_.size() > 1) {
    std::vector<Thread> unique;
    unique.reserve(threads_.size());
    for (Thread& t : threads_)
      if (std::find(unique.begin(), unique.end(), t) == unique.end()) unique.push_back(std::move(t));
    threads_ = std::move(unique);
  }
  if (threads_.size() > kMaxThreads) threads_.resize(kMaxThreads);
  return true;
}

void JsonSchemaPrefix::pop(Thread& t) {
  t.stack.pop_back();  // the container below already expects a comma or its end
  if (t.stack.empty()) t.done = true;
}

bool JsonSchemaPrefix::step(Thread& t, uint8_t c, std::vector<Thread>& forks) const {
  if (t.stack.empty()) {
    if (t.done) return false;
    if (is_space(c)) return ++t.spaces <= kMaxSpaceRun;
    t.spaces = 0;
    return start_value(t, start_, c, forks);
  }
  Frame& f = t.stack.back();
  switch (f.kind) {
    case Frame::Kind::Object:
      return object_byte(t, c, forks);
    case Frame::Kind::Array:
      return array_byte(t, c, forks);
    case Frame::Kind::String: {
      const Node& n = s_->nodes()[size_t(f.node)];
      const Str r = string_byte(f, c, false);
      if (r == Str::Refuse) return false;
      if (r == Str::Unit && f.count++ >= n.max_length) return false;
      if (r == Str::Close) {
        if (f.count < n.min_length) return false;
        pop(t);
      }
      return true;
    }
    case Frame::Kind::Number:
      return number_byte(t, c, forks);
    case Frame::Kind::Literal: {
      const char* w = kWords[f.st];
      if (uint8_t(w[f.count]) != c) return false;
      if (w[++f.count] == '\0') pop(t);
      return true;
    }
    case Frame::Kind::Enum:
      return enum_byte(t, c, forks);
  }
  return false;
}

// A value of `node` begins with c: one thread per alternative that takes c
// (t itself becomes the first).
bool JsonSchemaPrefix::start_value(Thread& t, int32_t node, uint8_t c, std::vector<Thread>& forks) const {
  const std::vector<int32_t>& alts = s_->nodes()[size_t(node)].expansion;
  if (alts.size() == 1) return begin(t, alts[0], c);
  const size_t first = forks.size();
  for (const int32_t a : alts) {
    // Past kMaxThreads split-offs this byte (from every thread), t takes its
    // first alternative and leaves out the rest (feed_one keeps at most
    // kMaxThreads anyway): the work per byte stays bounded.
    if (forks.size() > first && forks.size() > kMaxThreads) break;
    if (!begin(t, a, c)) continue;  // (t unchanged)
    forks.push_back(t);             // t with the alternative's frame on top
    t.stack.pop_back();
  }
  if (forks.size() == first) return false;
  t = std::move(forks[first]);
  forks.erase(forks.begin() + std::ptrdiff_t(first));
  return true;
}

// A value of the Value or Enum node `node` begins with c: its frame pushed;
// false (t unchanged) when it cannot.
bool JsonSchemaPrefix::begin(Thread& t, int32_t node, uint8_t c) const {
  const Node& n = s_->nodes()[size_t(node)];
  Frame f;
  f.node = node;
  if (n.kind == Node::Kind::Enum) {
    f.kind = Frame::Kind::Enum;
    f.lo = 0, f.hi = uint32_t(n.literals.size());
    narrow(n.literals, f.lo, f.hi, 0, c);
    if (f.lo == f.hi) return false;
    f.count = 1;
    t.stack.push_back(std::move(f));
    return true;
  }
  const auto has = [&](uint8_t type) { return (n.types & type) != 0; };
  switch (c) {
    case '{':
      // Below the top frame there are only containers: the stack's size is the depth.
      if (!has(JsonSchema::kObject) || t.stack.size() >= size_t(kMaxDepth)) return false;
      f.kind = Frame::Kind::Object, f.st = KeyOrEnd;
      f.seen.assign((n.props.size() + 63) / 64, 0);
      break;
    case '[':
      if (!has(JsonSchema::kArray) || t.stack.size() >= size_t(kMaxDepth)) return false;
      f.kind = Frame::Kind::Array, f.st = ItemOrEnd;
      break;
    case '"':
      if (!has(JsonSchema::kString)) return false;
      f.kind = Frame::Kind::String;
      break;
    case 't':
    case 'f':
      if (!has(JsonSchema::kBoolean)) return false;
      f.kind = Frame::Kind::Literal, f.st = c == 't' ? 0 : 1, f.count = 1;
      break;
    case 'n':
      if (!has(JsonSchema::kNull)) return false;
      f.kind = Frame::Kind::Literal, f.st = 2, f.count = 1;
      break;
    default:
      if ((c != '-' && !is_digit(c)) || !has(JsonSchema::kNumber | JsonSchema::kInteger)) return false;
      f.kind = Frame::Kind::Number;
      f.st = c == '-' ? Minus : c == '0' ? Zero : Int;
      f.integer = !has(JsonSchema::kNumber);
  }
  t.stack.push_back(std::move(f));
  return true;
}

// One more key may be written: an unwritten property, or any other key.
bool JsonSchemaPrefix::can_add_key(const Frame& f) const {
  const Node& n = s_->nodes()[size_t(f.node)];
  if (n.additional >= 0) return true;
  for (size_t i = 0; i < n.props.size(); ++i)
    if (n.prop_node[i] >= 0 && !seen_bit(f.seen, i)) return true;
  return false;
}

bool JsonSchemaPrefix::object_byte(Thread& t, uint8_t c, std::vector<Thread>& forks) const {
  Frame& f = t.stack.back();
  const Node& n = s_->nodes()[size_t(f.node)];
  if (f.st != InKey) {
    if (is_space(c)) return ++t.spaces <= kMaxSpaceRun;
    t.spaces = 0;
  }
  switch (f.st) {
    case KeyOrEnd:
    case Key:
      if (c == '"') {
        if (!can_add_key(f)) return false;
        f.st = InKey;
        f.lo = 0, f.hi = uint32_t(n.props.size()), f.count = 1;  // every name's literal begins with '"'
        f.other_key = n.additional >= 0;
        f.key.clear();
        f.esc = 0, f.u8 = 0, f.low_due = false;
        return true;
      }
      if (c == '}' && f.st == KeyOrEnd && f.req == n.n_required) {
        pop(t);
        return true;
      }
      return false;
    case InKey:
      return key_byte(f, c);
    case Colon:
      if (c != ':') return false;
      f.st = Value;
      return true;
    case Value: {
      const int32_t child = f.child;
      f.st = ObjCommaOrEnd;  // where the object will be once the value is read (f is gone after a push)
      return start_value(t, child, c, forks);
    }
    case ObjCommaOrEnd:
      if (c == ',') {
        if (!can_add_key(f)) return false;
        f.st = Key;
        return true;
      }
      if (c == '}' && f.req == n.n_required) {
        pop(t);
        return true;
      }
      return false;
  }
  return false;
}

// A byte of a key: matched against the property names (their literals,
// quotes included) and, where other keys are allowed, read as a key of its own.
bool JsonSchemaPrefix::key_byte(Frame& f, uint8_t c) const {
  const Node& n = s_->nodes()[size_t(f.node)];
  uint32_t lo = f.lo, hi = f.hi;
  narrow(n.props, lo, hi, f.count, c);
  if (lo < hi && n.props[lo].size() == f.count + 1) {  // c closes property lo's name
    if (n.prop_node[lo] < 0 || seen_bit(f.seen, lo)) return false;  // not writable, or written already
    f.seen[lo / 64] |= uint64_t(1) << (lo % 64);
    f.req += n.prop_required[lo];
    f.child = n.prop_node[lo];
    f.st = Colon;
    f.key.clear();
    return true;
  }
  const Str r = f.other_key ? string_byte(f, c, true) : Str::Refuse;
  if (r == Str::Close) {  // a key that is no property's name
    const auto at = std::lower_bound(f.others.begin(), f.others.end(), f.key);
    if (at != f.others.end() && *at == f.key) return false;  // each key once
    f.others.insert(at, f.key);
    f.key.clear();
    f.child = n.additional;
    f.st = Colon;
    return true;
  }
  f.other_key = r != Str::Refuse;
  bool prop = false;  // an unwritten, writable property still matches
  for (uint32_t i = lo; i < hi && !prop; ++i) prop = n.prop_node[i] >= 0 && !seen_bit(f.seen, i);
  if (!prop && !f.other_key) return false;
  f.lo = lo, f.hi = hi;
  ++f.count;
  if (f.other_key) f.key.push_back(char(c));
  return true;
}

bool JsonSchemaPrefix::array_byte(Thread& t, uint8_t c, std::vector<Thread>& forks) const {
  Frame& f = t.stack.back();
  const Node& n = s_->nodes()[size_t(f.node)];
  if (is_space(c)) return ++t.spaces <= kMaxSpaceRun;
  t.spaces = 0;
  const bool more = n.items >= 0 && f.count < n.max_items;  // one more item may be written
  if (c == ']' && f.st != Item) {
    if (f.count < n.min_items) return false;
    pop(t);
    return true;
  }
  if (f.st == ArrCommaOrEnd) {
    if (c != ',' || !more) return false;
    f.st = Item;
    return true;
  }
  if (!more) return false;
  ++f.count;
  f.st = ArrCommaOrEnd;
  return start_value(t, n.items, c, forks);
}

bool JsonSchemaPrefix::number_byte(Thread& t, uint8_t c, std::vector<Thread>& forks) const {
  Frame& f = t.stack.back();
  const auto digit_to = [&](Num next) {
    if (!is_digit(c)) return false;
    f.st = next;
    return true;
  };
  // The byte after a number's last digit belongs to what holds the number.
  const auto after = [&] {
    pop(t);
    return step(t, c, forks);
  };
  switch (f.st) {
    case Minus:
      return digit_to(c == '0' ? Zero : Int);
    case Zero:
    case Int:
      if (f.st == Int && is_digit(c)) return true;
      if (c == '.' && !f.integer) return f.st = Dot, true;
      if ((c == 'e' || c == 'E') && !f.integer) return f.st = E, true;
      return after();
    case Dot:
      return digit_to(Frac);
    case Frac:
      if (is_digit(c)) return true;
      if (c == 'e' || c == 'E') return f.st = E, true;
      return after();
    case E:
      if (c == '+' || c == '-') return f.st = ESign, true;
      return digit_to(Exp);
    case ESign:
      return digit_to(Exp);
    case Exp:
      if (is_digit(c)) return true;
      return after();
  }
  return false;
}

bool JsonSchemaPrefix::enum_byte(Thread& t, uint8_t c, std::vector<Thread>& forks) const {
  Frame& f = t.stack.back();
  const std::vector<std::string>& lits = s_->nodes()[size_t(f.node)].literals;
  uint32_t lo = f.lo, hi = f.hi;
  narrow(lits, lo, hi, f.count, c);
  if (lo == hi) {
    // No literal goes on with c: a literal written whole ends here (a
    // number's end is only seen at the next byte), and c belongs to what
    // holds it.
    if (lits[f.lo].size() != f.count) return false;
    pop(t);
    return step(t, c, forks);
  }
  f.lo = lo, f.hi = hi;
  ++f.count;
  return true;
}

// A byte of a string's contents (after its opening quote). Unit: a code
// point begins here (a character, the lead byte of a UTF-8 sequence, or an
// escape; the low half of an escaped surrogate pair is no new one).
// key: other keys' restricted escapes (no \u, no \/), one text per key.
JsonSchemaPrefix::Str JsonSchemaPrefix::string_byte(Frame& f, uint8_t c, bool key) {
  if (f.u8 > 0) {
    if (c < f.u8lo || c > f.u8hi) return Str::Refuse;
    f.u8lo = 0x80, f.u8hi = 0xBF;
    --f.u8;
    return Str::Part;
  }
  if (f.esc == 1) {
    if (c == 'u') {
      if (key) return Str::Refuse;
      f.esc = 2, f.hex = 0;
      return Str::Part;
    }
    if (f.low_due) return Str::Refuse;
    if (c == '"' || c == '\\' || c == 'b' || c == 'f' || c == 'n' || c == 'r' || c == 't' || (c == '/' && !key)) {
      f.esc = 0;
      return Str::Part;
    }
    return Str::Refuse;
  }
  if (f.esc >= 2) {
    const int h = hex_value(c);
    if (h < 0) return Str::Refuse;
    f.hex = uint16_t(f.hex * 16 + h);
    const int digits = f.esc - 1;
    // Surrogates: a low half (DC00-DFFF) exactly after a high one (D800-DBFF).
    if (digits == 1 && f.low_due && f.hex != 0xD) return Str::Refuse;
    if (digits == 2 && (f.hex >= 0xDC && f.hex <= 0xDF) != f.low_due) return Str::Refuse;
    if (digits < 4) {
      ++f.esc;
      return Str::Part;
    }
    f.esc = 0;
    f.low_due = !f.low_due && f.hex >= 0xD800 && f.hex <= 0xDBFF;
    return Str::Part;
  }
  if (f.low_due) {
    if (c != '\\') return Str::Refuse;
    f.esc = 1;
    return Str::Part;  // the pair's second half: the code point began with the first
  }
  if (c == '"') return Str::Close;
  if (c == '\\') {
    f.esc = 1;
    return Str::Unit;
  }
  if (c < 0x20) return Str::Refuse;
  if (c < 0x80) return Str::Unit;
  // UTF-8 lead bytes, with the ranges that rule out overlong forms,
  // surrogates and code points past U+10FFFF.
  if (c >= 0xC2 && c <= 0xDF) {
    f.u8 = 1;
  } else if (c >= 0xE0 && c <= 0xEF) {
    f.u8 = 2;
    if (c == 0xE0) f.u8lo = 0xA0;
    if (c == 0xED) f.u8hi = 0x9F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    f.u8 = 3;
    if (c == 0xF0) f.u8lo = 0x90;
    if (c == 0xF4) f.u8hi = 0x8F;
  } else {
    return Str::Refuse;
  }
  return Str::Unit;
}

}  // namespace fish
