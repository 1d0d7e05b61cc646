// The int8 activation formats and Q4_0 round exactly as ggml's reference
// quantisers do (llama.cpp's perplexity is matched within 0.5%, so the integers
// fish's dot products see must be the same): inputs chosen so that every
// rounding rule shows (ties, the sign convention of Q8_K's scale, clamping),
// with the expected bytes worked out by hand.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <vector>

#include "common/fp16.h"
#include "quant/blocks.h"
#include "quant/quant.h"
#include "quant_test_util.h"

using namespace fish;

TEST_CASE("Q8_0 and Q8_1: d = amax/127, roundf (ties away from zero)", "[quant][activations]") {
  // amax 127 -> d = 1, id = 1: the levels are the inputs rounded half away from zero.
  std::vector<float> x(32, 0.0f);
  const float in[10] = {127.0f, 2.5f, -2.5f, 0.5f, -0.5f, 1.49999f, -126.6f, 3.5f, -0.49f, 0.0f};
  const int expect[10] = {127, 3, -3, 1, -1, 1, -127, 4, 0, 0};
  std::copy(in, in + 10, x.begin());

  BlockQ8_0 b;
  quantize_row(GgmlType::Q8_0, x.data(), &b, 32);
  CHECK(b.d == 0x3C00);  // 1.0
  for (int j = 0; j < 10; ++j) CHECK(int(b.qs[j]) == expect[j]);

  BlockQ8_1 c;
  quantize_row(GgmlType::Q8_1, x.data(), &c, 32);
  CHECK(c.d == 0x3C00);
  int sum = 0;
  for (int j = 0; j < 10; ++j) {
    CHECK(int(c.qs[j]) == expect[j]);
    sum += expect[j];
  }
  CHECK(sum == 5);
  CHECK(fp16_to_fp32(c.s) == 5.0f);  // s = d · Σ q

  // A scale that is not a power of two: amax 2.54 -> d = 0.02 (f32), and
  // x · (1/d) rounds as computed in f32 here.
  std::vector<float> y = test::gaussian(32, 3);
  y[5] = -2.54f;
  for (auto& v : y) v = std::max(-2.5f, std::min(2.5f, v));
  y[5] = -2.54f;
  quantize_row(GgmlType::Q8_0, y.data(), &b, 32);
  const float d = 2.54f / 127.0f, id = 1.0f / d;
  CHECK(b.d == fp32_to_fp16(d));
  for (int j = 0; j < 32; ++j) CHECK(int(b.qs[j]) == int(std::round(y[j] * id)));
  CHECK(int(b.qs[5]) == -127);

  // All zero: d = 0 and every level 0.
  std::vector<float> z(64, 0.0f);
  BlockQ8_1 zz[2];
  quantize_row(GgmlType::Q8_1, z.data(), zz, 64);
  for (auto& blk : zz) {
    CHECK(blk.d == 0);
    CHECK(blk.s == 0);
    for (int j = 0; j < 32; ++j) CHECK(blk.qs[j] == 0);
  }
}

TEST_CASE("Q8_K: iscale = -127/max with max's sign, nearest-even, bsums", "[quant][activations]") {
  std::vector<float> x(256, 0.0f);
  // Largest magnitude 127 (positive) -> iscale = -1, d = -1: levels are -x
  // rounded half to even.
  const float in[8] = {127.0f, 2.5f, -2.5f, 0.5f, -1.5f, 3.5f, -0.5f, 100.2f};
  const int expect[8] = {-127, -2, 2, 0, 2, -4, 0, -100};
  std::copy(in, in + 8, x.begin());
  x[100] = -7.0f;
  BlockQ8_K b;
  quantize_row(GgmlType::Q8_K, x.data(), &b, 256);
  CHECK(b.d == -1.0f);
  for (int j = 0; j < 8; ++j) CHECK(int(b.qs[j]) == expect[j]);
  CHECK(int(b.qs[100]) == 7);
  CHECK(b.bsums[0] == -127 - 2 + 2 + 0 + 2 - 4 + 0 - 100);
  CHECK(b.bsums[6] == 7);  // element 100 is in group 6
  for (int g = 1; g < 16; ++g)
    if (g != 6) CHECK(b.bsums[g] == 0);

  // Largest magnitude negative -> iscale > 0, d > 0.
  x.assign(256, 0.0f);
  x[3] = -254.0f;
  x[17] = 1.0f;    // 0.5 -> 0 (tie to even)
  x[18] = 3.0f;    // 1.5 -> 2
  x[200] = 253.0f; // 126.5 -> 126
  quantize_row(GgmlType::Q8_K, x.data(), &b, 256);
  CHECK(b.d == 2.0f);
  CHECK(int(b.qs[3]) == -127);
  CHECK(int(b.qs[17]) == 0);
  CHECK(int(b.qs[18]) == 2);
  CHECK(int(b.qs[200]) == 126);
  CHECK(b.bsums[0] == -127);
  CHECK(b.bsums[1] == 2);
  CHECK(b.bsums[12] == 126);

  // bsums always equal the sums of the levels (random data, several blocks).
  const auto r = test::gaussian(256 * 3, 5);
  BlockQ8_K rb[3];
  quantize_row(GgmlType::Q8_K, r.data(), rb, 256 * 3);
  for (auto& blk : rb) {
    for (int g = 0; g < 16; ++g) {
      int s = 0;
      for (int l = 0; l < 16; ++l) s += blk.qs[16 * g + l];
      CHECK(blk.bsums[g] == s);
    }
  }
}

TEST_CASE("Q4_0: d = max/-8, level = min(15, trunc(x/d + 8.5))", "[quant][activations]") {
  // max (largest magnitude, signed) = -8 -> d = 1: level = x + 8 rounded half up, capped at 15.
  std::vector<float> x(32, 0.0f);
  const float in[8] = {-8.0f, 7.0f, 7.9f, 0.5f, -0.5f, -7.5f, 2.49f, 0.0f};
  const int expect[8] = {0, 15, 15, 9, 8, 1, 10, 8};
  std::copy(in, in + 8, x.begin());
  BlockQ4_0 b;
  quantize_row(GgmlType::Q4_0, x.data(), &b, 32);
  CHECK(b.d == 0x3C00);
  for (int j = 0; j < 8; ++j) CHECK((b.qs[j] & 15) == expect[j]);
  for (int j = 0; j < 16; ++j) CHECK((b.qs[j] >> 4) == 8);  // elements 16..31 are 0

  // Positive max -> negative d; the largest element takes level 0.
  x.assign(32, 0.0f);
  x[20] = 4.0f;  // d = -0.5
  x[21] = -4.0f; // -4 / -0.5 = 8 -> trunc(16.5) = 16 -> capped at 15
  x[0] = 1.0f;   // 1 / -0.5 = -2 -> 6
  quantize_row(GgmlType::Q4_0, x.data(), &b, 32);
  CHECK(b.d == 0xB800);
  CHECK((b.qs[4] >> 4) == 0);
  CHECK((b.qs[5] >> 4) == 15);
  CHECK((b.qs[0] & 15) == 6);
}
