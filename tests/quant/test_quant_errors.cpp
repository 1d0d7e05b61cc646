// Bad input is a fish::Error naming the type and the reason, never a crash:
// unsupported or unknown types, lengths that are not whole blocks, non-finite
// or out-of-range weights. And the capability queries match the lists in quant.h.
#include <catch2/catch.hpp>

#include <cmath>
#include <string>
#include <vector>

#include "common/error.h"
#include "quant/quant.h"
#include "quant_test_util.h"

using namespace fish;
using Catch::Matchers::Contains;

TEST_CASE("capabilities match quant.h", "[quant][errors]") {
  const GgmlType deq[] = {GgmlType::F32,  GgmlType::F16,  GgmlType::BF16, GgmlType::Q4_0, GgmlType::Q4_1,
                          GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::Q8_0, GgmlType::Q2_K, GgmlType::Q3_K,
                          GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K, GgmlType::Q8_K};
  const GgmlType quant[] = {GgmlType::F32,  GgmlType::F16,  GgmlType::BF16, GgmlType::Q8_0, GgmlType::Q4_0,
                            GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K, GgmlType::Q8_1, GgmlType::Q8_K};
  for (GgmlType t : deq) CHECK(can_dequantize(t));
  for (GgmlType t : quant) CHECK(can_quantize(t));
  for (GgmlType t : {GgmlType::IQ2_XXS, GgmlType::IQ4_NL, GgmlType::I8, GgmlType::F64, GgmlType::TQ1_0, GgmlType::MXFP4}) {
    CHECK_FALSE(can_dequantize(t));
    CHECK_FALSE(can_quantize(t));
  }
  for (GgmlType t : {GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::Q2_K, GgmlType::Q3_K})
    CHECK_FALSE(can_quantize(t));
  // Every type a model may hold (ggml_type_info's "computable") can be decoded.
  for (uint32_t t = 0; t < 64; ++t) {
    const auto info = ggml_type_info(t);
    if (info && info->computable) CHECK(can_dequantize(GgmlType(t)));
  }
}

TEST_CASE("unsupported and unknown types are named in the error", "[quant][errors]") {
  std::vector<uint8_t> buf(4096);
  std::vector<float> f(256);
  CHECK_THROWS_WITH(dequant_row(GgmlType::IQ2_XXS, buf.data(), f.data(), 256), Contains("IQ2_XXS"));
  CHECK_THROWS_WITH(dequant_row(GgmlType(99), buf.data(), f.data(), 256), Contains("type 99"));
  CHECK_THROWS_WITH(quantize_row(GgmlType::Q2_K, f.data(), buf.data(), 256), Contains("Q2_K"));
  CHECK_THROWS_WITH(quantize_row(GgmlType::IQ4_NL, f.data(), buf.data(), 256), Contains("IQ4_NL"));
  CHECK_THROWS_WITH(vec_dot_type(GgmlType::IQ3_S), Contains("IQ3_S"));
  CHECK_THROWS_WITH(vec_dot_type(GgmlType::Q8_1), Contains("Q8_1"));
  CHECK_THROWS_WITH(vec_dot_ref(GgmlType::I32, 32, buf.data(), buf.data()), Contains("I32"));
  CHECK_THROWS_AS(dequant_row_fn(GgmlType::TQ2_0), Error);
  CHECK_THROWS_AS(quantize_row_fn(GgmlType::Q3_K), Error);
  CHECK(dequant_row_fn(GgmlType::Q6_K) != nullptr);
  CHECK(quantize_row_fn(GgmlType::Q4_K) != nullptr);
}

TEST_CASE("lengths that are not whole blocks are refused", "[quant][errors]") {
  std::vector<uint8_t> buf(4096);
  std::vector<float> f(512);
  CHECK_THROWS_WITH(dequant_row(GgmlType::Q4_K, buf.data(), f.data(), 100), Contains("Q4_K") && Contains("100"));
  CHECK_THROWS_WITH(dequant_row(GgmlType::Q8_0, buf.data(), f.data(), 33), Contains("32-element"));
  CHECK_THROWS_WITH(quantize_row(GgmlType::Q6_K, f.data(), buf.data(), 255), Contains("Q6_K"));
  CHECK_THROWS_AS(quantize_row(GgmlType::F16, f.data(), buf.data(), -1), Error);
  CHECK_THROWS_AS(vec_dot_ref(GgmlType::Q4_0, 48, buf.data(), buf.data()), Error);
  // Q4_0 rows of 32 are whole blocks for the weights and for Q8_0.
  CHECK_NOTHROW(vec_dot_ref(GgmlType::Q4_0, 32, buf.data(), buf.data()));
  // Zero-length rows are fine and touch nothing.
  CHECK_NOTHROW(dequant_row(GgmlType::Q4_K, nullptr, nullptr, 0));
  CHECK_NOTHROW(quantize_row(GgmlType::Q4_K, nullptr, nullptr, 0));
  CHECK(vec_dot_ref(GgmlType::Q6_K, 0, nullptr, nullptr) == 0.0f);
}

TEST_CASE("weights that are not finite or beyond the f16 scales are refused", "[quant][errors]") {
  std::vector<uint8_t> buf(4096);
  for (GgmlType t : {GgmlType::Q4_0, GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K}) {
    INFO(ggml_type_name(t));
    auto x = test::gaussian(256, 1);
    x[77] = NAN;
    CHECK_THROWS_WITH(quantize_row(t, x.data(), buf.data(), 256),
                      Contains(ggml_type_name(t)) && Contains("element 77") && Contains("not finite"));
    x[77] = -INFINITY;
    CHECK_THROWS_WITH(quantize_row(t, x.data(), buf.data(), 256), Contains("not finite"));
    x[77] = 1e12f;
    CHECK_THROWS_WITH(quantize_row(t, x.data(), buf.data(), 256), Contains("beyond the format's range"));

    // Just inside the limit: still representable, decodes to finite values
    // within the format's error of the large values (Q4_0 loses up to |d| =
    // max/8 on the value opposite the largest one).
    const float big = t == GgmlType::Q4_0 ? 5.0e5f : (t == GgmlType::Q6_K ? 2.0e8f : 3.5e6f);
    x[77] = big;
    x[78] = -big;
    const auto y = test::round_trip(t, x);
    for (float v : y) REQUIRE(std::isfinite(v));
    CHECK(std::fabs(y[77] - big) < 0.13f * big);
    CHECK(std::fabs(y[78] + big) < 0.13f * big);
  }
  // The activation formats do not check (hot path) but do not crash either.
  std::vector<float> a(256, 1.0f);
  a[3] = NAN;
  a[4] = INFINITY;
  CHECK_NOTHROW(quantize_row(GgmlType::Q8_K, a.data(), buf.data(), 256));
  CHECK_NOTHROW(quantize_row(GgmlType::Q8_0, a.data(), buf.data(), 256));
  CHECK_NOTHROW(quantize_row(GgmlType::Q8_1, a.data(), buf.data(), 256));
}
