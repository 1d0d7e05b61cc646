// The weight reads of matvec_units.glsl (f32 x) and matvec_units_i8.glsl (int8
// x): rows past n_rows read the last row (their sums are never written).
uint last_row(uint row0, uint r) { return min(row0 + r, pc.n_rows - 1u); }

// Weight reads by accumulated row r (0 .. RT-1). The span's PAIR dispatch
// accumulates RT = 2·ROWS rows: r < ROWS from the matrix at binding 0, r >= ROWS
// the same rows of the matrix at binding 5 (WB). The loops over r are unrolled
// once ROWS is specialised, so the choice of binding is static.
#ifdef FISH_SPAN
bool second(uint r) { return PAIR && r >= ROWS; }
uint wv(uint r, uint i) { return second(r) ? WB[i] : W[i]; }
uvec4 wv4(uint r, uint i) { return second(r) ? WB4[i] : W4[i]; }
#ifdef TYPE_FQ3
uvec2 wv2(uint r, uint i) { return second(r) ? WB2[i] : W2[i]; }
#endif
#ifdef FISH_MOE
// moe_matvec.comp: the chosen expert's first row in the stacked weight (set per expert).
uint moe_row0 = 0u;
uint mv_row(uint row0, uint r) { return moe_row0 + last_row(row0, second(r) ? r - ROWS : r); }
#else
uint mv_row(uint row0, uint r) { return last_row(row0, second(r) ? r - ROWS : r); }
#endif
#else
const uint RT = ROWS;
uint wv(uint r, uint i) { return W[i]; }
uvec4 wv4(uint r, uint i) { return W4[i]; }
#ifdef TYPE_FQ3
uvec2 wv2(uint r, uint i) { return W2[i]; }
#endif
uint mv_row(uint row0, uint r) { return last_row(row0, r); }
#endif
// matmul_common.glsl's unaligned reads, from row r's matrix.
uvec2 mv_bytes8(uint r, uint o) {
  const uint w = o >> 2;
  const bool odd = (o & 2u) != 0u;
  const uint a = wv(r, w), b = wv(r, w + 1u), c = wv(r, w + 2u);
  return uvec2(funnel16(a, b, odd), funnel16(b, c, odd));
}
uvec4 mv_bytes16(uint r, uint o) {
  const uint w = o >> 2;
  const bool odd = (o & 2u) != 0u;
  const uint a = wv(r, w), b = wv(r, w + 1u), c = wv(r, w + 2u), d = wv(r, w + 3u), e = wv(r, w + 4u);
  return uvec4(funnel16(a, b, odd), funnel16(b, c, odd), funnel16(c, d, odd), funnel16(d, e, odd));
}
void mv_bytes32(uint r, uint o, out uvec4 lo, out uvec4 hi) {
  const uint w = o >> 2;
  const bool odd = (o & 2u) != 0u;
  const uint a0 = wv(r, w), a1 = wv(r, w + 1u), a2 = wv(r, w + 2u), a3 = wv(r, w + 3u), a4 = wv(r, w + 4u);
  const uint a5 = wv(r, w + 5u), a6 = wv(r, w + 6u), a7 = wv(r, w + 7u), a8 = wv(r, w + 8u);
  lo = uvec4(funnel16(a0, a1, odd), funnel16(a1, a2, odd), funnel16(a2, a3, odd), funnel16(a3, a4, odd));
  hi = uvec4(funnel16(a4, a5, odd), funnel16(a5, a6, odd), funnel16(a6, a7, odd), funnel16(a7, a8, odd));
}
uint mv_half(uint r, uint o) { return (wv(r, o >> 2) >> ((o & 2u) * 8u)) & 0xFFFFu; }

#if defined(TYPE_Q5_K)
// A Q5_K unit's 5-bit quants, one per byte: the 16 qs bytes q hold group 2j
// (low nibbles) and 2j + 1 (high nibbles); bit 2j / 2j + 1 of the unit's qh
// bytes is bit 4.
void q5k_quants(uvec4 q, uvec4 qh, uint j, out uvec4 lo, out uvec4 hi) {
  lo = (q & 0x0F0F0F0Fu) | (((qh >> (2u * j)) & 0x01010101u) << 4);
  hi = ((q >> 4) & 0x0F0F0F0Fu) | (((qh >> (2u * j + 1u)) & 0x01010101u) << 4);
}
#endif

#if defined(TYPE_Q6_K)
// A Q6_K unit of row r (block at byte o, half n, l0 = 0 or 16): the 6-bit
// quants of its runs k = 0..3 (elements 128n + l0 + 32k + i), one per byte:
// low / high nibbles of ql[64n + l0 ..] (k = 0 / 2) and ql[64n + 32 + l0 ..]
// (k = 1 / 3), bits 2k..2k+1 of qh[32n + l0 ..] on top.
void q6k_quants(uint r, uint o, uint n, uint l0, out uvec4 v0, out uvec4 v1, out uvec4 v2, out uvec4 v3) {
  const uvec4 qa = mv_bytes16(r, o + 64u * n + l0);
  const uvec4 qb = mv_bytes16(r, o + 64u * n + 32u + l0);
  const uvec4 qh = mv_bytes16(r, o + 128u + 32u * n + l0);
  v0 = (qa & 0x0F0F0F0Fu) | ((qh << 4) & 0x30303030u);
  v1 = (qb & 0x0F0F0F0Fu) | ((qh << 2) & 0x30303030u);
  v2 = ((qa >> 4) & 0x0F0F0F0Fu) | (qh & 0x30303030u);
  v3 = ((qb >> 4) & 0x0F0F0F0Fu) | ((qh >> 2) & 0x30303030u);
}
// The same unit's four int8 run scales sc[8n + l0/16 + 2k].
ivec4 q6k_scales(uint r, uint o, uint n, uint l0) {
  const uvec2 sw = mv_bytes8(r, o + 192u + 8u * n);
  const int sh = int(l0 / 2u);  // byte l0/16 of each scale pair
  return ivec4(bitfieldExtract(int(sw.x), sh, 8), bitfieldExtract(int(sw.x), sh + 16, 8),
               bitfieldExtract(int(sw.y), sh, 8), bitfieldExtract(int(sw.y), sh + 16, 8));
}
#endif

#if defined(TYPE_FQ3)
// An FQ3 unit of row r: groups 2p and 2p + 1 (p = 0..3) of the block at uvec4
// index base, i.e. words 4 + 6p .. 9 + 6p of the block: one uvec4 and one
// uvec2 (even p: the uvec4 first; odd p: the uvec2 first). ga / gb: the two
// groups' words A, B, C.
void fq3_pair(uint r, uint base, uint p, out uvec3 ga, out uvec3 gb) {
  const uint w0 = base * 4u + 4u + 6u * p;  // group 2p's word A
  const bool odd = (p & 1u) != 0u;
  const uvec4 v = wv4(r, (w0 + (odd ? 2u : 0u)) >> 2);
  const uvec2 h = wv2(r, (w0 + (odd ? 0u : 4u)) >> 1);
  ga = odd ? uvec3(h, v.x) : v.xyz;
  gb = odd ? v.yzw : uvec3(v.w, h);
}
#endif
