// Row ops of a layer against double-precision formulas.
#include <catch2/catch.hpp>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "cpu/ops.h"

using namespace fish;

TEST_CASE("rmsnorm: x / sqrt(mean(x^2) + eps) * w", "[ops]") {
  std::mt19937 rng(1);
  std::normal_distribution<float> nd(0.f, 2.f);
  for (int n : {1, 7, 64, 2048}) {
    std::vector<float> x(n), w(n), y(n);
    for (auto& v : x) v = nd(rng);
    for (auto& v : w) v = nd(rng);
    rmsnorm(x.data(), w.data(), y.data(), n, 1e-5f);
    double ss = 0;
    for (float v : x) ss += double(v) * v;
    const double s = 1.0 / std::sqrt(ss / n + 1e-5);
    for (int i = 0; i < n; ++i) CHECK(std::fabs(y[i] - x[i] * s * w[i]) <= 1e-5 * (1 + std::fabs(x[i] * s * w[i])));
  }
}

TEST_CASE("silu_mul", "[ops]") {
  std::vector<float> g{-3.f, -0.5f, 0.f, 0.7f, 4.f}, u{1.f, 2.f, 3.f, -1.f, 0.5f}, o(5);
  silu_mul(g.data(), u.data(), o.data(), 5);
  for (int i = 0; i < 5; ++i) CHECK(o[i] == Approx(g[i] / (1 + std::exp(-double(g[i]))) * u[i]).epsilon(1e-6));
}

// The vector form (AVX2 CPUs: e^-|g| by a polynomial, eight at a time, the
// tail padded through the same code) over every length's tail, the range a gate takes and both
// exponential tails, against double: within 2e-6 of |ref| (a few ulp; below
// 1e-34 in absolute, where e^g underflows: silu(-88) ~ -6e-37), the
// same as the scalar form for NaN and ±inf, and in place (out = gate).
TEST_CASE("silu_mul: vector form within a few ulp of double, tails, NaN, inf, in place", "[ops]") {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> wide(-30.f, 30.f), unit(-2.f, 2.f);
  std::vector<float> g, u;
  for (int i = 0; i < 4000; ++i) g.push_back(i % 3 == 0 ? unit(rng) : wide(rng)), u.push_back(unit(rng));
  for (float v : {0.f, -0.f, 1e-30f, -1e-30f, 80.f, -80.f, 87.f, -87.f, 88.f, -88.f, 100.f, -100.f, 1e30f, -1e30f})
    g.push_back(v), u.push_back(1.5f);
  double worst = 0;
  for (int n : {1, 7, 8, 9, 15, 16, 17, int(g.size())}) {
    std::vector<float> o(size_t(n), -1.f);
    silu_mul(g.data(), u.data(), o.data(), n);
    for (int i = 0; i < n; ++i) {
      const double gd = g[size_t(i)], ref = gd / (1 + std::exp(-gd)) * u[size_t(i)];
      const double err = std::fabs(double(o[size_t(i)]) - ref);
      INFO("g " << g[size_t(i)] << " u " << u[size_t(i)] << ": " << o[size_t(i)] << " against " << ref);
      CHECK(err <= 2e-6 * std::fabs(ref) + 1e-34);  // g < -87.3: e^g underflows, silu(g) ~ 1e-36 -> 0
      if (std::fabs(ref) > 1e-30) worst = std::max(worst, err / std::fabs(ref));
    }
  }
  std::printf("  silu_mul worst relative error %.3g\n", worst);
  const float inf = INFINITY, nan = NAN;
  std::vector<float> sg{nan, inf, -inf, nan, 1.f, 2.f, 3.f, 4.f, nan}, su{1.f, 2.f, 2.f, 1.f, 1.f, 1.f, 1.f, 1.f, 1.f};
  std::vector<float> so(sg.size());
  silu_mul(sg.data(), su.data(), so.data(), int64_t(sg.size()));
  CHECK(std::isnan(so[0]));
  CHECK(so[1] == inf);
  CHECK(std::isnan(so[2]));  // -inf / (1 + e^inf), as the scalar form
  CHECK(std::isnan(so[8]));
  // In place: the output over the gate.
  std::vector<float> ip(g), ref(g.size());
  silu_mul(g.data(), u.data(), ref.data(), int64_t(g.size()));
  silu_mul(ip.data(), u.data(), ip.data(), int64_t(ip.size()));
  CHECK(ip == ref);
}

TEST_CASE("rope: rotation angles and pairing for normal and NeoX", "[ops]") {
  const int hd = 16, n_rot = 16;
  const float base = 10000.f;
  std::vector<float> freqs(n_rot / 2);
  for (int i = 0; i < n_rot / 2; ++i) freqs[i] = 1.0f + 0.5f * i;
  for (int pos : {0, 1, 17, 1000}) {
    for (const float* ff : {(const float*)nullptr, (const float*)freqs.data()}) {
      std::vector<float> cs(n_rot);
      rope_angles(pos, n_rot, base, 0.5f, ff, cs.data());
      for (int i = 0; i < n_rot / 2; ++i) {
        const double theta = 0.5 * pos * std::pow(double(base), -2.0 * i / n_rot) / (ff ? ff[i] : 1.0);
        CHECK(std::fabs(cs[2 * i] - std::cos(theta)) < 2e-4);
        CHECK(std::fabs(cs[2 * i + 1] - std::sin(theta)) < 2e-4);
      }
      for (RopeType rt : {RopeType::Normal, RopeType::NeoX}) {
        std::vector<float> x(2 * hd), x0;
        for (int i = 0; i < 2 * hd; ++i) x[i] = float(i + 1) * 0.1f;
        x0 = x;
        rope_apply(x.data(), 2, hd, n_rot, rt, cs.data());
        for (int h = 0; h < 2; ++h)
          for (int i = 0; i < n_rot / 2; ++i) {
            const int a = rt == RopeType::NeoX ? i : 2 * i, b = rt == RopeType::NeoX ? i + n_rot / 2 : 2 * i + 1;
            const double c = cs[2 * i], s = cs[2 * i + 1];
            CHECK(x[h * hd + a] == Approx(x0[h * hd + a] * c - x0[h * hd + b] * s).margin(1e-6));
            CHECK(x[h * hd + b] == Approx(x0[h * hd + a] * s + x0[h * hd + b] * c).margin(1e-6));
          }
      }
    }
  }
}
