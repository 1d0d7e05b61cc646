// AVX-512 attention for a block of query rows over one KV head
// (cpu/attention.h: AttentionBlock). Only called after a cpuid check
// (CpuFeatures::avx512_vnni, as the AVX-512 matmul kernels).
//
// A score is defined as: 16 lane sums a_l = Σ_c q[16c + l] · k[16c + l], each
// one fused multiply-add at a time in the order of c, then the fixed tree
// t8_l = a_l + a_l+8, t4_l = t8_l + t8_l+4, t2_l = t4_l + t4_l+2,
// s = (t2_0 + t2_1) · scale. Two kernels give exactly those bits:
//   - a few rows (decode: one token × a KV group's heads): the dims in the
//     lanes, K read as f16 straight from the cache (prefetched, the rows of a
//     head are strided), four positions × up to six rows per pass, the sums
//     reduced across lanes by shuffles, blends and adds (scores16);
//   - many rows (a prompt: up to 32 tokens × the group): per tile of 32 or 64
//     positions the K rows converted once into an L1 f32 buffer, transposed
//     (dims × positions), every row taking 32 scores at a time with a
//     broadcast q element per FMA and the tree as vertical adds (scores32_t).
// The softmax: e^(s - max) elementwise (the AVX2 file's polynomial), the sum
// in double in a fixed order. The values: each output lane adds p_j · v_j one
// FMA at a time in the order of the positions (six rows × 64 dims, or three ×
// 128, per kernel), V from the cache or from a converted tile (positions ×
// dims). So a row's output is the same bits whatever block it is computed in.
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

// A tile of positions converted to f32 (positions × dims, rows padded to a
// multiple of 16 with zeros, or transposed): 64 positions where that fits in
// 16 KB (head dims up to 64), else 32, up to kTileFloats floats (32 KB: head
// dims up to 256).
constexpr int32_t kTileFloats = 8192;
inline int32_t tile_positions(int32_t hdp) { return hdp * 64 <= 4096 ? 64 : 32; }
// Blocks of at most this many rows read K and V as f16 straight from the cache
// (each element converted once per 6 rows); more rows share a tile. Measured:
// decode with groups of 7 and 8 heads 5-10% faster so than through tiles, 16
// rows 5-10% slower.
constexpr int32_t kDirectRows = 8;

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

// 16 dims of a K or V row from the f32 tile or as f16 from the cache (lanes past m: 0).
inline __m512 load16(const float* p, __mmask16 m) { return _mm512_maskz_loadu_ps(m, p); }
inline __m512 load16(const uint16_t* p, __mmask16 m) { return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, p)); }

// Where a tile's (or the cache's) rows are: row(jj) is position j0 + jj;
// prefetch(jj) asks for that row ahead of its use (the cache's rows of one
// head are strided, beyond what the hardware follows), none at n or past.
struct TileRows {
  const float* base;
  int32_t stride;
  const float* operator()(int32_t jj) const { return base + int64_t(jj) * stride; }
  void prefetch(int32_t) const {}
  TileRows shifted(int32_t by) const { return {base + int64_t(by) * stride, stride}; }
};
template <bool Key>
struct CacheRows {
  const KvView* kv;
  int32_t j0, n, hd;
  const uint16_t* operator()(int32_t jj) const { return Key ? kv->key(j0 + jj) : kv->value(j0 + jj); }
  void prefetch(int32_t jj) const {
    if (j0 + jj >= n) return;
    const char* p = reinterpret_cast<const char*>((*this)(jj));
    for (int32_t b = 0; b < hd * 2; b += 64) _mm_prefetch(p + b, _MM_HINT_T0);
  }
  CacheRows shifted(int32_t by) const { return {kv, j0 + by, n, hd}; }
};
using KeyRows = CacheRows<true>;
using ValueRows = CacheRows<false>;

// tile[jj · hdp + d] = row(jj)[d] in f32 for jj < nj (0 for hd <= d < hdp).
template <class Rows>
void load_tile(const Rows& row, int32_t nj, int32_t hd, int32_t hdp, float* tile) {
  for (int32_t jj = 0; jj < nj; ++jj) {
    const uint16_t* v = row(jj);
    row.prefetch(jj + nj);  // the next tile's
    for (int32_t d = 0; d < hdp; d += 16) _mm512_store_ps(tile + int64_t(jj) * hdp + d, load16(v + d, first_n(hd - d)));
  }
}

// The reductions of a score's 16 lane sums a_0..a_15 (lane l: Σ over the dims
// d ≡ l mod 16, in order): t8_l = a_l + a_l+8, t4_l = t8_l + t8_l+4,
// t2_l = t4_l + t4_l+2, s = t2_0 + t2_1; several positions per vector, each
// step one shuffle, a blend and an add where it can.
// Positions A, B: lanes 0-7 A's t8, 8-15 B's.
inline __m512 fold8(__m512 a, __m512 b) {
  return _mm512_add_ps(_mm512_mask_blend_ps(0xff00, a, b), _mm512_shuffle_f32x4(a, b, _MM_SHUFFLE(1, 0, 3, 2)));
}
// fold8(A, B), fold8(C, D): quarters t4 of A, C, B, D.
inline __m512 fold4(__m512 ab, __m512 cd) {
  const __m512i idx = _mm512_setr_epi32(4, 5, 6, 7, 16, 17, 18, 19, 12, 13, 14, 15, 24, 25, 26, 27);
  return _mm512_add_ps(_mm512_mask_blend_ps(0xf0f0, ab, cd), _mm512_permutex2var_ps(ab, idx, cd));
}
// u[m] = fold4 of positions 4m..4m+3 -> lane 4q + k: the score of position
// 4k + (0, 2, 1, 3)[q].
inline __m512 fold_last(const __m512 u[4]) {
  const __m512 w01 = _mm512_add_ps(_mm512_mask_blend_ps(0xcccc, u[0], u[1]), _mm512_shuffle_ps(u[0], u[1], _MM_SHUFFLE(1, 0, 3, 2)));
  const __m512 w23 = _mm512_add_ps(_mm512_mask_blend_ps(0xcccc, u[2], u[3]), _mm512_shuffle_ps(u[2], u[3], _MM_SHUFFLE(1, 0, 3, 2)));
  return _mm512_add_ps(_mm512_shuffle_ps(w01, w23, _MM_SHUFFLE(2, 0, 2, 0)), _mm512_shuffle_ps(w01, w23, _MM_SHUFFLE(3, 1, 3, 1)));
}

// Scores of R rows at 16 positions (row(0..nj-1); nj <= 16): s[r][jj] = scale ·
// the reduction of q[r] · k_jj's 16 lane sums, stored for jj < nj.
#define FISH_INLINE inline __attribute__((always_inline))

template <int R, class Rows>
FISH_INLINE void scores16(const float* const* q, const Rows& row, int32_t nj, int32_t hd, float scale, float* const* s) {
  const int32_t nc = (hd + 15) / 16;
  const __mmask16 tail = first_n(hd - 16 * (nc - 1));
  alignas(64) float u[R][4][16];  // each row's fold4 of 4 positions at a time
  for (int m = 0; m < 4; ++m) {
    if (4 * m >= nj) {
      #pragma GCC unroll 16
      for (int r = 0; r < R; ++r) _mm512_store_ps(u[r][m], _mm512_setzero_ps());
      continue;
    }
    decltype(row(0)) kp[4];
    #pragma GCC unroll 16
    for (int p = 0; p < 4; ++p) kp[p] = row(imin(4 * m + p, nj - 1)), row.prefetch(16 + 4 * m + p);
    __m512 a[R][4];
    #pragma GCC unroll 16
    for (int r = 0; r < R; ++r)
      #pragma GCC unroll 16
      for (int p = 0; p < 4; ++p) a[r][p] = _mm512_setzero_ps();
    for (int32_t c = 0; c < nc; ++c) {
      const __mmask16 k = c == nc - 1 ? tail : __mmask16(0xffff);
      __m512 kv[4];
      #pragma GCC unroll 16
      for (int p = 0; p < 4; ++p) kv[p] = load16(kp[p] + 16 * c, k);
      #pragma GCC unroll 16
      for (int r = 0; r < R; ++r) {
        const __m512 qv = _mm512_maskz_loadu_ps(k, q[r] + 16 * c);
        #pragma GCC unroll 16
        for (int p = 0; p < 4; ++p) a[r][p] = _mm512_fmadd_ps(qv, kv[p], a[r][p]);
      }
    }
    #pragma GCC unroll 16
    for (int r = 0; r < R; ++r) _mm512_store_ps(u[r][m], fold4(fold8(a[r][0], a[r][1]), fold8(a[r][2], a[r][3])));
  }
  const __m512i order = _mm512_setr_epi32(0, 8, 4, 12, 1, 9, 5, 13, 2, 10, 6, 14, 3, 11, 7, 15);
  const __m512 sc = _mm512_set1_ps(scale);
  #pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
    const __m512 ur[4] = {_mm512_load_ps(u[r][0]), _mm512_load_ps(u[r][1]), _mm512_load_ps(u[r][2]), _mm512_load_ps(u[r][3])};
    _mm512_mask_storeu_ps(s[r], first_n(nj), _mm512_mul_ps(_mm512_permutexvar_ps(order, fold_last(ur)), sc));
  }
}

// out[r][0..16·D) (the last vector only its lanes in `last`) += Σ_{jj < nj}
// p[r][jj] · row(jj)[d0..d0 + 16·D), one position at a time; from 0 where first.
template <int R, int D, class Rows>
FISH_INLINE void values_tile(const float* const* p, const Rows& row, int32_t d0, int32_t nj, float* const* out, __mmask16 last,
                 bool first) {
  __m512 a[R][D];
  #pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
    #pragma GCC unroll 16
    for (int c = 0; c < D; ++c)
      a[r][c] = first ? _mm512_setzero_ps() : _mm512_maskz_loadu_ps(c == D - 1 ? last : __mmask16(0xffff), out[r] + 16 * c);
  for (int32_t jj = 0; jj < nj; ++jj) {
    const auto* vr = row(jj) + d0;
    if (d0 == 0) row.prefetch(jj + 8);
    __m512 v[D];
    #pragma GCC unroll 16
    for (int c = 0; c < D; ++c) v[c] = load16(vr + 16 * c, c == D - 1 ? last : __mmask16(0xffff));
    #pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      const __m512 pj = _mm512_set1_ps(p[r][jj]);
      #pragma GCC unroll 16
      for (int c = 0; c < D; ++c) a[r][c] = _mm512_fmadd_ps(pj, v[c], a[r][c]);
    }
  }
  #pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
    #pragma GCC unroll 16
    for (int c = 0; c < D; ++c) _mm512_mask_storeu_ps(out[r] + 16 * c, c == D - 1 ? last : __mmask16(0xffff), a[r][c]);
}

constexpr int kScoreRows = 6;  // rows per score kernel (24 accumulators)
constexpr int kValueRows = 6;  // rows per value kernel of 64 dims (24 accumulators)

template <class Rows>
void scores_rows(int32_t n, const float* const* q, const Rows& row, int32_t nj, int32_t hd, float scale,
                 float* const* s) {
  switch (n) {
    case 6: scores16<6>(q, row, nj, hd, scale, s); break;
    case 5: scores16<5>(q, row, nj, hd, scale, s); break;
    case 4: scores16<4>(q, row, nj, hd, scale, s); break;
    case 3: scores16<3>(q, row, nj, hd, scale, s); break;
    case 2: scores16<2>(q, row, nj, hd, scale, s); break;
    default: scores16<1>(q, row, nj, hd, scale, s); break;
  }
}

template <int R, class Rows>
void values_rows_d(int32_t nd, const float* const* p, const Rows& row, int32_t d0, int32_t nj, float* const* out,
                   __mmask16 last, bool first) {
  switch (nd) {
    case 8: values_tile<R < 3 ? R : 3, 8>(p, row, d0, nj, out, last, first); break;
    case 7: values_tile<R < 3 ? R : 3, 7>(p, row, d0, nj, out, last, first); break;
    case 6: values_tile<R < 3 ? R : 3, 6>(p, row, d0, nj, out, last, first); break;
    case 5: values_tile<R < 3 ? R : 3, 5>(p, row, d0, nj, out, last, first); break;
    case 4: values_tile<R, 4>(p, row, d0, nj, out, last, first); break;
    case 3: values_tile<R, 3>(p, row, d0, nj, out, last, first); break;
    case 2: values_tile<R, 2>(p, row, d0, nj, out, last, first); break;
    default: values_tile<R, 1>(p, row, d0, nj, out, last, first); break;
  }
}

// n rows (<= kValueRows), every dim of the head: chunks of 64 dims, or 128
// for at most 3 rows (a position's V row read once).
template <class Rows>
void values_rows(int32_t n, const float* const* p, const Rows& row, int32_t hd, int32_t nj, float* const* out,
                 bool first) {
  const int32_t cw = n <= 3 ? 128 : 64;
  for (int32_t d0 = 0; d0 < hd; d0 += cw) {
    const int32_t w = imin(cw, hd - d0), nd = (w + 15) / 16;
    const __mmask16 last = first_n(w - 16 * (nd - 1));
    float* o[kValueRows];
    for (int32_t r = 0; r < n; ++r) o[r] = out[r] + d0;
    switch (n) {
      case 6: values_rows_d<6>(nd, p, row, d0, nj, o, last, first); break;
      case 5: values_rows_d<5>(nd, p, row, d0, nj, o, last, first); break;
      case 4: values_rows_d<4>(nd, p, row, d0, nj, o, last, first); break;
      case 3: values_rows_d<3>(nd, p, row, d0, nj, o, last, first); break;
      case 2: values_rows_d<2>(nd, p, row, d0, nj, o, last, first); break;
      default: values_rows_d<1>(nd, p, row, d0, nj, o, last, first); break;
    }
  }
}

// The same scores with the positions in the lanes, for blocks of many rows:
// the tile's K rows transposed (dims × positions) once for all of them, each
// lane sum a_l a chain of broadcast q elements (two at a time: l and l + 8),
// and the reduction vertical adds in the same order; the same bits as scores16.

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

// kt[d · tp + jj] = K[j0 + jj][d] in f32 for d < hd (a multiple of 16), jj <
// tp (a multiple of 32); 0 for jj >= nj.
void load_k_tile_t(const KeyRows& row, int32_t nj, int32_t hd, int32_t tp, float* kt) {
  for (int32_t jb = 0; jb < tp; jb += 16) {
    const uint16_t* rows[16];
    const int32_t nv = imin(16, nj - jb);
    for (int32_t p = 0; p < nv; ++p) rows[p] = row(jb + p), row.prefetch(jb + p + nj);
    for (int32_t db = 0; db < hd; db += 16) {
      __m512 r[16];
      for (int32_t p = 0; p < 16; ++p) r[p] = p < nv ? load16(rows[p] + db, 0xffff) : _mm512_setzero_ps();
      transpose16(r);
      for (int32_t c = 0; c < 16; ++c) _mm512_store_ps(kt + int64_t(db + c) * tp + jb, r[c]);
    }
  }
}

// Scores of R rows at 32 positions (kt: the transposed tile from the first of
// them, row stride tp), stored for jj < nj.
template <int R>
FISH_INLINE void scores32_t(const float* const* q, const float* kt, int32_t tp, int32_t hd, float scale,
                            float* const* s, int32_t nj) {
  alignas(64) float t8[R][8][2][16];
  const int32_t nc = hd / 16;
  for (int l = 0; l < 8; ++l) {
    __m512 a0[R][2], a1[R][2];  // lane sums l and l + 8
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) a0[r][0] = a0[r][1] = a1[r][0] = a1[r][1] = _mm512_setzero_ps();
    for (int32_t c = 0; c < nc; ++c) {
      const int32_t d = 16 * c + l;
      const float* k0 = kt + int64_t(d) * tp;
      const float* k1 = k0 + int64_t(8) * tp;
      const __m512 k00 = _mm512_load_ps(k0), k01 = _mm512_load_ps(k0 + 16);
      const __m512 k10 = _mm512_load_ps(k1), k11 = _mm512_load_ps(k1 + 16);
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) {
        const __m512 q0 = _mm512_set1_ps(q[r][d]), q1 = _mm512_set1_ps(q[r][d + 8]);
        a0[r][0] = _mm512_fmadd_ps(q0, k00, a0[r][0]);
        a0[r][1] = _mm512_fmadd_ps(q0, k01, a0[r][1]);
        a1[r][0] = _mm512_fmadd_ps(q1, k10, a1[r][0]);
        a1[r][1] = _mm512_fmadd_ps(q1, k11, a1[r][1]);
      }
    }
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      _mm512_store_ps(t8[r][l][0], _mm512_add_ps(a0[r][0], a1[r][0]));
      _mm512_store_ps(t8[r][l][1], _mm512_add_ps(a0[r][1], a1[r][1]));
    }
  }
  const __m512 sc = _mm512_set1_ps(scale);
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 2
    for (int v = 0; v < 2; ++v) {
      __m512 t4[4];
      for (int l = 0; l < 4; ++l) t4[l] = _mm512_add_ps(_mm512_load_ps(t8[r][l][v]), _mm512_load_ps(t8[r][l + 4][v]));
      const __m512 t20 = _mm512_add_ps(t4[0], t4[2]), t21 = _mm512_add_ps(t4[1], t4[3]);
      _mm512_mask_storeu_ps(s[r] + 16 * v, first_n(nj - 16 * v), _mm512_mul_ps(_mm512_add_ps(t20, t21), sc));
    }
}

void scores_rows_t(int32_t n, const float* const* q, const float* kt, int32_t tp, int32_t hd, float scale,
                   float* const* s, int32_t nj) {
  switch (n) {
    case 6: scores32_t<6>(q, kt, tp, hd, scale, s, nj); break;
    case 5: scores32_t<5>(q, kt, tp, hd, scale, s, nj); break;
    case 4: scores32_t<4>(q, kt, tp, hd, scale, s, nj); break;
    case 3: scores32_t<3>(q, kt, tp, hd, scale, s, nj); break;
    case 2: scores32_t<2>(q, kt, tp, hd, scale, s, nj); break;
    default: scores32_t<1>(q, kt, tp, hd, scale, s, nj); break;
  }
}

struct Rows {
  int32_t n = 0;
  const float* q[kMaxBlockRows];
  float* out[kMaxBlockRows];
  float* s[kMaxBlockRows];
  int32_t lim[kMaxBlockRows];
  // The first row that sees position j (rows are in order of their ends).
  int32_t first_seeing(int32_t j) const {
    int32_t r = 0;
    while (lim[r] <= j) ++r;
    return r;
  }
};

// Scores of every row at positions j0..j0+nj-1 (row(jj): position j0 + jj),
// 16 at a time; rows that end before a group of 16 skip it, the others
// compute all of it (scores past a row's end are never read).
template <class RowFn>
void scores_span(const Rows& rw, const RowFn& row, int32_t j0, int32_t nj, int32_t hd, float scale) {
  for (int32_t jb = 0; jb < nj; jb += 16) {
    const int32_t r0 = rw.first_seeing(j0 + jb);
    const RowFn sub = row.shifted(jb);
    float* sp[kScoreRows];
    for (int32_t r = r0; r < rw.n; r += kScoreRows) {
      const int32_t n = imin(kScoreRows, rw.n - r);
      for (int32_t k = 0; k < n; ++k) sp[k] = rw.s[r + k] + j0 + jb;
      scores_rows(n, rw.q + r, sub, imin(16, nj - jb), hd, scale, sp);
    }
  }
}

// scores_span through the transposed tile kt (tp positions from j0), 32 at a time.
void scores_span_t(const Rows& rw, const float* kt, int32_t tp, int32_t j0, int32_t nj, int32_t hd, float scale) {
  for (int32_t jb = 0; jb < nj; jb += 32) {
    const int32_t r0 = rw.first_seeing(j0 + jb);
    float* sp[kScoreRows];
    for (int32_t r = r0; r < rw.n; r += kScoreRows) {
      const int32_t n = imin(kScoreRows, rw.n - r);
      for (int32_t k = 0; k < n; ++k) sp[k] = rw.s[r + k] + j0 + jb;
      scores_rows_t(n, rw.q + r, kt + jb, tp, hd, scale, sp, nj - jb);
    }
  }
}

// Outputs of every row += positions j0..j0+nj-1: rows that see all of them
// together, rows that end inside (the block's last positions) one at a time.
template <class RowFn>
void values_span(const Rows& rw, const RowFn& row, int32_t j0, int32_t nj, int32_t hd) {
  const bool first = j0 == 0;
  const int32_t r0 = rw.first_seeing(j0);
  int32_t rf = r0;  // rows rf.. see all nj positions
  while (rf < rw.n && rw.lim[rf] < j0 + nj) ++rf;
  const float* pp[kValueRows];
  for (int32_t r = r0; r < rf; ++r) {
    pp[0] = rw.s[r] + j0;
    values_rows(1, pp, row, hd, rw.lim[r] - j0, rw.out + r, first);
  }
  for (int32_t r = rf; r < rw.n; r += kValueRows) {
    const int32_t n = imin(kValueRows, rw.n - r);
    for (int32_t k = 0; k < n; ++k) pp[k] = rw.s[r + k] + j0;
    values_rows(n, pp, row, hd, nj, rw.out + r, first);
  }
}

}  // namespace

void attention_block_avx512(const AttentionBlock& b, const KvView& kv, int32_t hd, float scale, float* scores) {
  if (split_large_block(b, kv, hd, scale, scores, attention_block_avx512)) return;
  // Rows r = token i · H + head h, in order of their number of positions n_kv0 + i.
  const int32_t H = b.n_heads, n_max = b.n_kv0 + b.n_tok - 1, hdp = (hd + 15) & ~15;
  Rows rw;
  rw.n = b.n_tok * H;
  for (int32_t r = 0; r < rw.n; ++r) {
    const int32_t i = r / H, h = r % H;
    rw.q[r] = b.q + i * b.q_stride + int64_t(h) * hd;
    rw.out[r] = b.out + i * b.out_stride + int64_t(h) * hd;
    rw.s[r] = scores + int64_t(r) * n_max;
    rw.lim[r] = b.n_kv0 + i;
  }
  // Few rows (decode) or heads too large for a tile: f16 from the cache.
  // Else tiles of tp positions, converted once for all rows.
  // With a head dim of 16s: K transposed per tile for the scores.
  const bool direct = rw.n <= kDirectRows || hdp * 32 > kTileFloats, transposed = !direct && hd == hdp;
  const int32_t tp = direct ? 64 : tile_positions(hdp);
  alignas(64) float tile[kTileFloats];
  for (int32_t j0 = 0; j0 < n_max; j0 += tp) {
    const int32_t nj = imin(tp, n_max - j0);
    if (direct) {
      scores_span(rw, KeyRows{&kv, j0, n_max, hd}, j0, nj, hd, scale);
    } else if (transposed) {
      load_k_tile_t(KeyRows{&kv, j0, n_max, hd}, nj, hd, tp, tile);
      scores_span_t(rw, tile, tp, j0, nj, hd, scale);
    } else {
      load_tile(KeyRows{&kv, j0, n_max, hd}, nj, hd, hdp, tile);
      scores_span(rw, TileRows{tile, hdp}, j0, nj, hd, scale);
    }
  }
  float inv[kMaxBlockRows];
  for (int32_t r = 0; r < rw.n; ++r) inv[r] = float(1.0 / softmax_row(rw.s[r], rw.lim[r]));
  for (int32_t j0 = 0; j0 < n_max; j0 += tp) {
    const int32_t nj = imin(tp, n_max - j0);
    if (direct) {
      values_span(rw, ValueRows{&kv, j0, n_max, hd}, j0, nj, hd);
    } else {
      load_tile(ValueRows{&kv, j0, n_max, hd}, nj, hd, hdp, tile);
      values_span(rw, TileRows{tile, hdp}, j0, nj, hd);
    }
  }
  for (int32_t r = 0; r < rw.n; ++r) {
    const __m512 iv = _mm512_set1_ps(inv[r]);
    for (int32_t d = 0; d < hd; d += 16) {
      const __mmask16 k = first_n(hd - d);
      _mm512_mask_storeu_ps(rw.out[r] + d, k, _mm512_mul_ps(_mm512_maskz_loadu_ps(k, rw.out[r] + d), iv));
    }
  }
}

}  // namespace fish
