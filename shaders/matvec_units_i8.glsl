// The int8 inner step of matvec.comp / matvec_span.comp (FISH_INT8): the same
// units as matvec_units.glsl (and the same mv_units / mv_unit contract), but
// x is the output of quantize_x.comp and every product is an exact integer sum
// of int8 · quant per sub-block, as the CPU's vec_dot computes it
// (engine/src/quant/vec_dot_ref.cpp); the block scales are applied in f32.
// So the only difference from the CPU is the order of the float additions.
//
// x (binding 1) per token t, from word xb = x_off + t · x_stride:
//   qs int8 [n_in] (n_in/4 words) | d f32 [n_in/BS] | sums int32 [n_in/SG]
// BS/SG = 256/16 (Q8_K: the K-quants) or 32/32 (Q8_0: Q4_0, Q8_0).
// XB32 (matvec_span.comp, decode): the span's B32 rows instead, BS/SG =
// 32/16 (quant_block.glsl): in the K-quants each 16-element group of a unit
// then has its own d_x, applied in f32 to that group's exact integer sum; Q4_0
// and Q8_0 read them as their own rows (the same qs and d_x per 32; Q4_0's
// Σ per 32 is two sums per 16).
// x_off and x_stride are multiples of 4 words (uvec4 loads).
#include "int8_common.glsl"

#include "matvec_weights.glsl"

#ifndef FISH_XB32
const bool XB32 = false;
#endif
#if defined(TYPE_Q4_K) || defined(TYPE_Q5_K) || defined(TYPE_Q6_K) || defined(TYPE_FQ3)
const uint QBS = XB32 ? 32u : 256u, QSG = 16u;
#else
const uint QBS = 32u, QSG = XB32 ? 16u : 32u;
#endif
#ifndef MV_TOK
#define MV_TOK(t) (t)  // matvec_span.comp's token groups map a unit's token t to the chunk's
#endif
uint xq_base(uint t) { return pc.x_off + MV_TOK(t) * pc.x_stride; }
uvec4 xq16(uint t, uint e) { return XQ4[(xq_base(t) + (e >> 2)) >> 2]; }  // elements e .. e+15 (e % 16 == 0)
float xq_d(uint t, uint e) { return uintBitsToFloat(XQ[xq_base(t) + (pc.n_in >> 2) + e / QBS]); }
int xq_sum(uint t, uint e) { return int(XQ[xq_base(t) + (pc.n_in >> 2) + pc.n_in / QBS + e / QSG]); }

#if defined(TYPE_Q4_0)
// 18-byte blocks {f16 d; qs[16]}: element j = low nibble of qs[j], 16 + j =
// high nibble; Σ (q - 8) a = Σ q a - 8 Σ a. Unit = one block.
uint mv_units() { return pc.n_in >> 5; }
void mv_unit(uint u, uint row0) {
  const uint nb = pc.n_in >> 5, e0 = u * 32u;
  uvec4 xa[NT], xb[NT];
  float dx[NT];
  int sx[NT];
  for (uint t = 0u; t < NT; ++t) {
    xa[t] = xq16(t, e0), xb[t] = xq16(t, e0 + 16u);
    dx[t] = xq_d(t, e0), sx[t] = XB32 ? xq_sum(t, e0) + xq_sum(t, e0 + 16u) : xq_sum(t, e0);
  }
  for (uint r = 0u; r < RT; ++r) {
    const uint o = (mv_row(row0, r) * nb + u) * 18u;
    const float d = half_to_float(mv_half(r, o));
    const uvec4 q = mv_bytes16(r, o + 2u);
    const uvec4 lo = q & 0x0F0F0F0Fu, hi = (q >> 4) & 0x0F0F0F0Fu;
    for (uint t = 0u; t < NT; ++t)
      acc[r * NT + t] += float(sdot16(lo, xa[t]) + sdot16(hi, xb[t]) - 8 * sx[t]) * (d * dx[t]);
  }
}

#elif defined(TYPE_Q8_0)
// 34-byte blocks {f16 d; int8 qs[32]}. Unit = one block.
uint mv_units() { return pc.n_in >> 5; }
void mv_unit(uint u, uint row0) {
  const uint nb = pc.n_in >> 5, e0 = u * 32u;
  uvec4 xa[NT], xb[NT];
  float dx[NT];
  for (uint t = 0u; t < NT; ++t) xa[t] = xq16(t, e0), xb[t] = xq16(t, e0 + 16u), dx[t] = xq_d(t, e0);
  for (uint r = 0u; r < RT; ++r) {
    const uint o = (mv_row(row0, r) * nb + u) * 34u;
    const float d = half_to_float(mv_half(r, o));
    const uvec4 qa = mv_bytes16(r, o + 2u), qb = mv_bytes16(r, o + 18u);
    for (uint t = 0u; t < NT; ++t) acc[r * NT + t] += float(sdot16(qa, xa[t]) + sdot16(qb, xb[t])) * (d * dx[t]);
  }
}

#elif defined(TYPE_Q4_K) || defined(TYPE_Q5_K)
// Q4_K 144-byte / Q5_K 176-byte blocks (16-byte aligned, read as uvec4). Chunk
// j of block b holds 32 qs bytes (uvec4s 2j and 2j + 1 after the header: halves
// h = 0, 1) with elements e0 + i (group A = 2j, low nibbles) and e0 + 32 + i
// (group B = 2j + 1, high nibbles), i < 32, e0 = 256b + 64j. A unit is one
// half (16 qs bytes, the unit of matvec_units.glsl) or, with U64 (the span's
// specialisation constant 9), the whole chunk: one header read, one scale
// decode and one float epilogue per 32 bytes instead of 16. Per unit and row:
//   sc_A Σ_A q a + sc_B Σ_B q a  and  m_A Σ_A a + m_B Σ_B a  (exact integers),
// then d·d_x·isum - dmin·d_x·msum.
#if defined(TYPE_Q4_K)
const uint BLOCK_V4 = 9u;
#else
const uint BLOCK_V4 = 11u;
#endif
#ifndef FISH_U64
const bool U64 = false;
#endif
const uint KH = U64 ? 2u : 1u;  // halves per unit
uint mv_units() { return (pc.n_in >> 8) * (8u / KH); }
void mv_unit(uint u, uint row0) {
  const uint nb = pc.n_in >> 8;
  const uint b = u / (8u / KH), t8 = (u % (8u / KH)) * KH, j = t8 >> 1, h = t8 & 1u;
  const uint e0 = b * 256u + 64u * j + 16u * h;
  uvec4 xa[NT * KH], xb[NT * KH];
  float dx[NT], dxb[NT];
  int sa[NT], sb[NT];
  for (uint t = 0u; t < NT; ++t) {
    sa[t] = 0, sb[t] = 0;
    for (uint k = 0u; k < KH; ++k) {
      xa[t * KH + k] = xq16(t, e0 + 16u * k), xb[t * KH + k] = xq16(t, e0 + 32u + 16u * k);
      sa[t] += xq_sum(t, e0 + 16u * k), sb[t] += xq_sum(t, e0 + 32u + 16u * k);
    }
    dx[t] = xq_d(t, e0);
    dxb[t] = XB32 ? xq_d(t, e0 + 32u) : dx[t];
  }
  for (uint r = 0u; r < RT; ++r) {
    const uint base = (mv_row(row0, r) * nb + b) * BLOCK_V4;
    const uvec4 hd = wv4(r, base);
    uvec4 lo[KH], hi[KH];
    for (uint k = 0u; k < KH; ++k) {
#if defined(TYPE_Q4_K)
      const uvec4 q = wv4(r, base + 1u + t8 + k);
      lo[k] = q & 0x0F0F0F0Fu, hi[k] = (q >> 4) & 0x0F0F0F0Fu;
#else
      q5k_quants(wv4(r, base + 3u + t8 + k), wv4(r, base + 1u + h + k), j, lo[k], hi[k]);
#endif
    }
    const vec2 dm = unpackHalf2x16(hd.x);
    const ivec2 smA = ivec2(k4_scale_min(2u * j, hd)), smB = ivec2(k4_scale_min(2u * j + 1u, hd));
    for (uint t = 0u; t < NT; ++t) {
      int qa = 0, qb = 0;
      for (uint k = 0u; k < KH; ++k) qa += sdot16(lo[k], xa[t * KH + k]), qb += sdot16(hi[k], xb[t * KH + k]);
      if (XB32) {  // groups A and B lie in different blocks of 32
        const float fs = dx[t] * float(smA.x * qa) + dxb[t] * float(smB.x * qb);
        const float fm = dx[t] * float(smA.y * sa[t]) + dxb[t] * float(smB.y * sb[t]);
        acc[r * NT + t] += dm.x * fs - dm.y * fm;
      } else {
        const int isum = smA.x * qa + smB.x * qb;
        const int msum = smA.y * sa[t] + smB.y * sb[t];
        acc[r * NT + t] += dx[t] * (dm.x * float(isum) - dm.y * float(msum));
      }
    }
  }
}

#elif defined(TYPE_Q6_K)
// 210-byte blocks {ql[128], qh[64], int8 scales[16], f16 d}, the unit of
// matvec_units.glsl: 4 runs of 16 (elements e0 + 32k + i, scale sc[8n + l0/16
// + 2k]). Per run Σ (q - 32) a = Σ q a - 32 Σ a; isum = Σ_k sc_k · that.
uint mv_units() { return (pc.n_in >> 8) * 4u; }
void mv_unit(uint u, uint row0) {
  const uint nb = pc.n_in >> 8;
  const uint b = u >> 2, t4 = u & 3u, n = t4 >> 1, l0 = (t4 & 1u) * 16u;
  const uint e0 = b * 256u + 128u * n + l0;
  uvec4 xv[NT * 4];
  float dx[NT];
  vec4 dx4[NT];  // XB32: the four runs' blocks of 32
  ivec4 sx[NT];
  for (uint t = 0u; t < NT; ++t) {
    for (uint k = 0u; k < 4u; ++k) xv[t * 4u + k] = xq16(t, e0 + 32u * k);
    dx[t] = xq_d(t, e0);
    if (XB32) dx4[t] = vec4(dx[t], xq_d(t, e0 + 32u), xq_d(t, e0 + 64u), xq_d(t, e0 + 96u));
    sx[t] = 32 * ivec4(xq_sum(t, e0), xq_sum(t, e0 + 32u), xq_sum(t, e0 + 64u), xq_sum(t, e0 + 96u));
  }
  for (uint r = 0u; r < RT; ++r) {
    const uint o = (mv_row(row0, r) * nb + b) * 210u;
    uvec4 v0, v1, v2, v3;
    q6k_quants(r, o, n, l0, v0, v1, v2, v3);
    const ivec4 sc = q6k_scales(r, o, n, l0);
    const float d = half_to_float(mv_half(r, o + 208u));
    for (uint t = 0u; t < NT; ++t) {
      const uint x0 = t * 4u;
      const ivec4 g = ivec4(sdot16(v0, xv[x0]), sdot16(v1, xv[x0 + 1u]), sdot16(v2, xv[x0 + 2u]),
                            sdot16(v3, xv[x0 + 3u])) - sx[t];
      if (XB32) {
        acc[r * NT + t] += d * dot(dx4[t], vec4(sc * g));
      } else {
        const int isum = sc.x * g.x + sc.y * g.y + sc.z * g.z + sc.w * g.w;
        acc[r * NT + t] += float(isum) * (d * dx[t]);
      }
    }
  }
}

#elif defined(TYPE_FQ3)
// 112-byte blocks (fq3_codes.glsl), the unit of matvec_units.glsl: groups A =
// 2p and B = 2p + 1 of block b, elements e0 = 256b + 64p .. e0 + 63. The codes
// (bytes 0..7, fq3_group) meet x in sdot4 as they are; then as Q4_K: per unit
// and row sc_A Σ_A q a + sc_B Σ_B q a and m_A Σ_A a + m_B Σ_B a (exact
// integers), d·d_x·isum - dmin·d_x·msum (XB32: per group with its own d_x).
uint mv_units() { return (pc.n_in >> 8) * 4u; }
void mv_unit(uint u, uint row0) {
  const uint nb = pc.n_in >> 8;
  const uint b = u >> 2, p = u & 3u;
  const uint e0 = b * 256u + 64u * p;
  uvec4 xv[NT * 4];  // [t][A 0..15, A 16..31, B 0..15, B 16..31]
  float dx[NT], dxb[NT];
  int sa[NT], sb[NT];
  for (uint t = 0u; t < NT; ++t) {
    for (uint k = 0u; k < 4u; ++k) xv[t * 4u + k] = xq16(t, e0 + 16u * k);
    sa[t] = xq_sum(t, e0) + xq_sum(t, e0 + 16u), sb[t] = xq_sum(t, e0 + 32u) + xq_sum(t, e0 + 48u);
    dx[t] = xq_d(t, e0);
    dxb[t] = XB32 ? xq_d(t, e0 + 32u) : dx[t];
  }
  for (uint r = 0u; r < RT; ++r) {
    const uint base = (mv_row(row0, r) * nb + b) * FQ3_V4;
    const uvec4 hd = wv4(r, base);
    uvec3 ga, gb;
    fq3_pair(r, base, p, ga, gb);
    uvec4 la, ha, lb, hb;
    fq3_group(ga, la, ha);
    fq3_group(gb, lb, hb);
    const vec2 dm = unpackHalf2x16(hd.x);
    const ivec2 smA = ivec2(k4_scale_min(2u * p, hd)), smB = ivec2(k4_scale_min(2u * p + 1u, hd));
    for (uint t = 0u; t < NT; ++t) {
      const uint x0 = t * 4u;
      const int qa = sdot16(la, xv[x0]) + sdot16(ha, xv[x0 + 1u]);
      const int qb = sdot16(lb, xv[x0 + 2u]) + sdot16(hb, xv[x0 + 3u]);
      if (XB32) {  // groups A and B lie in different blocks of 32
        const float fs = dx[t] * float(smA.x * qa) + dxb[t] * float(smB.x * qb);
        const float fm = dx[t] * float(smA.y * sa[t]) + dxb[t] * float(smB.y * sb[t]);
        acc[r * NT + t] += dm.x * fs - dm.y * fm;
      } else {
        const int isum = smA.x * qa + smB.x * qb;
        const int msum = smA.y * sa[t] + smB.y * sb[t];
        acc[r * NT + t] += dx[t] * (dm.x * float(isum) - dm.y * float(msum));
      }
    }
  }
}

#else
#error "matvec_units_i8.glsl: no int8 unit for this type"
#endif
