// Constrained generation at the token level, whatever decides which texts
// are allowed: JSON mode (JsonPrefix, json_constraint.h) and JSON Schema
// (JsonSchemaPrefix, json_schema_prefix.h) share it.
//
// JsonVocab holds each token's bytes (Tokenizer::token_to_piece) and whether
// it ends generation. A TokenConstraint decides per token; PrefixConstraint
// does so from a byte-level recognizer ("Prefix": feed(byte) / feed(bytes),
// all or nothing; scan(bytes), the same without restoring the state on
// failure, for throwaway copies; complete()): a token is allowed when all its
// bytes keep the text a prefix of an accepted one (empty pieces, i.e. control
// tokens, never), an end-of-generation token only once the text is complete.
#pragma once
#include <algorithm>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace fish {

class Tokenizer;

struct JsonVocab {
  std::vector<std::string> piece;  // [n_vocab] bytes of each token
  std::vector<uint8_t> eog;        // [n_vocab] 1: ends generation
  static std::shared_ptr<const JsonVocab> from(const Tokenizer& t);
};

// What the Sampler holds: which tokens may come next, and the state moved by
// each token taken.
class TokenConstraint {
 public:
  explicit TokenConstraint(std::shared_ptr<const JsonVocab> v) : v_(std::move(v)) {}
  virtual ~TokenConstraint() = default;
  virtual bool allows(int32_t token) const = 0;
  // Sets the logits of the tokens that are not allowed to -inf; true when
  // one allowed token keeps a finite logit.
  virtual bool mask(float* logits, int32_t n) const = 0;
  virtual void advance(int32_t token) = 0;  // the token taken (allowed)
  virtual bool complete() const = 0;
  bool ends(int32_t token) const { return token >= 0 && token < n_vocab() && v_->eog[size_t(token)]; }
  int32_t n_vocab() const { return int32_t(v_->piece.size()); }

 protected:
  std::shared_ptr<const JsonVocab> v_;
};

template <class Prefix>
class PrefixConstraint final : public TokenConstraint {
 public:
  explicit PrefixConstraint(std::shared_ptr<const JsonVocab> v, Prefix start = Prefix())
      : TokenConstraint(std::move(v)), state_(std::move(start)) {}

  bool allows(int32_t token) const override {
    if (token < 0 || token >= n_vocab()) return false;
    if (v_->eog[size_t(token)]) return state_.complete();
    const std::string& p = v_->piece[size_t(token)];
    if (p.empty()) return false;  // a complete text refuses more bytes itself, unless it may go on (a number)
    Prefix s = state_;
    return s.scan(p);
  }

  // One pass over the vocabulary, most tokens refused by their first byte (a
  // 256-entry table per call), the rest fed whole to a copy of the state.
  bool mask(float* logits, int32_t n) const override {
    const float gone = -std::numeric_limits<float>::infinity();
    bool first_ok[256];
    for (int b = 0; b < 256; ++b) {
      Prefix s = state_;
      const char ch = char(b);
      first_ok[b] = s.scan(std::string_view(&ch, 1));
    }
    const bool done = state_.complete();
    bool any = false;
    n = std::min(n, n_vocab());
    for (int32_t i = 0; i < n; ++i) {
      const std::string& p = v_->piece[size_t(i)];
      bool ok;
      if (v_->eog[size_t(i)]) ok = done;
      else if (p.empty() || !first_ok[uint8_t(p[0])]) ok = false;
      else if (p.size() == 1) ok = true;
      else ok = allows(i);
      if (!ok) logits[i] = gone;
      else any = any || logits[i] > gone;
    }
    return any;
  }

  void advance(int32_t token) override {
    if (token >= 0 && token < n_vocab() && !v_->eog[size_t(token)]) state_.feed(std::string_view(v_->piece[size_t(token)]));
  }
  bool complete() const override { return state_.complete(); }
  const Prefix& state() const { return state_; }

 private:
  Prefix state_;
};

}  // namespace fish
