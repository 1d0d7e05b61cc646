// Small numeric helpers of the fish_vulkan Catch2 tests: random vectors and
// the largest magnitude / difference of results (NaN counts as infinite).
#pragma once
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

namespace fish::vktest {

// n values ~ N(0, scale²).
inline std::vector<float> randn(size_t n, uint64_t seed, float scale = 1.0f) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> nd(0.0f, scale);
  std::vector<float> v(n);
  for (auto& e : v) e = nd(rng);
  return v;
}

// n values uniform in [lo, hi).
inline std::vector<float> uniform(size_t n, uint64_t seed, float lo, float hi) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> v(n);
  for (auto& e : v) e = u(rng);
  return v;
}

inline double max_abs(const std::vector<float>& v) {
  double m = 0;
  for (float e : v) m = std::max(m, double(std::fabs(e)));
  return m;
}

// Largest |a - b| over the elements (NaN counts as infinite).
inline double max_diff(const float* a, const float* b, size_t n) {
  double m = 0;
  for (size_t i = 0; i < n; ++i) {
    const double d = std::fabs(double(a[i]) - double(b[i]));
    if (!(d <= m)) m = std::isnan(d) ? INFINITY : d;
  }
  return m;
}
inline double max_diff(const std::vector<float>& a, const std::vector<float>& b) {
  REQUIRE(a.size() == b.size());
  return max_diff(a.data(), b.data(), a.size());
}

}  // namespace fish::vktest
