// Log-softmax of one row of logits, the chosen token and the likeliest ones.
#include "logprobs.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

namespace fish::serve {

TokenLogprob token_logprob(const float* logits, int32_t n_vocab, int32_t token, int32_t top_n,
                           const std::function<std::string(int32_t)>& piece) {
  // log p_i = x_i - (max + log sum exp(x_j - max)), in double for the sum.
  float mx = -INFINITY;
  for (int32_t i = 0; i < n_vocab; ++i) mx = std::max(mx, logits[i]);
  double sum = 0;
  for (int32_t i = 0; i < n_vocab; ++i) sum += std::exp(double(logits[i]) - double(mx));
  const double lse = double(mx) + std::log(sum);
  TokenLogprob t;
  t.id = token;
  t.piece = piece(token);
  t.logprob = float(double(logits[token]) - lse);
  top_n = std::clamp(top_n, 0, n_vocab);
  if (top_n > 0) {
    std::vector<int32_t> idx(static_cast<size_t>(n_vocab));
    std::iota(idx.begin(), idx.end(), 0);
    // Likeliest first; ties by the lower id, so the order is deterministic.
    auto better = [&](int32_t a, int32_t b) { return logits[a] > logits[b] || (logits[a] == logits[b] && a < b); };
    std::partial_sort(idx.begin(), idx.begin() + top_n, idx.end(), better);
    for (int32_t k = 0; k < top_n; ++k)
      t.top.emplace_back(piece(idx[size_t(k)]), float(double(logits[idx[size_t(k)]]) - lse));
  }
  return t;
}

}  // namespace fish::serve
