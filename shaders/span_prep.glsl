// Head preparation shared by span_rope_store.comp and span_attention.comp:
// a workgroup holds n_heads head vectors of D floats in prep_sh (raw
// projection + bias, written by the caller) and finishes them in place:
//   q/k norm (qwen3)  v ← v / sqrt(mean(v²) + eps) · w          (w = P[norm_off..], when not NONE)
//   RoPE              pairs (2i, 2i+1) or NeoX (i, i + n_rot/2), i < n_rot/2, at position pos:
//                     (a, b) ← (a cos θ_i − b sin θ_i, a sin θ_i + b cos θ_i), θ from the table R
//   scale             every element × scale (the softmax scale folded into q; 1 for k)
// The includer declares D, WG, `shared float prep_sh[≥ n_heads·D]`,
// `shared float prep_inv[≥ n_heads]` and `vec2 prep_rope(uint pos, uint i)`,
// the table's (cos θ_i, sin θ_i) at pos (span_attention.comp reads it from
// shared memory, loaded early). Must be called in uniform control flow.

void prep_finish(uint n_heads, uint norm_off, uint pos, float scale) {
  const uint tid = gl_LocalInvocationID.x;
  barrier();
  if (norm_off != NONE) {
    if (tid < n_heads) {
      // One thread per head: D is at most a few hundred, four running sums.
      vec4 s4 = vec4(0.0);
      for (uint d = 0u; d + 3u < D; d += 4u) {
        const vec4 v = vec4(prep_sh[tid * D + d], prep_sh[tid * D + d + 1u], prep_sh[tid * D + d + 2u],
                            prep_sh[tid * D + d + 3u]);
        s4 += v * v;
      }
      prep_inv[tid] = inversesqrt(((s4.x + s4.y) + (s4.z + s4.w)) / float(D) + pc.eps);
    }
    barrier();
    for (uint i = tid; i < n_heads * D; i += WG) prep_sh[i] *= prep_inv[i / D] * P[norm_off + i % D];
    barrier();
  }
  const uint half_rot = pc.n_rot >> 1;
  for (uint i = tid; i < n_heads * half_rot; i += WG) {
    const uint h = i / half_rot, j = i % half_rot;
    const uint a = h * D + (pc.neox != 0u ? j : 2u * j);
    const uint b = h * D + (pc.neox != 0u ? j + half_rot : 2u * j + 1u);
    const vec2 cs = prep_rope(pos, j);
    const float x = prep_sh[a], y = prep_sh[b];
    prep_sh[a] = (x * cs.x - y * cs.y) * scale;
    prep_sh[b] = (x * cs.y + y * cs.x) * scale;
  }
  if (scale != 1.0) {
    for (uint i = tid; i < n_heads * D; i += WG)
      if (i % D >= pc.n_rot) prep_sh[i] *= scale;
  }
  barrier();
}
