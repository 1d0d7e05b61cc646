// ggml's block layouts, byte for byte (facts of the GGUF format). Halves are
// IEEE fp16 bit patterns (fp16.h). QK_K = 256 (common/ggml_type.h).
#pragma once
#include <cstdint>

#include "common/ggml_type.h"

namespace fish {

constexpr int QK4_0 = 32, QK4_1 = 32, QK5_0 = 32, QK5_1 = 32, QK8_0 = 32, QK8_1 = 32;
constexpr int K_SCALE_SIZE = 12;

// x[j] = (q[j] - 8) * d; qs[j] holds element j (low nibble) and j + 16 (high).
struct BlockQ4_0 { uint16_t d; uint8_t qs[QK4_0 / 2]; };
// x[j] = q[j] * d + m
struct BlockQ4_1 { uint16_t d; uint16_t m; uint8_t qs[QK4_1 / 2]; };
// 5-bit: low 4 bits as Q4_0, bit 4 of element j in bit j of qh (u32 LE); x = (q - 16) * d
struct BlockQ5_0 { uint16_t d; uint8_t qh[4]; uint8_t qs[QK5_0 / 2]; };
// x = q * d + m
struct BlockQ5_1 { uint16_t d; uint16_t m; uint8_t qh[4]; uint8_t qs[QK5_1 / 2]; };
// x = q * d
struct BlockQ8_0 { uint16_t d; int8_t qs[QK8_0]; };
// activations: s = d * Σ qs
struct BlockQ8_1 { uint16_t d; uint16_t s; int8_t qs[QK8_1]; };

// 2-bit super-block: 16 groups of 16; scales[i] = (min4 << 4) | scale4.
struct BlockQ2_K { uint8_t scales[QK_K / 16]; uint8_t qs[QK_K / 4]; uint16_t d; uint16_t dmin; };
// 3-bit: low 2 bits in qs, high bit in hmask; 16 6-bit signed scales packed in 12 bytes.
struct BlockQ3_K { uint8_t hmask[QK_K / 8]; uint8_t qs[QK_K / 4]; uint8_t scales[12]; uint16_t d; };
// 4-bit: 8 groups of 32, 6-bit scale and min per group packed in 12 bytes.
struct BlockQ4_K { uint16_t d; uint16_t dmin; uint8_t scales[K_SCALE_SIZE]; uint8_t qs[QK_K / 2]; };
// 5-bit: as Q4_K plus one high bit per element in qh.
struct BlockQ5_K { uint16_t d; uint16_t dmin; uint8_t scales[K_SCALE_SIZE]; uint8_t qh[QK_K / 8]; uint8_t qs[QK_K / 2]; };
// 6-bit: low 4 bits in ql, high 2 in qh, 16 int8 scales; x = d * scale * (q - 32).
struct BlockQ6_K { uint8_t ql[QK_K / 2]; uint8_t qh[QK_K / 4]; int8_t scales[QK_K / 16]; uint16_t d; };
// activations for the K-quants: f32 scale, bsums[i] = Σ qs[16i .. 16i+15].
struct BlockQ8_K { float d; int8_t qs[QK_K]; int16_t bsums[QK_K / 16]; };

// fish's own 3-bit layout (GgmlType::FQ3, plugin_abi.h FISH_TYPE_FQ3), the
// device copy of online re-quantisation: Q4_K's header (d, dmin, the 12-byte
// 6-bit scale/min packing: group g's pair as Q4_K's sub-block g), then per
// 32-value group g three little-endian u32 words A, B, C at qs[12g]. Value
// 4s + t of the group (s = 0..7, byte lane t = 0..3) has the 3-bit code
//   q = (((s < 4 ? A : B) >> (2 (s & 3) + 8 t)) & 3) | (((C >> (s + 8 t)) & 1) << 2)
// and the value (d·sc_g)·q − (dmin·m_g). The bit order is the shader's: one
// mask of A or B and one of C give the four codes of s as the four bytes of
// one word (unpackUnorm4x8).
constexpr int FQ3_GROUP = 32;
struct BlockFQ3 { uint16_t d; uint16_t dmin; uint8_t scales[K_SCALE_SIZE]; uint8_t qs[3 * 4 * (QK_K / FQ3_GROUP)]; };

static_assert(sizeof(BlockQ4_0) == 18 && sizeof(BlockQ4_1) == 20 && sizeof(BlockQ5_0) == 22 &&
              sizeof(BlockQ5_1) == 24 && sizeof(BlockQ8_0) == 34 && sizeof(BlockQ8_1) == 36);
static_assert(sizeof(BlockQ2_K) == 84 && sizeof(BlockQ3_K) == 110 && sizeof(BlockQ4_K) == 144 &&
              sizeof(BlockQ5_K) == 176 && sizeof(BlockQ6_K) == 210 && sizeof(BlockQ8_K) == 292);
static_assert(sizeof(BlockFQ3) == 112);

// The 6-bit scale j and min j (j = 0..7) of a Q4_K / Q5_K super-block.
inline void get_scale_min_k4(int j, const uint8_t* q, uint8_t* sc, uint8_t* m) {
  if (j < 4) {
    *sc = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *sc = uint8_t((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
    *m = uint8_t((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
  }
}

}  // namespace fish
