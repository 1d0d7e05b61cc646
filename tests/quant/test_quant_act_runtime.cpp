// quantize_act_row_fn: the run-time activation rounding of llama.cpp's x86
// path (127/amax, ties to even) for Q8_0/Q8_1, against hand-worked values.
#include <catch2/catch.hpp>
#include <vector>

#include "common/fp16.h"
#include "quant/blocks.h"
#include "quant/quant.h"

using namespace fish;

TEST_CASE("activation Q8_0/Q8_1: id = 127/amax, ties to even", "[quant][activations]") {
  // amax 1.27 -> id = 100: x = 0.005 -> 0.5 -> 0 (even), 0.015 -> 1.5 -> 2,
  // 0.025 -> 2.5 -> 2, -0.005 -> -0.5 -> 0; reference roundf would give 1, 2, 3, -1.
  std::vector<float> x(32, 0.0f);
  x[0] = 1.27f;
  x[1] = 0.005f;
  x[2] = 0.015f;
  x[3] = 0.025f;
  x[4] = -0.005f;
  x[5] = -1.0f;  // -100
  BlockQ8_0 b{};
  quantize_act_row_fn(GgmlType::Q8_0)(x.data(), &b, 32);
  const float id = 127.0f / 1.27f;
  CHECK(b.qs[0] == 127);
  CHECK(int(b.qs[1]) == (x[1] * id < 0.5f ? 0 : (x[1] * id > 0.5f ? 1 : 0)));
  CHECK(int(b.qs[2]) == 2);
  CHECK(int(b.qs[3]) == (x[3] * id == 2.5f ? 2 : int(x[3] * id + 0.5f)));
  CHECK(int(b.qs[5]) == -100);
  CHECK(b.d == fp32_to_fp16(1.27f / 127.0f));
  BlockQ8_1 c{};
  quantize_act_row_fn(GgmlType::Q8_1)(x.data(), &c, 32);
  int sum = 0;
  for (int j = 0; j < 32; ++j) {
    CHECK(c.qs[j] == b.qs[j]);
    sum += c.qs[j];
  }
  CHECK(c.s == fp32_to_fp16(1.27f / 127.0f * float(sum)));
  // A genuine tie: amax 127 -> id exactly 1, x = 2.5 -> 2, x = 3.5 -> 4, -2.5 -> -2.
  std::vector<float> y(32, 0.0f);
  y[0] = 127.0f;
  y[1] = 2.5f;
  y[2] = 3.5f;
  y[3] = -2.5f;
  quantize_act_row_fn(GgmlType::Q8_0)(y.data(), &b, 32);
  CHECK(b.qs[1] == 2);
  CHECK(b.qs[2] == 4);
  CHECK(b.qs[3] == -2);
  // All zeros: d = 0, q = 0.
  std::vector<float> z(32, 0.0f);
  quantize_act_row_fn(GgmlType::Q8_0)(z.data(), &b, 32);
  CHECK(b.d == 0);
  for (int j = 0; j < 32; ++j) CHECK(b.qs[j] == 0);
  // Q8_K is quantize_row's.
  CHECK(quantize_act_row_fn(GgmlType::Q8_K) == quantize_row_fn(GgmlType::Q8_K));
}
