// Comparing logit vectors in the tests that drive whole models.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

namespace fish::test {

// max |a - b| / max |b| (max |a - b| when b is all zero)
inline double rel_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double d = 0, mx = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    d = std::max(d, double(std::fabs(a[i] - b[i])));
    mx = std::max(mx, double(std::fabs(b[i])));
  }
  return mx > 0 ? d / mx : d;
}

inline int32_t argmax(const std::vector<float>& v) {
  return int32_t(std::max_element(v.begin(), v.end()) - v.begin());
}

}  // namespace fish::test
