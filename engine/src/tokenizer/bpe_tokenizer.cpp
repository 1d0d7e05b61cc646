#include "tokenizer/bpe_tokenizer.h"

#include <algorithm>

#include "common/error.h"
#include "tokenizer/byte_level.h"

namespace fish {

namespace {

// Heap order: the lowest rank on top, then the leftmost pair.
bool candidate_after(const auto& a, const auto& b) {
  return a.rank > b.rank || (a.rank == b.rank && a.left > b.left);
}

}  // namespace

BpeTokenizer::BpeTokenizer(std::unique_ptr<Vocab> vocab, const std::vector<std::string_view>& merges,
                           std::string_view pre, const TokenizerConfig& config)
    : VocabTokenizer(std::move(vocab), config, PreTokenizer::adds_bos_by_default(pre)),
      pre_(pre) {
  merges_.reserve(merges.size());
  for (size_t i = 0; i < merges.size(); ++i) {
    const std::string_view m = merges[i];
    // The separator is the first space after the first character: a left part
    // never is empty, so "  x" would split as " " + "x".
    const size_t sp = m.size() > 1 ? m.find(' ', 1) : std::string_view::npos;
    if (sp == std::string_view::npos || sp + 1 >= m.size())
      throw Error("tokenizer.ggml.merges[" + std::to_string(i) + "] '" + std::string(m) +
                  "' is not two symbols separated by a space");
    const std::string_view left = m.substr(0, sp), right = m.substr(sp + 1);
    const int32_t a = symbol_id(left), b = symbol_id(right);
    const int32_t r = symbol_id(std::string(left) + std::string(right));
    merges_.insert(a, b, {int32_t(i), r});  // a repeated pair keeps its first rank
  }
  const ByteLevel& bl = ByteLevel::get();
  for (int b = 0; b < 256; ++b) {
    const std::string& ch = bl.byte_to_utf8(uint8_t(b));
    byte_token_[size_t(b)] = vocab_->find(ch);
    auto it = extra_.find(ch);
    byte_symbol_[size_t(b)] = byte_token_[size_t(b)] >= 0 ? byte_token_[size_t(b)] : (it != extra_.end() ? it->second : -1);
  }
  build_pieces();
}

int32_t BpeTokenizer::symbol_id(std::string_view text) {
  const int32_t id = vocab_->find(text);
  if (id >= 0) return id;
  auto it = extra_.find(std::string(text));
  if (it != extra_.end()) return it->second;
  const int32_t extra = vocab_->size() + int32_t(extra_.size());
  extra_.emplace(std::string(text), extra);
  return extra;
}

std::string BpeTokenizer::make_piece(int32_t id) const {
  switch (vocab_->attr(id)) {
    case TokenAttr::Control:
    case TokenAttr::Unknown:
    case TokenAttr::UserDefined:
    case TokenAttr::Unused:
      return vocab_->text(id);  // written as plain text, not in the byte alphabet
    default:
      return ByteLevel::get().decode(vocab_->text(id));
  }
}

void BpeTokenizer::encode_text(std::string_view text, bool /*after_special*/, std::vector<int32_t>& out) const {
  Scratch s;
  pre_.for_each_piece(text, [&](uint32_t b, uint32_t e) { encode_word(text.substr(b, e - b), s, out); });
}

// Fallback for a symbol that is not a token: one token per byte. A byte whose
// alphabet character is not in the vocabulary (vocabularies trained without
// ever seeing e.g. 0xF8) is dropped, as llama.cpp does: the UNK of these
// vocabularies is usually <|endoftext|>, which must not appear mid-prompt.
void BpeTokenizer::emit_bytes(std::string_view bytes, std::vector<int32_t>& out) const {
  for (unsigned char c : bytes) {
    const int32_t t = byte_token_[c];
    if (t >= 0) out.push_back(t);
  }
}

void BpeTokenizer::push_candidate(Scratch& s, int32_t left, int32_t right) const {
  if (left < 0 || right < 0) return;
  const int32_t a = s.ids[size_t(left)], b = s.ids[size_t(right)];
  if (a < 0 || b < 0) return;
  const MergeTable::Merge* m = merges_.find(a, b);
  if (!m) return;
  s.heap.push_back({m->rank, left, right, a, b, m->result});
  std::push_heap(s.heap.begin(), s.heap.end(), [](const Candidate& x, const Candidate& y) { return candidate_after(x, y); });
}

void BpeTokenizer::encode_word(std::string_view word, Scratch& s, std::vector<int32_t>& out) const {
  const size_t n = word.size();
  if (n == 0) return;
  if (pre_.ignore_merges()) {
    s.mapped.clear();
    const ByteLevel& bl = ByteLevel::get();
    for (unsigned char c : word) s.mapped += bl.byte_to_utf8(c);
    const int32_t id = vocab_->find(s.mapped);
    if (id >= 0) {
      out.push_back(id);
      return;
    }
  }
  // Symbols: ids[i] (-2 once merged away), a doubly linked list by index.
  s.ids.resize(n);
  s.next.resize(n);
  s.prev.resize(n);
  for (size_t i = 0; i < n; ++i) {
    s.ids[i] = byte_symbol_[static_cast<unsigned char>(word[i])];
    s.prev[i] = int32_t(i) - 1;
    s.next[i] = i + 1 < n ? int32_t(i + 1) : -1;
  }
  s.heap.clear();
  for (size_t i = 0; i + 1 < n; ++i) push_candidate(s, int32_t(i), int32_t(i + 1));
  const auto cmp = [](const Candidate& x, const Candidate& y) { return candidate_after(x, y); };
  while (!s.heap.empty()) {
    std::pop_heap(s.heap.begin(), s.heap.end(), cmp);
    const Candidate c = s.heap.back();
    s.heap.pop_back();
    // Stale when either side has merged since the pair was queued.
    if (s.ids[size_t(c.left)] != c.left_id || s.ids[size_t(c.right)] != c.right_id || s.next[size_t(c.left)] != c.right)
      continue;
    s.ids[size_t(c.left)] = c.result;
    s.ids[size_t(c.right)] = -2;
    const int32_t after = s.next[size_t(c.right)];
    s.next[size_t(c.left)] = after;
    if (after >= 0) s.prev[size_t(after)] = c.left;
    push_candidate(s, s.prev[size_t(c.left)], c.left);
    push_candidate(s, c.left, after);
  }
  const int32_t n_vocab = vocab_->size();
  for (int32_t i = 0; i >= 0; i = s.next[size_t(i)]) {
    const int32_t id = s.ids[size_t(i)];
    if (id >= 0 && id < n_vocab) {
      out.push_back(id);
    } else {
      const size_t end = s.next[size_t(i)] >= 0 ? size_t(s.next[size_t(i)]) : n;
      emit_bytes(word.substr(size_t(i), end - size_t(i)), out);
    }
  }
}

}  // namespace fish
