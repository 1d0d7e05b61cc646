// Packing of the K-quant per-group scales (facts of ggml's byte layout), shared
// by dequantisation, quantisation, the reference dot products and any SIMD
// kernel that wants the scales as plain bytes.
#pragma once
#include <cstdint>

#include "quant/blocks.h"

namespace fish {

// Q4_K / Q5_K: 8 six-bit scales sc[j] and 8 six-bit mins m[j] in 12 bytes.
//   bytes 0..3  : sc[0..3] in bits 0..5, bits 6..7 = sc[4..7] >> 4
//   bytes 4..7  : m[0..3]  in bits 0..5, bits 6..7 = m[4..7]  >> 4
//   bytes 8..11 : low nibble = sc[4..7] & 15, high nibble = m[4..7] & 15
inline void unpack_scale_min_k4(const uint8_t* packed, uint8_t sc[8], uint8_t m[8]) {
  for (int j = 0; j < 4; ++j) {
    sc[j] = packed[j] & 63;
    m[j] = packed[j + 4] & 63;
    sc[j + 4] = uint8_t((packed[j + 8] & 15) | ((packed[j] >> 6) << 4));
    m[j + 4] = uint8_t((packed[j + 8] >> 4) | ((packed[j + 4] >> 6) << 4));
  }
}

// Inverse of unpack_scale_min_k4; sc[j], m[j] must be < 64.
inline void pack_scale_min_k4(const uint8_t sc[8], const uint8_t m[8], uint8_t* packed) {
  for (int j = 0; j < 4; ++j) {
    packed[j] = uint8_t(sc[j] | ((sc[j + 4] >> 4) << 6));
    packed[j + 4] = uint8_t(m[j] | ((m[j + 4] >> 4) << 6));
    packed[j + 8] = uint8_t((sc[j + 4] & 15) | ((m[j + 4] & 15) << 4));
  }
}

// Q3_K: 16 six-bit scales, stored biased by 32, in 12 bytes:
//   low 4 bits of scale i: i < 8 ? bytes[i] & 15 : bytes[i - 8] >> 4
//   high 2 bits of scale i: (bytes[8 + i % 4] >> (2 * (i / 4))) & 3
// out[i] is the signed scale (stored value - 32), in -32..31.
inline void unpack_scales_q3_k(const uint8_t* packed, int8_t out[16]) {
  for (int i = 0; i < 16; ++i) {
    const int lo = i < 8 ? (packed[i] & 15) : (packed[i - 8] >> 4);
    const int hi = (packed[8 + i % 4] >> (2 * (i / 4))) & 3;
    out[i] = int8_t((lo | (hi << 4)) - 32);
  }
}

}  // namespace fish
