#version 450
// Causal grouped-query attention over the f16 KV cache, split along the
// context (flash-decoding) so that a long context is streamed by many
// workgroups at once.
//
// Grid (indirect: the ctrl block holds it): x = group of G query heads (of KV
// head g; G = GQ = n_head / n_head_kv unless narrower, see GQ), y = split s,
// z = token t (position p = pos0 + t sees positions 0..p). A workgroup takes
// its G query heads (all sharing KV head g) and positions
// [s·L, min((s+1)·L, p+1)), in tiles of 128:
//   K phase   thread i scores position j0 + i against the G queries (its own
//             K row, 8 halves per load), tile max and Σ exp by subgroup + shared
//             reductions, online softmax (running max m, sum l per head)
//   V phase   D/4 threads per position (4 dims each, one 8-byte load), PP =
//             128 / (D/4) positions at a time, o[h] += p·v for the G heads;
//             VLATE: the tile's V rows are loaded after its scores, their
//             latency overlapping the softmax, else with the K row (more
//             registers live through the K phase; the host's choice:
//             SpanKernels::attn_vlate, plugins/vulkan/README.md)
// With one split the output o / l goes straight to att; with several, each
// writes (o, m, l) to its partial slot, and the last workgroup of (t, g) to
// arrive (an atomic counter) combines them: o = Σ e^{m_s-M} o_s / Σ e^{m_s-M} l_s.
//
// FUSED (decode, n_tok = 1): the projections arrive raw: every workgroup
// prepares its G query heads itself (bias, q_norm, RoPE), and the split holding
// position p prepares k and v of KV head g (bias, k_norm, RoPE), stores them
// in the cache (f16) for later tokens and uses the same f16-rounded values for
// position p. Otherwise q comes roped from span_rope_store.comp (qr rows) and
// the cache already holds every position up to p.
//
// QOUT (int8 decode of one token): the workgroup that writes (t, g)'s G·D
// outputs also writes them as the span's B32 rows at q8_out for the wo matvec
// (blocks of 32, D a multiple of 32; quant_block.glsl), in place of a quantise
// step and its barrier: from the writing loop's registers within subgroups
// (quant_b32_sg.glsl: a block is 8 invocations of 4 outputs each) where that
// loop takes one item per invocation (G·D/4 <= 128) and gl_SubgroupSize >= 8,
// else staged in shared memory and quantised by the workgroup.
//
// Every K / V row is found through the sequence's page table (kv_row,
// span_common.glsl): the one-sequence forward's in the ctrl block; MULTI
// (rows of several sequences, never FUSED): row t's position p and its
// sequence's page table come from the row table, so rows of
// different sequences and lengths share the dispatch; a split past a short
// row's p is empty and weighs nothing in the combine.
//
// Specialisation: 0 = D (a multiple of 4, <= 512), 1 = G, 2 = KVH, 3 = FUSED, 4 = QOUT, 5 = GQ, 6 = VLATE,
// 7 = MULTI.
#extension GL_GOOGLE_include_directive : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require

layout(local_size_x = 128) in;
layout(constant_id = 0) const uint D = 128;
layout(constant_id = 1) const uint G = 4;
layout(constant_id = 2) const uint KVH = 8;
layout(constant_id = 3) const bool FUSED = false;
layout(constant_id = 4) const bool QOUT = false;
// GQ: query heads per KV head. A workgroup takes G of them (G divides GQ):
// G = GQ is one workgroup per KV head; a smaller G (decode at short contexts)
// spreads a KV group over GQ/G workgroups, each with less work per thread
// (shorter latency), at the price of reading the group's K/V rows GQ/G times
// (from L2). The group's first workgroup stores the new K/V (FUSED).
layout(constant_id = 5) const uint GQ = 4;
layout(constant_id = 6) const bool VLATE = true;
layout(constant_id = 7) const bool MULTI = false;
const uint WG = 128u;
#include "span_common.glsl"
#define QB_X_SIZE (G * D)
#define QSG_SLOTS (QOUT ? G * D / 4u : 1u)
#include "quant_block.glsl"

const uint KD = KVH * D;      // halves per position per K (and V)
const uint DQ = D / 4u;       // vec4s per head
const uint DT = D / 4u;       // V phase: threads per position
const uint PP = WG / DT;      // V phase: positions in flight
const uint VPT = WG / PP;     // V phase: positions per thread per tile (loads issued together)
const uint SLOT = G * (D + 2u);  // floats per partial: o [G][D], m [G], l [G]
const float NEG = -1.0e30;

shared float prep_sh[G * D];
shared float prep_inv[G];
shared vec2 rope_sh[D / 2u];  // FUSED: the RoPE row of position p_last (every head's, q's and k's)
vec2 prep_rope(uint pos, uint i) { return rope_sh[i]; }
#include "span_prep.glsl"

shared vec4 q_sh[G * DQ];     // prepared, scaled queries
shared vec4 kv_sh[2u * DQ];   // FUSED: the new k, v (f16-rounded)
shared float p_sh[WG * G];    // [position in tile][head]
shared float red_sh[G * 32u]; // per-subgroup partials (up to 32 subgroups)
shared float stat_sh[2u * G]; // tile max, tile Σ exp
shared vec4 o_sh[PP * DT * G];
shared uint last_sh;

float bias(uint off, uint i) { return off == NONE ? 0.0 : P[off + i]; }

// QOUT within subgroups: the writing loop takes one item per invocation
// (item = tid) and the blocks' 8 invocations share a subgroup. Uniform.
bool qout_in_subgroups() { return QOUT && G * DQ <= WG && gl_SubgroupSize >= 8u; }

// QOUT: (t, g)'s outputs to B32 rows: from qr, this invocation's item, within
// subgroups (qout_in_subgroups), else staged in qb_x by the writing loop.
void quant_out(uint t, uint qh0, vec4 qr) {
  const uint tid = gl_LocalInvocationID.x, QD = KVH * GQ * D, row = pc.q8_out + t * pc.q8_stride;
  if (qout_in_subgroups()) {
    q8b32_sg(qr, 4u, tid < G * DQ, tid, row, QD, qh0 * D / 32u, 4u * tid);
    return;
  }
  barrier();
  q8b32_wg(tid, WG, G * D, row, QD, qh0 * D / 32u);
}
vec4 half4(uvec2 w) { return vec4(unpackHalf2x16(w.x), unpackHalf2x16(w.y)); }

// The K phase's row of the tile from position j0: this invocation's position
// j0 + tid (clamped to the split's end), 8 halves per load (4 when D is not a
// multiple of 8).
uvec4 kw[(D + 7u) / 8u];
uvec2 kw2[DQ];
void load_k(uint j0, uint j_end, uint pt, uint g) {
  const uint kr = kv_row(pt, min(j0 + gl_LocalInvocationID.x, j_end - 1u)) * KD + g * D;
  if (D % 8u == 0u) {
    for (uint c = 0u; c < D / 8u; ++c) kw[c] = KV4[(kr >> 3) + c];
  } else {
    for (uint c = 0u; c < DQ; ++c) kw2[c] = KV2[(kr >> 2) + c];
  }
}

// The V phase's rows of the tile from position j0: this invocation's 4 dims
// (dq) of positions j0 + pp + k·PP, clamped to the split's end (a valid row
// that gets p = 0). Loaded with the K row, or after the scores (VLATE).
uvec2 vw[VPT];
void load_v(uint j0, uint j_end, uint pt, uint g, uint dq, uint pp) {
  if (pp < PP)
    for (uint k = 0u; k < VPT; ++k)
      vw[k] = KV2[(((pc.kv_cap + kv_row(pt, min(j0 + pp + k * PP, j_end - 1u))) * KD + g * D) >> 2) + dq];
}

// Workgroup max (op 0) or sum (op 1) of v[h] for each head, into stat_sh[op·G + h].
void reduce_heads(float v[G], uint op) {
  for (uint h = 0u; h < G; ++h) {
    const float r = op == 0u ? subgroupMax(v[h]) : subgroupAdd(v[h]);
    if (subgroupElect()) red_sh[h * 32u + gl_SubgroupID] = r;
  }
  barrier();
  if (gl_LocalInvocationID.x < G) {
    const uint h = gl_LocalInvocationID.x;
    float r = red_sh[h * 32u];
    for (uint i = 1u; i < gl_NumSubgroups; ++i) r = op == 0u ? max(r, red_sh[h * 32u + i]) : r + red_sh[h * 32u + i];
    stat_sh[op * G + h] = r;
  }
  barrier();
}

void main() {
  const uint tid = gl_LocalInvocationID.x;
  // wgi: this workgroup's group of G query heads (qh0 ..), g: their KV head.
  const uint wgi = gl_WorkGroupID.x, s = gl_WorkGroupID.y, t = gl_WorkGroupID.z;
  const uint qh0 = wgi * G, g = qh0 / GQ, NWG = KVH * GQ / G;
  const uint n_split = AU[CTRL_SPLITS], split_len = AU[CTRL_SPLIT_LEN];
  const uint p_last = MULTI ? row_pos(t) : AU[CTRL_POS0] + t;
  const uint pt = MULTI ? row_pt(t) : AU[CTRL_PT];  // the row's sequence's page table
  const uint j_begin = s * split_len, j_end = min(j_begin + split_len, p_last + 1u);
  const uint QD = KVH * GQ * D;
  const uint dq = tid % DT, pp = tid / DT;
  const bool qsg = qout_in_subgroups();

  // The first tile's K row (this thread's position) and (VLATE off) V rows
  // are loaded before the query preparation, so their latency overlaps it.
  // (FUSED: the row at p_last is not written yet; it is taken from kv_sh
  // instead, however late the V rows are loaded.)
  if (j_begin < j_end) {
    load_k(j_begin, j_end, pt, g);
    if (!VLATE) load_v(j_begin, j_end, pt, g, dq, pp);
  }

  // Everything else the preparation reads, loaded now too (one round trip
  // for all): the raw q of the G heads, the RoPE row of p_last and, for the
  // split holding p_last, the raw k and v of KV head g.
  const uint QPT = (G * D + WG - 1u) / WG, KPT = (D + WG - 1u) / WG, RPT = (D / 2u + WG - 1u) / WG;
  const bool owns_new = FUSED && p_last >= j_begin && p_last < j_end;  // uniform
  const uint half_rot = pc.n_rot >> 1;
  float qv[QPT], kn[KPT], vn[KPT];
  vec2 rv[RPT];
  for (uint c = 0u; c < QPT; ++c) {
    const uint i = min(tid + c * WG, G * D - 1u);
    qv[c] = A[pc.q_off + t * pc.q_stride + (qh0 + i / D) * D + i % D];
  }
  if (FUSED) {
    for (uint c = 0u; c < RPT; ++c) rv[c] = R[p_last * half_rot + min(tid + c * WG, max(half_rot, 1u) - 1u)];
    if (owns_new) {
      for (uint c = 0u; c < KPT; ++c) {
        const uint d = min(tid + c * WG, D - 1u);
        kn[c] = A[pc.k_off + t * pc.q_stride + g * D + d];
        vn[c] = A[pc.v_off + t * pc.q_stride + g * D + d];
      }
    }
  }

  // ---- queries: G heads of D floats, scaled by the softmax scale ----
  for (uint c = 0u; c < QPT; ++c) {
    const uint i = tid + c * WG;
    if (i >= G * D) break;
    const uint qh = qh0 + i / D, d = i % D;
    prep_sh[i] = FUSED ? qv[c] + bias(pc.bq_off, qh * D + d) : qv[c];
  }
  if (FUSED) {
    for (uint c = 0u; c < RPT; ++c)
      if (tid + c * WG < half_rot) rope_sh[tid + c * WG] = rv[c];
    prep_finish(G, pc.qn_off, p_last, pc.scale);
  } else {
    barrier();
    for (uint i = tid; i < G * D; i += WG) prep_sh[i] *= pc.scale;
    barrier();
  }
  for (uint i = tid; i < G * DQ; i += WG)
    q_sh[i] = vec4(prep_sh[4u * i], prep_sh[4u * i + 1u], prep_sh[4u * i + 2u], prep_sh[4u * i + 3u]);
  if (owns_new) {
    // k and v of KV head g at position p_last: prepare, store (f16), keep the rounded values
    // (raw v + bias waits in kv_sh's V half meanwhile).
    barrier();
    for (uint c = 0u; c < KPT; ++c) {
      const uint d = tid + c * WG;
      if (d >= D) break;
      prep_sh[d] = kn[c] + bias(pc.bk_off, g * D + d);
      kv_sh[DQ + d / 4u][d % 4u] = vn[c] + bias(pc.bv_off, g * D + d);
    }
    prep_finish(1u, pc.kn_off, p_last, 1.0);
    const uint r = kv_row(pt, p_last);
    const uint kw = (r * KD + g * D) >> 1, vw = ((pc.kv_cap + r) * KD + g * D) >> 1;
    for (uint i = tid; i < DQ; i += WG) {
      const vec4 vv = kv_sh[DQ + i];
      const uvec2 kp = uvec2(packHalf2x16(vec2(prep_sh[4u * i], prep_sh[4u * i + 1u])),
                             packHalf2x16(vec2(prep_sh[4u * i + 2u], prep_sh[4u * i + 3u])));
      const uvec2 vp = uvec2(packHalf2x16(vv.xy), packHalf2x16(vv.zw));
      if (qh0 % GQ == 0u) {  // the group's first workgroup stores them
        KV[kw + 2u * i] = kp.x;
        KV[kw + 2u * i + 1u] = kp.y;
        KV[vw + 2u * i] = vp.x;
        KV[vw + 2u * i + 1u] = vp.y;
      }
      kv_sh[i] = half4(kp);
      kv_sh[DQ + i] = half4(vp);
    }
  }
  barrier();

  float m_run[G], l_run[G];
  vec4 o[G];
  for (uint h = 0u; h < G; ++h) {
    m_run[h] = NEG;
    l_run[h] = 0.0;
    o[h] = vec4(0.0);
  }

  for (uint j0 = j_begin; j0 < j_end; j0 += WG) {
    if (j0 != j_begin) {  // later tiles: this tile's rows now
      load_k(j0, j_end, pt, g);
      if (!VLATE) load_v(j0, j_end, pt, g, dq, pp);
    }
    // ---- K phase: scores of position j0 + tid ----
    const uint j = j0 + tid;
    const bool valid = j < j_end;
    float sc[G];
    for (uint h = 0u; h < G; ++h) sc[h] = 0.0;
    if (valid) {
      if (owns_new && j == p_last) {
        for (uint c = 0u; c < DQ; ++c)
          for (uint h = 0u; h < G; ++h) sc[h] += dot(q_sh[h * DQ + c], kv_sh[c]);
      } else if (D % 8u == 0u) {
        for (uint c = 0u; c < D / 8u; ++c) {
          const vec4 k0 = half4(kw[c].xy), k1 = half4(kw[c].zw);
          for (uint h = 0u; h < G; ++h) sc[h] += dot(q_sh[h * DQ + 2u * c], k0) + dot(q_sh[h * DQ + 2u * c + 1u], k1);
        }
      } else {
        for (uint c = 0u; c < DQ; ++c) {
          const vec4 k = half4(kw2[c]);
          for (uint h = 0u; h < G; ++h) sc[h] += dot(q_sh[h * DQ + c], k);
        }
      }
    } else {
      for (uint h = 0u; h < G; ++h) sc[h] = NEG;
    }
    if (VLATE) load_v(j0, j_end, pt, g, dq, pp);  // this tile's V rows, now that the scores are done
    // ---- online softmax ----
    reduce_heads(sc, 0u);
    float corr[G], pv[G];
    for (uint h = 0u; h < G; ++h) {
      const float m_new = max(m_run[h], stat_sh[h]);
      corr[h] = exp(m_run[h] - m_new);
      pv[h] = valid ? exp(sc[h] - m_new) : 0.0;
      p_sh[tid * G + h] = pv[h];
      m_run[h] = m_new;
    }
    reduce_heads(pv, 1u);  // its barriers also publish p_sh
    for (uint h = 0u; h < G; ++h) {
      l_run[h] = l_run[h] * corr[h] + stat_sh[G + h];
      o[h] *= corr[h];
    }
    // ---- V phase: a constant trip count over rows loaded with the K row (positions
    // past the tile's end read a valid row and get p = 0) ----
    if (pp < PP) {
      for (uint k = 0u; k < VPT; ++k) {
        const uint jj = pp + k * PP;
        // The row that was loaded (clamped to the split's end): FUSED's new
        // position comes from kv_sh (its memory was loaded before the store).
        const bool is_new = owns_new && min(j0 + jj, j_end - 1u) == p_last;
        const vec4 v = is_new ? kv_sh[DQ + dq] : half4(vw[k]);
        for (uint h = 0u; h < G; ++h) o[h] += p_sh[jj * G + h] * v;
      }
    }
    barrier();  // p_sh, red_sh and stat_sh are rewritten by the next tile
  }

  // ---- this split's result: the PP position groups' sums, all heads at once ----
  const uint slot = ((t * NWG + wgi) * n_split + s) * SLOT;
  if (pp < PP)
    for (uint h = 0u; h < G; ++h) o_sh[(h * PP + pp) * DT + dq] = o[h];
  barrier();
  vec4 qr = vec4(0.0);  // qsg: this invocation's item (i = tid) for quant_out
  for (uint i = tid; i < G * DT; i += WG) {
    const uint h = i / DT, c = i % DT;
    vec4 sum = vec4(0.0);
    for (uint k = 0u; k < PP; ++k) sum += o_sh[(h * PP + k) * DT + c];
    if (n_split == 1u) {
      const uint a = pc.att_off + t * QD + (qh0 + h) * D + 4u * c;
      const vec4 r = sum / l_run[h];
      A[a] = r.x;
      A[a + 1u] = r.y;
      A[a + 2u] = r.z;
      A[a + 3u] = r.w;
      qr = r;
      if (QOUT && !qsg)
        for (uint k = 0u; k < 4u; ++k) qb_x[h * D + 4u * c + k] = r[k];
    } else {
      const uint a = pc.part_off + slot + h * D + 4u * c;
      AC[a] = sum.x;
      AC[a + 1u] = sum.y;
      AC[a + 2u] = sum.z;
      AC[a + 3u] = sum.w;
    }
  }
  if (n_split == 1u) {
    if (QOUT) quant_out(t, qh0, qr);
    return;
  }
  if (tid < G) {
    AC[pc.part_off + slot + G * D + tid] = m_run[tid];
    AC[pc.part_off + slot + G * D + G + tid] = l_run[tid];
  }

  // ---- the last split of (t, g) to finish combines ----
  memoryBarrierBuffer();
  barrier();
  if (tid == 0u) last_sh = atomicAdd(ACU[pc.cnt_off + t * NWG + wgi], 1u) == n_split - 1u ? 1u : 0u;
  barrier();
  if (last_sh == 0u) return;
  memoryBarrierBuffer();
  const uint slot0 = pc.part_off + (t * NWG + wgi) * n_split * SLOT;
  // Each split's weight e^{m_s - M} / Σ_s e^{m_s - M} l_s per head (p_sh is free now), then
  // every thread one (head, 4 dims) item over the splits, loads 8 at a time. The
  // first item's first 8 splits are loaded with the m's (one round trip less).
  vec4 pre[8];
  {
    const uint i = min(tid, G * DQ - 1u), h = i / DQ, c = i % DQ;
    for (uint u = 0u; u < 8u; ++u) {
      const uint b = slot0 + min(u, n_split - 1u) * SLOT + h * D + 4u * c;
      pre[u] = vec4(AC[b], AC[b + 1u], AC[b + 2u], AC[b + 3u]);
    }
  }
  for (uint i = tid; i < n_split * G; i += WG) p_sh[i] = AC[slot0 + (i / G) * SLOT + G * D + i % G];
  barrier();
  if (tid < G) {
    float M = NEG;
    for (uint k = 0u; k < n_split; ++k) M = max(M, p_sh[k * G + tid]);
    float lsum = 0.0;
    for (uint k = 0u; k < n_split; ++k) lsum += exp(p_sh[k * G + tid] - M) * AC[slot0 + k * SLOT + G * D + G + tid];
    stat_sh[tid] = M;
    stat_sh[G + tid] = 1.0 / lsum;
  }
  barrier();
  for (uint i = tid; i < n_split * G; i += WG) p_sh[i] = exp(p_sh[i] - stat_sh[i % G]) * stat_sh[G + i % G];
  barrier();
  for (uint i = tid; i < G * DQ; i += WG) {
    const uint h = i / DQ, c = i % DQ;
    vec4 acc = vec4(0.0);
    uint k = 0u;
    if (i == tid) {
      for (uint u = 0u; u < 8u; ++u)
        if (u < n_split) acc += p_sh[u * G + h] * pre[u];
      k = min(n_split, 8u);
    }
    for (; k + 8u <= n_split; k += 8u) {
      vec4 part[8];
      for (uint u = 0u; u < 8u; ++u) {
        const uint b = slot0 + (k + u) * SLOT + h * D + 4u * c;
        part[u] = vec4(AC[b], AC[b + 1u], AC[b + 2u], AC[b + 3u]);
      }
      for (uint u = 0u; u < 8u; ++u) acc += p_sh[(k + u) * G + h] * part[u];
    }
    for (; k < n_split; ++k) {
      const uint b = slot0 + k * SLOT + h * D + 4u * c;
      acc += p_sh[k * G + h] * vec4(AC[b], AC[b + 1u], AC[b + 2u], AC[b + 3u]);
    }
    const uint a = pc.att_off + t * QD + (qh0 + h) * D + 4u * c;
    A[a] = acc.x;
    A[a + 1u] = acc.y;
    A[a + 2u] = acc.z;
    A[a + 3u] = acc.w;
    qr = acc;
    if (QOUT && !qsg)
      for (uint k = 0u; k < 4u; ++k) qb_x[h * D + 4u * c + k] = acc[k];
  }
  if (tid == 0u) ACU[pc.cnt_off + t * NWG + wgi] = 0u;
  if (QOUT) quant_out(t, qh0, qr);
}
