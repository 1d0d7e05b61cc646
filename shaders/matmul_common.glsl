// Shared declarations of the matmul kernels (matvec.comp, matmul_tiled.comp):
// bindings, push constants and the bit tricks that turn packed quants into floats.
//
// y = x · Wᵀ for one weight chunk: W holds n_rows rows of n_in elements in GGUF
// layout (row r at byte r * row_bytes), x is [n_tok, x_stride] f32 starting at
// float x_off, y is [n_tok, y_stride] f32 and this chunk writes columns
// y_off .. y_off + n_rows - 1 of every token row.
//
// Weights are bound as plain 32-bit words (and, aliased on the same binding, as
// uvec4 for the block types whose blocks are 16-byte aligned): no 8/16-bit
// storage feature is needed, bytes come out with shifts.

layout(set = 0, binding = 0) readonly restrict buffer WeightWords { uint W[]; };
layout(set = 0, binding = 0) readonly restrict buffer WeightVec4 { uvec4 W4[]; };
#ifdef TYPE_FQ3
// FQ3's matvec units read 24 bytes at 8-byte alignment (fq3_pair): one uvec4 and one uvec2.
layout(set = 0, binding = 0) readonly restrict buffer WeightVec2 { uvec2 W2[]; };
#endif
#ifndef FISH_SPAN
layout(set = 0, binding = 1) readonly restrict buffer InputX { float X[]; };
layout(set = 0, binding = 1) readonly restrict buffer InputX4 { vec4 X4[]; };
layout(set = 0, binding = 2) writeonly restrict buffer OutputY { float Y[]; };
#ifdef FISH_INT8
// The int8 matvec reads x as quantize_x.comp wrote it (matvec_units_i8.glsl).
layout(set = 0, binding = 1) readonly restrict buffer InputQ { uint XQ[]; };
layout(set = 0, binding = 1) readonly restrict buffer InputQ4 { uvec4 XQ4[]; };
#endif
#else
// Span variant (FISH_SPAN): x and y are regions of the span's arena, bound
// twice (1: read-only x, 3: y, read-write for the residual add). A dispatch
// never reads and writes the same region, so both may be `restrict` (which
// lets the compiler keep x loads on the read-only path). Binding 2 holds the
// span's f32 parameters (norm weights).
layout(set = 0, binding = 1) readonly restrict buffer ArenaX { float X[]; };
layout(set = 0, binding = 1) readonly restrict buffer ArenaX4 { vec4 X4[]; };
layout(set = 0, binding = 2) readonly restrict buffer ParamsF { float P[]; };
layout(set = 0, binding = 2) readonly restrict buffer ParamsF4 { vec4 P4[]; };
layout(set = 0, binding = 3) restrict buffer ArenaY { float Y[]; };
#ifdef FISH_INT8
layout(set = 0, binding = 1) readonly restrict buffer ArenaQ { uint XQ[]; };
layout(set = 0, binding = 1) readonly restrict buffer ArenaQ4 { uvec4 XQ4[]; };
#endif
// Binding 5: the second weight of a PAIR dispatch (matvec_span.comp; the host
// binds the first weight again otherwise).
layout(set = 0, binding = 5) readonly restrict buffer WeightWordsB { uint WB[]; };
layout(set = 0, binding = 5) readonly restrict buffer WeightVec4B { uvec4 WB4[]; };
#ifdef TYPE_FQ3
layout(set = 0, binding = 5) readonly restrict buffer WeightVec2B { uvec2 WB2[]; };
#endif
#endif

layout(push_constant) uniform MatmulParams {
  uint n_in;      // elements per weight row (and per x row)
  uint n_rows;    // rows of this weight chunk
  uint n_tok;     // token rows of x / y
  uint x_stride;  // floats between consecutive token rows of x
  uint x_off;     // float index of x[0][0] in X
  uint y_stride;  // floats between consecutive token rows of y
  uint y_off;     // float index of y[0][first row of this chunk] in Y
#ifdef FISH_SPAN
  uint inv_in;    // float index of NT per-token scales of x (1/rms of its norm), or 0xFFFFFFFF: 1
  float eps;      // EPI 3: rms epsilon
  uint x2_off;    // XPROD: float index of the second factor's [0][0] (same stride as x)
  uint norm_off;  // EPI 3: P index of the next rmsnorm's weights [n_rows]
  uint xg_off;    // EPI 3: where y ∘ those weights go (same stride as y)
  uint sq_off;    // EPI 3: float index of the [NT][row groups] Σy² partials
  uint inv_parts; // 0: inv_in holds 1/rms per token; n: inv_in holds [NT][n] Σx² partials (the
                  // producer's row groups), 1/rms = 1/sqrt(Σ/n_in + eps) is computed here
  uint q_out;     // QOUT (matvec_span.comp): word index of the output's B32 row
  uint q_stride;  // QOUT: words between two tokens' rows
  uint rt_part;   // ROUTER (matvec_span.comp): float index of the [row groups][n_expert] partial logits
  uint rt_logits; // ROUTER: float index of the n_expert logits
  uint rt_route;  // ROUTER: word index of the pairs' words (expert, weight)
  uint rt_cnt;    // ROUTER: word index of the arrival counter (0 between dispatches)
  uint rt_n_expert;
  uint rt_k;      // ROUTER: k | 0x10000 (renormalise the k weights)
#endif
#ifdef FISH_MOE
  uint route_off; // moe_route.comp's words in the arena (moe_common.glsl)
  uint n_expert;
  uint k;         // experts per token
  uint flags;     // 1 = renormalise the k weights (moe_route); 2 = moe_matvec ROUTE: pairs whose words are written
  uint cnt_off;   // moe_matvec SUM with QOUT: word index of the B32 blocks' arrival counters (0 between dispatches)
#endif
} pc;

// ---- unaligned reads --------------------------------------------------------
// Blocks whose size is not a multiple of 4 bytes (Q4_0: 18, Q8_0: 34, Q6_K: 210)
// are still 2-byte aligned, so a field is either word-aligned or starts in the
// middle of a word: two neighbouring words are then funnel-shifted by 16 bits
// (one byte-permute instruction on most GPUs). `odd` = the offset is 2 mod 4.
uint funnel16(uint lo, uint hi, bool odd) { return odd ? (lo >> 16) | (hi << 16) : lo; }

// Eight bytes at byte offset o (o even): three word reads.
uvec2 load_bytes8(uint o) {
  const uint w = o >> 2;
  const bool odd = (o & 2u) != 0u;
  const uint a = W[w], b = W[w + 1u], c = W[w + 2u];
  return uvec2(funnel16(a, b, odd), funnel16(b, c, odd));
}

// Sixteen bytes from the five words that hold them, the first at byte 2 of
// its word where odd (a run at an even offset: funnel16 per word pair).
uvec4 funnel_run(uint w[5], bool odd) {
  return uvec4(funnel16(w[0], w[1], odd), funnel16(w[1], w[2], odd), funnel16(w[2], w[3], odd), funnel16(w[3], w[4], odd));
}

// The 16-bit half at byte offset o (o even).
uint load_half(uint o) { return (W[o >> 2] >> ((o & 2u) * 8u)) & 0xFFFFu; }

float half_to_float(uint h) { return unpackHalf2x16(h).x; }

// ---- packed integers to floats without conversion instructions --------------
// Integer-to-float conversions run at a quarter of the FMA rate on most GPUs, so
// the quants are turned into floats by writing them into the mantissa of a
// constant: with exponent field 126, 0x3F000000 | (q << 16) is 0.5 + q/256 for
// 0 <= q < 128 (0.5 + q/32 for a nibble at bits 19..22). The dot
// product is then recovered from Σf·x and Σx:  Σq·x = 256·Σf·x - 128·Σx
// (32·Σf·x - 16·Σx for high nibbles). The subtraction happens per block of 16..32 values, so
// the cancellation costs ~8 bits of f32 precision: far inside the 1e-3 bound.
const uint F_HALF = 0x3F000000u;

// Bytes 0..3 of v (each < 128) as 0.5 + b/256.
vec4 bytes_f(uint v) {
  return uintBitsToFloat(uvec4((v << 16) & 0x00FF0000u, (v << 8) & 0x00FF0000u, v & 0x00FF0000u,
                               (v >> 8) & 0x00FF0000u) | F_HALF);
}
// Low nibbles of bytes 0..3 of v as 0.5 + q/256.
vec4 nib_lo_f(uint v) {
  return uintBitsToFloat(uvec4((v << 16) & 0x000F0000u, (v << 8) & 0x000F0000u, v & 0x000F0000u,
                               (v >> 8) & 0x000F0000u) | F_HALF);
}
// High nibbles of bytes 0..3 of v as 0.5 + q/32 (moved to bits 19..22: bit 23
// is the exponent's lowest bit).
vec4 nib_hi_f(uint v) {
  const uint h = v >> 1;
  return uintBitsToFloat(uvec4((h << 16) & 0x00780000u, (h << 8) & 0x00780000u, h & 0x00780000u,
                               (h >> 8) & 0x00780000u) | F_HALF);
}
// Signed bytes 0..3 of v as 1 + (b + 128)/256 (bits 15..22 of the mantissa, so
// all 256 values fit): Σb·x = 256·Σf·x - 384·Σx.
vec4 sbytes_f(uint v) {
  v ^= 0x80808080u;
  return uintBitsToFloat(uvec4((v << 15) & 0x007F8000u, (v << 7) & 0x007F8000u, (v >> 1) & 0x007F8000u,
                               (v >> 9) & 0x007F8000u) | 0x3F800000u);
}

// Byte k (0..3) of v.
uint byte_of(uint v, uint k) { return (v >> (8u * k)) & 0xFFu; }

// The signed byte at byte offset o.
int load_sbyte(uint o) { return bitfieldExtract(int(W[o >> 2]), int((o & 3u) * 8u), 8); }

// Q4_K / Q5_K / FQ3: the 6-bit scale (x) and min (y) of group s (0..7) from a block's
// first 16 bytes hd (hd.x = d | dmin << 16, hd.yzw = the 12 packed scale bytes
// q[0..11]): s < 4: q[s] & 63, q[s+4] & 63; s >= 4: the low/high nibble of
// q[s+4] with the top two bits of q[s-4] / q[s] above it.
uvec2 k4_scale_min(uint s, uvec4 hd) {
  const uint k = 8u * (s & 3u);
  const uint a = (hd.y >> k) & 0xFFu, b = (hd.z >> k) & 0xFFu, c = (hd.w >> k) & 0xFFu;
  // Both forms, then a select: lanes of one subgroup take both branches.
  const uvec2 low = uvec2(a & 63u, b & 63u);
  const uvec2 high = uvec2((c & 15u) | ((a >> 6) << 4), (c >> 4) | ((b >> 6) << 4));
  return s < 4u ? low : high;
}

#ifdef TYPE_FQ3
#include "fq3_codes.glsl"
#endif
