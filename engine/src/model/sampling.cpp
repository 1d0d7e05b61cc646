#include "model/sampling.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace fish {

int32_t argmax(const float* logits, int32_t n) {
  int32_t best = 0;
  for (int32_t i = 1; i < n; ++i)
    if (logits[i] > logits[best]) best = i;
  return best;
}

Sampler::Sampler(const SamplerParams& p) : p_(p), rng_(p.seed) {}

void Sampler::accept(int32_t token) {
  if (p_.repeat_last_n <= 0) return;
  recent_.push_back(token);
  while (int32_t(recent_.size()) > p_.repeat_last_n) recent_.pop_front();
}

bool Sampler::penalising() const {
  return (p_.repeat_penalty != 1.0f || p_.presence_penalty != 0.0f || p_.frequency_penalty != 0.0f) &&
         !recent_.empty();
}

void Sampler::constrain(std::unique_ptr<TokenConstraint> c) { constraint_ = std::move(c); }

void Sampler::constrain_json(std::shared_ptr<const JsonVocab> v) { constrain(std::make_unique<JsonConstraint>(std::move(v))); }

int32_t Sampler::sample(const float* logits, int32_t n_vocab) {
  return constraint_ ? sample_constrained(logits, n_vocab) : sample_chain(logits, n_vocab);
}

int32_t Sampler::sample_constrained(const float* logits, int32_t n_vocab) {
  const int32_t n = std::min(n_vocab, constraint_->n_vocab());
  masked_.assign(logits, logits + n);
  const float gone = -std::numeric_limits<float>::infinity();
  int32_t t = -1;
  for (int tries = 0; tries < kJsonRedraws; ++tries) {
    t = sample_chain(masked_.data(), n);
    if (constraint_->allows(t)) break;
    masked_[size_t(t)] = gone;
    t = -1;
  }
  if (t < 0) {  // mask every unfit token at once
    if (!constraint_->mask(masked_.data(), n)) {  // no token fits (or every fitting one is -inf): end the text
      for (int32_t i = 0; i < n; ++i)
        if (constraint_->ends(i)) return i;
      return sample_chain(logits, n_vocab);
    }
    t = sample_chain(masked_.data(), n);
  }
  constraint_->advance(t);
  return t;
}

int32_t Sampler::sample_chain(const float* logits, int32_t n_vocab) {
  const bool penalise = penalising();
  if (p_.temp <= 0 && !penalise) return argmax(logits, n_vocab);
  const size_t n = chain(logits, n_vocab, penalise);
  if (p_.temp <= 0) return cands_[0].id;
  std::uniform_real_distribution<double> u(0.0, 1.0);
  double r = u(rng_), cum = 0;
  for (size_t i = 0; i < n; ++i) {
    cum += cands_[i].p;
    if (r < cum) return cands_[i].id;
  }
  return cands_[n - 1].id;
}

void Sampler::distribution(const float* logits, int32_t n_vocab, std::vector<TokenProb>& out) {
  out.clear();
  if (p_.temp <= 0) {
    out.push_back({sample_chain(logits, n_vocab), 1.0f});  // greedy: no random number drawn
    return;
  }
  const size_t n = chain(logits, n_vocab, penalising());
  out.reserve(n);
  for (size_t i = 0; i < n; ++i) out.push_back({cands_[i].id, cands_[i].p});
}

// temp <= 0 (with a penalty): cands_[0] is the greedy choice; returns 1.
size_t Sampler::chain(const float* logits, int32_t n_vocab, bool penalise) {
  cands_.resize(size_t(n_vocab));
  for (int32_t i = 0; i < n_vocab; ++i) cands_[size_t(i)] = {i, logits[i], 0.0f};
  if (penalise) {
    std::vector<int32_t> seen(recent_.begin(), recent_.end());
    std::sort(seen.begin(), seen.end());
    for (size_t i = 0; i < seen.size();) {  // each distinct token once, with its count
      const int32_t id = seen[i];
      size_t j = i;
      while (j < seen.size() && seen[j] == id) ++j;
      const float count = float(j - i);
      i = j;
      if (id < 0 || id >= n_vocab) continue;
      float& l = cands_[size_t(id)].logit;
      l = l > 0 ? l / p_.repeat_penalty : l * p_.repeat_penalty;
      l -= count * p_.frequency_penalty + p_.presence_penalty;
    }
  }
  if (p_.temp <= 0) {
    auto it = std::max_element(cands_.begin(), cands_.end(), [](const Cand& a, const Cand& b) { return a.logit < b.logit; });
    std::swap(cands_[0], *it);
    return 1;
  }
  auto by_logit = [](const Cand& a, const Cand& b) { return a.logit > b.logit || (a.logit == b.logit && a.id < b.id); };
  size_t n = cands_.size();
  if (p_.top_k > 0 && size_t(p_.top_k) < n) {
    std::partial_sort(cands_.begin(), cands_.begin() + p_.top_k, cands_.end(), by_logit);
    n = size_t(p_.top_k);
  } else {
    std::sort(cands_.begin(), cands_.end(), by_logit);
  }
  auto softmax = [&](size_t m) {
    const float mx = cands_[0].logit;
    double sum = 0;
    for (size_t i = 0; i < m; ++i) sum += (cands_[i].p = std::exp(cands_[i].logit - mx));
    for (size_t i = 0; i < m; ++i) cands_[i].p = float(cands_[i].p / sum);
  };
  if (p_.top_p < 1.0f) {
    softmax(n);
    double cum = 0;
    size_t keep = n;
    for (size_t i = 0; i < n; ++i) {
      cum += cands_[i].p;
      if (cum >= p_.top_p) {
        keep = i + 1;
        break;
      }
    }
    n = std::max<size_t>(1, keep);
  }
  if (p_.min_p > 0) {
    softmax(n);
    const float thr = cands_[0].p * p_.min_p;
    size_t keep = 1;
    while (keep < n && cands_[keep].p >= thr) ++keep;
    n = keep;
  }
  for (size_t i = 0; i < n; ++i) cands_[i].logit /= p_.temp;
  softmax(n);
  return n;
}

}  // namespace fish
