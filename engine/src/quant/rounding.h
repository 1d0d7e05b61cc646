// The two float -> integer roundings the GGUF quantisers use, written so that
// the loops around them vectorise and so that no input (NaN, inf, huge) is
// undefined behaviour: a plain float -> int cast of NaN or of a value out of
// range is UB in C++, so neither helper casts an unchecked value.
//
//  - round_half_even: nearest integer, ties to even (what the x86 default
//    rounding mode and the K-quant / Q8_K quantisers use). Adding 1.5 * 2^23
//    pushes the fraction bits out of the mantissa, so the FPU's own
//    round-to-nearest-even does the work; the integer is then read from the
//    low mantissa bits. Exact for |v| < 2^22; outside that the result is some
//    integer (garbage in, garbage out, never UB).
//  - round_half_away: nearest integer, ties away from zero (C's roundf, used by
//    the Q8_0 / Q8_1 reference quantisers). Exact for |v| < 2^22 as well.
#pragma once
#include <cstdint>
#include <cstring>

namespace fish {

constexpr float kRoundMagic = 12582912.0f;  // 1.5 * 2^23

// v rounded to an integral float (ties to even); exact for |v| < 2^22.
inline float round_even_f(float v) { return (v + kRoundMagic) - kRoundMagic; }

inline int32_t round_half_even(float v) {
  const float t = v + kRoundMagic;
  int32_t bits;
  std::memcpy(&bits, &t, 4);
  return (bits & 0x007fffff) - 0x00400000;
}

// v rounded to an integral float, ties away from zero; exact for |v| < 2^22.
// Round to even first, then move the ties that went toward zero: v − r is
// exact there, and the bitwise & keeps the loop free of branches.
inline float round_away_f(float v) {
  const float r = round_even_f(v);
  const float diff = v - r;
  return r + float((diff == 0.5f) & (v > 0.0f)) - float((diff == -0.5f) & (v < 0.0f));
}

inline int32_t round_half_away(float v) { return round_half_even(round_away_f(v)); }

}  // namespace fish
