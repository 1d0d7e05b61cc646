// BpeTokenizer: byte-level BPE (tokenizer.ggml.model = "gpt2").
//
// encode: split on special tokens -> pre-tokenize each text stretch into words
// (PreTokenizer) -> per word, start from one symbol per byte (the byte's
// alphabet character, see byte_level.h) and repeatedly merge the adjacent pair
// with the lowest merge rank (leftmost first on ties) -> each final symbol is a
// token; a symbol that is not a token falls back to its bytes' tokens.
//
// Symbols are ids: a token id, or an "extra" id >= n_vocab for strings that
// appear in the merges but not in the vocabulary, so that merging works on
// integers: merges_ maps (left id, right id) -> (rank, merged id).
#pragma once
#include <array>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tokenizer/merge_table.h"
#include "tokenizer/pretokenizer.h"
#include "tokenizer/vocab_tokenizer.h"

namespace fish {

class BpeTokenizer final : public VocabTokenizer {
 public:
  // merges: "left right" in rank order. Throws fish::Error naming
  // tokenizer.ggml.merges[i] for a malformed entry, or the pre-tokenizer name.
  BpeTokenizer(std::unique_ptr<Vocab> vocab, const std::vector<std::string_view>& merges, std::string_view pre,
               const TokenizerConfig& config);

  const char* kind() const override { return "bpe"; }
  std::string_view pre_name() const override { return pre_.name(); }
  const PreTokenizer& pretokenizer() const { return pre_; }

 protected:
  void encode_text(std::string_view text, bool after_special, std::vector<int32_t>& out) const override;
  std::string make_piece(int32_t id) const override;

 private:
  struct Candidate {  // a mergeable adjacent pair in the work heap
    int32_t rank, left, right, left_id, right_id, result;
  };
  struct Scratch {
    std::vector<int32_t> ids, next, prev;
    std::vector<Candidate> heap;
    std::string mapped;
  };

  int32_t symbol_id(std::string_view text);  // token id, else a (new) extra id
  void push_candidate(Scratch& s, int32_t left, int32_t right) const;
  void encode_word(std::string_view word, Scratch& s, std::vector<int32_t>& out) const;
  void emit_bytes(std::string_view bytes, std::vector<int32_t>& out) const;

  PreTokenizer pre_;
  MergeTable merges_;
  std::unordered_map<std::string, int32_t> extra_;  // merge strings missing from the vocabulary
  std::array<int32_t, 256> byte_symbol_{};  // initial symbol of each byte value (-1: none)
  std::array<int32_t, 256> byte_token_{};   // its token for the fallback (-1: none)
};

}  // namespace fish
