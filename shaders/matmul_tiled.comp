#version 450
// Tiled matrix product for prefill (n_tok > 4): y[t][r] = Σ_i W[r][i] · x[t][i].
//
// A workgroup of 256 invocations computes a TM × TN = 64 rows × 64 tokens tile of
// y, walking n_in in steps of BK = 32: each step dequantises the 64 × 32 weight
// tile (8 elements per invocation, dequant.glsl) and copies the 64 × 32 x tile
// into shared memory, then every invocation accumulates a 4 × 4 block of
// outputs (rows tr + 16i, tokens tc + 16j: strided so that a subgroup reads
// consecutive shared addresses). Rows past n_rows and tokens past n_tok are
// computed on clamped/zero inputs and never written.
//
// Grid: x = row tiles, y = token tiles.

#extension GL_GOOGLE_include_directive : require

layout(local_size_x = 256) in;

#include "matmul_common.glsl"
#include "dequant.glsl"

#ifdef FISH_SPAN
// Span variant: x := x ∘ x2 on load (XPROD), and the epilogue EPI (0 store,
// 1 add into y: the residual, 2 silu: the gate), as in matvec.comp.
layout(constant_id = 0) const uint EPI = 0;
layout(constant_id = 1) const bool XPROD = false;
float x_load(uint tok, uint k) {
  float v = X[pc.x_off + tok * pc.x_stride + k];
  if (XPROD) v *= X[pc.x2_off + tok * pc.x_stride + k];
  return v;
}
void store_y(uint a, float v) {
  if (EPI == 2u) v = v / (1.0 + exp(-v));
  if (EPI == 1u) Y[a] += v;
  else Y[a] = v;
}
#else
float x_load(uint tok, uint k) { return X[pc.x_off + tok * pc.x_stride + k]; }
void store_y(uint a, float v) { Y[a] = v; }
#endif

const uint TM = 64u, TN = 64u, BK = 32u;
shared float w_tile[BK][TM + 1u];  // [k][row]  (+1: no bank conflicts on the transposed store)
shared float x_tile[BK][TN + 1u];  // [k][token]

void main() {
  const uint tid = gl_LocalInvocationID.x;
  const uint row_base = gl_WorkGroupID.x * TM, tok_base = gl_WorkGroupID.y * TN;
  const uint tr = tid & 15u, tc = tid >> 4;
  // Loader roles: invocation tid fills 8 consecutive k of row/token tid / 4.
  const uint ld_row = tid >> 2, ld_k = (tid & 3u) * 8u;
  const uint w_row = min(row_base + ld_row, pc.n_rows - 1u);
  const uint x_tok = tok_base + ld_row;
  const bool x_ok = x_tok < pc.n_tok;

  float acc[16];
  for (uint i = 0u; i < 16u; ++i) acc[i] = 0.0;

  for (uint k0 = 0u; k0 < pc.n_in; k0 += BK) {
    vec4 lo, hi;
    dequant8(w_row, k0 + ld_k, lo, hi);
    for (uint i = 0u; i < 4u; ++i) {
      w_tile[ld_k + i][ld_row] = lo[i];
      w_tile[ld_k + 4u + i][ld_row] = hi[i];
    }
    for (uint i = 0u; i < 8u; ++i) {
      const uint k = k0 + ld_k + i;
      x_tile[ld_k + i][ld_row] = (x_ok && k < pc.n_in) ? x_load(x_tok, k) : 0.0;
    }
    barrier();
    for (uint k = 0u; k < BK; ++k) {
      float a[4], b[4];
      for (uint i = 0u; i < 4u; ++i) a[i] = w_tile[k][tr + 16u * i];
      for (uint j = 0u; j < 4u; ++j) b[j] = x_tile[k][tc + 16u * j];
      for (uint i = 0u; i < 4u; ++i)
        for (uint j = 0u; j < 4u; ++j) acc[i * 4u + j] += a[i] * b[j];
    }
    barrier();
  }

  for (uint i = 0u; i < 4u; ++i) {
    const uint r = row_base + tr + 16u * i;
    if (r >= pc.n_rows) continue;
    for (uint j = 0u; j < 4u; ++j) {
      const uint t = tok_base + tc + 16u * j;
      if (t < pc.n_tok) store_y(pc.y_off + t * pc.y_stride + r, acc[i * 4u + j]);
    }
  }
}
