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
uint mv_row(uint row0, uint r) { return last_row(row0, second(r) ? r - ROWS : r); }
#else
const uint RT = ROWS;
uint wv(uint r, uint i) { return W[i]; }
uvec4 wv4(uint r, uint i) { return W4[i]; }
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
