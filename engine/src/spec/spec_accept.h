// Speculative sampling's acceptance rule (Leviathan et al. 2023, Chen et al.
// 2023): a token x proposed from a distribution q is kept with probability
// min(1, p(x) / q(x)), where p is the target's distribution at that position;
// otherwise a replacement is drawn from max(0, p - q), normalised. Whether or
// not x is kept, the token that comes out is distributed exactly as p, so the
// text has the target sampler's distribution whatever the draft proposes.
#pragma once
#include <cstdint>
#include <random>
#include <vector>

#include "model/sampling.h"

namespace fish::spec {

class SpecSampling {
 public:
  explicit SpecSampling(uint64_t seed) : rng_(seed) {}
  // A draw from p (probabilities summing to ~1; their sum is renormalised).
  int32_t draw(const std::vector<TokenProb>& p);
  // The rule for x proposed from q (q null: x was proposed for certain, as
  // n-gram lookup does, q(x) = 1). Returns x when kept (*kept = true), else
  // the replacement. p empty: throws.
  int32_t accept(const std::vector<TokenProb>& p, const std::vector<TokenProb>* q, int32_t x, bool* kept);
  std::mt19937_64& rng() { return rng_; }

 private:
  std::mt19937_64 rng_;
  std::vector<TokenProb> residual_;
  std::vector<float> dense_q_;  // q by token id while a rejection is resolved, else all 0
};

}  // namespace fish::spec
