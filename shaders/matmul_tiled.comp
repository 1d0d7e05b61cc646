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
//
// FISH_MOE (tlm_<T>, with FISH_SPAN): one MoE expert's product over its pairs
// (moe_common.glsl's grouped lists), an expert per z = active-expert slot s (a
// slot past n_active, or a token tile past the expert's pair count, returns at
// once): weight rows offset by e · n_rows in the stacked weight, token j of the
// tile is the expert's pair p = list[first + j]; x row p / k (GATE_UP: the
// token's normalised input) or p (the hidden rows), y row p. EPI 2 silu (gate),
// 4 y = y · v (up onto silu(gate): h = silu(g)·u in place), 5 v · w_p (down,
// the pair's routing weight). So each expert's weights are read once per 64 of
// its pairs, at the tiled kernel's efficiency.

#extension GL_GOOGLE_include_directive : require

layout(local_size_x = 256) in;

#include "matmul_common.glsl"
#include "dequant.glsl"

#ifdef FISH_MOE
layout(constant_id = 0) const uint EPI = 0;
layout(constant_id = 1) const bool GATE_UP = false;
layout(set = 0, binding = 4) readonly buffer ArenaR { uint AR[]; };
#include "moe_common.glsl"
uint moe_list0 = 0u;   // the expert's first list entry
uint moe_count = 0u;   // its pairs
// Tile token t -> its pair (t < moe_count).
uint moe_pair(uint t) { return AR[moe_list0 + t]; }
float x_load(uint tok, uint k) {
  const uint p = moe_pair(tok);
  return X[pc.x_off + (GATE_UP ? p / pc.k : p) * pc.x_stride + k];
}
// a = y_off + p · y_stride + row
void store_y(uint a, float v, uint p) {
  if (EPI == 2u) v = v / (1.0 + exp(-v));
  if (EPI == 4u) v *= Y[a];
  if (EPI == 5u) v *= uintBitsToFloat(AR[pc.route_off + 2u * p + 1u]);
  Y[a] = v;
}
#elif defined(FISH_SPAN)
// Span variant: x := x ∘ x2 on load (XPROD), and the epilogue EPI (0 store,
// 1 add into y: the residual, 2 silu: the gate, 4 y = y · v: up onto
// silu(gate)).
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
  else if (EPI == 4u) Y[a] = Y[a] * v;
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
#ifdef FISH_MOE
  const uint G = moe_group(pc.route_off, pc.n_tok * pc.k), s = gl_WorkGroupID.z;
  if (s >= AR[G]) return;  // uniform: no expert in this slot
  const uint e = AR[G + 1u + s];
  moe_list0 = moe_list(G, pc.n_expert) + AR[G + 1u + pc.n_expert + s];
  moe_count = AR[G + 2u + pc.n_expert + s] - AR[G + 1u + pc.n_expert + s];
  if (tok_base >= moe_count) return;  // uniform: past the expert's pairs
  const uint w_row = e * pc.n_rows + min(row_base + ld_row, pc.n_rows - 1u);
  const uint n_tok = moe_count;
#else
  const uint w_row = min(row_base + ld_row, pc.n_rows - 1u);
  const uint n_tok = pc.n_tok;
#endif
  const uint x_tok = tok_base + ld_row;
  const bool x_ok = x_tok < n_tok;

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
#ifdef FISH_MOE
      if (t < n_tok) {
        const uint p = moe_pair(t);
        store_y(pc.y_off + p * pc.y_stride + r, acc[i * 4u + j], p);
      }
#else
      if (t < n_tok) store_y(pc.y_off + t * pc.y_stride + r, acc[i * 4u + j]);
#endif
    }
  }
}
