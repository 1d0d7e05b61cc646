// The spec's kernel check (vulkan-offload.md) as the conformance suite and
// `fish test-gpu` both apply it: a backend's product y [n_tok][n_out] against
// a reference want, measured in units of the token's bound.
#pragma once
#include <cstdint>

namespace fish::backend {

// Where the largest ratio is (token, row) and its ratio.
struct BoundWorst {
  double ratio = 0.0;
  int tok = 0;
  int64_t row = 0;
};

// The largest |y - want| / (scale · bound[t]) over every element; a
// non-finite y is infinitely far; with a zero bound any error is infinite.
BoundWorst worst_bound_ratio(const float* y, const float* want, const double* bound, int n_tok, int64_t n_out,
                             double scale);

}  // namespace fish::backend
