// The per-type inner step of matvec.comp. Each type defines
//   uint mv_units()                 units per weight row
//   void mv_unit(uint u, uint row0) adds unit u of rows row0 .. row0+ROWS-1 into acc[]
//                                   (of both matrices of a span PAIR: RT accumulated rows)
// A unit's x values are loaded once and reused for the ROWS rows; rows past
// n_rows read the last row (their sums are never written), so the inner loop
// has no bounds branches.
//
// x is read as vec4 for the block types: n_in is a multiple of 32 there, and the
// host keeps x_stride and x_off multiples of 4.

#ifndef FISH_SPAN
vec4 x4_at(uint t, uint e) { return X4[(pc.x_off + t * pc.x_stride + e) >> 2]; }
float x_at(uint t, uint e) { return X[pc.x_off + t * pc.x_stride + e]; }
#endif  // the span variant defines both in matvec.comp (fused norm / product)
float hsum(vec4 v) { return (v.x + v.y) + (v.z + v.w); }
#include "matvec_weights.glsl"

#if defined(TYPE_F32)
// Unit = 4 consecutive elements: one 16-byte load when n_in % 4 == 0, else
// element by element with the tail masked.
uint mv_units() { return (pc.n_in + 3u) >> 2; }
void mv_unit(uint u, uint row0) {
  const uint e0 = u * 4u;
  if ((pc.n_in & 3u) == 0u) {
    vec4 xv[NT];
    for (uint t = 0u; t < NT; ++t) xv[t] = x4_at(t, e0);
    for (uint r = 0u; r < RT; ++r) {
      const vec4 w = uintBitsToFloat(wv4(r, (mv_row(row0, r) * pc.n_in + e0) >> 2));
      for (uint t = 0u; t < NT; ++t) acc[r * NT + t] += dot(w, xv[t]);
    }
  } else {
    for (uint i = 0u; i < 4u; ++i) {
      const uint e = e0 + i;
      if (e >= pc.n_in) break;
      for (uint r = 0u; r < RT; ++r) {
        const float w = uintBitsToFloat(wv(r, mv_row(row0, r) * pc.n_in + e));
        for (uint t = 0u; t < NT; ++t) acc[r * NT + t] += w * x_at(t, e);
      }
    }
  }
}

#elif defined(TYPE_F16)
// Unit = 8 elements (one uvec4 of halves) when n_in % 8 == 0, else 4 elements
// read half by half (a row may then start in the middle of a word).
uint mv_units() { return (pc.n_in & 7u) == 0u ? pc.n_in >> 3 : (pc.n_in + 3u) >> 2; }
void mv_unit(uint u, uint row0) {
  if ((pc.n_in & 7u) == 0u) {
    const uint e0 = u * 8u;
    vec4 xa[NT], xb[NT];
    for (uint t = 0u; t < NT; ++t) { xa[t] = x4_at(t, e0); xb[t] = x4_at(t, e0 + 4u); }
    for (uint r = 0u; r < RT; ++r) {
      const uvec4 q = wv4(r, (mv_row(row0, r) * pc.n_in + e0) >> 3);
      const vec4 wa = vec4(unpackHalf2x16(q.x), unpackHalf2x16(q.y));
      const vec4 wb = vec4(unpackHalf2x16(q.z), unpackHalf2x16(q.w));
      for (uint t = 0u; t < NT; ++t) acc[r * NT + t] += dot(wa, xa[t]) + dot(wb, xb[t]);
    }
  } else {
    const uint e0 = u * 4u;
    for (uint i = 0u; i < 4u; ++i) {
      const uint e = e0 + i;
      if (e >= pc.n_in) break;
      for (uint r = 0u; r < RT; ++r) {
        const uint a = mv_row(row0, r) * pc.n_in + e;
        const float w = half_to_float((wv(r, a >> 1) >> ((a & 1u) * 16u)) & 0xFFFFu);
        for (uint t = 0u; t < NT; ++t) acc[r * NT + t] += w * x_at(t, e);
      }
    }
  }
}

#elif defined(TYPE_Q4_0)
// 18-byte blocks {f16 d; 16 bytes qs}: element j = low nibble of qs[j], element
// 16 + j = high nibble; value (q - 8)·d. Unit = one block.
uint mv_units() { return pc.n_in >> 5; }
void mv_unit(uint u, uint row0) {
  const uint nb = pc.n_in >> 5, e0 = u * 32u;
  vec4 xa[NT * 4], xb[NT * 4];
  float sa[NT], sb[NT];
  for (uint t = 0u; t < NT; ++t) {
    vec4 s4a = vec4(0.0), s4b = vec4(0.0);
    for (uint i = 0u; i < 4u; ++i) {
      xa[t * 4u + i] = x4_at(t, e0 + 4u * i);
      xb[t * 4u + i] = x4_at(t, e0 + 16u + 4u * i);
      s4a += xa[t * 4u + i];
      s4b += xb[t * 4u + i];
    }
    sa[t] = hsum(s4a);
    sb[t] = hsum(s4b);
  }
  for (uint r = 0u; r < RT; ++r) {
    const uint o = (mv_row(row0, r) * nb + u) * 18u;
    const float d = half_to_float(mv_half(r, o));
    const uvec4 q = mv_bytes16(r, o + 2u);
    for (uint t = 0u; t < NT; ++t) {
      const float fa = dot(nib_lo_f(q.x), xa[t * 4u]) + dot(nib_lo_f(q.y), xa[t * 4u + 1u]) +
                       dot(nib_lo_f(q.z), xa[t * 4u + 2u]) + dot(nib_lo_f(q.w), xa[t * 4u + 3u]);
      const float fb = dot(nib_hi_f(q.x), xb[t * 4u]) + dot(nib_hi_f(q.y), xb[t * 4u + 1u]) +
                       dot(nib_hi_f(q.z), xb[t * 4u + 2u]) + dot(nib_hi_f(q.w), xb[t * 4u + 3u]);
      // Σ(q-8)x = (256 fa - 128 sa) - 8 sa for the low half, (32 fb - 16 sb) - 8 sb for the high.
      acc[r * NT + t] += d * ((256.0 * fa - 136.0 * sa[t]) + (32.0 * fb - 24.0 * sb[t]));
    }
  }
}

#elif defined(TYPE_Q8_0)
// 34-byte blocks {f16 d; int8 qs[32]}: value q·d. Unit = one block.
uint mv_units() { return pc.n_in >> 5; }
void mv_unit(uint u, uint row0) {
  const uint nb = pc.n_in >> 5, e0 = u * 32u;
  vec4 xv[NT * 8];
  float sx[NT];
  for (uint t = 0u; t < NT; ++t) {
    vec4 s4 = vec4(0.0);
    for (uint i = 0u; i < 8u; ++i) {
      xv[t * 8u + i] = x4_at(t, e0 + 4u * i);
      s4 += xv[t * 8u + i];
    }
    sx[t] = hsum(s4);
  }
  for (uint r = 0u; r < RT; ++r) {
    const uint o = (mv_row(row0, r) * nb + u) * 34u;
    const float d = half_to_float(mv_half(r, o));
    uvec4 qa, qb;
    mv_bytes32(r, o + 2u, qa, qb);
    for (uint t = 0u; t < NT; ++t) {
      const uint b = t * 8u;
      const float f = dot(sbytes_f(qa.x), xv[b]) + dot(sbytes_f(qa.y), xv[b + 1u]) +
                      dot(sbytes_f(qa.z), xv[b + 2u]) + dot(sbytes_f(qa.w), xv[b + 3u]) +
                      dot(sbytes_f(qb.x), xv[b + 4u]) + dot(sbytes_f(qb.y), xv[b + 5u]) +
                      dot(sbytes_f(qb.z), xv[b + 6u]) + dot(sbytes_f(qb.w), xv[b + 7u]);
      acc[r * NT + t] += d * (256.0 * f - 384.0 * sx[t]);
    }
  }
}

#elif defined(TYPE_Q4_K) || defined(TYPE_Q5_K)
// Q4_K: 144-byte blocks = 9 uvec4 {d, dmin, scales[12]} {qs[128]}.
// Q5_K: 176-byte blocks = 11 uvec4 {d, dmin, scales[12]} {qh[32]} {qs[128]}.
// Both 16-byte aligned, so read as uvec4. Unit u: block b = u / 8, t = u % 8,
// 64-element chunk j = t / 2, half h = t % 2; its 16 qs bytes hold, for
// l = 16h + i: element 64j + l (low nibble, group 2j) and 64j + 32 + l (high
// nibble, group 2j + 1). Q5_K adds bit 2j (low) / 2j + 1 (high) of qh[l] as bit 4.
// value = d·sc·q - dmin·m.
#if defined(TYPE_Q4_K)
const uint BLOCK_V4 = 9u;
#else
const uint BLOCK_V4 = 11u;
#endif
uint mv_units() { return (pc.n_in >> 8) * 8u; }
void mv_unit(uint u, uint row0) {
  const uint nb = pc.n_in >> 8;
  const uint b = u >> 3, t8 = u & 7u, j = t8 >> 1, h = t8 & 1u;
  const uint e0 = b * 256u + 64u * j + 16u * h;
  vec4 xa[NT * 4], xb[NT * 4];
  float sa[NT], sb[NT];
  for (uint t = 0u; t < NT; ++t) {
    vec4 s4a = vec4(0.0), s4b = vec4(0.0);
    for (uint i = 0u; i < 4u; ++i) {
      xa[t * 4u + i] = x4_at(t, e0 + 4u * i);
      xb[t * 4u + i] = x4_at(t, e0 + 32u + 4u * i);
      s4a += xa[t * 4u + i];
      s4b += xb[t * 4u + i];
    }
    sa[t] = hsum(s4a);
    sb[t] = hsum(s4b);
  }
  for (uint r = 0u; r < RT; ++r) {
    const uint base = (mv_row(row0, r) * nb + b) * BLOCK_V4;
    const uvec4 hd = wv4(r, base);
#if defined(TYPE_Q4_K)
    const uvec4 q = wv4(r, base + 1u + t8);
#else
    const uvec4 q = wv4(r, base + 3u + t8);
    const uvec4 qh = wv4(r, base + 1u + h);
#endif
    const vec2 dm = unpackHalf2x16(hd.x);
    const uvec2 smA = k4_scale_min(2u * j, hd), smB = k4_scale_min(2u * j + 1u, hd);
    const float dA = dm.x * float(smA.x), mA = dm.y * float(smA.y);
    const float dB = dm.x * float(smB.x), mB = dm.y * float(smB.y);
    for (uint t = 0u; t < NT; ++t) {
      const uint x0 = t * 4u;
#if defined(TYPE_Q4_K)
      const float fa = dot(nib_lo_f(q.x), xa[x0]) + dot(nib_lo_f(q.y), xa[x0 + 1u]) +
                       dot(nib_lo_f(q.z), xa[x0 + 2u]) + dot(nib_lo_f(q.w), xa[x0 + 3u]);
      const float fb = dot(nib_hi_f(q.x), xb[x0]) + dot(nib_hi_f(q.y), xb[x0 + 1u]) +
                       dot(nib_hi_f(q.z), xb[x0 + 2u]) + dot(nib_hi_f(q.w), xb[x0 + 3u]);
      acc[r * NT + t] += dA * (256.0 * fa - 128.0 * sa[t]) - mA * sa[t] + dB * (32.0 * fb - 16.0 * sb[t]) - mB * sb[t];
#else
      uvec4 lo, hi;
      q5k_quants(q, qh, j, lo, hi);
      const float fa = dot(bytes_f(lo.x), xa[x0]) + dot(bytes_f(lo.y), xa[x0 + 1u]) +
                       dot(bytes_f(lo.z), xa[x0 + 2u]) + dot(bytes_f(lo.w), xa[x0 + 3u]);
      const float fb = dot(bytes_f(hi.x), xb[x0]) + dot(bytes_f(hi.y), xb[x0 + 1u]) +
                       dot(bytes_f(hi.z), xb[x0 + 2u]) + dot(bytes_f(hi.w), xb[x0 + 3u]);
      acc[r * NT + t] += dA * (256.0 * fa - 128.0 * sa[t]) - mA * sa[t] + dB * (256.0 * fb - 128.0 * sb[t]) - mB * sb[t];
#endif
    }
  }
}

#elif defined(TYPE_Q6_K)
// 210-byte blocks {ql[128], qh[64], int8 scales[16], f16 d} (2-byte aligned:
// funnel-shifted reads). Unit u: block b = u / 4, t = u % 4, half n = t / 2,
// l0 = 16·(t % 2). For l = l0 .. l0+15 the unit covers elements 128n + l + 32k
// (k = 0..3): k = 0/2 from the low/high nibble of ql[64n + l], k = 1/3 from the
// low/high nibble of ql[64n + 32 + l], bits 2k..2k+1 of qh[32n + l] on top;
// scale sc[8n + l0/16 + 2k]; value d·sc·(q - 32). 64 weights per unit so that
// the scales, d and the funnel shifts are paid once per 64.
uint mv_units() { return (pc.n_in >> 8) * 4u; }
void mv_unit(uint u, uint row0) {
  const uint nb = pc.n_in >> 8;
  const uint b = u >> 2, t4 = u & 3u, n = t4 >> 1, l0 = (t4 & 1u) * 16u;
  const uint e0 = b * 256u + 128u * n + l0;
  vec4 xv[NT * 16];  // [t][k][4]: run k = elements e0 + 32k .. +15
  float sx[NT * 4];
  for (uint t = 0u; t < NT; ++t) {
    for (uint k = 0u; k < 4u; ++k) {
      vec4 s4 = vec4(0.0);
      for (uint i = 0u; i < 4u; ++i) {
        xv[t * 16u + 4u * k + i] = x4_at(t, e0 + 32u * k + 4u * i);
        s4 += xv[t * 16u + 4u * k + i];
      }
      sx[t * 4u + k] = hsum(s4);
    }
  }
  for (uint r = 0u; r < RT; ++r) {
    const uint o = (mv_row(row0, r) * nb + b) * 210u;
    uvec4 v0, v1, v2, v3;
    q6k_quants(r, o, n, l0, v0, v1, v2, v3);
    const ivec4 sc = q6k_scales(r, o, n, l0);
    const float d = half_to_float(mv_half(r, o + 208u));
    const float s0 = d * float(sc.x), s1 = d * float(sc.y), s2 = d * float(sc.z), s3 = d * float(sc.w);
    for (uint t = 0u; t < NT; ++t) {
      const uint x0 = t * 16u, s = t * 4u;
      const float f0 = dot(bytes_f(v0.x), xv[x0]) + dot(bytes_f(v0.y), xv[x0 + 1u]) +
                       dot(bytes_f(v0.z), xv[x0 + 2u]) + dot(bytes_f(v0.w), xv[x0 + 3u]);
      const float f1 = dot(bytes_f(v1.x), xv[x0 + 4u]) + dot(bytes_f(v1.y), xv[x0 + 5u]) +
                       dot(bytes_f(v1.z), xv[x0 + 6u]) + dot(bytes_f(v1.w), xv[x0 + 7u]);
      const float f2 = dot(bytes_f(v2.x), xv[x0 + 8u]) + dot(bytes_f(v2.y), xv[x0 + 9u]) +
                       dot(bytes_f(v2.z), xv[x0 + 10u]) + dot(bytes_f(v2.w), xv[x0 + 11u]);
      const float f3 = dot(bytes_f(v3.x), xv[x0 + 12u]) + dot(bytes_f(v3.y), xv[x0 + 13u]) +
                       dot(bytes_f(v3.z), xv[x0 + 14u]) + dot(bytes_f(v3.w), xv[x0 + 15u]);
      // Σ(q-32)x = 256 f - 128 s - 32 s per run.
      acc[r * NT + t] += s0 * (256.0 * f0 - 160.0 * sx[s]) + s1 * (256.0 * f1 - 160.0 * sx[s + 1u]) +
                         s2 * (256.0 * f2 - 160.0 * sx[s + 2u]) + s3 * (256.0 * f3 - 160.0 * sx[s + 3u]);
    }
  }
}

#elif defined(TYPE_FQ3)
// 112-byte blocks = 7 uvec4 (fq3_codes.glsl). Unit u: block b = u / 4, groups
// A = 2p and B = 2p + 1 (p = u % 4), elements e0 = 256b + 64p .. e0 + 63: the
// header uvec4 and the groups' six words (fq3_pair), 64 weights per unit as
// Q6_K's so that the header, scales and selects are paid once per 64. Codes
// as 0.5 + q/16 (code3_f): Σ q x = 16 Σ f x - 8 Σ x per group; value d·sc·q - dmin·m.
uint mv_units() { return (pc.n_in >> 8) * 4u; }
void mv_unit(uint u, uint row0) {
  const uint nb = pc.n_in >> 8;
  const uint b = u >> 2, p = u & 3u;
  const uint e0 = b * 256u + 64u * p;
  vec4 xv[NT * 16];  // [t][group A, B][8 runs]
  float sx[NT * 2];
  for (uint t = 0u; t < NT; ++t) {
    for (uint h = 0u; h < 2u; ++h) {
      vec4 s4 = vec4(0.0);
      for (uint i = 0u; i < 8u; ++i) {
        xv[t * 16u + 8u * h + i] = x4_at(t, e0 + 32u * h + 4u * i);
        s4 += xv[t * 16u + 8u * h + i];
      }
      sx[t * 2u + h] = hsum(s4);
    }
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
    const uvec2 smA = k4_scale_min(2u * p, hd), smB = k4_scale_min(2u * p + 1u, hd);
    const float dA = dm.x * float(smA.x), mA = dm.y * float(smA.y);
    const float dB = dm.x * float(smB.x), mB = dm.y * float(smB.y);
    for (uint t = 0u; t < NT; ++t) {
      const uint x0 = t * 16u, s = t * 2u;
      const float fa = dot(code3_f(la.x), xv[x0]) + dot(code3_f(la.y), xv[x0 + 1u]) +
                       dot(code3_f(la.z), xv[x0 + 2u]) + dot(code3_f(la.w), xv[x0 + 3u]) +
                       dot(code3_f(ha.x), xv[x0 + 4u]) + dot(code3_f(ha.y), xv[x0 + 5u]) +
                       dot(code3_f(ha.z), xv[x0 + 6u]) + dot(code3_f(ha.w), xv[x0 + 7u]);
      const float fb = dot(code3_f(lb.x), xv[x0 + 8u]) + dot(code3_f(lb.y), xv[x0 + 9u]) +
                       dot(code3_f(lb.z), xv[x0 + 10u]) + dot(code3_f(lb.w), xv[x0 + 11u]) +
                       dot(code3_f(hb.x), xv[x0 + 12u]) + dot(code3_f(hb.y), xv[x0 + 13u]) +
                       dot(code3_f(hb.z), xv[x0 + 14u]) + dot(code3_f(hb.w), xv[x0 + 15u]);
      acc[r * NT + t] += dA * (16.0 * fa - 8.0 * sx[s]) - mA * sx[s] + dB * (16.0 * fb - 8.0 * sx[s + 1u]) - mB * sx[s + 1u];
    }
  }
}

#else
#error "matvec_units.glsl: define one TYPE_<T>"
#endif
