// Group fits for the K-quant quantisers (see kquant_fit.h for the method).
//
// The inner loop (one candidate over n <= 32 values) is written with 4-wide
// vectors; rounding uses the 1.5*2^23 trick of rounding.h in the float domain,
// so there is no float -> int conversion in it.
// The closed-form solves and error sums are done in double: the error is a
// difference of sums of similar size, where float would lose digits.
#include "quant/kquant_fit.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "quant/rounding.h"

namespace fish::qk {
namespace {

constexpr int kMaxN = 32;

// Weighted sums of one level assignment q (floats holding integers).
struct LevelSums {
  double l = 0, ll = 0, xl = 0;  // Σ w q, Σ w q², Σ w x q
};

// Four floats as one SIMD value (GCC/Clang vector extension: SSE2 on any
// x86-64, NEON on ARM). Plain loops did not vectorise well here: the compiler
// may not reorder float sums, and the clamp became branches.
using F4 = float __attribute__((vector_size(16)));

inline F4 load4(const float* p) {
  F4 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
inline F4 splat4(float f) { return F4{f, f, f, f}; }
inline double hsum(F4 v) { return double(v[0]) + double(v[1]) + double(v[2]) + double(v[3]); }

// q[i] = clamp(round((x[i] - off) * inv), lo, hi), and the sums over it.
// N (a multiple of 4) is a compile-time group size so the loop unrolls fully.
template <int N>
LevelSums assign_levels_n(const float* __restrict x, const float* __restrict w, float off, float inv, float lo,
                          float hi, float* __restrict q) {
  const F4 voff = splat4(off), vinv = splat4(inv), vlo = splat4(lo), vhi = splat4(hi);
  const F4 magic = splat4(kRoundMagic);
  F4 sl = {}, sll = {}, sxl = {};
  for (int i = 0; i < N; i += 4) {
    const F4 xv = load4(x + i), wv = load4(w + i);
    F4 v = ((xv - voff) * vinv + magic) - magic;  // round half to even
    v = v > vlo ? v : vlo;
    v = v < vhi ? v : vhi;
    std::memcpy(q + i, &v, sizeof v);
    const F4 wq = wv * v;
    sl += wq;
    sll += wq * v;
    sxl += wq * xv;
  }
  return LevelSums{hsum(sl), hsum(sll), hsum(sxl)};
}

LevelSums assign_levels(const float* x, const float* w, int n, float off, float inv, float lo, float hi, float* q) {
  switch (n) {
    case 16: return assign_levels_n<16>(x, w, off, inv, lo, hi, q);
    case 32: return assign_levels_n<32>(x, w, off, inv, lo, hi, q);
    default: {
      LevelSums s;
      for (int i = 0; i < n; i += 4) {
        const LevelSums p = assign_levels_n<4>(x + i, w + i, off, inv, lo, hi, q + i);
        s.l += p.l;
        s.ll += p.ll;
        s.xl += p.xl;
      }
      return s;
    }
  }
}

// Σ w, Σ w x, Σ w x² of a group: fixed for every candidate.
struct DataSums {
  double w = 0, x = 0, xx = 0;
};

DataSums data_sums(const float* x, const float* w, int n) {
  DataSums s;
  for (int i = 0; i < n; ++i) {
    s.w += w[i];
    s.x += double(w[i]) * x[i];
    s.xx += double(w[i]) * x[i] * x[i];
  }
  return s;
}

// Best x ≈ a·q + b with b <= 0 for fixed levels q. Normal equations of
// min Σ w (a q + b − x)²:  [ll l; l w] [a; b] = [xl; x], so with
// det = w·ll − l²:  a = (w·xl − x·l) / det,  b = (ll·x − l·xl) / det, and the
// error at the optimum is Σwx² − (a·xl + b·x). When b would be > 0 (or all q
// are equal) the optimum lies on b = 0: a = xl / ll, error Σwx² − xl²/ll.
// The error is kept as Σwx² − num/den so that candidates compare by a cross
// product, without a division per candidate; a and b are only formed for the
// winner.
struct Affine {
  double num = 0, den = 1;  // explained part of Σwx²: num / den, den > 0
  double a_num = 0, b_num = 0;  // a = a_num / den, b = b_num / den
  bool valid = false;           // a > 0

  double a() const { return a_num / den; }
  double b() const { return b_num / den; }
  bool better_than(const Affine& o) const { return valid && (!o.valid || num * o.den > o.num * den); }
};

Affine solve_affine(const LevelSums& q, const DataSums& d) {
  Affine r;
  const double det = d.w * q.ll - q.l * q.l;
  const double b_num = q.ll * d.x - q.l * q.xl;
  if (det > 1e-12 * d.w * q.ll && b_num <= 0) {
    r.a_num = d.w * q.xl - d.x * q.l;
    r.b_num = b_num;
    r.den = det;
    r.num = r.a_num * q.xl + r.b_num * d.x;
  } else if (q.ll > 0) {
    r.a_num = q.xl;
    r.b_num = 0;
    r.den = q.ll;
    r.num = q.xl * q.xl;
  }
  r.valid = r.a_num > 0;
  return r;
}

}  // namespace

AffineFit fit_affine(const float* x, const float* w, int n, int nmax, const FitGrid& grid, uint8_t* L) {
  float lo = x[0], hi = x[0];
  for (int i = 1; i < n; ++i) {
    lo = std::min(lo, x[i]);
    hi = std::max(hi, x[i]);
  }
  lo = std::min(lo, 0.0f);  // the offset can only be <= 0
  if (!(hi > lo)) {         // every value equal (and <= 0)
    std::fill(L, L + n, uint8_t(0));
    return AffineFit{0.0f, -lo};
  }
  const DataSums ds = data_sums(x, w, n);
  const float fmax = float(nmax);
  const float range = hi - lo;

  float q[kMaxN], best_q[kMaxN];
  Affine best;
  auto consider = [&](float off, float inv) {
    const Affine r = solve_affine(assign_levels(x, w, n, off, inv, 0.0f, fmax, q), ds);
    if (!r.better_than(best)) return false;
    best = r;
    std::copy(q, q + n, best_q);
    return true;
  };

  consider(lo, fmax / range);
  for (int k = 0; k <= grid.nstep; ++k) consider(lo, (fmax + grid.rmin + grid.rdelta * float(k)) / range);
  // Alternate: nearest levels of the fitted grid, then re-fit.
  for (int it = 0; it < 4 && best.valid; ++it) {
    if (!consider(float(best.b()), float(best.den / best.a_num))) break;
  }

  if (!best.valid) {  // nothing fitted (cannot happen for finite input with hi > lo)
    std::fill(L, L + n, uint8_t(0));
    return AffineFit{0.0f, -lo};
  }
  for (int i = 0; i < n; ++i) L[i] = uint8_t(best_q[i]);
  return AffineFit{float(best.a()), float(-best.b())};
}

float fit_symmetric(const float* x, const float* w, int n, int nmax, uint8_t* L) {
  float max = 0.0f, amax = 0.0f;
  for (int i = 0; i < n; ++i) {
    const float a = std::fabs(x[i]);
    if (a > amax) {
      amax = a;
      max = x[i];
    }
  }
  if (amax < 1e-15f) {
    std::fill(L, L + n, uint8_t(nmax));
    return 0.0f;
  }
  const float fmax = float(nmax);
  float q[kMaxN], best_q[kMaxN];
  double best_scale = 0, best_gain = -1;  // gain = (Σwxq)² / Σwq²: error = Σwx² - gain
  auto consider = [&](float inv) {
    const LevelSums s = assign_levels(x, w, n, 0.0f, inv, -fmax, fmax - 1.0f, q);
    if (!(s.ll > 0)) return false;
    const double gain = s.xl * s.xl / s.ll;
    if (gain <= best_gain) return false;
    best_gain = gain;
    best_scale = s.xl / s.ll;
    std::copy(q, q + n, best_q);
    return true;
  };

  // Candidate steps max / (nmax + 0.4 k): seven points from -1.2 to +1.2 levels
  // around the plain one; with the refinement below this measured as good as
  // a 19-point grid of 0.1 at a third of the cost.
  for (int k = -3; k <= 3; ++k) consider(-(fmax + 0.4f * float(k)) / max);
  for (int it = 0; it < 4 && best_scale != 0; ++it) {
    if (!consider(float(1.0 / best_scale))) break;
  }

  if (best_gain < 0) {
    std::fill(L, L + n, uint8_t(nmax));
    return 0.0f;
  }
  for (int i = 0; i < n; ++i) L[i] = uint8_t(int(best_q[i]) + nmax);
  return float(best_scale);
}

namespace {

// Weighted error of x ≈ scale·q + off over levels q = nearest (lo..hi) of
// (x − off)/scale, from the closed form; the levels are left in q.
double grid_error(const float* x, const float* w, int n, const DataSums& ds, double scale, double off, float lo,
                  float hi, float* q) {
  if (scale == 0) {  // every value decodes to off
    std::fill(q, q + n, lo < 0 ? 0.0f : lo);
    return ds.xx - 2 * off * ds.x + off * off * ds.w;
  }
  const LevelSums s = assign_levels(x, w, n, float(off), float(1.0 / scale), lo, hi, q);
  return ds.xx - 2 * scale * s.xl - 2 * off * ds.x + scale * scale * s.ll + 2 * scale * off * s.l + off * off * ds.w;
}

}  // namespace

void pick_stored_scale_min(const float* x, const float* w, int n, int nmax, float d, float dmin, int& sc, int& m,
                           uint8_t* L) {
  const DataSums ds = data_sums(x, w, n);
  float q[kMaxN], best_q[kMaxN];
  double best = std::numeric_limits<double>::infinity();
  const int sc0 = sc, m0 = m;
  for (int s = std::max(0, sc0 - 1); s <= std::min(63, sc0 + 1); ++s) {
    for (int mm = std::max(0, m0 - 1); mm <= std::min(63, m0 + 1); ++mm) {
      // the decoder computes d·sc and dmin·m in f32: use the same values
      const float scale = d * float(s), off = -(dmin * float(mm));
      const double err = grid_error(x, w, n, ds, scale, off, 0.0f, float(nmax), q);
      if (err < best) {
        best = err;
        sc = s;
        m = mm;
        std::copy(q, q + n, best_q);
      }
    }
  }
  for (int i = 0; i < n; ++i) L[i] = uint8_t(best_q[i]);
}

void pick_stored_scale(const float* x, const float* w, int n, int nmax, float d, int& sc, uint8_t* L) {
  const DataSums ds = data_sums(x, w, n);
  float q[kMaxN], best_q[kMaxN];
  double best = std::numeric_limits<double>::infinity();
  const int sc0 = sc;
  for (int s = std::max(-128, sc0 - 1); s <= std::min(127, sc0 + 1); ++s) {
    const double err = grid_error(x, w, n, ds, d * float(s), 0.0, -float(nmax), float(nmax - 1), q);
    if (err < best) {
      best = err;
      sc = s;
      std::copy(q, q + n, best_q);
    }
  }
  for (int i = 0; i < n; ++i) L[i] = uint8_t(int(best_q[i]) + nmax);
}

}  // namespace fish::qk
