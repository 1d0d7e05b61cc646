// FQ3, fish's 3-bit layout for re-quantised device copies (plugin_abi.h
// FISH_TYPE_FQ3; the CPU decoder is engine/src/quant/fq3.cpp): 256 values in
// a 112-byte block = 7 uvec4, 16-byte aligned like Q4_K's 144-byte blocks:
//   uvec4 0        d | dmin << 16, then Q4_K's 12 packed scale/min bytes
//                  (group g's 6-bit scale and min: k4_scale_min(g, ...))
//   bytes 16 + 12g group g's (g = 0..7, 32 values) little-endian words A, B, C
// Value 4s + t of a group (run s = 0..7, byte lane t = 0..3) has the code
//   q = (((s < 4 ? A : B) >> (2(s & 3) + 8t)) & 3) | ((((C >> (s + 8t)) & 1) << 2)
// and the value (d·sc_g)·q - dmin·m_g.
//
// So the four codes of a run come out as the four bytes of one word with two
// masks: bits 2(s & 3) .. +1 of every byte of A (or B) shifted to bits 0..1,
// bit s of every byte of C shifted to bit 2. Bytes 0..7 then feed sdot4 (int8
// x) as they are, or become floats (u8x4, code3_f).
// Included by matmul_common.glsl with TYPE_FQ3.

const uint FQ3_V4 = 7u;  // uvec4 per block

// Run s's four codes, one per byte, from the group's A or B word (ab: A for
// s < 4, else B) and its C word. s may vary per invocation.
uint fq3_run(uint ab, uint c, uint s) {
  const uint hi = s < 2u ? c << (2u - s) : c >> (s - 2u);
  return ((ab >> (2u * (s & 3u))) & 0x03030303u) | (hi & 0x04040404u);
}

// All eight runs of a group (w = its words A, B, C): lo = runs 0..3 (values
// 0..15, one word per run), hi = runs 4..7 (values 16..31).
void fq3_group(uvec3 w, out uvec4 lo, out uvec4 hi) {
  const uvec4 sh = uvec4(0u, 2u, 4u, 6u);
  // C << 2 drops C's bits 30..31, which only runs 6 and 7 read (from C >> 4, C >> 5).
  lo = ((uvec4(w.x) >> sh) & 0x03030303u) | ((uvec4(w.z << 2) >> uvec4(0u, 1u, 2u, 3u)) & 0x04040404u);
  hi = ((uvec4(w.y) >> sh) & 0x03030303u) | ((uvec4(w.z) >> uvec4(2u, 3u, 4u, 5u)) & 0x04040404u);
}

// The codes (bytes 0..3 of v, each < 8) as 0.5 + q/16 (moved to the top
// mantissa bits 20..22 of 0.5: no conversion instruction, and the least
// cancellation in Σ q·x = 16·Σ f·x - 8·Σ x).
vec4 code3_f(uint v) {
  return uintBitsToFloat(uvec4((v << 20) & 0x00700000u, (v << 12) & 0x00700000u, (v << 4) & 0x00700000u,
                               (v >> 4) & 0x00700000u) | F_HALF);
}
