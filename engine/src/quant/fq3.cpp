// FQ3, fish's 3-bit layout for re-quantised device copies (blocks.h BlockFQ3,
// plugin_abi.h FISH_TYPE_FQ3): the CPU decoder every device kernel is checked
// against, and the quantiser of online re-quantisation.
//
// Decode: (d·sc_g)·q − (dmin·m_g) with both products formed in f32 (each is
// exact: an 11-bit f16 mantissa times a 6-bit scale times a 3-bit q) and one
// rounded subtraction, so a decoder that follows the layout reproduces
// ../shared/reference/fq3 to the bit, and a fused multiply-subtract gives the
// same result (the product it skips rounding is exact).
//
// Encode: the affine K fit of affine_block.h with 8 levels (q in 0..7), then
// the codes scattered into the A/B/C words.
#include <cstring>

#include "common/fp16.h"
#include "quant/affine_block.h"
#include "quant/blocks.h"
#include "quant/k_scales.h"
#include "quant/quant_kernels.h"

namespace fish::qk {
namespace {

uint32_t load_le32(const uint8_t* p) {
  return uint32_t(p[0]) | (uint32_t(p[1]) << 8) | (uint32_t(p[2]) << 16) | (uint32_t(p[3]) << 24);
}
void store_le32(uint8_t* p, uint32_t v) {
  p[0] = uint8_t(v);
  p[1] = uint8_t(v >> 8);
  p[2] = uint8_t(v >> 16);
  p[3] = uint8_t(v >> 24);
}

}  // namespace

void fq3_group_codes(const uint8_t* words, uint8_t q[FQ3_GROUP]) {
  const uint32_t A = load_le32(words), B = load_le32(words + 4), C = load_le32(words + 8);
  for (int s = 0; s < 8; ++s) {
    const uint32_t lo = (s < 4 ? A : B) >> (2 * (s & 3));
    const uint32_t hi = C >> s;
    for (int t = 0; t < 4; ++t) q[4 * s + t] = uint8_t(((lo >> (8 * t)) & 3) | (((hi >> (8 * t)) & 1) << 2));
  }
}

void fq3_pack_group(const uint8_t q[FQ3_GROUP], uint8_t* words) {
  uint32_t A = 0, B = 0, C = 0;
  for (int s = 0; s < 8; ++s) {
    for (int t = 0; t < 4; ++t) {
      const uint32_t v = q[4 * s + t];
      (s < 4 ? A : B) |= (v & 3) << (2 * (s & 3) + 8 * t);
      C |= ((v >> 2) & 1) << (s + 8 * t);
    }
  }
  store_le32(words, A);
  store_le32(words + 4, B);
  store_le32(words + 8, C);
}

void dequant_fq3(const void* src, float* __restrict dst, int64_t nb) {
  const BlockFQ3* b = static_cast<const BlockFQ3*>(src);
  for (int64_t i = 0; i < nb; ++i) {
    const float d = fp16_to_fp32(b[i].d);
    const float dmin = fp16_to_fp32(b[i].dmin);
    uint8_t sc[8], m[8];
    unpack_scale_min_k4(b[i].scales, sc, m);
    for (int g = 0; g < 8; ++g) {
      uint8_t q[FQ3_GROUP];
      fq3_group_codes(b[i].qs + 12 * g, q);
      const float dl = d * float(sc[g]), ml = dmin * float(m[g]);
      for (int l = 0; l < FQ3_GROUP; ++l) dst[l] = dl * float(q[l]) - ml;
      dst += FQ3_GROUP;
    }
  }
}

void quantize_fq3(const float* x, void* dst, int64_t nb) {
  BlockFQ3* b = static_cast<BlockFQ3*>(dst);
  AffineBlock blk;
  for (int64_t i = 0; i < nb; ++i, x += QK_K) {
    quantize_affine_block(x, kRequantFQ3, blk);
    b[i].d = blk.d;
    b[i].dmin = blk.dmin;
    std::memcpy(b[i].scales, blk.scales, K_SCALE_SIZE);
    for (int g = 0; g < 8; ++g) fq3_pack_group(blk.L + FQ3_GROUP * g, b[i].qs + 12 * g);
  }
}

}  // namespace fish::qk
