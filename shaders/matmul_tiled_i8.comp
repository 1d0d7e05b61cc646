#version 450
// Tiled matrix product on int8 activations (prefill, n_tok > 4, FISH_VK_INT8):
// y[t][r] = Σ over 32-element groups of (integer Σ q_w · q_x) · scales, the
// integers exact as in the CPU's vec_dot (engine/src/quant/vec_dot_ref.cpp),
// so prompt tokens see the CPU's arithmetic too (their K/V feed every later
// step). x is quantize_x.comp's rows (matvec_units_i8.glsl gives the layout).
//
// Tile as matmul_tiled.comp: 256 invocations, 64 rows × 64 tokens, k steps of
// 32 = one quantisation group of every supported type. Per step the weight
// tile is 64 rows × 8 words of signed int8 quants (Q4_0: q - 8, Q6_K: q - 32,
// the others as stored) with, per row, the group's f32 scale per 16-element
// half (Q6_K's two; the same twice otherwise) and its min (Q4_K/Q5_K/FQ3: dmin·m,
// times Σ x of the group); the x tile is 64 tokens × 8 words with each
// token's block scale d_x and group sum. Every invocation accumulates 4 × 4
// outputs: acc += d_x · (s0 · Σ_lo + s1 · Σ_hi - m · Σx), Σ by sdot4.
//
// Compile-time: TYPE_<T> (Q4_0, Q8_0, Q4_K, Q5_K, Q6_K, FQ3); FISH_SPAN: the span's
// bindings and epilogue (EPI 0 store, 1 add into y, 2 silu, 4 y = y · v; no x·x2: the
// quantiser folded it in). Grid: x = row tiles, y = token tiles.
#extension GL_GOOGLE_include_directive : require

layout(local_size_x = 256) in;

#include "matmul_common.glsl"
#include "int8_common.glsl"

#ifdef FISH_SPAN
layout(constant_id = 0) const uint EPI = 0;
void store_y(uint a, float v) {
  if (EPI == 2u) v = v / (1.0 + exp(-v));
  if (EPI == 1u) Y[a] += v;
  else if (EPI == 4u) Y[a] = Y[a] * v;
  else Y[a] = v;
}
#else
void store_y(uint a, float v) { Y[a] = v; }
#endif

#if defined(TYPE_Q4_K) || defined(TYPE_Q5_K) || defined(TYPE_Q6_K) || defined(TYPE_FQ3)
const uint QBS = 256u, QSG = 16u;
#else
const uint QBS = 32u, QSG = 32u;
#endif

// Bytewise q - c for bytes q in [0, 2c) (no borrow crosses a byte: bit 7 is
// set first and flipped back after).
uint sub_bytes(uint q, uint c) { return ((q | 0x80808080u) - c) ^ 0x80808080u; }

// Elements k .. k+7 (k % 8 == 0) of weight row `row` as signed int8 (two
// words), with the scale s of their 16-element half and the min m of their
// 32-group (value = s · q - m).
void quant8(uint row, uint k, out uvec2 q, out float s, out float m) {
  m = 0.0;
#if defined(TYPE_Q4_0)
  const uint o = (row * (pc.n_in >> 5) + (k >> 5)) * 18u, e = k & 31u;
  s = half_to_float(load_half(o));
  q = load_bytes8(o + 2u + (e & 15u));
  q = e < 16u ? q & 0x0F0F0F0Fu : (q >> 4) & 0x0F0F0F0Fu;
  q = uvec2(sub_bytes(q.x, 0x08080808u), sub_bytes(q.y, 0x08080808u));
#elif defined(TYPE_Q8_0)
  const uint o = (row * (pc.n_in >> 5) + (k >> 5)) * 34u, e = k & 31u;
  s = half_to_float(load_half(o));
  q = load_bytes8(o + 2u + e);
#elif defined(TYPE_Q4_K) || defined(TYPE_Q5_K)
#if defined(TYPE_Q4_K)
  const uint bv4 = 9u, qs_word = 4u;
#else
  const uint bv4 = 11u, qs_word = 12u;
#endif
  const uint base = (row * (pc.n_in >> 8) + (k >> 8)) * bv4;
  const uint e = k & 255u, j = e >> 6, g = e >> 5, l = e & 31u;
  const uvec4 hd = W4[base];
  const uint w = base * 4u + qs_word + 8u * j + (l >> 2);
  q = uvec2(W[w], W[w + 1u]);
  q = (g & 1u) == 0u ? q & 0x0F0F0F0Fu : (q >> 4) & 0x0F0F0F0Fu;
#if defined(TYPE_Q5_K)
  const uint wh = base * 4u + 4u + (l >> 2);
  q |= ((uvec2(W[wh], W[wh + 1u]) >> g) & 0x01010101u) << 4;
#endif
  const vec2 dm = unpackHalf2x16(hd.x);
  const uvec2 sm = k4_scale_min(g, hd);
  s = dm.x * float(sm.x);
  m = dm.y * float(sm.y);
#elif defined(TYPE_Q6_K)
  const uint o = (row * (pc.n_in >> 8) + (k >> 8)) * 210u;
  const uint e = k & 255u, n = e >> 7, k4 = (e >> 5) & 3u, l = e & 31u;
  q = load_bytes8(o + 64u * n + 32u * (k4 & 1u) + l);
  q = k4 < 2u ? q & 0x0F0F0F0Fu : (q >> 4) & 0x0F0F0F0Fu;
  q |= ((load_bytes8(o + 128u + 32u * n + l) >> (2u * k4)) & 0x03030303u) << 4;
  q = uvec2(sub_bytes(q.x, 0x20202020u), sub_bytes(q.y, 0x20202020u));
  s = half_to_float(load_half(o + 208u)) * float(load_sbyte(o + 192u + 8u * n + (l >> 4) + 2u * k4));
#elif defined(TYPE_FQ3)
  // Runs run and run + 1 of group g (fq3_codes.glsl): codes 0..7 as they are.
  const uint base = (row * (pc.n_in >> 8) + (k >> 8)) * FQ3_V4;
  const uint e = k & 255u, g = e >> 5, run = (e >> 2) & 7u;
  const uvec4 hd = W4[base];
  const uint w = base * 4u + 4u + 3u * g;
  const uint ab = W[w + (run >> 2)], c = W[w + 2u];
  q = uvec2(fq3_run(ab, c, run), fq3_run(ab, c, run + 1u));
  const vec2 dm = unpackHalf2x16(hd.x);
  const uvec2 sm = k4_scale_min(g, hd);
  s = dm.x * float(sm.x);
  m = dm.y * float(sm.y);
#else
#error "matmul_tiled_i8.comp: no int8 tile for this type"
#endif
}

const uint TM = 64u, TN = 64u, BK = 32u;
shared uint wq[8][TM + 1u];  // [word][row]: 4 int8 quants of k step elements 4·word ..
shared uint xq[8][TN + 1u];  // [word][token]
shared float ws_sh[2][TM], wm_sh[TM], xd_sh[TN];
shared int xs_sh[TN];

void main() {
  const uint tid = gl_LocalInvocationID.x;
  const uint row_base = gl_WorkGroupID.x * TM, tok_base = gl_WorkGroupID.y * TN;
  const uint tr = tid & 15u, tc = tid >> 4;
  // Loader roles: invocation tid fills elements ld_k .. ld_k+7 of row / token tid / 4.
  const uint ld_row = tid >> 2, ld_k = (tid & 3u) * 8u;
  const uint w_row = min(row_base + ld_row, pc.n_rows - 1u);
  const uint x_tok = tok_base + ld_row;
  const bool x_ok = x_tok < pc.n_tok;
  const uint xb = pc.x_off + x_tok * pc.x_stride;  // word index of the token's quantised row

  float acc[16];
  for (uint i = 0u; i < 16u; ++i) acc[i] = 0.0;

  for (uint k0 = 0u; k0 < pc.n_in; k0 += BK) {
    uvec2 q;
    float s, m;
    quant8(w_row, k0 + ld_k, q, s, m);
    wq[ld_k >> 2][ld_row] = q.x;
    wq[(ld_k >> 2) + 1u][ld_row] = q.y;
    if ((ld_k & 15u) == 0u) ws_sh[ld_k >> 4][ld_row] = s;
    if (ld_k == 0u) wm_sh[ld_row] = m;
    const uint xw = xb + ((k0 + ld_k) >> 2);
    xq[ld_k >> 2][ld_row] = x_ok ? XQ[xw] : 0u;
    xq[(ld_k >> 2) + 1u][ld_row] = x_ok ? XQ[xw + 1u] : 0u;
    if (ld_k == 0u) {
      const uint sums = xb + (pc.n_in >> 2) + pc.n_in / QBS;
      xd_sh[ld_row] = x_ok ? uintBitsToFloat(XQ[xb + (pc.n_in >> 2) + k0 / QBS]) : 0.0;
      int sx = 0;
      if (x_ok) {
        sx = int(XQ[sums + k0 / QSG]);
        if (QSG == 16u) sx += int(XQ[sums + k0 / QSG + 1u]);
      }
      xs_sh[ld_row] = sx;
    }
    barrier();
    uvec4 wa[4], wb[4];
    float s0[4], s1[4], mm[4];
    for (uint i = 0u; i < 4u; ++i) {
      const uint r = tr + 16u * i;
      wa[i] = uvec4(wq[0][r], wq[1][r], wq[2][r], wq[3][r]);
      wb[i] = uvec4(wq[4][r], wq[5][r], wq[6][r], wq[7][r]);
      s0[i] = ws_sh[0][r], s1[i] = ws_sh[1][r], mm[i] = wm_sh[r];
    }
    for (uint j = 0u; j < 4u; ++j) {
      const uint t = tc + 16u * j;
      const uvec4 xa = uvec4(xq[0][t], xq[1][t], xq[2][t], xq[3][t]);
      const uvec4 xbv = uvec4(xq[4][t], xq[5][t], xq[6][t], xq[7][t]);
      const float dx = xd_sh[t], sx = float(xs_sh[t]);
      for (uint i = 0u; i < 4u; ++i)
        acc[i * 4u + j] += dx * ((s0[i] * float(sdot16(wa[i], xa)) + s1[i] * float(sdot16(wb[i], xbv))) - mm[i] * sx);
    }
    barrier();
  }

  for (uint i = 0u; i < 4u; ++i) {
    const uint r = row_base + tr + 16u * i;
    if (r >= pc.n_rows) continue;
    for (uint j = 0u; j < 4u; ++j) {
      const uint t = tok_base + tc + 16u * j;
      if (t < pc.n_tok) store_y(pc.y_off + t * pc.y_stride + r, acc[i * 4u + j]);
    }
  }
}
