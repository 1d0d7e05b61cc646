// Error-minimising scale searches for one small group of weights (16 or 32
// values), the heart of the K-quant quantisers.
//
// Both fits work the same way: try a short grid of candidate step sizes around
// the plain "range / levels" one; for each, round every value to its nearest
// level, then solve the weighted least-squares problem for the best scale (and
// offset) given those integer levels, in closed form from a few running sums.
// The best candidate is then refined by alternating the two steps (re-round to
// the nearest level of the fitted grid, re-fit) until the error stops falling:
// each half-step can only lower the weighted error, so this converges in a few
// rounds. All of it is O(n) per candidate with small constants.
#pragma once
#include <cstdint>

namespace fish::qk {

// Candidate inverse steps: (nmax + rmin + rdelta * k) / range for k = 0..nstep,
// besides the plain nmax / range.
struct FitGrid {
  float rmin;
  float rdelta;
  int nstep;
};

// x[i] ≈ scale * L[i] - min, L[i] in 0..nmax, scale >= 0, min >= 0 (the K-quant
// formats store a non-negative min that is subtracted). n is a multiple of 4,
// at most 32; w[i] > 0 are the per-value weights of the squared error.
struct AffineFit {
  float scale = 0.0f;
  float min = 0.0f;
};
AffineFit fit_affine(const float* x, const float* w, int n, int nmax, const FitGrid& grid, uint8_t* L);

// x[i] ≈ scale * (L[i] - nmax), L[i] - nmax in -nmax..nmax-1 (the asymmetric
// signed range of Q6_K: the value of largest magnitude takes the -nmax end, so
// the scale carries its sign). n a multiple of 4, at most 32. Returns scale (0
// for an all-zero group, with every L[i] = nmax).
float fit_symmetric(const float* x, const float* w, int n, int nmax, uint8_t* L);

// After the super-scales are fixed: the stored 6-bit scale sc and min m of one
// group (values d·sc·L − dmin·m) chosen among the neighbours (±1 each, 0..63) of
// the rounded ones by the weighted error they actually give, with L re-rounded
// for each; L gets the levels of the winner. Rounding scale/d and min/dmin
// independently is not the best pair once L is re-rounded, and this measured
// ~1% (Q4_K) to 3% (Q5_K) lower error on Gaussian data.
void pick_stored_scale_min(const float* x, const float* w, int n, int nmax, float d, float dmin, int& sc, int& m,
                           uint8_t* L);

// The same for Q6_K's int8 scales (values d·sc·(L − nmax)): sc among its ±1
// neighbours in -128..127.
void pick_stored_scale(const float* x, const float* w, int n, int nmax, float d, int& sc, uint8_t* L);

}  // namespace fish::qk
