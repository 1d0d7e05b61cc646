#include "convert/synth_vocab.h"

#include <cstdio>

#include "common/error.h"

namespace fish::convert {

namespace {
// Letters by their frequency in English text, so the short (high-score) pieces
// look like the common pieces of a real vocabulary.
constexpr char kLetters[] = "etaoinshrdlcumwfgypbvkjxqz";
constexpr int kNumLetters = 26;

// The k-th string (k >= 0) in bijective base 26: e, t, ..., z, ee, et, ...
std::string letters_of(uint64_t k) {
  std::string s;
  ++k;
  while (k) {
    --k;
    s.insert(s.begin(), kLetters[k % kNumLetters]);
    k /= kNumLetters;
  }
  return s;
}
}  // namespace

SynthVocab make_synth_vocab(int n_vocab) {
  if (n_vocab < 259)
    throw Error("synthetic vocabulary: " + std::to_string(n_vocab) + " tokens is too few (the specials and bytes need 259)");
  SynthVocab v;
  v.tokens.reserve(size_t(n_vocab));
  v.scores.reserve(size_t(n_vocab));
  v.token_type.reserve(size_t(n_vocab));
  auto add = [&](std::string s, float score, int32_t type) {
    v.tokens.push_back(std::move(s));
    v.scores.push_back(score);
    v.token_type.push_back(type);
  };
  add("<unk>", 0.f, 2);
  add("<s>", 0.f, 3);
  add("</s>", 0.f, 3);
  for (int b = 0; b < 256; ++b) {
    char buf[8];
    std::snprintf(buf, sizeof buf, "<0x%02X>", b);
    add(buf, 0.f, 6);
  }
  // Pieces: word-start then continuation form of each letter string, in order.
  for (uint64_t k = 0; int(v.tokens.size()) < n_vocab; ++k) {
    const std::string s = letters_of(k);
    const float score = -float(v.tokens.size() - 259);
    add("\xE2\x96\x81" + s, score, 1);  // U+2581 LOWER ONE EIGHTH BLOCK: SentencePiece's word start
    if (int(v.tokens.size()) < n_vocab) add(s, score - 0.5f, 1);
  }
  return v;
}

}  // namespace fish::convert
