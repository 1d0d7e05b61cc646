#include "tokenizer/spm_tokenizer.h"

#include <algorithm>
#include <cstdio>

#include "tokenizer/unicode.h"

namespace fish {

namespace {

constexpr std::string_view kSpaceMark = "\xe2\x96\x81";  // U+2581 '▁'

// Heap order: the highest score on top, then the leftmost pair.
bool bigram_after(float sa, int32_t la, float sb, int32_t lb) { return sa < sb || (sa == sb && la > lb); }

// "<0xNN>" -> NN, -1 otherwise.
int parse_byte_token(const std::string& t) {
  if (t.size() != 6 || t[0] != '<' || t[1] != '0' || t[2] != 'x' || t[5] != '>') return -1;
  auto hex = [](char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  const int hi = hex(t[3]), lo = hex(t[4]);
  return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

}  // namespace

SpmTokenizer::SpmTokenizer(std::unique_ptr<Vocab> vocab, const TokenizerConfig& config)
    : VocabTokenizer(std::move(vocab), config, /*default_add_bos=*/true),
      add_space_prefix_(config.add_space_prefix.value_or(true)) {
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", b);
    byte_token_[size_t(b)] = vocab_->find(name);
  }
  build_pieces();
}

std::string SpmTokenizer::make_piece(int32_t id) const {
  const std::string& t = vocab_->text(id);
  switch (vocab_->attr(id)) {
    case TokenAttr::Control:
    case TokenAttr::Unknown:
    case TokenAttr::UserDefined:
      return t;
    case TokenAttr::Byte: {
      const int b = parse_byte_token(t);
      if (b >= 0) return std::string(1, static_cast<char>(b));
      break;
    }
    default:
      break;
  }
  std::string out;
  out.reserve(t.size());
  for (size_t i = 0; i < t.size();) {
    if (t.compare(i, kSpaceMark.size(), kSpaceMark) == 0) {
      out.push_back(' ');
      i += kSpaceMark.size();
    } else {
      out.push_back(t[i++]);
    }
  }
  return out;
}

void SpmTokenizer::try_bigram(const std::string& s, const std::vector<Symbol>& syms, std::vector<Bigram>& heap,
                              int32_t left, int32_t right) const {
  if (left < 0 || right < 0) return;
  const Symbol& l = syms[size_t(left)];
  const Symbol& r = syms[size_t(right)];
  const int32_t id = vocab_->find(std::string_view(s).substr(l.begin, l.len + r.len));
  if (id < 0) return;
  heap.push_back({vocab_->score(id), left, right, l.len + r.len});
  std::push_heap(heap.begin(), heap.end(),
                 [](const Bigram& a, const Bigram& b) { return bigram_after(a.score, a.left, b.score, b.left); });
}

void SpmTokenizer::encode_text(std::string_view text, bool after_special, std::vector<int32_t>& out) const {
  // Escaped text: optional prefix '▁', every ' ' as '▁'.
  std::string s;
  s.reserve(text.size() + 8);
  if (add_space_prefix_ && after_special) s += kSpaceMark;
  for (char c : text) {
    if (c == ' ') s += kSpaceMark;
    else s.push_back(c);
  }
  std::vector<Symbol> syms;
  syms.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    const auto c = unicode::decode_utf8(s.data() + i, s.size() - i);
    const auto idx = int32_t(syms.size());
    syms.push_back({uint32_t(i), c.len, idx - 1, -1});
    if (idx > 0) syms[size_t(idx - 1)].next = idx;
    i += c.len;
  }
  if (syms.empty()) return;

  std::vector<Bigram> heap;
  for (size_t i = 1; i < syms.size(); ++i) try_bigram(s, syms, heap, int32_t(i - 1), int32_t(i));
  const auto cmp = [](const Bigram& a, const Bigram& b) { return bigram_after(a.score, a.left, b.score, b.left); };
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), cmp);
    const Bigram bg = heap.back();
    heap.pop_back();
    Symbol& l = syms[size_t(bg.left)];
    Symbol& r = syms[size_t(bg.right)];
    // Stale when either side has changed since the pair was queued.
    if (l.len == 0 || r.len == 0 || l.next != bg.right || l.len + r.len != bg.len) continue;
    l.len += r.len;
    r.len = 0;
    l.next = r.next;
    if (r.next >= 0) syms[size_t(r.next)].prev = bg.left;
    try_bigram(s, syms, heap, l.prev, bg.left);
    try_bigram(s, syms, heap, bg.left, l.next);
  }

  for (int32_t i = 0; i >= 0; i = syms[size_t(i)].next) {
    const Symbol& sym = syms[size_t(i)];
    const std::string_view piece = std::string_view(s).substr(sym.begin, sym.len);
    const int32_t id = vocab_->find(piece);
    if (id >= 0) {
      out.push_back(id);
      continue;
    }
    bool all_bytes = true;
    for (unsigned char c : piece) all_bytes = all_bytes && byte_token_[c] >= 0;
    if (all_bytes) {
      for (unsigned char c : piece) out.push_back(byte_token_[c]);
    } else if (unk() >= 0) {
      out.push_back(unk());
    }
  }
}

}  // namespace fish
