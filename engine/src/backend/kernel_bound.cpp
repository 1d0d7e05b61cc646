#include "backend/kernel_bound.h"

#include <cmath>

namespace fish::backend {

BoundWorst worst_bound_ratio(const float* y, const float* want, const double* bound, int n_tok, int64_t n_out,
                             double scale) {
  BoundWorst w;
  for (int t = 0; t < n_tok; ++t)
    for (int64_t r = 0; r < n_out; ++r) {
      const double b = scale * bound[t];
      const double got = y[int64_t(t) * n_out + r], ref = want[int64_t(t) * n_out + r];
      const double err = std::isfinite(got) ? std::fabs(got - ref) : INFINITY;
      const double ratio = b > 0 ? err / b : (err > 0 ? INFINITY : 0.0);
      if (ratio > w.ratio) w = {ratio, t, r};
    }
  return w;
}

}  // namespace fish::backend
