// One 256-value super-block of an affine K layout (Q4_K, Q5_K, FQ3): values
// d·sc_j·q − dmin·m_j, 8 groups of 32 with 6-bit (sc_j, m_j) under f16 super-
// scales d and dmin, q in 0..nmax. The fit is the same for all three; what
// differs is the level count and how hard the per-group search tries:
//   1. each group: (scale_j, min_j) by fit_affine (kquant_fit.h): candidate
//      steps, weighted least squares in closed form, refinement;
//   2. the super-scales: d = f16(max scale_j / 63), dmin = f16(max min_j / 63);
//   3. each group: the 6-bit (sc_j, m_j) around (scale_j / d, min_j / dmin),
//      d and dmin being the stored f16 values, either chosen among the ±1
//      neighbours by the error they give (pick_stored_scale_min) or rounded,
//      the levels re-rounded to the stored grid either way.
#pragma once
#include <cstdint>

#include "quant/blocks.h"
#include "quant/kquant_fit.h"

namespace fish::qk {

struct AffineParams {
  int nmax;                 // largest level: 15 (Q4_K), 31 (Q5_K), 7 (FQ3)
  FitGrid grid;             // candidate steps of step 1
  bool weighted;            // error weights rms(group) + |x| (else every value 1)
  bool pick_neighbours;     // step 3 searches the ±1 neighbours (else plain rounding)
};

// The fitted block: f16 super-scales, the packed 6-bit scales/mins (Q4_K's
// 12-byte layout) and the level of every value.
struct AffineBlock {
  uint16_t d = 0, dmin = 0;
  uint8_t scales[K_SCALE_SIZE] = {};
  uint8_t L[QK_K] = {};
};

// Online re-quantisation (FQ3, and Q6_K / Q5_K -> Q4_K for a device copy)
// runs at every load the cache does not serve, within ~1.5 ns per weight on
// 16 threads, so it searches less than the model-file quantisers: 5 candidate
// steps (nmax ± 0.25, ± 0.75, and nmax itself) + refinement, plain rounding of
// the 6-bit scales, and unweighted error (the relative RMS it is judged by).
// Measured on one core (tests/quant data: TinyStories' trained weights through
// Q4_K / Q6_K, and synth-tiny's Q4_K / Q6_K matrices), relative RMS against
// the source / ns per weight:
//   FQ3:  13.67% / 10.5 ns   (the file quantiser's search: 13.62% / 34 ns;
//         with the neighbour search: 13.62% / 18 ns)
//   Q4_K:  7.11% / 11.6 ns   (file quantiser's search: 6.98-7.04% / 35 ns)
constexpr AffineParams kRequantFQ3{7, FitGrid{-0.75f, 0.5f, 3}, false, false};
constexpr AffineParams kRequantQ4K{15, FitGrid{-0.75f, 0.5f, 3}, false, false};

// x: 256 finite values.
void quantize_affine_block(const float* x, const AffineParams& p, AffineBlock& out);

}  // namespace fish::qk
