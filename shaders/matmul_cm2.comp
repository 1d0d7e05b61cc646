#version 450
// The span's prefill product on workgroup-scope cooperative matrices
// (VK_NV_cooperative_matrix2: the driver stages the tiles through shared
// memory and decodes the weight blocks with the functions below as it loads):
// y[t][r] = Σ_i W[r][i] · x[t][i] for a prompt chunk whose x are f16 rows (XH).
// The same products, bindings, push constants and epilogues as
// matmul_coopmat.comp's span modules (tlc_<T>), which run where the device
// lacks the extension; the host takes these (tl2_<T>) for f16 x only.
//
// Product, as the rows lie in memory: Y' (tokens × rows, = y) = X (tokens × k,
// the f16 rows: operand A) · Wᵀ (k × rows: operand B, W's blocks read through
// a transposing view and the type's decode function). A workgroup of 256
// invocations owns TT tokens × TR rows (grid: x = row tiles, y = token tiles)
// and walks k in steps of BK. Tensor layouts clamp with a constant: loads past
// n_tok / n_rows / n_in give zeros and stores there are dropped, so partial
// tiles cost nothing extra.
//
// A layout's base element must be 16-byte aligned: x, y and the f16 output
// start at the aligned element below their offset, the remainder added to the
// slice's column (the columns below it are never addressed).
//
// Epilogues (EPI, as the span's other products): 0 y = Y', 1 y += Y' (the
// residual: Y' starts from y), 2 y = silu(Y'), 4 y = y · Y' (up onto
// silu(gate)); OH (EPI 4): y · Y' goes as f16 to half index xg_off + y's float
// index, clamped to ±65504 as the x tile's halves are.
//
// SELF (TR 128, BK 64): the weight tile is dequantised by the workgroup
// itself instead, as matmul_coopmat.comp does it (dequant_seg: 32 of a row's
// 64 values per invocation, the next step's loads in flight during the
// product), into shared memory as f16, and the B operand loaded from there:
// a few loads per 32 weights where a decode function costs one call per weight.
//
// Compile-time: TYPE_<T> (Q4_0, Q8_0, Q4_K, Q5_K, Q6_K, F16). Specialisation:
// EPI 0, XPROD 1 (never set: the host keeps x ∘ x2 on matmul_coopmat.comp),
// XH 2 (always set), OH 3, TT 4, TR 5, BK 6, SELF 7.
#extension GL_GOOGLE_include_directive : require
#extension GL_KHR_cooperative_matrix : require
#extension GL_NV_cooperative_matrix2 : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_EXT_shader_explicit_arithmetic_types : require
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_buffer_reference : require

layout(local_size_x = 256) in;

#define FISH_SPAN
#include "matmul_common.glsl"
#include "dequant.glsl"

layout(constant_id = 0) const uint EPI = 0;
layout(constant_id = 1) const bool XPROD = false;
layout(constant_id = 2) const bool XH = true;
layout(constant_id = 3) const bool OH = false;
layout(constant_id = 4) const uint TT = 64;   // tokens per tile
layout(constant_id = 5) const uint TR = 128;  // rows per tile
layout(constant_id = 6) const uint BK = 64;   // k per step
layout(constant_id = 7) const bool SELF = false;
const uint LD4 = (64u + 8u) / 4u;  // SELF: a row of the weight tile in f16vec4 (64 + 8 halves: banks spread)
shared f16vec4 w_sh[SELF ? 128u * LD4 : 1u];

layout(set = 0, binding = 0) readonly restrict buffer WeightHalves { float16_t WH[]; };
layout(set = 0, binding = 1) readonly restrict buffer ArenaXH { float16_t XH16[]; };
layout(set = 0, binding = 3) restrict buffer ArenaYH { float16_t YH[]; };

#define MAT_A coopmat<float16_t, gl_ScopeWorkgroup, TT, BK, gl_MatrixUseA>
#define MAT_B coopmat<float16_t, gl_ScopeWorkgroup, BK, TR, gl_MatrixUseB>
#define MAT_C coopmat<float, gl_ScopeWorkgroup, TT, TR, gl_MatrixUseAccumulator>
#define MAT_CH coopmat<float16_t, gl_ScopeWorkgroup, TT, TR, gl_MatrixUseAccumulator>
#define LAYOUT tensorLayoutNV<2, gl_CooperativeMatrixClampModeConstantNV>

// ---- weight blocks: one struct per block, one decode function per type ------
// (the value at coordInBlock[1] of the block, as the CPU's dequantisation gives it)
#if defined(TYPE_Q4_K)
const uint QK = 256u;
layout(buffer_reference, std430, buffer_reference_align = 16) buffer Block { uint w[36]; };
float16_t decode(const in Block b, const in uint block[2], const in uint at[2]) {
  const uint j = at[1];
  const uvec2 sm = k4_scale_min(j >> 5u, uvec4(b.w[0], b.w[1], b.w[2], b.w[3]));
  const vec2 dm = unpackHalf2x16(b.w[0]);
  const uint byte = 32u * (j >> 6u) + (j & 31u);
  const uint q = (b.w[4u + (byte >> 2u)] >> (8u * (byte & 3u) + 4u * ((j >> 5u) & 1u))) & 15u;
  return float16_t(dm.x * float(sm.x) * float(q) - dm.y * float(sm.y));
}
#elif defined(TYPE_Q5_K)
const uint QK = 256u;
layout(buffer_reference, std430, buffer_reference_align = 16) buffer Block { uint w[44]; };
float16_t decode(const in Block b, const in uint block[2], const in uint at[2]) {
  const uint j = at[1];
  const uvec2 sm = k4_scale_min(j >> 5u, uvec4(b.w[0], b.w[1], b.w[2], b.w[3]));
  const vec2 dm = unpackHalf2x16(b.w[0]);
  const uint l = j & 31u, byte = 32u * (j >> 6u) + l;
  const uint lo = (b.w[12u + (byte >> 2u)] >> (8u * (byte & 3u) + 4u * ((j >> 5u) & 1u))) & 15u;
  const uint hi = (b.w[4u + (l >> 2u)] >> (8u * (l & 3u) + (j >> 5u))) & 1u;
  return float16_t(dm.x * float(sm.x) * float(lo | (hi << 4u)) - dm.y * float(sm.y));
}
#elif defined(TYPE_Q6_K)
// 210 bytes: ql[128], qh[64], scales[16] (int8), d (f16); 2-byte aligned.
const uint QK = 256u;
layout(buffer_reference, std430, buffer_reference_align = 2) buffer Block { uint16_t h[105]; };
uint q6_byte(const in Block b, uint o) { return (uint(b.h[o >> 1u]) >> (8u * (o & 1u))) & 0xFFu; }
float16_t decode(const in Block b, const in uint block[2], const in uint at[2]) {
  const uint j = at[1];
  const uint n = j >> 7u, quarter = (j >> 5u) & 3u, l = j & 31u;
  const uint ql = (q6_byte(b, 64u * n + l + 32u * (quarter & 1u)) >> (4u * (quarter >> 1u))) & 15u;
  const uint qh = (q6_byte(b, 128u + 32u * n + l) >> (2u * quarter)) & 3u;
  const int sc = int(q6_byte(b, 192u + 8u * n + (l >> 4u) + 2u * quarter) << 24u) >> 24;
  const float d = unpackHalf2x16(uint(b.h[104])).x;
  return float16_t(d * float(sc) * float(int(ql | (qh << 4u)) - 32));
}
#elif defined(TYPE_Q8_0)
// 34 bytes: d (f16), 32 int8; 2-byte aligned.
const uint QK = 32u;
layout(buffer_reference, std430, buffer_reference_align = 2) buffer Block { uint16_t h[17]; };
float16_t decode(const in Block b, const in uint block[2], const in uint at[2]) {
  const uint j = at[1];
  const int q = int(uint(b.h[1u + (j >> 1u)]) << (24u - 8u * (j & 1u))) >> 24;
  return float16_t(unpackHalf2x16(uint(b.h[0])).x * float(q));
}
#elif defined(TYPE_Q4_0)
// 18 bytes: d (f16), 16 bytes of nibbles (j < 16: low nibbles, else high); 2-byte aligned.
const uint QK = 32u;
layout(buffer_reference, std430, buffer_reference_align = 2) buffer Block { uint16_t h[9]; };
float16_t decode(const in Block b, const in uint block[2], const in uint at[2]) {
  const uint j = at[1], byte = j & 15u;
  const uint q = (uint(b.h[1u + (byte >> 1u)]) >> (8u * (byte & 1u) + 4u * (j >> 4u))) & 15u;
  return float16_t(unpackHalf2x16(uint(b.h[0])).x * float(int(q) - 8));
}
#elif defined(TYPE_F16)
const uint QK = 1u;
#else
#error "matmul_cm2.comp: no decode function for this type"
#endif

float silu(const in uint r, const in uint c, const in float v) { return v / (1.0 + exp(-v)); }
float times(const in uint r, const in uint c, const in float a, const in float b) { return a * b; }
float clamp_half(const in uint r, const in uint c, const in float v) { return clamp(v, -65504.0, 65504.0); }

// A tokens × columns layout over a buffer of `elem`-byte elements whose rows
// are `stride` elements apart and whose [0][0] is element `off`: base (16-byte
// aligned) and the column where [0][0] lands.
LAYOUT rows_layout(uint off, uint stride, uint n_tok, uint n_cols, uint elem, out uint base, out uint col0) {
  const uint per16 = 16u / elem;
  base = off - off % per16;
  col0 = off % per16;
  LAYOUT t = createTensorLayoutNV(2, gl_CooperativeMatrixClampModeConstantNV);
  t = setTensorLayoutDimensionNV(t, n_tok, col0 + n_cols);
  return setTensorLayoutStrideNV(t, stride, 1);
}

void main() {
  const uint row_base = gl_WorkGroupID.x * TR, tok_base = gl_WorkGroupID.y * TT;

  // x: f16 rows at half index 2 · x_off + t · x_stride.
  uint xb, xc;
  const LAYOUT tx = rows_layout(2u * pc.x_off, pc.x_stride, pc.n_tok, pc.n_in, 2u, xb, xc);
  // W: n_rows rows of n_in values in blocks of QK along the row.
  LAYOUT tw = createTensorLayoutNV(2, gl_CooperativeMatrixClampModeConstantNV);
  tw = setTensorLayoutBlockSizeNV(tw, 1, QK);
  tw = setTensorLayoutDimensionNV(tw, pc.n_rows, pc.n_in);
  const tensorViewNV<2, false, 1, 0> transposed = createTensorViewNV(2, false, 1, 0);
  // y: f32 rows at float index y_off + t · y_stride.
  uint yb, yc;
  const LAYOUT ty = rows_layout(pc.y_off, pc.y_stride, pc.n_tok, pc.n_rows, 4u, yb, yc);
  const LAYOUT ty_tile = sliceTensorLayoutNV(ty, tok_base, TT, yc + row_base, TR);

  MAT_C acc;
  if (EPI == 1u) coopMatLoadTensorNV(acc, Y, yb, ty_tile);
  else acc = MAT_C(0.0);

  if (SELF) {
    // Row tid / 2 of the tile (clamped: rows past n_rows are never stored), half tid % 2 of the step.
    const uint tid = gl_LocalInvocationID.x, w_r = tid >> 1u, h = tid & 1u;
    const uint w_row = min(row_base + w_r, pc.n_rows - 1u);
    vec4 wa[4], wb[4];
    dequant_seg(w_row, 0u, h, wa, wb);
    for (uint k0 = 0u; k0 < pc.n_in; k0 += 64u) {
      for (uint j = 0u; j < 4u; ++j)
        w_sh[w_r * LD4 + 4u * h + j] = f16vec4(clamp(wa[j], vec4(-65504.0), vec4(65504.0))),
        w_sh[w_r * LD4 + 8u + 4u * h + j] = f16vec4(clamp(wb[j], vec4(-65504.0), vec4(65504.0)));
      barrier();
      if (k0 + 64u < pc.n_in) dequant_seg(w_row, k0 + 64u, h, wa, wb);  // in flight during the product
      coopmat<float16_t, gl_ScopeWorkgroup, TT, 64, gl_MatrixUseA> a;
      coopmat<float16_t, gl_ScopeWorkgroup, 64, 128, gl_MatrixUseB> b;
      coopMatLoadTensorNV(a, XH16, xb, sliceTensorLayoutNV(tx, tok_base, TT, xc + k0, 64u));
      coopMatLoad(b, w_sh, 0, LD4, gl_CooperativeMatrixLayoutColumnMajor);
      acc = coopMatMulAdd(a, b, acc);
      barrier();
    }
  } else {
    for (uint k0 = 0u; k0 < pc.n_in; k0 += BK) {
      MAT_A a;
      MAT_B b;
      coopMatLoadTensorNV(a, XH16, xb, sliceTensorLayoutNV(tx, tok_base, TT, xc + k0, BK));
#if defined(TYPE_F16)
      coopMatLoadTensorNV(b, WH, 0, sliceTensorLayoutNV(tw, row_base, TR, k0, BK), transposed);
#else
      coopMatLoadTensorNV(b, W, 0, sliceTensorLayoutNV(tw, row_base, TR, k0, BK), transposed, decode);
#endif
      acc = coopMatMulAdd(a, b, acc);
    }
  }

  if (EPI == 2u) coopMatPerElementNV(acc, acc, silu);
  if (EPI == 4u) {
    MAT_C v;
    coopMatLoadTensorNV(v, Y, yb, ty_tile);
    coopMatPerElementNV(acc, acc, times, v);
  }
  if (OH) {  // y · Y' as f16 at half index xg_off + y's float index
    coopMatPerElementNV(acc, acc, clamp_half);
    const MAT_CH h = MAT_CH(acc);
    uint hb, hc;
    const LAYOUT th = rows_layout(pc.xg_off + pc.y_off, pc.y_stride, pc.n_tok, pc.n_rows, 2u, hb, hc);
    coopMatStoreTensorNV(h, YH, hb, sliceTensorLayoutNV(th, tok_base, TT, hc + row_base, TR));
  } else {
    coopMatStoreTensorNV(acc, Y, yb, ty_tile);
  }
}
