// f32 -> Q4_K, Q5_K, Q6_K: the quantisers that make fish's own model files
// (`fish synth`, `fish quantize`), so they fit scales properly instead of
// rounding to the nearest level of a min/max grid.
//
// Every value gets the error weight rms(group) + |x|: large weights matter more
// to a matmul than small ones, without letting the largest dominate.
//
// Q4_K / Q5_K (x ≈ d·sc_j·q − dmin·m_j, q in 0..15 / 0..31, 8 groups of 32):
//   1. each group: (scale_j, min_j) by fit_affine (grid of candidate steps +
//      weighted least squares + refinement, see kquant_fit.h);
//   2. the super-scales: d = f16(max scale_j / 63), dmin = f16(max min_j / 63);
//   3. each group: the 6-bit (sc_j, m_j) around (scale_j / d, min_j / dmin),
//      d and dmin being the f16 values actually stored, chosen by the error they
//      give with every q re-rounded to the stored grid (pick_stored_scale_min).
// Q6_K (x ≈ d·sc_j·(q − 32), q in 0..63, 16 groups of 16, int8 sc_j):
//   1. each group: scale_j by fit_symmetric;
//   2. d = f16(max_scale / −128) where max_scale is the scale of largest
//      magnitude (so that group stores about −128);
//   3. each group: the int8 sc_j around scale_j / d by the error it gives, q
//      re-rounded (pick_stored_scale).
#include <algorithm>
#include <cmath>
#include <cstring>

#include "common/fp16.h"
#include "quant/affine_block.h"
#include "quant/blocks.h"
#include "quant/kquant_fit.h"
#include "quant/quant_kernels.h"
#include "quant/rounding.h"

namespace fish::qk {
namespace {

int clampi(int v, int lo, int hi) { return v < lo ? lo : (v > hi ? hi : v); }

// Error weights of a group of N values: rms + |x|.
template <int N>
void group_weights(const float* x, float* w) {
  float sum_x2 = 0.0f;
  for (int i = 0; i < N; ++i) sum_x2 += x[i] * x[i];
  const float rms = std::sqrt(sum_x2 / N);
  for (int i = 0; i < N; ++i) w[i] = rms + std::fabs(x[i]);
}

// The model-file quantisers try hard (a 21 / 16-point grid and the neighbour
// search): they run once per file, and the error is what every user of the
// file pays.
constexpr AffineParams kQ4K{15, FitGrid{-1.0f, 0.1f, 20}, true, true};
constexpr AffineParams kQ5K{31, FitGrid{-0.5f, 0.1f, 15}, true, true};

void quantize_q4_k_with(const float* x, BlockQ4_K* b, int64_t nb, const AffineParams& p) {
  AffineBlock blk;
  for (int64_t i = 0; i < nb; ++i, x += QK_K) {
    quantize_affine_block(x, p, blk);
    b[i].d = blk.d;
    b[i].dmin = blk.dmin;
    std::memcpy(b[i].scales, blk.scales, K_SCALE_SIZE);
    // chunk c (64 values): qs[32c + l] = q[64c + l] | q[64c + 32 + l] << 4
    for (int c = 0; c < 4; ++c)
      for (int l = 0; l < 32; ++l)
        b[i].qs[32 * c + l] = uint8_t(blk.L[64 * c + l] | (blk.L[64 * c + 32 + l] << 4));
  }
}

}  // namespace

void quantize_q4_k(const float* x, void* dst, int64_t nb) {
  quantize_q4_k_with(x, static_cast<BlockQ4_K*>(dst), nb, kQ4K);
}

void quantize_q4_k_requant(const float* x, void* dst, int64_t nb) {
  quantize_q4_k_with(x, static_cast<BlockQ4_K*>(dst), nb, kRequantQ4K);
}

void quantize_q5_k(const float* x, void* dst, int64_t nb) {
  BlockQ5_K* b = static_cast<BlockQ5_K*>(dst);
  AffineBlock blk;
  for (int64_t i = 0; i < nb; ++i, x += QK_K) {
    quantize_affine_block(x, kQ5K, blk);
    b[i].d = blk.d;
    b[i].dmin = blk.dmin;
    std::memcpy(b[i].scales, blk.scales, K_SCALE_SIZE);
    // as Q4_K for the low nibbles; bit 4 of q[64c + l] -> bit 2c of qh[l],
    // bit 4 of q[64c + 32 + l] -> bit 2c + 1 of qh[l].
    std::memset(b[i].qh, 0, sizeof(b[i].qh));
    for (int c = 0; c < 4; ++c) {
      for (int l = 0; l < 32; ++l) {
        const int q1 = blk.L[64 * c + l], q2 = blk.L[64 * c + 32 + l];
        b[i].qs[32 * c + l] = uint8_t((q1 & 15) | ((q2 & 15) << 4));
        b[i].qh[l] = uint8_t(b[i].qh[l] | ((q1 >> 4) << (2 * c)) | ((q2 >> 4) << (2 * c + 1)));
      }
    }
  }
}

void quantize_q6_k(const float* x, void* dst, int64_t nb) {
  constexpr int kG = 16, kNG = QK_K / kG;
  BlockQ6_K* b = static_cast<BlockQ6_K*>(dst);
  uint8_t L[QK_K];
  float scale[kNG], w[QK_K];
  for (int64_t i = 0; i < nb; ++i, x += QK_K) {
    float max_scale = 0.0f, max_abs = 0.0f;
    for (int j = 0; j < kNG; ++j) {
      group_weights<kG>(x + kG * j, w + kG * j);
      scale[j] = fit_symmetric(x + kG * j, w + kG * j, kG, 32, L + kG * j);
      if (std::fabs(scale[j]) > max_abs) {
        max_abs = std::fabs(scale[j]);
        max_scale = scale[j];
      }
    }
    std::memset(&b[i], 0, sizeof(BlockQ6_K));
    if (max_abs < 1e-15f) continue;  // all zero: d = 0 and q = 0 (decodes to 0)

    b[i].d = fp32_to_fp16(max_scale / -128.0f);
    const float d = fp16_to_fp32(b[i].d);
    for (int j = 0; j < kNG; ++j) {
      int s = d != 0.0f ? clampi(round_half_even(scale[j] / d), -128, 127) : 0;
      pick_stored_scale(x + kG * j, w + kG * j, kG, 32, d, s, L + kG * j);
      b[i].scales[j] = int8_t(s);
    }
    // half h, quarter r: element 128h + 32r + l (l < 32) -> low nibble in
    // ql[64h + l + 32 (r & 1)] (high half of the byte when r >= 2), top two
    // bits at 2r of qh[32h + l].
    for (int h = 0; h < 2; ++h) {
      const uint8_t* Lh = L + 128 * h;
      for (int l = 0; l < 32; ++l) {
        b[i].ql[64 * h + l] = uint8_t((Lh[l] & 15) | ((Lh[64 + l] & 15) << 4));
        b[i].ql[64 * h + 32 + l] = uint8_t((Lh[32 + l] & 15) | ((Lh[96 + l] & 15) << 4));
        b[i].qh[32 * h + l] =
            uint8_t((Lh[l] >> 4) | ((Lh[32 + l] >> 4) << 2) | ((Lh[64 + l] >> 4) << 4) | ((Lh[96 + l] >> 4) << 6));
      }
    }
  }
}

}  // namespace fish::qk
