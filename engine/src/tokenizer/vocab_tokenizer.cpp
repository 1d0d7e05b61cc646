#include "tokenizer/vocab_tokenizer.h"

#include <algorithm>
#include <climits>

#include "common/error.h"

namespace fish {

namespace {

// Texts of end-of-turn tokens in common chat vocabularies: generation stops on
// them even when the metadata names only the EOS (or an older EOS).
const char* const kEndOfTurnTexts[] = {
    "<|eot_id|>", "<|eom_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<EOT>",
    ("<\xef\xbd\x9c" "end\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>"),  // DeepSeek: <｜end▁of▁sentence｜>
};

}  // namespace

VocabTokenizer::VocabTokenizer(std::unique_ptr<Vocab> vocab, const TokenizerConfig& config, bool default_add_bos)
    : vocab_(std::move(vocab)) {
  auto checked = [&](int32_t id) { return vocab_->valid(id) ? id : -1; };
  bos_ = checked(config.bos);
  eos_ = checked(config.eos);
  unk_ = checked(config.unk);
  add_bos_ = config.add_bos.value_or(default_add_bos);
  add_eos_ = config.add_eos.value_or(false);
  for (int32_t id : {eos_, checked(config.eot), checked(config.eom)})
    if (id >= 0) eog_.push_back(id);
  for (const char* t : kEndOfTurnTexts) {
    const int32_t id = vocab_->find(t);
    if (id >= 0 && (vocab_->attr(id) == TokenAttr::Control || vocab_->attr(id) == TokenAttr::UserDefined))
      eog_.push_back(id);
  }
  std::sort(eog_.begin(), eog_.end());
  eog_.erase(std::unique(eog_.begin(), eog_.end()), eog_.end());
}

void VocabTokenizer::build_pieces() {
  pieces_.resize(size_t(vocab_->size()));
  for (int32_t id = 0; id < vocab_->size(); ++id) pieces_[size_t(id)] = make_piece(id);
}

std::vector<int32_t> VocabTokenizer::encode(std::string_view text, bool add_special, bool parse_special) const {
  if (text.size() >= size_t(UINT32_MAX)) throw Error("tokenizer: input text of " + std::to_string(text.size()) +
                                                     " bytes is too large");
  std::vector<int32_t> out;
  if (add_special && add_bos_ && bos_ >= 0) out.push_back(bos_);
  std::vector<Vocab::Fragment> frags;
  vocab_->partition(text, parse_special, frags);
  bool after_special = true;
  for (const auto& f : frags) {
    if (f.token >= 0) {
      out.push_back(f.token);
      after_special = true;
    } else {
      encode_text(text.substr(f.begin, f.end - f.begin), after_special, out);
      after_special = false;
    }
  }
  if (add_special && add_eos_ && eos_ >= 0) out.push_back(eos_);
  return out;
}

std::string VocabTokenizer::token_to_piece(int32_t id, bool special) const {
  if (!vocab_->valid(id)) throw Error("tokenizer: token id " + std::to_string(id) + " out of range [0, " +
                                      std::to_string(vocab_->size()) + ")");
  if (!special) {
    const TokenAttr a = vocab_->attr(id);
    if (a == TokenAttr::Control || a == TokenAttr::Unknown || a == TokenAttr::Unused) return {};
  }
  return pieces_[size_t(id)];
}

std::string VocabTokenizer::decode(const std::vector<int32_t>& ids, bool special, bool remove_leading_space) const {
  std::string out;
  bool strip = remove_leading_space && strips_leading_space();
  for (int32_t id : ids) {
    const std::string piece = token_to_piece(id, special);
    if (piece.empty()) continue;
    if (strip) {
      strip = false;
      if (piece[0] == ' ') {
        out.append(piece, 1, std::string::npos);
        continue;
      }
    }
    out += piece;
  }
  return out;
}

bool VocabTokenizer::is_eog(int32_t id) const { return std::binary_search(eog_.begin(), eog_.end(), id); }

std::string_view VocabTokenizer::token_text(int32_t id) const {
  if (!vocab_->valid(id)) throw Error("tokenizer: token id " + std::to_string(id) + " out of range");
  return vocab_->text(id);
}

TokenAttr VocabTokenizer::token_attr(int32_t id) const {
  if (!vocab_->valid(id)) throw Error("tokenizer: token id " + std::to_string(id) + " out of range");
  return vocab_->attr(id);
}

}  // namespace fish
