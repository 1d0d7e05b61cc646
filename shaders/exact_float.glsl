// The exact float arithmetic of the int8 path: correctly rounded division,
// C's roundf and f16 rounding from correctly rounded +, -, · alone. Apart from
// int8_common.glsl (which adds the integer dot products) so that shaders
// without them (span_attention.comp's quantised output) need no capability.
#ifndef FISH_EXACT_FLOAT_GLSL
#define FISH_EXACT_FLOAT_GLSL
// a·b = p + err exactly (Dekker's product; no fma: Vulkan lets fma be unfused).
float two_prod_err(float a, float b, float p) {
  precise float ca = 4097.0 * a;
  precise float ah = ca - (ca - a);
  precise float al = a - ah;
  precise float cb = 4097.0 * b;
  precise float bh = cb - (cb - b);
  precise float bl = b - bh;
  precise float e = ((ah * bh - p) + ah * bl + al * bh) + al * bl;
  return e;
}
// a - q·b, accurate to a rounding of a tiny value when q is near a/b.
float div_rem(float a, float b, float q) {
  precise float p = q * b;
  precise float r = (a - p) - two_prod_err(q, b, p);
  return r;
}
// The neighbour of finite nonzero q toward +inf (up) or -inf.
float next_float(float q, bool up) {
  const int bits = floatBitsToInt(q);
  return intBitsToFloat((q > 0.0) == up ? bits + 1 : bits - 1);
}
// a / b correctly rounded (to nearest even) for finite a, b != 0 of moderate
// range: the driver's quotient (within a few ulp), one correction step, then
// the neighbour with the smaller remainder. A quotient of these operands is
// never exactly halfway between two floats, so the remainders decide alone.
float div_rn(float a, float b) {
  precise float q = a / b;
  if (q == 0.0 || isinf(q) || isnan(q)) return q;
  precise float q1 = q + div_rem(a, b, q) / b;
  q = q1;
  const float r = div_rem(a, b, q);
  if (r == 0.0) return q;
  const float qn = next_float(q, (r > 0.0) == (b > 0.0));
  return abs(div_rem(a, b, qn)) < abs(r) ? qn : q;
}

// Nearest integer, ties away from zero (C's roundf), exact for |v| < 2^22.
float round_half_away(float v) {
  const float r = roundEven(v);
  precise float diff = v - r;
  return diff == 0.5 && v > 0.0 ? r + 1.0 : diff == -0.5 && v < 0.0 ? r - 1.0 : r;
}

// f32 -> nearest-even f16 -> f32 (as the F16C instruction; no rounding mode of
// packHalf2x16 is promised). Normal and subnormal halves; overflow -> inf.
float f16_round(float f) {
  const uint x = floatBitsToUint(f), sign = x & 0x80000000u, a = x & 0x7FFFFFFFu;
  if (a >= 0x7F800000u) return f;
  if (a >= 0x477FF000u) return uintBitsToFloat(sign | 0x7F800000u);
  if (a < 0x38800000u) {  // a half subnormal: multiples of 2^-24
    if (a < 0x33000000u) return uintBitsToFloat(sign);
    const uint e = a >> 23, m = (a & 0x7FFFFFu) | 0x800000u, sh = 126u - e;
    uint r = m >> sh;
    const uint rem = m & ((1u << sh) - 1u), hf = 1u << (sh - 1u);
    if (rem > hf || (rem == hf && (r & 1u) != 0u)) r++;
    const float v = float(r) * (1.0 / 16777216.0);
    return sign != 0u ? -v : v;
  }
  uint r = a >> 13;
  const uint rem = a & 0x1FFFu;
  if (rem > 0x1000u || (rem == 0x1000u && (r & 1u) != 0u)) r++;
  return uintBitsToFloat(sign | (r << 13));
}

// The Q8_K rule (the CPU's quantize_row Q8_K) of a block whose extremes, 0
// included, are hi >= 0 >= lo: the signed maximum mx is the side of larger
// magnitude; on a tie in magnitude (q8k_tie) the caller finds the first
// element that reaches hi and takes it with its sign. iscale = -127 / mx and
// d = 1 / iscale (both 0 for an all-zero block); q = min(127,
// nearest-even(iscale · x)), 0 for an all-zero block.
float q8k_signed_max(float hi, float lo) { return hi != -lo ? (hi > -lo ? hi : lo) : 0.0; }
bool q8k_tie(float hi, float lo) { return hi == -lo && hi != 0.0; }
void q8k_scales(float mx, out float iscale, out float d) {
  iscale = 0.0, d = 0.0;
  if (mx != 0.0) {
    iscale = div_rn(-127.0, mx);
    d = div_rn(1.0, iscale);
  }
}
int q8k_quant(float mx, float iscale, float x) {
  precise float p = iscale * x;
  return mx != 0.0 ? min(127, int(roundEven(p))) : 0;
}
#endif
