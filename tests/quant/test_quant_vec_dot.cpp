// vec_dot_ref against dot products computed independently in double:
//  (a) with the dequantised weight row and the dequantised activation row: the
//      two differ only by float rounding, except that Q8_1's stored s (an f16
//      of d·Σq) stands in for the f16(d)·Σq of the decoded row. Bound:
//        1e-5 · Σ|w_i a_i|  +  Σ_blocks |m_b| · (|s_b| + |d_b·Σq_b|) · 2^-11.
//  (b) with the f32 activations before quantisation: the error is the
//      activation rounding. Per block of activations with largest magnitude A:
//        Q8_0 / Q8_1: |a − f16(d)·q| <= d/2 + 127·|d − f16(d)| <= (0.5 + 127·2^-11)·A/127
//        Q8_K:        |a − d·q| <= d/2 (d = A/127 in f32),
//      so |dot − Σ w a| <= Σ_blocks Σ|w_i| · that bound, + 1e-5 · Σ|w_i a_i|.
// Every weight type, rows of 1, 3 and 7 blocks.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <vector>

#include "common/fp16.h"
#include "quant/blocks.h"
#include "quant/quant.h"
#include "quant_test_util.h"

using namespace fish;

namespace {

uint32_t lcg(uint32_t& s) {
  s = s * 1664525u + 1013904223u;
  return s >> 8;
}

// A weight row of type t: quantised Gaussian data where fish can quantise to
// t, otherwise random bytes with sane f16 scales written into each block.
std::vector<uint8_t> make_weights(GgmlType t, int64_t n, uint32_t seed) {
  std::vector<uint8_t> w(test::row_bytes(t, n));
  if (can_quantize(t)) {
    const auto x = test::gaussian(size_t(n), seed, 0.05f);
    quantize_row(t, x.data(), w.data(), n);
    return w;
  }
  uint32_t s = seed;
  for (auto& b : w) b = uint8_t(lcg(s));
  const size_t nb = w.size() / size_t(ggml_type_info(t)->type_size);
  auto half = [&](float lo, float hi) {
    return fp32_to_fp16(lo + (hi - lo) * float(lcg(s) % 1000) / 1000.0f);
  };
  for (size_t i = 0; i < nb; ++i) {
    switch (t) {
      case GgmlType::Q4_1: {
        auto* b = reinterpret_cast<BlockQ4_1*>(w.data()) + i;
        b->d = half(0.001f, 0.01f);
        b->m = half(-0.08f, 0.0f);
        break;
      }
      case GgmlType::Q5_0: reinterpret_cast<BlockQ5_0*>(w.data())[i].d = half(-0.005f, 0.005f); break;
      case GgmlType::Q5_1: {
        auto* b = reinterpret_cast<BlockQ5_1*>(w.data()) + i;
        b->d = half(0.001f, 0.005f);
        b->m = half(-0.08f, 0.0f);
        break;
      }
      case GgmlType::Q2_K: {
        auto* b = reinterpret_cast<BlockQ2_K*>(w.data()) + i;
        b->d = half(0.001f, 0.003f);
        b->dmin = half(0.001f, 0.003f);
        break;
      }
      case GgmlType::Q3_K: reinterpret_cast<BlockQ3_K*>(w.data())[i].d = half(-0.001f, 0.001f); break;
      default: FAIL("no generator for " << ggml_type_name(t));
    }
  }
  return w;
}

std::vector<float> decode(GgmlType t, const std::vector<uint8_t>& row, int64_t n) {
  std::vector<float> y(static_cast<size_t>(n));
  dequant_row(t, row.data(), y.data(), n);
  return y;
}

// Σ_b |m_b|·(|s_b| + |d_b Σq_b|)·2^-11 for Q4_1/Q5_1 weights on Q8_1 activations.
double q8_1_s_bound(GgmlType t, const std::vector<uint8_t>& w, const std::vector<uint8_t>& a) {
  if (t != GgmlType::Q4_1 && t != GgmlType::Q5_1) return 0.0;
  const auto* ab = reinterpret_cast<const BlockQ8_1*>(a.data());
  const size_t nb = a.size() / sizeof(BlockQ8_1);
  double sum = 0;
  for (size_t i = 0; i < nb; ++i) {
    const uint16_t m = t == GgmlType::Q4_1 ? reinterpret_cast<const BlockQ4_1*>(w.data())[i].m
                                           : reinterpret_cast<const BlockQ5_1*>(w.data())[i].m;
    int qsum = 0;
    for (int j = 0; j < 32; ++j) qsum += ab[i].qs[j];
    sum += std::fabs(fp16_to_fp32(m)) *
           (std::fabs(fp16_to_fp32(ab[i].s)) + std::fabs(fp16_to_fp32(ab[i].d) * qsum)) * 0x1p-11;
  }
  return sum;
}

const GgmlType kWeightTypes[] = {GgmlType::F32,  GgmlType::F16,  GgmlType::BF16, GgmlType::Q4_0, GgmlType::Q4_1,
                                 GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::Q8_0, GgmlType::Q2_K, GgmlType::Q3_K,
                                 GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K, GgmlType::Q8_K};

}  // namespace

TEST_CASE("vec_dot_type follows llama.cpp's CPU path", "[quant][vec_dot]") {
  CHECK(vec_dot_type(GgmlType::F32) == GgmlType::F32);
  CHECK(vec_dot_type(GgmlType::F16) == GgmlType::F16);
  CHECK(vec_dot_type(GgmlType::BF16) == GgmlType::BF16);
  for (GgmlType t : {GgmlType::Q4_0, GgmlType::Q5_0, GgmlType::Q8_0}) CHECK(vec_dot_type(t) == GgmlType::Q8_0);
  for (GgmlType t : {GgmlType::Q4_1, GgmlType::Q5_1}) CHECK(vec_dot_type(t) == GgmlType::Q8_1);
  for (GgmlType t : {GgmlType::Q2_K, GgmlType::Q3_K, GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K})
    CHECK(vec_dot_type(t) == GgmlType::Q8_K);
}

TEST_CASE("vec_dot_ref equals the double dot of the decoded rows (float rounding only)", "[quant][vec_dot]") {
  uint32_t seed = 100;
  for (GgmlType t : kWeightTypes) {
    const GgmlType at = vec_dot_type(t);
    const int bs = std::max(ggml_type_info(t)->block_size, ggml_type_info(at)->block_size);
    for (int nb : {1, 3, 7}) {
      const int64_t n = int64_t(nb) * bs;
      const auto w = make_weights(t, n, ++seed);
      const auto x = test::gaussian(size_t(n), ++seed, 2.0f);
      std::vector<uint8_t> a(test::row_bytes(at, n));
      quantize_row(at, x.data(), a.data(), n);
      const auto wd = decode(t, w, n), ad = decode(at, a, n);
      double exact = 0, mag = 0;
      for (int64_t i = 0; i < n; ++i) {
        exact += double(wd[size_t(i)]) * double(ad[size_t(i)]);
        mag += std::fabs(double(wd[size_t(i)]) * double(ad[size_t(i)]));
      }
      const double got = vec_dot_ref(t, n, w.data(), a.data());
      const double bound = 1e-5 * mag + q8_1_s_bound(t, w, a) + 1e-30;
      INFO(ggml_type_name(t) << " x " << ggml_type_name(at) << ", " << nb << " block(s): got " << got << ", exact "
                             << exact << ", bound " << bound);
      CHECK(std::fabs(got - exact) <= bound);
      CHECK(mag > 0);
    }
  }
}

TEST_CASE("vec_dot_ref is within the activation-rounding bound of the f32 dot", "[quant][vec_dot]") {
  uint32_t seed = 500;
  for (GgmlType t : kWeightTypes) {
    const GgmlType at = vec_dot_type(t);
    const int abs_ = ggml_type_info(at)->block_size;
    const int bs = std::max(ggml_type_info(t)->block_size, abs_);
    for (int nb : {1, 3, 7}) {
      const int64_t n = int64_t(nb) * bs;
      const auto w = make_weights(t, n, ++seed);
      const auto x = test::gaussian(size_t(n), ++seed, 2.0f);
      std::vector<uint8_t> a(test::row_bytes(at, n));
      quantize_row(at, x.data(), a.data(), n);
      const auto wd = decode(t, w, n);

      double exact = 0, mag = 0, bound = 0;
      for (int64_t i = 0; i < n; ++i) {
        exact += double(wd[size_t(i)]) * double(x[size_t(i)]);
        mag += std::fabs(double(wd[size_t(i)]) * double(x[size_t(i)]));
      }
      if (at == GgmlType::F32) {
        bound = 0;
      } else if (at == GgmlType::F16 || at == GgmlType::BF16) {
        const double rel = at == GgmlType::F16 ? 0x1p-11 : 0x1p-8;  // half an ulp, relative
        bound = rel * mag;
      } else {
        for (int64_t b0 = 0; b0 < n; b0 += abs_) {
          double amax = 0, wsum = 0;
          for (int64_t i = b0; i < b0 + abs_; ++i) {
            amax = std::max(amax, double(std::fabs(x[size_t(i)])));
            wsum += std::fabs(double(wd[size_t(i)]));
          }
          const double per = at == GgmlType::Q8_K ? 0.5 * amax / 127 : (0.5 + 127 * 0x1p-11) * amax / 127;
          bound += wsum * per;
        }
      }
      // + float rounding of the kernel and the Q8_1 s term
      bound += 1e-5 * mag + 2 * q8_1_s_bound(t, w, a) + 1e-30;
      const double got = vec_dot_ref(t, n, w.data(), a.data());
      INFO(ggml_type_name(t) << ", " << nb << " block(s): got " << got << ", f32 dot " << exact << ", bound " << bound);
      CHECK(std::fabs(got - exact) <= bound);
    }
  }
}

TEST_CASE("vec_dot_ref of known blocks", "[quant][vec_dot]") {
  // Q4_K weights all level 1 in group 0 only (sc 1, m 0, d 0.5): values 0.5 for
  // elements 0..31, and −dmin·m elsewhere with m = 0 -> 0. Activations: Q8_K
  // with d = 0.25 and q = 2 everywhere. Dot = 32 · 0.5 · 0.25 · 2 = 8.
  BlockQ4_K w{};
  w.d = 0x3800;
  w.dmin = 0x3C00;
  w.scales[0] = 1;
  for (int l = 0; l < 32; ++l) w.qs[l] = 0x01;  // group 0 (low nibbles of chunk 0) = 1, group 1 = 0
  BlockQ8_K a{};
  a.d = 0.25f;
  for (auto& q : a.qs) q = 2;
  for (auto& s : a.bsums) s = 32;
  CHECK(vec_dot_ref(GgmlType::Q4_K, 256, &w, &a) == 8.0f);
  // With min 3 in group 1 (scales[5] = 3, dmin 1): group 1 decodes to −3 -> + 32·(−3)·0.5 = −48.
  w.scales[5] = 3;
  CHECK(vec_dot_ref(GgmlType::Q4_K, 256, &w, &a) == -40.0f);

  // Q8_0 · Q8_0: d 0.5 and 2, levels 3 and −1: 32 · 0.5 · 3 · 2 · −1 = −96.
  BlockQ8_0 x{}, y{};
  x.d = 0x3800;
  y.d = 0x4000;
  for (int j = 0; j < 32; ++j) {
    x.qs[j] = 3;
    y.qs[j] = -1;
  }
  CHECK(vec_dot_ref(GgmlType::Q8_0, 32, &x, &y) == -96.0f);
}
