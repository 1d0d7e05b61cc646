// AVX-512 attention for a block of query rows over one KV head
// (cpu/attention.h: AttentionBlock). Only called after a cpuid check
// (CpuFeatures::avx512_vnni, as the AVX-512 matmul kernels).
//
// The block is two small matrix products over tiles of positions: a tile's K
// rows are converted from f16 once into an f32 buffer held in L1, transposed
// (dims × positions), and every row of the block (tokens × the KV group's query
// heads) takes 32 scores at a time from it: 16 positions a vector, one
// broadcast q element per FMA, no horizontal sums. Then the tile's V rows
// (positions × dims, f32) serve every row's output, 16 dims a vector.
//
// Every number a row produces is computed as it would be alone, whatever the
// block or tile: a score is q[0]·k[0] + q[1]·k[1] + ... one fused multiply-add
// at a time in the order of the dims, times scale; e^(s - max) is elementwise;
// the sum of a row's exponentials is in a fixed order over its own positions;
// an output lane adds p_j·v_j one FMA at a time in the order of the positions.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>

#include <cmath>
#include <cstdint>

#include "cpu/attention.h"

namespace fish {
namespace {

// The converted tile: positions × dims, at most kTileFloats floats (32 KB).
constexpr int32_t kTileFloats = 8192;
// Positions per K/V tile for head_dim hd: 64 where 64 · hd fits in 16 KB, else 32.
inline int32_t tile_positions(int32_t hd) { return hd <= 64 ? 64 : 32; }
constexpr int32_t kMaxHd = kTileFloats / 32;  // 256; larger heads go to the AVX2 variant

inline int32_t imin(int32_t a, int32_t b) { return a < b ? a : b; }
inline __mmask16 first_n(int32_t n) { return n >= 16 ? __mmask16(0xffff) : __mmask16((1u << (n > 0 ? n : 0)) - 1); }

// e^x for x <= 0 (or NaN), as avx2_exp8_nonpos (cpu/avx2_math.h) 16 lanes at a time.
inline __m512 exp16_nonpos(__m512 x) {
  const __m512 lo = _mm512_set1_ps(-87.33654f);
  const __mmask16 under = _mm512_cmp_ps_mask(x, lo, _CMP_LT_OQ);
  x = _mm512_max_ps(lo, x);  // the second operand where either is NaN: x
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504f)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.0f / 720);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  const __m512i e = _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23);
  return _mm512_maskz_mul_ps(__mmask16(~under), p, _mm512_castsi512_ps(e));
}

// s[j] = e^(s[j] - mx) for j < n, mx = max s[0..n); returns Σ s[j], summed in
// double over 16 lanes in the order of the positions, then the lanes in a fixed order.
double softmax_row(float* s, int32_t n) {
  __m512 m = _mm512_set1_ps(-INFINITY);
  for (int32_t j = 0; j < n; j += 16) m = _mm512_max_ps(m, _mm512_mask_loadu_ps(_mm512_set1_ps(-INFINITY), first_n(n - j), s + j));
  const __m512 mx = _mm512_set1_ps(_mm512_reduce_max_ps(m));
  __m512d lo = _mm512_setzero_pd(), hi = lo;
  for (int32_t j = 0; j < n; j += 16) {
    const __mmask16 k = first_n(n - j);
    const __m512 e = _mm512_maskz_mov_ps(k, exp16_nonpos(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, s + j), mx)));
    _mm512_mask_storeu_ps(s + j, k, e);
    lo = _mm512_add_pd(lo, _mm512_cvtps_pd(_mm512_castps512_ps256(e)));
    hi = _mm512_add_pd(hi, _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(e), 1))));
  }
  alignas(64) double d[8];
  _mm512_store_pd(d, _mm512_add_pd(lo, hi));
  return ((d[0] + d[1]) + (d[2] + d[3])) + ((d[4] + d[5]) + (d[6] + d[7]));
}

// The 16 × 16 transpose of r (r[i] lane c -> r[c] lane i).
inline void transpose16(__m512 r[16]) {
  __m512 t[16];
  for (int i = 0; i < 8; ++i) {
    t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  __m512 u[16];  // u[4g + m] lane k: rows 4g..4g+3 of column 4k + m
  for (int g = 0; g < 4; ++g) {
    const __m512d a = _mm512_castps_pd(t[4 * g]), b = _mm512_castps_pd(t[4 * g + 1]);
    const __m512d c = _mm512_castps_pd(t[4 * g + 2]), d = _mm512_castps_pd(t[4 * g + 3]);
    u[4 * g + 0] = _mm512_castpd_ps(_mm512_unpacklo_pd(a, c));
    u[4 * g + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, c));
    u[4 * g + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(b, d));
    u[4 * g + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(b, d));
  }
  for (int m = 0; m < 4; ++m) {
    const __m512 x0 = _mm512_shuffle_f32x4(u[m], u[4 + m], 0x88), x1 = _mm512_shuffle_f32x4(u[m], u[4 + m], 0xdd);
    const __m512 y0 = _mm512_shuffle_f32x4(u[8 + m], u[12 + m], 0x88), y1 = _mm512_shuffle_f32x4(u[8 + m], u[12 + m], 0xdd);
    r[m] = _mm512_shuffle_f32x4(x0, y0, 0x88);
    r[m + 8] = _mm512_shuffle_f32x4(x0, y0, 0xdd);
    r[m + 4] = _mm512_shuffle_f32x4(x1, y1, 0x88);
    r[m + 12] = _mm512_shuffle_f32x4(x1, y1, 0xdd);
  }
}

inline __m512 load_h16(const uint16_t* p, __mmask16 k) {
  return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(k, p));
}

// kt[d · tp + jj] = K[j0 + jj][d] in f32 for d < hd, jj < tp; 0 for jj >= nj.
void load_k_tile(const KvView& kv, int32_t j0, int32_t nj, int32_t hd, int32_t tp, float* kt) {
  for (int32_t jb = 0; jb < tp; jb += 16) {
    const uint16_t* rows[16];
    const int32_t nv = imin(16, nj - jb);
    for (int32_t p = 0; p < 16; ++p) rows[p] = p < nv ? kv.key(j0 + jb + p) : nullptr;
    for (int32_t db = 0; db < hd; db += 16) {
      const __mmask16 k = first_n(hd - db);
      __m512 r[16];
      for (int32_t p = 0; p < 16; ++p) r[p] = p < nv ? load_h16(rows[p] + db, k) : _mm512_setzero_ps();
      transpose16(r);
      const int32_t nd = imin(16, hd - db);
      for (int32_t c = 0; c < nd; ++c) _mm512_store_ps(kt + int64_t(db + c) * tp + jb, r[c]);
    }
  }
}

// vt[jj · hdp + d] = V[j0 + jj][d] in f32 for jj < nj, d < hdp (0 past hd).
void load_v_tile(const KvView& kv, int32_t j0, int32_t nj, int32_t hd, int32_t hdp, float* vt) {
  for (int32_t jj = 0; jj < nj; ++jj) {
    const uint16_t* v = kv.value(j0 + jj);
    for (int32_t d = 0; d < hdp; d += 16) _mm512_store_ps(vt + int64_t(jj) * hdp + d, load_h16(v + d, first_n(hd - d)));
  }
}

// Scores of R rows at 32 positions of the tile (kt at column jb, row stride
// tp): s[r][jj] = scale · Σ_d q[r][d] · kt[d][jj], stored for jj < nj.
template <int R>
void scores_32(const float* const* q, const float* kt, int32_t tp, int32_t hd, float scale, float* const* s,
               int32_t nj) {
  __m512 a0[R], a1[R];
  for (int r = 0; r < R; ++r) a0[r] = a1[r] = _mm512_setzero_ps();
  for (int32_t d = 0; d < hd; ++d, kt += tp) {
    const __m512 k0 = _mm512_load_ps(kt), k1 = _mm512_load_ps(kt + 16);
    for (int r = 0; r < R; ++r) {
      const __m512 qd = _mm512_set1_ps(q[r][d]);
      a0[r] = _mm512_fmadd_ps(qd, k0, a0[r]);
      a1[r] = _mm512_fmadd_ps(qd, k1, a1[r]);
    }
  }
  const __m512 sc = _mm512_set1_ps(scale);
  const __mmask16 m0 = first_n(nj), m1 = first_n(nj - 16);
  for (int r = 0; r < R; ++r) {
    _mm512_mask_storeu_ps(s[r], m0, _mm512_mul_ps(a0[r], sc));
    _mm512_mask_storeu_ps(s[r] + 16, m1, _mm512_mul_ps(a1[r], sc));
  }
}

// out[r][0..16·D) (the last vector only its lanes in `last`) += Σ_{jj < nj}
// p[r][jj] · vt[jj][0..16·D), one position at a time; from 0 where first.
template <int R, int D>
void values_tile(const float* const* p, const float* vt, int32_t hdp, int32_t nj, float* const* out, __mmask16 last,
                 bool first) {
  __m512 a[R][D];
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < D; ++c)
      a[r][c] = first ? _mm512_setzero_ps() : _mm512_maskz_loadu_ps(c == D - 1 ? last : __mmask16(0xffff), out[r] + 16 * c);
  for (int32_t jj = 0; jj < nj; ++jj, vt += hdp) {
    __m512 v[D];
    for (int c = 0; c < D; ++c) v[c] = _mm512_load_ps(vt + 16 * c);
    for (int r = 0; r < R; ++r) {
      const __m512 pj = _mm512_set1_ps(p[r][jj]);
      for (int c = 0; c < D; ++c) a[r][c] = _mm512_fmadd_ps(pj, v[c], a[r][c]);
    }
  }
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < D; ++c) _mm512_mask_storeu_ps(out[r] + 16 * c, c == D - 1 ? last : __mmask16(0xffff), a[r][c]);
}

constexpr int kScoreRows = 8;  // rows per score kernel (16 accumulators)
constexpr int kValueRows = 6;  // rows per value kernel of 64 dims (24 accumulators)

void scores_rows(int32_t n, const float* const* q, const float* kt, int32_t tp, int32_t hd, float scale,
                 float* const* s, int32_t nj) {
  switch (n) {
    case 8: scores_32<8>(q, kt, tp, hd, scale, s, nj); break;
    case 7: scores_32<7>(q, kt, tp, hd, scale, s, nj); break;
    case 6: scores_32<6>(q, kt, tp, hd, scale, s, nj); break;
    case 5: scores_32<5>(q, kt, tp, hd, scale, s, nj); break;
    case 4: scores_32<4>(q, kt, tp, hd, scale, s, nj); break;
    case 3: scores_32<3>(q, kt, tp, hd, scale, s, nj); break;
    case 2: scores_32<2>(q, kt, tp, hd, scale, s, nj); break;
    default: scores_32<1>(q, kt, tp, hd, scale, s, nj); break;
  }
}

template <int R>
void values_rows_d(int32_t nd, const float* const* p, const float* vt, int32_t hdp, int32_t nj, float* const* out,
                   __mmask16 last, bool first) {
  switch (nd) {
    case 4: values_tile<R, 4>(p, vt, hdp, nj, out, last, first); break;
    case 3: values_tile<R, 3>(p, vt, hdp, nj, out, last, first); break;
    case 2: values_tile<R, 2>(p, vt, hdp, nj, out, last, first); break;
    default: values_tile<R, 1>(p, vt, hdp, nj, out, last, first); break;
  }
}

// n rows (<= kValueRows), every dim of the head: chunks of 64 dims.
void values_rows(int32_t n, const float* const* p, const float* vt, int32_t hd, int32_t hdp, int32_t nj,
                 float* const* out, bool first) {
  for (int32_t d0 = 0; d0 < hd; d0 += 64) {
    const int32_t w = imin(64, hd - d0), nd = (w + 15) / 16;
    const __mmask16 last = first_n(w - 16 * (nd - 1));
    float* o[kValueRows];
    for (int32_t r = 0; r < n; ++r) o[r] = out[r] + d0;
    switch (n) {
      case 6: values_rows_d<6>(nd, p, vt + d0, hdp, nj, o, last, first); break;
      case 5: values_rows_d<5>(nd, p, vt + d0, hdp, nj, o, last, first); break;
      case 4: values_rows_d<4>(nd, p, vt + d0, hdp, nj, o, last, first); break;
      case 3: values_rows_d<3>(nd, p, vt + d0, hdp, nj, o, last, first); break;
      case 2: values_rows_d<2>(nd, p, vt + d0, hdp, nj, o, last, first); break;
      default: values_rows_d<1>(nd, p, vt + d0, hdp, nj, o, last, first); break;
    }
  }
}

}  // namespace

void attention_block_avx2(const AttentionBlock& b, const KvView& kv, int32_t hd, float scale, float* scores);

void attention_block_avx512(const AttentionBlock& b, const KvView& kv, int32_t hd, float scale, float* scores) {
  if (hd > kMaxHd) {
    attention_block_avx2(b, kv, hd, scale, scores);
    return;
  }
  if (b.n_tok * b.n_heads > kMaxBlockRows) {  // in two (the same bits: rows are independent)
    AttentionBlock x = b, y = b;
    if (b.n_tok > 1) {
      x.n_tok = b.n_tok / 2, y.n_tok = b.n_tok - x.n_tok;
      y.q += x.n_tok * b.q_stride, y.out += x.n_tok * b.out_stride, y.n_kv0 += x.n_tok;
    } else {
      x.n_heads = b.n_heads / 2, y.n_heads = b.n_heads - x.n_heads;
      y.q += int64_t(x.n_heads) * hd, y.out += int64_t(x.n_heads) * hd;
    }
    attention_block_avx512(x, kv, hd, scale, scores);
    attention_block_avx512(y, kv, hd, scale, scores);
    return;
  }
  alignas(64) float tile[kTileFloats];
  // Rows r = token i · H + head h, in order of their number of positions n_kv0 + i.
  const int32_t H = b.n_heads, R = b.n_tok * H, n_max = b.n_kv0 + b.n_tok - 1;
  const int32_t tp = tile_positions(hd), hdp = (hd + 15) & ~15;
  const float* q[kMaxBlockRows];
  float* out[kMaxBlockRows];
  float* s[kMaxBlockRows];
  int32_t lim[kMaxBlockRows];
  for (int32_t r = 0; r < R; ++r) {
    const int32_t i = r / H, h = r % H;
    q[r] = b.q + i * b.q_stride + int64_t(h) * hd;
    out[r] = b.out + i * b.out_stride + int64_t(h) * hd;
    s[r] = scores + int64_t(r) * n_max;
    lim[r] = b.n_kv0 + i;
  }
  // Scores, tile by tile: the rows that see any of the tile's positions (a
  // suffix of the rows) compute all of them; those past a row's own end are
  // never read.
  for (int32_t j0 = 0; j0 < n_max; j0 += tp) {
    const int32_t nj = imin(tp, n_max - j0);
    load_k_tile(kv, j0, nj, hd, tp, tile);
    int32_t r0 = 0;
    while (lim[r0] <= j0) ++r0;
    for (int32_t jb = 0; jb < nj; jb += 32) {
      float* sp[kScoreRows];
      for (int32_t r = r0; r < R; r += kScoreRows) {
        const int32_t n = imin(kScoreRows, R - r);
        for (int32_t k = 0; k < n; ++k) sp[k] = s[r + k] + j0 + jb;
        scores_rows(n, q + r, tile + jb, tp, hd, scale, sp, nj - jb);
      }
    }
  }
  float inv[kMaxBlockRows];
  for (int32_t r = 0; r < R; ++r) inv[r] = float(1.0 / softmax_row(s[r], lim[r]));
  // Values, tile by tile: rows that see the whole tile together, the others
  // (the block's last positions) one at a time up to their own end.
  for (int32_t j0 = 0; j0 < n_max; j0 += tp) {
    const int32_t nj = imin(tp, n_max - j0);
    load_v_tile(kv, j0, nj, hd, hdp, tile);
    const bool first = j0 == 0;
    int32_t r0 = 0;
    while (lim[r0] <= j0) ++r0;
    int32_t rf = r0;  // rows rf.. see all nj positions
    while (rf < R && lim[rf] < j0 + nj) ++rf;
    const float* pp[kValueRows];
    for (int32_t r = r0; r < rf; ++r) {
      pp[0] = s[r] + j0;
      values_rows(1, pp, tile, hd, hdp, lim[r] - j0, out + r, first);
    }
    for (int32_t r = rf; r < R; r += kValueRows) {
      const int32_t n = imin(kValueRows, R - r);
      for (int32_t k = 0; k < n; ++k) pp[k] = s[r + k] + j0;
      values_rows(n, pp, tile, hd, hdp, nj, out + r, first);
    }
  }
  for (int32_t r = 0; r < R; ++r) {
    const __m512 iv = _mm512_set1_ps(inv[r]);
    for (int32_t d = 0; d < hd; d += 16) {
      const __mmask16 k = first_n(hd - d);
      _mm512_mask_storeu_ps(out[r] + d, k, _mm512_mul_ps(_mm512_maskz_loadu_ps(k, out[r] + d), iv));
    }
  }
}

}  // namespace fish
