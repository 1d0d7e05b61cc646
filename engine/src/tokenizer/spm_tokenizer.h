// SpmTokenizer: SentencePiece-style BPE by score (tokenizer.ggml.model = "llama").
//
// encode, per text stretch: spaces become U+2581 '▁' (and one '▁' is prefixed
// at the start of the input or after a special token, unless
// tokenizer.ggml.add_space_prefix is false); start from one symbol per UTF-8
// character and repeatedly merge the adjacent pair whose concatenation is the
// vocabulary token with the highest score (leftmost first on ties); a final
// symbol that is not a token becomes its bytes' <0xNN> tokens (byte fallback),
// or UNK when the vocabulary has no byte tokens.
// decode: '▁' -> ' ', <0xNN> -> the byte; the first leading space is dropped
// when the prefix was added (decode(encode(s)) == s).
#pragma once
#include <array>
#include <string>
#include <vector>

#include "tokenizer/vocab_tokenizer.h"

namespace fish {

class SpmTokenizer final : public VocabTokenizer {
 public:
  SpmTokenizer(std::unique_ptr<Vocab> vocab, const TokenizerConfig& config);

  const char* kind() const override { return "spm"; }
  std::string_view pre_name() const override { return {}; }
  bool add_space_prefix() const { return add_space_prefix_; }

 protected:
  void encode_text(std::string_view text, bool after_special, std::vector<int32_t>& out) const override;
  std::string make_piece(int32_t id) const override;
  bool strips_leading_space() const override { return add_space_prefix_; }

 private:
  struct Symbol {
    uint32_t begin, len;  // bytes of the escaped text
    int32_t prev, next;
  };
  struct Bigram {
    float score;
    int32_t left, right;
    uint32_t len;
  };

  void try_bigram(const std::string& s, const std::vector<Symbol>& syms, std::vector<Bigram>& heap, int32_t left,
                  int32_t right) const;

  bool add_space_prefix_ = true;
  std::array<int32_t, 256> byte_token_{};  // <0xNN> token of each byte, -1 when missing
};

}  // namespace fish
