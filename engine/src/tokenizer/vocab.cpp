#include "tokenizer/vocab.h"

#include <algorithm>

#include "common/error.h"

namespace fish {

Vocab::Vocab(std::vector<std::string> tokens, std::vector<float> scores, std::vector<TokenAttr> types)
    : text_(std::move(tokens)), score_(std::move(scores)), attr_(std::move(types)) {
  if (score_.empty()) score_.assign(text_.size(), 0.0f);
  if (attr_.empty()) attr_.assign(text_.size(), TokenAttr::Normal);
  if (score_.size() != text_.size())
    throw Error("token scores: " + std::to_string(score_.size()) + " entries for " +
                std::to_string(text_.size()) + " tokens");
  if (attr_.size() != text_.size())
    throw Error("token types: " + std::to_string(attr_.size()) + " entries for " + std::to_string(text_.size()) +
                " tokens");
  if (text_.size() > size_t(INT32_MAX)) throw Error("vocabulary too large");

  index_.reserve(text_.size());
  for (size_t i = 0; i < text_.size(); ++i) index_.emplace(std::string_view(text_[i]), int32_t(i));

  trie_.emplace_back();
  for (size_t i = 0; i < text_.size(); ++i) {
    const TokenAttr a = attr_[i];
    if (a != TokenAttr::Control && a != TokenAttr::UserDefined && a != TokenAttr::Unknown) continue;
    const std::string& t = text_[i];
    if (t.empty()) continue;  // an empty special text would match everywhere
    int32_t node = 0;
    for (unsigned char c : t) {
      auto& edges = trie_[size_t(node)].next;
      auto it = std::lower_bound(edges.begin(), edges.end(), std::make_pair(c, int32_t(-1)),
                                 [](const auto& x, const auto& y) { return x.first < y.first; });
      if (it != edges.end() && it->first == c) {
        node = it->second;
      } else {
        const auto child = int32_t(trie_.size());
        edges.insert(it, {c, child});
        trie_.emplace_back();
        node = child;
      }
    }
    if (trie_[size_t(node)].token < 0) trie_[size_t(node)].token = int32_t(i);  // duplicates: lowest id
    first_byte_[static_cast<unsigned char>(t[0])] = true;
  }
}

void Vocab::partition(std::string_view text, bool parse_special, std::vector<Fragment>& out) const {
  out.clear();
  size_t raw_begin = 0, i = 0;
  while (i < text.size()) {
    if (!first_byte_[static_cast<unsigned char>(text[i])]) {
      ++i;
      continue;
    }
    // Walk the trie from i; remember the longest eligible token.
    int32_t node = 0, best = -1;
    size_t best_end = 0;
    for (size_t j = i; j < text.size(); ++j) {
      const auto& edges = trie_[size_t(node)].next;
      const auto c = static_cast<unsigned char>(text[j]);
      auto it = std::lower_bound(edges.begin(), edges.end(), std::make_pair(c, int32_t(-1)),
                                 [](const auto& x, const auto& y) { return x.first < y.first; });
      if (it == edges.end() || it->first != c) break;
      node = it->second;
      const int32_t tok = trie_[size_t(node)].token;
      if (tok >= 0 && (parse_special || attr_[size_t(tok)] == TokenAttr::UserDefined)) {
        best = tok;
        best_end = j + 1;
      }
    }
    if (best < 0) {
      ++i;
      continue;
    }
    if (i > raw_begin) out.push_back({-1, raw_begin, i});
    out.push_back({best, i, best_end});
    i = raw_begin = best_end;
  }
  if (raw_begin < text.size()) out.push_back({-1, raw_begin, text.size()});
}

}  // namespace fish
