// Sampler: turns logits into the next token. Greedy when temp <= 0; otherwise
// the chain penalties -> top-k -> top-p -> min-p -> temperature -> random
// draw (llama.cpp's default order), seeded and reproducible. The penalties
// (before greedy too) look at the last repeat_last_n accepted tokens: a token
// seen c > 0 times there has its logit divided by repeat_penalty (multiplied
// when negative), then lowered by c · frequency_penalty + presence_penalty
// (OpenAI's definition, over that window as llama.cpp applies it).
#pragma once
#include <cstdint>
#include <deque>
#include <memory>
#include <random>
#include <vector>

#include "model/json_constraint.h"

namespace fish {

struct SamplerParams {
  float temp = 0.8f;
  int32_t top_k = 40;
  float top_p = 0.95f;
  float min_p = 0.05f;
  float repeat_penalty = 1.0f;
  int32_t repeat_last_n = 64;
  float presence_penalty = 0.0f;   // 0: off
  float frequency_penalty = 0.0f;  // 0: off
  uint64_t seed = 0;
};

// A token and its probability under the sampler's chain.
struct TokenProb {
  int32_t id;
  float p;
};

class Sampler {
 public:
  explicit Sampler(const SamplerParams& p);
  int32_t sample(const float* logits, int32_t n_vocab);
  void accept(int32_t token);  // remembered for the penalties
  // The distribution sample() draws from (the chain up to the draw; no random
  // number used): the candidates left, the most probable first, probabilities
  // summing to 1. temp <= 0: the one token sample() returns, p = 1.
  // Speculative sampling needs it to accept or reject a proposed token.
  void distribution(const float* logits, int32_t n_vocab, std::vector<TokenProb>& out);
  const SamplerParams& params() const { return p_; }
  // Constrained generation (token_constraint.h): from now on sample()
  // returns only tokens the constraint allows, e.g. JSON mode
  // (json_constraint.h: the text it has returned stays a prefix of one JSON
  // object) or a JSON Schema (json_schema_prefix.h), and once the text is
  // complete an end-of-generation token. A token the chain draws that does not
  // fit is dropped and the chain drawn again (greedy: the likeliest token that
  // fits); after kJsonRedraws every unfit token is masked first
  // (TokenConstraint::mask). The caller takes each token sample() returns
  // (distribution() does not apply the constraint). Replaces any earlier one.
  void constrain(std::unique_ptr<TokenConstraint> c);
  void constrain_json(std::shared_ptr<const JsonVocab> v);  // JSON mode
  static constexpr int kJsonRedraws = 4;

 private:
  struct Cand {
    int32_t id;
    float logit;
    float p;
  };
  // temp > 0: the chain up to the draw; cands_[0, n) with p set; returns n.
  size_t chain(const float* logits, int32_t n_vocab, bool penalise);
  bool penalising() const;  // a penalty is on and a token has been accepted
  int32_t sample_chain(const float* logits, int32_t n_vocab);  // sample() without the constraint
  int32_t sample_constrained(const float* logits, int32_t n_vocab);
  SamplerParams p_;
  std::mt19937_64 rng_;
  std::deque<int32_t> recent_;
  std::vector<Cand> cands_;
  std::unique_ptr<TokenConstraint> constraint_;
  std::vector<float> masked_;  // sample_constrained's copy of the logits
};

// Index of the largest logit (the first on ties).
int32_t argmax(const float* logits, int32_t n);

}  // namespace fish
