// dequant8(row, k, lo, hi): elements k .. k+7 of weight row `row` as f32
// (k a multiple of 8), for the tiled kernel. One section per GGUF type; the
// layouts are ggml's (see engine/src/quant/blocks.h). Elements at or past n_in
// (only possible for F32/F16, whose rows may have any length) read as 0.

vec4 u8x4(uint v) { return vec4(float(v & 0xFFu), float((v >> 8) & 0xFFu), float((v >> 16) & 0xFFu), float(v >> 24)); }
vec4 s8x4(uint v) {
  const int i = int(v);
  return vec4(float(bitfieldExtract(i, 0, 8)), float(bitfieldExtract(i, 8, 8)), float(bitfieldExtract(i, 16, 8)),
              float(bitfieldExtract(i, 24, 8)));
}

#if defined(TYPE_F32)
void dequant8(uint row, uint k, out vec4 lo, out vec4 hi) {
  float v[8];
  for (uint i = 0u; i < 8u; ++i) v[i] = k + i < pc.n_in ? uintBitsToFloat(W[row * pc.n_in + k + i]) : 0.0;
  lo = vec4(v[0], v[1], v[2], v[3]);
  hi = vec4(v[4], v[5], v[6], v[7]);
}

#elif defined(TYPE_F16)
void dequant8(uint row, uint k, out vec4 lo, out vec4 hi) {
  float v[8];
  for (uint i = 0u; i < 8u; ++i) {
    const uint a = row * pc.n_in + k + i;
    v[i] = k + i < pc.n_in ? half_to_float((W[a >> 1] >> ((a & 1u) * 16u)) & 0xFFFFu) : 0.0;
  }
  lo = vec4(v[0], v[1], v[2], v[3]);
  hi = vec4(v[4], v[5], v[6], v[7]);
}

#elif defined(TYPE_Q4_0)
// {f16 d; qs[16]}: element j < 16 = low nibble of qs[j], 16 + j = high nibble.
void dequant8(uint row, uint k, out vec4 lo, out vec4 hi) {
  const uint o = (row * (pc.n_in >> 5) + (k >> 5)) * 18u, e = k & 31u;
  const float d = half_to_float(load_half(o));
  uvec2 q = load_bytes8(o + 2u + (e & 15u));
  q = e < 16u ? q & 0x0F0F0F0Fu : (q >> 4) & 0x0F0F0F0Fu;
  lo = d * (u8x4(q.x) - 8.0);
  hi = d * (u8x4(q.y) - 8.0);
}

#elif defined(TYPE_Q8_0)
// {f16 d; int8 qs[32]}.
void dequant8(uint row, uint k, out vec4 lo, out vec4 hi) {
  const uint o = (row * (pc.n_in >> 5) + (k >> 5)) * 34u, e = k & 31u;
  const float d = half_to_float(load_half(o));
  const uvec2 q = load_bytes8(o + 2u + e);
  lo = d * s8x4(q.x);
  hi = d * s8x4(q.y);
}

#elif defined(TYPE_Q4_K) || defined(TYPE_Q5_K)
// Element e of a super-block: chunk j = e / 64; e % 64 < 32: low nibble of
// qs[32j + e % 32] (group 2j), else the high nibble (group 2j + 1). Q5_K: bit
// (group) of qh[e % 32] is bit 4.
void dequant8(uint row, uint k, out vec4 lo, out vec4 hi) {
#if defined(TYPE_Q4_K)
  const uint bv4 = 9u, qs_word = 4u;
#else
  const uint bv4 = 11u, qs_word = 12u;
#endif
  const uint base = (row * (pc.n_in >> 8) + (k >> 8)) * bv4;
  const uint e = k & 255u, j = e >> 6, g = e >> 5, l = e & 31u;
  const uvec4 hd = W4[base];
  const uint w = base * 4u + qs_word + 8u * j + (l >> 2);
  uvec2 q = uvec2(W[w], W[w + 1u]);
  q = (g & 1u) == 0u ? q & 0x0F0F0F0Fu : (q >> 4) & 0x0F0F0F0Fu;
#if defined(TYPE_Q5_K)
  const uint wh = base * 4u + 4u + (l >> 2);
  q |= ((uvec2(W[wh], W[wh + 1u]) >> g) & 0x01010101u) << 4;
#endif
  const vec2 dm = unpackHalf2x16(hd.x);
  const uvec2 sm = k4_scale_min(g, hd);
  const float sc = dm.x * float(sm.x), mn = dm.y * float(sm.y);
  lo = sc * u8x4(q.x) - mn;
  hi = sc * u8x4(q.y) - mn;
}

#elif defined(TYPE_Q6_K)
// Element e of a super-block: half n = e / 128, quarter k4 = (e % 128) / 32,
// l = e % 32: ql[64n + 32·(k4 & 1) + l] (low nibble for k4 < 2, else high),
// bits 2·k4 of qh[32n + l] on top, scale sc[8n + l/16 + 2·k4], value d·sc·(q - 32).
void dequant8(uint row, uint k, out vec4 lo, out vec4 hi) {
  const uint o = (row * (pc.n_in >> 8) + (k >> 8)) * 210u;
  const uint e = k & 255u, n = e >> 7, k4 = (e >> 5) & 3u, l = e & 31u;
  uvec2 q = load_bytes8(o + 64u * n + 32u * (k4 & 1u) + l);
  q = k4 < 2u ? q & 0x0F0F0F0Fu : (q >> 4) & 0x0F0F0F0Fu;
  q |= ((load_bytes8(o + 128u + 32u * n + l) >> (2u * k4)) & 0x03030303u) << 4;
  const float s = half_to_float(load_half(o + 208u)) * float(load_sbyte(o + 192u + 8u * n + (l >> 4) + 2u * k4));
  lo = s * (u8x4(q.x) - 32.0);
  hi = s * (u8x4(q.y) - 32.0);
}

#elif defined(TYPE_FQ3)
// 7 uvec4 per block (fq3_codes.glsl): elements k .. k+7 are runs s and s + 1
// (s even) of group g: one A-or-B word and the C word. Both products are
// exact in f32 and the subtraction is rounded once (fused or not), so the
// values are the CPU decoder's to the bit.
void dequant8(uint row, uint k, out vec4 lo, out vec4 hi) {
  const uint base = (row * (pc.n_in >> 8) + (k >> 8)) * FQ3_V4;
  const uint e = k & 255u, g = e >> 5, s = (e >> 2) & 7u;
  const uvec4 hd = W4[base];
  const uint w = base * 4u + 4u + 3u * g;  // group g's word A
  const uint ab = W[w + (s >> 2)], c = W[w + 2u];
  const vec2 dm = unpackHalf2x16(hd.x);
  const uvec2 sm = k4_scale_min(g, hd);
  const float sc = dm.x * float(sm.x), mn = dm.y * float(sm.y);
  lo = sc * u8x4(fq3_run(ab, c, s)) - mn;
  hi = sc * u8x4(fq3_run(ab, c, s + 1u)) - mn;
}

#else
#error "dequant.glsl: define one TYPE_<T>"
#endif

// dequant_seg(row, k, h, a, b): the half of a 64-element segment (k a
// multiple of 64) that lane h (0, 1) of a row's pair takes, as f32: a =
// elements k + 16h .. +15, b = k + 32 + 16h .. +15, by four dequant8 calls.
// Elements at or past n_in read as 0. The coopmat loader's per-type segment
// decoders (f16, no conversions) are dequant_seg_f16.glsl's; this form serves
// the rows they do not take (F32, F16 rows not a multiple of 64).
void dequant_seg(uint row, uint k, uint h, out vec4 a[4], out vec4 b[4]) {
  for (uint i = 0u; i < 2u; ++i) {
    const uint ka = k + 16u * h + 8u * i, kb = ka + 32u;
    a[2u * i] = b[2u * i] = a[2u * i + 1u] = b[2u * i + 1u] = vec4(0.0);
    if (ka < pc.n_in) dequant8(row, ka, a[2u * i], a[2u * i + 1u]);
    if (kb < pc.n_in) dequant8(row, kb, b[2u * i], b[2u * i + 1u]);
  }
}
