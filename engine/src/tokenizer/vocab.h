// Vocab: the token table shared by both tokenizer families: texts, scores and
// types by id, text -> id lookup, and the split of input text on special
// tokens (control, unknown and user-defined token texts) before tokenizing.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace fish {

class Vocab {
 public:
  // scores/types may be empty (0 / Normal). Sizes must match tokens (the caller
  // checks and names the metadata key; this throws a plain message otherwise).
  Vocab(std::vector<std::string> tokens, std::vector<float> scores, std::vector<TokenAttr> types);
  Vocab(const Vocab&) = delete;  // index_ holds views into text_
  Vocab& operator=(const Vocab&) = delete;

  int32_t size() const { return int32_t(text_.size()); }
  bool valid(int32_t id) const { return id >= 0 && id < size(); }
  const std::string& text(int32_t id) const { return text_[size_t(id)]; }
  float score(int32_t id) const { return score_[size_t(id)]; }
  TokenAttr attr(int32_t id) const { return attr_[size_t(id)]; }
  // The id of a token text, -1 when absent (with duplicates, the lowest id).
  int32_t find(std::string_view text) const {
    auto it = index_.find(text);
    return it == index_.end() ? -1 : it->second;
  }

  // A stretch of input: a special token (token >= 0) or raw text [begin, end).
  struct Fragment {
    int32_t token;
    size_t begin, end;
  };
  // Splits `text` on special-token texts, leftmost-longest: user-defined tokens
  // always, control and unknown tokens only when parse_special.
  void partition(std::string_view text, bool parse_special, std::vector<Fragment>& out) const;

 private:
  std::vector<std::string> text_;
  std::vector<float> score_;
  std::vector<TokenAttr> attr_;
  std::unordered_map<std::string_view, int32_t> index_;

  // Byte trie of special-token texts: node 0 is the root; edges sorted by byte.
  struct TrieNode {
    std::vector<std::pair<uint8_t, int32_t>> next;
    int32_t token = -1;
  };
  std::vector<TrieNode> trie_;
  bool first_byte_[256] = {};  // quick reject: no special text starts with this byte
};

}  // namespace fish
