// Random weight matrices of every type the matmul kernels take, for the tests
// and the benchmark. Quant bytes are uniformly random (every bit pattern of
// quants, 6-bit scales, high bits and signs occurs); the f16 block scales are
// drawn from a sane range so the products stay finite and comparable.
#pragma once
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "common/fp16.h"
#include "common/ggml_type.h"
#include "quant/blocks.h"

namespace fish::test {

// Bytes of one row of n elements of type t.
inline uint64_t row_bytes_of(GgmlType t, int64_t n) {
  const auto info = ggml_type_info(t);
  return uint64_t(n / info->block_size) * uint64_t(info->type_size);
}

// One matrix [n_out rows of n_in] of type t, rows packed back to back.
inline std::vector<uint8_t> random_weights(GgmlType t, int64_t n_in, int64_t n_out, uint64_t seed) {
  std::mt19937_64 rng(seed);
  const uint64_t rb = row_bytes_of(t, n_in);
  std::vector<uint8_t> w(rb * uint64_t(n_out));
  for (auto& b : w) b = uint8_t(rng());
  std::uniform_real_distribution<float> scale(0.25f, 1.0f);
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
  auto half = [&](float v) { return fp32_to_fp16(v); };
  // A block scale of either sign, ~1/(quant range) so block values are O(1).
  auto dscale = [&](float range) { return half((rng() & 1 ? 1.0f : -1.0f) * scale(rng) / range); };
  const auto info = ggml_type_info(t);
  const int64_t blocks = int64_t(w.size()) / info->type_size;
  uint8_t* p = w.data();
  switch (t) {
    case GgmlType::F32:
      for (int64_t i = 0; i < blocks; ++i) {
        const float v = unit(rng);
        std::memcpy(p + 4 * i, &v, 4);
      }
      break;
    case GgmlType::F16:
      for (int64_t i = 0; i < blocks; ++i) {
        const uint16_t h = half(unit(rng));
        std::memcpy(p + 2 * i, &h, 2);
      }
      break;
    case GgmlType::BF16:
      for (int64_t i = 0; i < blocks; ++i) {
        const uint16_t h = fp32_to_bf16(unit(rng));
        std::memcpy(p + 2 * i, &h, 2);
      }
      break;
    case GgmlType::Q4_0:
      for (int64_t i = 0; i < blocks; ++i) reinterpret_cast<BlockQ4_0*>(p)[i].d = dscale(8);
      break;
    case GgmlType::Q4_1:
      for (int64_t i = 0; i < blocks; ++i) {
        reinterpret_cast<BlockQ4_1*>(p)[i].d = dscale(16);
        reinterpret_cast<BlockQ4_1*>(p)[i].m = half(-0.5f * scale(rng));
      }
      break;
    case GgmlType::Q5_0:
      for (int64_t i = 0; i < blocks; ++i) reinterpret_cast<BlockQ5_0*>(p)[i].d = dscale(16);
      break;
    case GgmlType::Q5_1:
      for (int64_t i = 0; i < blocks; ++i) {
        reinterpret_cast<BlockQ5_1*>(p)[i].d = dscale(32);
        reinterpret_cast<BlockQ5_1*>(p)[i].m = half(-0.5f * scale(rng));
      }
      break;
    case GgmlType::Q8_0:
      for (int64_t i = 0; i < blocks; ++i) reinterpret_cast<BlockQ8_0*>(p)[i].d = dscale(128);
      break;
    case GgmlType::Q2_K:
      for (int64_t i = 0; i < blocks; ++i) {
        reinterpret_cast<BlockQ2_K*>(p)[i].d = dscale(45);
        reinterpret_cast<BlockQ2_K*>(p)[i].dmin = half(scale(rng) / 60);
      }
      break;
    case GgmlType::Q3_K:
      for (int64_t i = 0; i < blocks; ++i) reinterpret_cast<BlockQ3_K*>(p)[i].d = dscale(128);
      break;
    case GgmlType::Q4_K:
      for (int64_t i = 0; i < blocks; ++i) {
        reinterpret_cast<BlockQ4_K*>(p)[i].d = dscale(900);
        reinterpret_cast<BlockQ4_K*>(p)[i].dmin = half(scale(rng) / 250);
      }
      break;
    case GgmlType::Q5_K:
      for (int64_t i = 0; i < blocks; ++i) {
        reinterpret_cast<BlockQ5_K*>(p)[i].d = dscale(1900);
        reinterpret_cast<BlockQ5_K*>(p)[i].dmin = half(scale(rng) / 250);
      }
      break;
    case GgmlType::Q6_K:
      for (int64_t i = 0; i < blocks; ++i) reinterpret_cast<BlockQ6_K*>(p)[i].d = dscale(4000);
      break;
    default: w.clear(); break;
  }
  return w;
}

// Activations: mostly in [-1, 1], one in 16 scaled up to 8 (outliers make
// the per-block activation scales differ, as in real hidden states).
inline std::vector<float> random_acts(int64_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(n));
  for (auto& v : x) v = unit(rng) * (rng() % 16 == 0 ? 8.0f : 1.0f);
  return x;
}

}  // namespace fish::test
