// quantize_row -> dequant_row on synthetic data: the error of every format
// against stated bounds, the K-quant scale search against plain
// round-to-nearest in the same format, odd row lengths, and edge inputs.
//
// Bounds (relative RMS error, Gaussian data, 65536 values): set a little above
// what this implementation measures (measured values in parentheses):
//   Q8_0 / Q8_1 0.6% (0.54), Q8_K 0.75% (0.69), Q4_0 9.2% (8.59),
//   Q4_K 7.4% (7.07), Q5_K 3.75% (3.51), Q6_K 1.85% (1.72),
//   F16 0.03% (0.021), BF16 0.2% (0.166).
// The K formats must beat round-to-nearest (min/max grid, same 6-bit / int8
// scale quantisation) by at least 4% of its error; measured on Gaussian /
// Laplace data: Q4_K 9.7% / 9.1%, Q5_K 8.1% / 7.8%, Q6_K 7.8% / 5.6%.
// Re-quantising a format's own output moves it by < 1% (measured: Q4_K 0.38%,
// Q5_K 0.48%, Q6_K 0.15%, Q8_0 and Q4_0 0).
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "common/fp16.h"
#include "quant/quant.h"
#include "quant_test_util.h"

using namespace fish;

namespace {

struct Bound {
  GgmlType type;
  double max_rel_rms;
};

const Bound kBounds[] = {
    {GgmlType::Q8_0, 0.006},  {GgmlType::Q8_1, 0.006},  {GgmlType::Q8_K, 0.0075}, {GgmlType::Q4_0, 0.092},
    {GgmlType::Q4_K, 0.074},  {GgmlType::Q5_K, 0.0375}, {GgmlType::Q6_K, 0.0185}, {GgmlType::F16, 0.0003},
    {GgmlType::BF16, 0.002},
};

// Laplace-distributed values (heavier tails than a Gaussian, like real weights).
std::vector<float> laplace(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::exponential_distribution<float> e(1.0f);
  std::bernoulli_distribution sign(0.5);
  std::vector<float> v(n);
  for (auto& x : v) x = sign(rng) ? e(rng) : -e(rng);
  return v;
}

int block_of(GgmlType t) { return ggml_type_info(t)->block_size; }

}  // namespace

TEST_CASE("quantize -> dequantize error on Gaussian data is within each format's bound", "[quant][roundtrip]") {
  const auto x = test::gaussian(65536, 42, 0.02f);
  for (const auto& b : kBounds) {
    const auto y = test::round_trip(b.type, x);
    const double err = test::rel_rms(x.data(), y.data(), x.size());
    INFO(ggml_type_name(b.type) << ": relative RMS error " << err * 100 << " %");
    CHECK(err < b.max_rel_rms);
    CHECK(err > b.max_rel_rms * 0.5);  // a format that is "too good" is not what we think it is
  }
  // F32 is exact.
  const auto y = test::round_trip(GgmlType::F32, x);
  CHECK(std::memcmp(x.data(), y.data(), x.size() * 4) == 0);
}

TEST_CASE("the K-quant scale search beats round-to-nearest in the same format", "[quant][roundtrip]") {
  for (int dist = 0; dist < 2; ++dist) {
    const auto x = dist == 0 ? test::gaussian(65536, 7) : laplace(65536, 8);
    const double q4 = test::rel_rms(x.data(), test::round_trip(GgmlType::Q4_K, x).data(), x.size());
    const double q5 = test::rel_rms(x.data(), test::round_trip(GgmlType::Q5_K, x).data(), x.size());
    const double q6 = test::rel_rms(x.data(), test::round_trip(GgmlType::Q6_K, x).data(), x.size());
    const double b4 = test::rel_rms(x.data(), test::rtn_affine_k(x, 15).data(), x.size());
    const double b5 = test::rel_rms(x.data(), test::rtn_affine_k(x, 31).data(), x.size());
    const double b6 = test::rel_rms(x.data(), test::rtn_q6_k(x).data(), x.size());
    INFO((dist == 0 ? "gaussian" : "laplace") << ": Q4_K " << q4 * 100 << "% vs RTN " << b4 * 100 << "%, Q5_K "
                                              << q5 * 100 << "% vs " << b5 * 100 << "%, Q6_K " << q6 * 100
                                              << "% vs " << b6 * 100 << "%");
    CHECK(q4 < 0.96 * b4);
    CHECK(q5 < 0.96 * b5);
    CHECK(q6 < 0.96 * b6);
  }
}

TEST_CASE("K-quant data re-quantised to its own format is reproduced (fixed point)", "[quant][roundtrip]") {
  const auto x = test::gaussian(65536, 9, 0.05f);
  for (GgmlType t : {GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K, GgmlType::Q8_0, GgmlType::Q4_0}) {
    const auto y = test::round_trip(t, x);
    const auto z = test::round_trip(t, y);
    const double err = test::rel_rms(y.data(), z.data(), y.size());
    INFO(ggml_type_name(t) << ": relative RMS change on re-quantisation " << err * 100 << " %");
    CHECK(err < 0.01);
  }
}

TEST_CASE("rows of 1, 3 and 7 blocks: block-independent, nothing written past the row", "[quant][roundtrip]") {
  const GgmlType types[] = {GgmlType::F32,  GgmlType::F16,  GgmlType::BF16, GgmlType::Q4_0,
                            GgmlType::Q8_0, GgmlType::Q8_1, GgmlType::Q8_K, GgmlType::Q4_K,
                            GgmlType::Q5_K, GgmlType::Q6_K};
  const auto all = test::gaussian(7 * 256, 21);
  for (GgmlType t : types) {
    const int bs = block_of(t);
    // the 7-block row, quantised whole: its blocks are the reference bytes
    std::vector<uint8_t> whole(test::row_bytes(t, 7 * bs));
    quantize_row(t, all.data(), whole.data(), 7 * bs);
    for (int nb : {1, 3, 7}) {
      const int64_t n = int64_t(nb) * bs;
      const size_t bytes = test::row_bytes(t, n);
      for (int start : {0, 7 - nb}) {  // a row starting at block `start` of `all`
        INFO(ggml_type_name(t) << ": " << nb << " block(s) from block " << start);
        std::vector<uint8_t> q(bytes + 64, 0xA5);
        quantize_row(t, all.data() + size_t(start) * bs, q.data(), n);
        const size_t off = test::row_bytes(t, int64_t(start) * bs);
        CHECK(std::memcmp(q.data(), whole.data() + off, bytes) == 0);
        for (size_t i = bytes; i < q.size(); ++i) REQUIRE(q[i] == 0xA5);

        std::vector<float> y(size_t(n) + 16, -777.0f);
        dequant_row(t, q.data(), y.data(), n);
        for (size_t i = size_t(n); i < y.size(); ++i) REQUIRE(y[i] == -777.0f);
        double max_err = 0, amax = 0;
        for (int64_t i = 0; i < n; ++i) {
          max_err = std::max(max_err, double(std::fabs(y[size_t(i)] - all[size_t(start * bs + i)])));
          amax = std::max(amax, double(std::fabs(all[size_t(start * bs + i)])));
        }
        CHECK(max_err <= 0.25 * amax);  // coarse sanity: Q4_0's worst case is amax/8
      }
    }
  }
  // dequant-only formats on odd lengths: nothing written past the row.
  for (GgmlType t : {GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::Q2_K, GgmlType::Q3_K}) {
    const int bs = block_of(t);
    for (int nb : {1, 3, 7}) {
      const int64_t n = int64_t(nb) * bs;
      std::vector<uint8_t> q(test::row_bytes(t, n));
      for (size_t i = 0; i < q.size(); ++i) q[i] = uint8_t(i * 37 + 11);
      std::vector<float> y(size_t(n) + 16, -777.0f);
      dequant_row(t, q.data(), y.data(), n);
      for (size_t i = size_t(n); i < y.size(); ++i) REQUIRE(y[i] == -777.0f);
      // every block decodes as it does alone
      const size_t bb = test::row_bytes(t, bs);
      std::vector<float> one(static_cast<size_t>(bs));
      for (int b = 0; b < nb; ++b) {
        dequant_row(t, q.data() + bb * size_t(b), one.data(), bs);
        REQUIRE(std::memcmp(one.data(), y.data() + size_t(b) * bs, size_t(bs) * 4) == 0);
      }
    }
  }
}

TEST_CASE("edge inputs: zeros, constants, outliers, tiny and huge scales", "[quant][roundtrip]") {
  const GgmlType types[] = {GgmlType::Q4_0, GgmlType::Q8_0, GgmlType::Q8_1, GgmlType::Q8_K,
                            GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K};
  for (GgmlType t : types) {
    INFO(ggml_type_name(t));
    std::vector<float> zero(512, 0.0f);
    const auto yz = test::round_trip(t, zero);
    for (float v : yz) REQUIRE(v == 0.0f);

    // Constant rows (positive and negative) come back within 1% of the constant.
    for (float c : {0.75f, -3.0f}) {
      std::vector<float> k(512, c);
      const auto yk = test::round_trip(t, k);
      for (float v : yk) REQUIRE(std::fabs(v - c) <= 0.01f * std::fabs(c));
    }

    // One large outlier per block: finite everywhere, the outlier itself kept
    // within 5%.
    auto o = test::gaussian(512, 31);
    o[77] = 1000.0f;
    o[300] = -1000.0f;
    const auto yo = test::round_trip(t, o);
    for (float v : yo) REQUIRE(std::isfinite(v));
    CHECK(std::fabs(yo[77] - 1000.0f) < 50.0f);
    CHECK(std::fabs(yo[300] + 1000.0f) < 50.0f);

    // Tiny and large magnitudes keep their relative error (no f16 under/overflow
    // of the scales for weights in a sane range).
    for (float scale : {1e-3f, 30.0f}) {
      auto g = test::gaussian(4096, 33, scale);
      const auto yg = test::round_trip(t, g);
      CHECK(test::rel_rms(g.data(), yg.data(), g.size()) < 0.1);
    }
  }
}

TEST_CASE("F16 and BF16 quantisation round to nearest even", "[quant][roundtrip]") {
  // 1 + 2^-11 is halfway between two halves: ties to even -> 1.0;
  // 1 + 3·2^-11 -> 1 + 2^-9 (the even neighbour).
  const float x[4] = {1.0f + 0x1p-11f, 1.0f + 3 * 0x1p-11f, 65504.0f, -0x1p-24f};
  uint16_t h[4];
  quantize_row(GgmlType::F16, x, h, 4);
  CHECK(h[0] == 0x3C00);
  CHECK(h[1] == 0x3C02);
  CHECK(h[2] == 0x7BFF);
  CHECK(h[3] == 0x8001);
  // bf16: 1 + 2^-8 is halfway -> 1.0; 1 + 3·2^-8 -> 1 + 2^-6.
  const float y[2] = {1.0f + 0x1p-8f, 1.0f + 3 * 0x1p-8f};
  uint16_t b[2];
  quantize_row(GgmlType::BF16, y, b, 2);
  CHECK(b[0] == 0x3F80);
  CHECK(b[1] == 0x3F82);
}

TEST_CASE("F16 rows convert exactly as common/fp16.h does, for every half and many floats", "[quant][roundtrip]") {
  // every half bit pattern -> float (NaNs compared as NaN)
  std::vector<uint16_t> all(65536);
  for (uint32_t i = 0; i < 65536; ++i) all[i] = uint16_t(i);
  std::vector<float> f(65536);
  dequant_row(GgmlType::F16, all.data(), f.data(), 65536);
  size_t bad = 0;
  for (uint32_t i = 0; i < 65536; ++i) {
    const float want = fp16_to_fp32(uint16_t(i));
    if (std::isnan(want) ? !std::isnan(f[i]) : fp32_to_bits(f[i]) != fp32_to_bits(want)) ++bad;
  }
  CHECK(bad == 0);

  // floats -> half: a stride through all 2^32 bit patterns (every exponent,
  // both signs, NaNs, infinities) plus the rounding boundaries of each half.
  std::vector<float> x;
  for (uint64_t b = 0; b < (uint64_t(1) << 32); b += 4093) x.push_back(fp32_from_bits(uint32_t(b)));
  for (uint32_t hb = 0; hb < 0x7c00; hb += 7) {
    const float lo = fp16_to_fp32(uint16_t(hb)), hi = fp16_to_fp32(uint16_t(hb + 1));
    const float mid = lo + (hi - lo) / 2;  // exact: a tie
    for (float v : {mid, std::nextafter(mid, 0.0f), std::nextafter(mid, 1e30f)}) {
      x.push_back(v);
      x.push_back(-v);
    }
  }
  for (float v : {65504.0f, 65519.99f, 65520.0f, 65536.0f, 1e30f, 0x1p-25f, 0x1.000002p-25f, 0x1p-24f, 0x1p-14f}) {
    x.push_back(v);
    x.push_back(-v);
  }
  std::vector<uint16_t> h(x.size());
  quantize_row(GgmlType::F16, x.data(), h.data(), int64_t(x.size()));
  bad = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    if (h[i] != fp32_to_fp16(x[i])) {
      if (bad < 5) UNSCOPED_INFO("float bits " << std::hex << fp32_to_bits(x[i]) << ": " << h[i] << " vs " << fp32_to_fp16(x[i]));
      ++bad;
    }
  }
  CHECK(bad == 0);
}
