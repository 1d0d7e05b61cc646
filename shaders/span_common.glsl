// Shared declarations of the span's auxiliary kernels (span_rmsnorm,
// span_rope_store, span_attention): one descriptor set layout and
// one push-constant block for all of them (plugins/vulkan/span_kernels.h
// mirrors SpanParams as SpanPush).
//
// Bindings (set 0):
//   0  the span's arena, f32 words: the ctrl block at word 0 (written by the
//      copy-in kernel each forward), the residual stream x and every work
//      region (offsets in floats below)
//   1  this layer's KV cache, f16 pairs in uint words: a pool of pages of
//      KV_PAGE positions, K [kv_cap][n_head_kv][D] then V [kv_cap][n_head_kv][D]
//      (V starts at half index kv_cap·KD); pool row r is page r / KV_PAGE
//   2  the span's f32 parameters (norm weights, biases)
//   3  the RoPE table: [cap][n_rot/2] (cos θ, sin θ), computed on the host in double
//   4  the arena again, coherent: the attention's partials and arrival counters,
//      which one workgroup reads after others wrote them in the same dispatch
//   5  the page tables: per sequence, the pool page of each KV_PAGE positions
//      (plugins/vulkan/span.h)
//
// A sequence's position j lives in pool row kv_row(pt, j), pt being where its
// page table starts in binding 5. A forward whose rows are of one sequence
// finds pt in the ctrl block (CTRL_PT; positions pos0 + t, CTRL_POS0); a
// forward of rows of several sequences (the MULTI variants of span_rope_store
// / span_attention) reads each row's position and pt from the arena's row
// table: uvec2 (position, pt) per row at word pc.meta_off + 2·t.
layout(set = 0, binding = 0) buffer ArenaF { float A[]; };
layout(set = 0, binding = 0) buffer ArenaF4 { vec4 A4[]; };
layout(set = 0, binding = 0) buffer ArenaU { uint AU[]; };
layout(set = 0, binding = 1) buffer KvWords { uint KV[]; };
layout(set = 0, binding = 1) buffer KvWords2 { uvec2 KV2[]; };
layout(set = 0, binding = 1) buffer KvWords4 { uvec4 KV4[]; };
layout(set = 0, binding = 2) readonly buffer ParamsF { float P[]; };
layout(set = 0, binding = 3) readonly buffer RopeTable { vec2 R[]; };
layout(set = 0, binding = 4) coherent buffer ArenaC { float AC[]; };
layout(set = 0, binding = 4) coherent buffer ArenaCU { uint ACU[]; };
layout(set = 0, binding = 5) readonly buffer PageTables { uint PT[]; };

// Optional parameter vectors are absent when their offset is NONE.
const uint NONE = 0xFFFFFFFFu;

// Two floats as one word of f16 halves (x low), saturated to f16's finite
// range (±65504) as the tensor-core kernels' f16 tiles are.
uint pack_half2_sat(vec2 v) { return packHalf2x16(clamp(v, vec2(-65504.0), vec2(65504.0))); }

// The ctrl block (uint words of the arena): the attention dispatch's indirect
// arguments (n_head_kv, splits, n_tok) and the forward's dynamic values.
const uint CTRL_POS0 = 4u;       // position of token 0
const uint CTRL_SPLITS = 5u;     // attention: workgroups per (token, KV head) along the context
const uint CTRL_SPLIT_LEN = 6u;  // attention: positions per split
const uint CTRL_PT = 7u;         // one sequence's forward: its page table's word index in PT

layout(push_constant) uniform SpanParams {
  uint n_tok;     // token rows of this dispatch
  uint n_embd;    // rmsnorm: elements per row
  uint x_off;     // rmsnorm: input rows [n_tok][n_embd]
  uint y_off;     // rmsnorm: output rows
  uint norm_off;  // rmsnorm: P index of the weights
  float eps;      // rms epsilon (rmsnorm, q/k norm)
  uint q_off;     // token 0's q: raw (in the q|k|v rows) or roped (qr rows)
  uint q_stride;  // floats between two tokens' q (and raw k, v) rows
  uint k_off;     // token 0's raw k
  uint v_off;     // token 0's raw v
  uint qr_off;    // rope_store: roped q rows [n_tok][n_head·D]
  uint kv_cap;    // positions (rows) of the layer's KV pool
  uint att_off;   // attention output rows [n_tok][n_head·D]
  uint part_off;  // attention partials (float index)
  uint cnt_off;   // attention arrival counters (uint index)
  uint bq_off;    // P index of bq / bk / bv / q_norm / k_norm, or NONE
  uint bk_off;
  uint bv_off;
  uint qn_off;
  uint kn_off;
  float scale;    // softmax scale
  uint n_rot;     // rotated dims per head
  uint neox;      // 1: NeoX pairs (i, i + n_rot/2), 0: adjacent pairs (2i, 2i + 1)
  uint n_head;    // query heads
  uint q8_out;    // attention with QOUT: word index of token 0's B32 row of the output
  uint q8_stride; // QOUT: words between two tokens' rows
  uint meta_off;  // MULTI: word index of the rows' (position, page table) pairs; rmsnorm GATHER: of its row list
} pc;

// Positions per KV page (Span::kKvPage).
const uint KV_PAGE = 64u;
// The pool row holding position j of the sequence whose page table starts at PT[pt].
uint kv_row(uint pt, uint j) { return PT[pt + j / KV_PAGE] * KV_PAGE + j % KV_PAGE; }
// MULTI: row t's position and its sequence's page table (word index in PT).
uint row_pos(uint t) { return AU[pc.meta_off + 2u * t]; }
uint row_pt(uint t) { return AU[pc.meta_off + 2u * t + 1u]; }
