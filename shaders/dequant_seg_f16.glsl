// The coopmat tile loader's weights (matmul_coopmat.comp): a lane's 32 weights
// of a 64-element segment (k a multiple of 64; lane h = 0, 1 of a row's pair)
// as f16, in two steps so the loads can be in flight while the tile's products
// run:
//   SegRaw seg_load(row, k, h)        issues the global loads (raw words only);
//   seg_f16(raw, k, h, a[4], b[4])    decodes them into f16vec4 a (elements
//                                     k + 16h .. +15) and b (k + 32 + 16h ..).
// Why f16 arithmetic: the f32 decode turned every code into a float with an
// integer-to-float conversion and every value into f16 with another; NVIDIA
// runs conversions at 16 per clock per SM, an eighth of the FMA rate, so a
// 128 x 64 weight tile (8192 weights per k step) cost ~770 clocks of
// conversions against ~256 of tensor-core products. Here a code c (< 256) is
// placed in the mantissa of 1.0 (the half 0x3C00 | c is exactly 1 + c/1024);
// the rest is half2 arithmetic: no conversion per weight. The block's d enters
// as d · 1024 and the codes as c/1024 (both exact), so no operand is an f16
// subnormal (d of small blocks is: 60% of test_vk_kernels' random Q4_K rows)
// on devices that flush those; the products are the same numbers (d · 1024 is
// exact up to d = 63.97, far beyond real weights). Rounding: each value
// is rounded twice, relative to itself (Q4_K / Q5_K / FQ3 below; Q6_K's d · sc is
// rounded to f16 once, a factor of the value): within the coopmat bound
// (test_vk_kernels).
// F16 rows are moved, not converted; F32 rows take dequant_seg's f32 values
// (dequant.glsl) and convert them at the store.

// Tile order: within every 4 consecutive k the tiles hold elements 0, 2, 1, 3
// (weights and x alike, so the products are the same sums): a word's bytes
// c0..c3 then become the halves (c0, c2) and (c1, c3) with one mask each.
f16vec4 to_f16(vec4 v) { return f16vec4(clamp(v.xzyw, vec4(-65504.0), vec4(65504.0))); }
// Four halves (h0, h1), (h2, h3) in tile order, as bits and as values.
uvec2 halves_tile(uvec2 p) { return uvec2((p.x & 0xFFFFu) | (p.y << 16), (p.x >> 16) | (p.y & 0xFFFF0000u)); }
f16vec4 halves_f16(uvec2 p) {
  const uvec2 t = halves_tile(p);
  return f16vec4(unpackFloat2x16(t.x), unpackFloat2x16(t.y));
}

// Bytes c0..c3 of v (each < 256) as halves (c0, c2), (c1, c3) of 1 + c/1024.
uvec2 codes_unit(uint v) { return uvec2((v & 0x00FF00FFu) | 0x3C003C00u, ((v >> 8) & 0x00FF00FFu) | 0x3C003C00u); }
// Four codes (bytes of v) as (1 + c/1024 - off) · s + m: off = 1 + z/1024 for
// a zero point z gives (c - z)/1024 exactly, s the scale times 1024.
f16vec4 codes_f16(uint v, float16_t off, f16vec2 s, f16vec2 m) {
  const uvec2 p = codes_unit(v);
  const f16vec2 o = f16vec2(off);
  return f16vec4(fma(unpackFloat2x16(p.x) - o, s, m), fma(unpackFloat2x16(p.y) - o, s, m));
}
float16_t f16_clamped(float v) { return float16_t(clamp(v, -65504.0, 65504.0)); }

#if defined(TYPE_Q4_K) || defined(TYPE_Q5_K) || defined(TYPE_FQ3)
#if !defined(TYPE_FQ3)
// Q4_K / Q5_K: a and b are exactly the low and high nibbles of one uvec4 of qs
// (chunk j = (k % 256) / 64, groups 2j and 2j + 1): two 16-byte loads (header,
// qs; Q5_K a third for qh) for 32 weights, where 8-weight reads made each load
// instruction's lanes touch a row each (vulkan-coopmat-prefill.md).
struct SegRaw {
  uvec4 hd, q;
#if defined(TYPE_Q5_K)
  uvec4 qh;
#endif
};
SegRaw seg_load(uint row, uint k, uint h) {
#if defined(TYPE_Q4_K)
  const uint bv4 = 9u, qs_v4 = 1u;
#else
  const uint bv4 = 11u, qs_v4 = 3u;  // qh: uvec4 1..2
#endif
  const uint base = (row * (pc.n_in >> 8) + (k >> 8)) * bv4;
  const uint j = (k & 255u) >> 6;
  SegRaw r;
  r.hd = W4[base];
  r.q = W4[base + qs_v4 + 2u * j + h];
#if defined(TYPE_Q5_K)
  r.qh = W4[base + 1u + h];
#endif
  return r;
}
#else
// FQ3 (fq3_codes.glsl): a lane's 16 values of a group are runs 4h .. 4h + 3,
// all from word A (h = 0) or B (h = 1) with the group's C word; a lies in group
// (k % 256) / 32, b in the next. Values d · sc · q - dmin · m as Q4_K's.
struct SegRaw { uvec4 hd; uint ab_a, c_a, ab_b, c_b; };
SegRaw seg_load(uint row, uint k, uint h) {
  const uint base = (row * (pc.n_in >> 8) + (k >> 8)) * FQ3_V4;
  const uint w = base * 4u + 4u + 3u * ((k & 255u) >> 5);  // group a's word A
  SegRaw r;
  r.hd = W4[base];
  r.ab_a = W[w + h], r.c_a = W[w + 2u], r.ab_b = W[w + 3u + h], r.c_b = W[w + 5u];
  return r;
}
#endif
// The K-quant group arithmetic (Q4_K / Q5_K: chunk j, group 2j in the low
// nibbles, 2j + 1 in the high; FQ3 the same per group): value d · sc · c -
// dmin · m, computed so that only the value's own roundings remain (a min
// rounded to f16 alone put up to 2^-11 of dmin · m on a value that can be much
// smaller: 2.7x the coopmat bound on random blocks):
//   c · sc / 1024 = fma(1 + c/1024, sc, -sc) (FUSED_F16, below): exact (c · sc
//   <= 31 · 63 < 2048);
//   dmin · m = M_hi + M_lo exactly (17 significant bits: two f16 values);
//   value = fma(c · sc / 1024, d · 1024, -M_hi) - M_lo: two roundings, both of
//   the value.
struct K4Group { f16vec2 sc, d, m_hi, m_lo; };
K4Group k4_group(uvec2 sm, vec2 dm) {
  K4Group g;
  g.sc = f16vec2(float16_t(float(sm.x)));
  g.d = f16vec2(f16_clamped(dm.x * 1024.0));
  // M = dmin · m has <= 17 significant bits and is a multiple of 2^-24 (dmin's
  // ulp at worst), so M_hi (M with its float mantissa cut to 10 bits) and M_lo
  // = M - M_hi (<= 7 bits) are both f16 values: every conversion here is exact,
  // so a compiler that folds a round trip through f16 changes nothing (one that
  // did dropped M_lo when M_hi was M rounded to f16).
  const float m = dm.y * float(sm.y);
  const float m_hi = uintBitsToFloat(floatBitsToUint(m) & 0xFFFFE000u);
  g.m_hi = f16vec2(-f16_clamped(m_hi));
  g.m_lo = f16vec2(-float16_t(m - m_hi));
  return g;
}
// FUSED_F16 (specialisation constant 6, set by the host where measured): the
// device's f16 fma rounds once. SPIR-V lets an fma round its product
// (lavapipe does: c · sc / 1024 then comes out up to 2% off); then c · sc /
// 1024 is (1 + c/1024 - 1) · sc, two operations, exact on any device. Where
// the fma does round its product, the value's fma below rounds c · sc · d too
// (an error of up to 2^-11 of it, within test_vk_span_kernels' loader check).
layout(constant_id = 6) const bool FUSED_F16 = false;
f16vec4 k4_codes_f16(uint v, K4Group g) {
  // precise: M_lo must be added to the rounded fma, not folded into M_hi.
  const uvec2 p = codes_unit(v);
  const f16vec2 u0 = unpackFloat2x16(p.x), u1 = unpackFloat2x16(p.y), one = f16vec2(1.0);
  const f16vec2 c0 = FUSED_F16 ? fma(u0, g.sc, -g.sc) : (u0 - one) * g.sc;
  const f16vec2 c1 = FUSED_F16 ? fma(u1, g.sc, -g.sc) : (u1 - one) * g.sc;
  precise const f16vec2 v0 = fma(c0, g.d, g.m_hi) + g.m_lo, v1 = fma(c1, g.d, g.m_hi) + g.m_lo;
  return f16vec4(v0, v1);
}
#if defined(TYPE_FQ3)
void seg_f16(SegRaw r, uint k, uint h, out f16vec4 a[4], out f16vec4 b[4]) {
  const uint g = (k & 255u) >> 5;
  const vec2 dm = unpackHalf2x16(r.hd.x);
  const K4Group ga = k4_group(k4_scale_min(g, r.hd), dm);
  const K4Group gb = k4_group(k4_scale_min(g + 1u, r.hd), dm);
  for (uint i = 0u; i < 4u; ++i) {
    // Run 4h + i: bit 4h + i of every byte of C is bit i of C >> 4h (bits 4..7
    // of a byte stay in it), so the runs' shifts are constants of the loop.
    a[i] = k4_codes_f16(fq3_run(r.ab_a, r.c_a >> (4u * h), i), ga);
    b[i] = k4_codes_f16(fq3_run(r.ab_b, r.c_b >> (4u * h), i), gb);
  }
}
#else
void seg_f16(SegRaw r, uint k, uint h, out f16vec4 a[4], out f16vec4 b[4]) {
  const uint j = (k & 255u) >> 6;
  uvec4 lo = r.q & 0x0F0F0F0Fu, hi = (r.q >> 4) & 0x0F0F0F0Fu;
#if defined(TYPE_Q5_K)
  lo |= ((r.qh >> (2u * j)) & 0x01010101u) << 4;
  hi |= ((r.qh >> (2u * j + 1u)) & 0x01010101u) << 4;
#endif
  const vec2 dm = unpackHalf2x16(r.hd.x);
  const K4Group ga = k4_group(k4_scale_min(2u * j, r.hd), dm);
  const K4Group gb = k4_group(k4_scale_min(2u * j + 1u, r.hd), dm);
  for (uint i = 0u; i < 4u; ++i) {
    a[i] = k4_codes_f16(lo[i], ga);
    b[i] = k4_codes_f16(hi[i], gb);
  }
}
#endif

#elif defined(TYPE_Q6_K)
// Q6_K: half n = (k % 256) / 128 and m = (k / 64) % 2 of a block: a = quarter
// 2m (l = 16h .. 16h + 15), b = quarter 2m + 1: ql[64n + 16h ..] and
// ql[64n + 32 + 16h ..], nibble 4m of both; qh[32n + 16h ..] bits 4m (a) and
// 4m + 2 (b); scales sc[8n + h + 4m] and [.. + 2]. Raw: the three 16-byte runs
// as their five words each (the funnel shifts wait for the loads, so they
// belong to the decode), the word of d, the words of the two scale bytes, and
// the block's start mod 4 (0 or 2: a 210-byte block starts at an even byte;
// every run and field below lies at a multiple of 4 from it, except the scale
// bytes' h).
struct SegRaw {
  uint la[5], lb[5], qh[5];
  uint dw, sw0, sw1, o3;
};
SegRaw seg_load(uint row, uint k, uint h) {
  const uint o = (row * (pc.n_in >> 8) + (k >> 8)) * 210u;
  const uint e0 = k & 255u, n = e0 >> 7, m = (e0 >> 6) & 1u, sh = 4u * m;
  const uint wa = (o + 64u * n + 16u * h) >> 2, wb = (o + 64u * n + 32u + 16u * h) >> 2;
  const uint wq = (o + 128u + 32u * n + 16u * h) >> 2;
  SegRaw r;
  for (uint i = 0u; i < 5u; ++i) r.la[i] = W[wa + i], r.lb[i] = W[wb + i], r.qh[i] = W[wq + i];
  r.dw = W[(o + 208u) >> 2];
  r.sw0 = W[(o + 192u + 8u * n + h + sh) >> 2];
  r.sw1 = W[(o + 194u + 8u * n + h + sh) >> 2];
  r.o3 = o & 3u;
  return r;
}
// Values d · sc · (q - 32).
void seg_f16(SegRaw r, uint k, uint h, out f16vec4 a[4], out f16vec4 b[4]) {
  const uint sh = 4u * ((k >> 6) & 1u);
  const bool odd = r.o3 != 0u;
  const uvec4 la = funnel_run(r.la, odd), lb = funnel_run(r.lb, odd), qh = funnel_run(r.qh, odd);
  const uvec4 qa = ((la >> sh) & 0x0F0F0F0Fu) | (((qh >> sh) & 0x03030303u) << 4);
  const uvec4 qb = ((lb >> sh) & 0x0F0F0F0Fu) | (((qh >> (sh + 2u)) & 0x03030303u) << 4);
  const float d = unpackHalf2x16(r.dw >> (8u * r.o3)).x;
  const float sa = d * float(bitfieldExtract(int(r.sw0), int(8u * ((r.o3 + h) & 3u)), 8));
  const float sb = d * float(bitfieldExtract(int(r.sw1), int(8u * ((r.o3 + 2u + h) & 3u)), 8));
  const f16vec2 s_a = f16vec2(f16_clamped(sa * 1024.0)), s_b = f16vec2(f16_clamped(sb * 1024.0)), zero = f16vec2(0.0);
  const float16_t off = float16_t(1.03125);  // 1 + 32/1024
  for (uint i = 0u; i < 4u; ++i) {
    a[i] = codes_f16(qa[i], off, s_a, zero);
    b[i] = codes_f16(qb[i], off, s_b, zero);
  }
}
#elif defined(TYPE_Q8_0) || defined(TYPE_Q4_0)
// a lies in block k / 32 and b in the next (k is a multiple of 64; past n_in,
// for rows of an odd number of blocks, b's words read as 0 and decode to 0).
// Q8_0 {f16 d; int8 qs[32]}: a lane's 16 values are bytes 2 + 16h .. of each
// block, c + 128 (the sign bit flipped) is the code and the value d · c.
// Q4_0 {f16 d; qs[16]}: lane h = 0 takes the low nibbles of qs[0..15], h = 1 the
// high ones, value d · (c - 8). One rounding (the product), as the f32 path.
#if defined(TYPE_Q8_0)
const uint SEG_BB = 34u;
#else
const uint SEG_BB = 18u;
#endif
// Block starts are even; 34 and 18 are 2 mod 4, so the two blocks' starts
// differ mod 4 (o3: block a's start mod 4).
struct SegRaw {
  uint qa[5], qb[5];
  uint da, db, o3;
};
SegRaw seg_load(uint row, uint k, uint h) {
  const uint oa = (row * (pc.n_in >> 5) + (k >> 5)) * SEG_BB, ob = oa + SEG_BB;
#if defined(TYPE_Q8_0)
  const uint ra = oa + 2u + 16u * h, rb = ob + 2u + 16u * h;
#else
  const uint ra = oa + 2u, rb = ob + 2u;
#endif
  const bool has_b = k + 32u < pc.n_in;
  SegRaw r;
  for (uint i = 0u; i < 5u; ++i) r.qa[i] = W[(ra >> 2) + i], r.qb[i] = has_b ? W[(rb >> 2) + i] : 0u;
  r.da = W[oa >> 2];
  r.db = has_b ? W[ob >> 2] : 0u;
  r.o3 = oa & 3u;
  return r;
}
void seg_f16(SegRaw r, uint k, uint h, out f16vec4 a[4], out f16vec4 b[4]) {
  // The runs start 2 bytes into their block: at 2 mod 4 where the block starts at 0.
  const bool odd_a = r.o3 == 0u;
  uvec4 qa = funnel_run(r.qa, odd_a), qb = funnel_run(r.qb, !odd_a);
#if defined(TYPE_Q8_0)
  qa ^= 0x80808080u, qb ^= 0x80808080u;
  const float16_t off = float16_t(1.125);  // 1 + 128/1024
#else
  const uint sh = 4u * h;
  qa = (qa >> sh) & 0x0F0F0F0Fu, qb = (qb >> sh) & 0x0F0F0F0Fu;
  const float16_t off = float16_t(1.0078125);  // 1 + 8/1024
#endif
  const f16vec2 d_a = f16vec2(f16_clamped(unpackHalf2x16(r.da >> (8u * r.o3)).x * 1024.0));
  const f16vec2 d_b = f16vec2(f16_clamped(unpackHalf2x16(r.db >> (8u * (r.o3 ^ 2u))).x * 1024.0)), zero = f16vec2(0.0);
  for (uint i = 0u; i < 4u; ++i) {
    a[i] = codes_f16(qa[i], off, d_a, zero);
    b[i] = codes_f16(qb[i], off, d_b, zero);
  }
}

#elif defined(TYPE_F16)
// Rows of a multiple of 64 halves: a lane's 16 + 16 halves as four uvec4 (rows
// start at a multiple of 8 halves), moved into tile order without arithmetic.
// Other rows (any length, starting mid-word) take dequant8's values, packed
// back into halves (exact: they are f16 values or 0).
struct SegRaw { uvec4 w[4]; };
uvec4 pack_halves8(vec4 lo, vec4 hi) { return uvec4(packHalf2x16(lo.xy), packHalf2x16(lo.zw), packHalf2x16(hi.xy), packHalf2x16(hi.zw)); }
SegRaw seg_load(uint row, uint k, uint h) {
  SegRaw r;
  if ((pc.n_in & 63u) == 0u) {
    const uint v = (row * pc.n_in + k + 16u * h) >> 3;
    r.w[0] = W4[v], r.w[1] = W4[v + 1u], r.w[2] = W4[v + 4u], r.w[3] = W4[v + 5u];
  } else {
    vec4 fa[4], fb[4];
    dequant_seg(row, k, h, fa, fb);
    for (uint i = 0u; i < 2u; ++i) r.w[i] = pack_halves8(fa[2u * i], fa[2u * i + 1u]), r.w[2u + i] = pack_halves8(fb[2u * i], fb[2u * i + 1u]);
  }
  return r;
}
void seg_f16(SegRaw r, uint k, uint h, out f16vec4 a[4], out f16vec4 b[4]) {
  for (uint i = 0u; i < 2u; ++i) {
    a[2u * i] = halves_f16(r.w[i].xy), a[2u * i + 1u] = halves_f16(r.w[i].zw);
    b[2u * i] = halves_f16(r.w[2u + i].xy), b[2u * i + 1u] = halves_f16(r.w[2u + i].zw);
  }
}

#else
struct SegRaw { vec4 a[4], b[4]; };
SegRaw seg_load(uint row, uint k, uint h) {
  SegRaw r;
  dequant_seg(row, k, h, r.a, r.b);
  return r;
}
void seg_f16(SegRaw r, uint k, uint h, out f16vec4 a[4], out f16vec4 b[4]) {
  for (uint i = 0u; i < 4u; ++i) a[i] = to_f16(r.a[i]), b[i] = to_f16(r.b[i]);
}
#endif
