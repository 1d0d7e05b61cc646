#include "cpu/moe_routing.h"

#include <cmath>

namespace fish {

void moe_route(const float* logits, int32_t n_expert, int32_t k, bool normalise, int32_t* ids, float* weights) {
  float mx = logits[0];
  for (int32_t e = 1; e < n_expert; ++e) mx = logits[e] > mx ? logits[e] : mx;
  double sum = 0.0;
  for (int32_t e = 0; e < n_expert; ++e) sum += std::exp(double(logits[e] - mx));
  // Selection by k passes (k is small: 2 or 8): each takes the largest logit
  // not yet chosen, the first (lowest index) of equal ones. Probabilities are
  // monotone in the logits, so this is the top-k of the softmax.
  for (int32_t j = 0; j < k; ++j) {
    int32_t best = -1;
    for (int32_t e = 0; e < n_expert; ++e) {
      bool taken = false;
      for (int32_t i = 0; i < j && !taken; ++i) taken = ids[i] == e;
      if (!taken && (best < 0 || logits[e] > logits[best])) best = e;
    }
    ids[j] = best;
    weights[j] = float(std::exp(double(logits[best] - mx)) / sum);
  }
  if (normalise) {
    double chosen = 0.0;
    for (int32_t j = 0; j < k; ++j) chosen += weights[j];
    for (int32_t j = 0; j < k; ++j) weights[j] = float(weights[j] / chosen);
  }
}

}  // namespace fish
