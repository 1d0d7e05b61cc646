#include "spec/spec_accept.h"

#include <algorithm>

#include "common/error.h"

namespace fish::spec {

namespace {

float prob_of(const std::vector<TokenProb>& d, int32_t id) {
  for (const TokenProb& t : d)
    if (t.id == id) return t.p;
  return 0.0f;
}

}  // namespace

int32_t SpecSampling::draw(const std::vector<TokenProb>& p) {
  if (p.empty()) throw Error("speculative sampling: an empty distribution");
  double sum = 0;
  for (const TokenProb& t : p) sum += double(t.p);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  const double r = u(rng_) * sum;
  double cum = 0;
  for (const TokenProb& t : p) {
    cum += double(t.p);
    if (r < cum) return t.id;
  }
  return p.back().id;
}

int32_t SpecSampling::accept(const std::vector<TokenProb>& p, const std::vector<TokenProb>* q, int32_t x, bool* kept) {
  if (p.empty()) throw Error("speculative sampling: an empty distribution");
  const double px = prob_of(p, x);
  const double qx = q ? prob_of(*q, x) : 1.0;
  std::uniform_real_distribution<double> u(0.0, 1.0);
  // Kept with probability min(1, px / qx); qx = 0 cannot have proposed x, but
  // keeping x then only when p allows it stays on the safe side.
  if (u(rng_) * qx < px) {
    *kept = true;
    return x;
  }
  *kept = false;
  // Rejected: draw from max(0, p - q). Tokens outside p have p = 0 and drop out.
  residual_.clear();
  if (q) {  // q's probabilities by id in a dense table (zeroed again below): O(|p| + |q|)
    for (const TokenProb& t : *q) {
      if (t.id < 0) continue;
      if (size_t(t.id) >= dense_q_.size()) dense_q_.resize(size_t(t.id) + 1, 0.0f);
      dense_q_[size_t(t.id)] = t.p;
    }
  }
  for (const TokenProb& t : p) {
    const float qt = q ? (t.id >= 0 && size_t(t.id) < dense_q_.size() ? dense_q_[size_t(t.id)] : 0.0f)
                       : (t.id == x ? 1.0f : 0.0f);
    if (t.p > qt) residual_.push_back({t.id, t.p - qt});
  }
  if (q)
    for (const TokenProb& t : *q)
      if (t.id >= 0) dense_q_[size_t(t.id)] = 0.0f;
  // p == q up to rounding leaves nothing (x was then kept but for rounding): draw from p.
  return residual_.empty() ? draw(p) : draw(residual_);
}

}  // namespace fish::spec
