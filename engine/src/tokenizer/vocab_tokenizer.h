// VocabTokenizer: what SentencePiece and byte-level BPE share: the Vocab, the
// special ids (BOS/EOS/UNK/EOG) and add_bos/add_eos, the encode skeleton
// (split on special tokens, tokenize each text fragment), and decoding through a
// per-token piece table built once.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"
#include "tokenizer/vocab.h"

namespace fish {

class VocabTokenizer : public Tokenizer {
 public:
  std::vector<int32_t> encode(std::string_view text, bool add_special, bool parse_special) const override;
  std::string token_to_piece(int32_t id, bool special = false) const override;
  std::string decode(const std::vector<int32_t>& ids, bool special = false,
                     bool remove_leading_space = true) const override;

  int32_t n_vocab() const override { return vocab_->size(); }
  int32_t bos() const override { return bos_; }
  int32_t eos() const override { return eos_; }
  bool add_bos() const override { return add_bos_; }
  bool add_eos() const override { return add_eos_; }
  bool is_eog(int32_t id) const override;
  std::string_view token_text(int32_t id) const override;
  TokenAttr token_attr(int32_t id) const override;

  int32_t unk() const { return unk_; }
  const Vocab& vocab() const { return *vocab_; }

 protected:
  // Ids in the config that are out of range count as absent (-1).
  VocabTokenizer(std::unique_ptr<Vocab> vocab, const TokenizerConfig& config, bool default_add_bos);

  // Tokenizes one stretch of plain text (no special tokens in it). after_special:
  // the stretch starts the input or follows a special token (SPM adds its space
  // prefix there).
  virtual void encode_text(std::string_view text, bool after_special, std::vector<int32_t>& out) const = 0;
  // The text a token prints as (with special = true); called once per id by
  // build_pieces(), which the derived constructor calls when it is ready.
  virtual std::string make_piece(int32_t id) const = 0;
  // SPM with a space prefix: decode drops the first piece's leading space.
  virtual bool strips_leading_space() const { return false; }
  void build_pieces();

  std::unique_ptr<Vocab> vocab_;

 private:
  int32_t bos_ = -1, eos_ = -1, unk_ = -1;
  bool add_bos_ = false, add_eos_ = false;
  std::vector<int32_t> eog_;       // sorted
  std::vector<std::string> pieces_;  // [n_vocab]
};

}  // namespace fish
