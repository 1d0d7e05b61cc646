// The matmul kernels: which GGUF types run on the device, and recording of one
// weight chunk's product y = x · Wᵀ into a command buffer.
//
// Types: F32, F16, Q4_0, Q8_0, Q4_K, Q5_K, Q6_K and FQ3 (1000, fish's 3-bit
// layout for re-quantised copies: shaders/fq3_codes.glsl).
// Per type two modules (shaders/modules.txt): matvec_<T> for n_tok <= 4
// (subgroup reductions; matvec_<T>_nosg on devices without subgroup arithmetic)
// and tiled_<T> for prefill. All read the weights in their GGUF layout. On a
// device with cooperative matrices (DeviceCaps::coopmat) prefill runs tc_<T> /
// tlc_<T> (matmul_coopmat.comp: f16 tensor-core products on f32 x) instead of
// the tiled and int8 tiled kernels.
#pragma once
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "pipelines.h"
#include "vk_config.h"

namespace fish::vk {

// A weight type the kernels handle (GGUF numbering; geometry of one block).
struct MatmulType {
  uint32_t ggml_type;
  const char* name;      // "Q4_K": module suffix and describe()
  uint32_t block_elems;  // elements per block
  uint32_t block_bytes;  // bytes per block
};

// nullptr for a type without kernels (supports() = false; the layer stays on the CPU).
const MatmulType* matmul_type(uint32_t ggml_type);
const MatmulType* matmul_types_begin();
const MatmulType* matmul_types_end();

// Push constants, laid out exactly as MatmulParams in shaders/matmul_common.glsl.
struct MatmulPush {
  uint32_t n_in, n_rows, n_tok, x_stride, x_off, y_stride, y_off;
};
static_assert(sizeof(MatmulPush) == 28);

// Push constants of the span variants (mvs_<T>: matvec_span.comp, tls_<T>:
// matmul_tiled.comp; MatmulParams with FISH_SPAN in matmul_common.glsl).
struct SpanMatmulPush {
  MatmulPush m;
  uint32_t inv_in = 0xFFFFFFFFu;  // float index of the per-token scales of x, or none
  float eps = 0;                  // EPI 3: rms epsilon
  uint32_t x2_off = 0;            // XPROD: float index of the second factor
  uint32_t norm_off = 0;          // EPI 3: P index of the next norm's weights
  uint32_t xg_off = 0;            // EPI 3: where y ∘ those weights go
  uint32_t sq_off = 0;            // EPI 3: Σy² partials, [NT][row groups]
  uint32_t inv_parts = 0;         // 0: inv_in holds 1/rms per token; n: [NT][n] Σx² partials to reduce
  uint32_t q_out = 0xFFFFFFFFu;   // decode: where the output also goes as B32 rows (QOUT), or none
  uint32_t q_stride = 0;          // q_out: words between two tokens' rows
  // SpanFusion::router (an MoE decode's wo with the router folded in, matvec_span.comp ROUTER):
  uint32_t rt_part = 0;           // float index of the [row groups][n_expert] partial logits
  uint32_t rt_logits = 0;         // float index of the n_expert logits
  uint32_t rt_route = 0;          // word index of the pairs' words
  uint32_t rt_cnt = 0;            // word index of the arrival counter (0 between dispatches)
  uint32_t rt_n_expert = 0;
  uint32_t rt_k = 0;              // k | 0x10000: renormalise the k weights
};
static_assert(sizeof(SpanMatmulPush) == 88);

// What a span matmul folds in (see shaders/matvec_span.comp): the epilogue
// (0 store, 1 add into y, 2 silu, 3 add + the next rmsnorm's x·g and 1/rms,
// 4 the gate|up product silu(gate)·up: a pair's silu(y_a)·y_b in the matvec,
// y = y · v in the tiled kernels, whose y holds silu(gate) from the gate's
// step), the x∘x2 input, and pair: two
// matrices of the same shape and type (binding 0 and 5) in one dispatch, their
// rows r side by side (EPI 4: gate and up). role picks FISH_VK_SPAN_MV's shape.
// int8: x is int8 blocks and the mvsi_<T> module runs: quantize_x's
// (record_quantize: xprod and the scale applied there) or a producer's
// (SpanMatmulPush::q_out: the per-token scale inv_in is still applied here).
// xb32: x is the span's B32 rows (K-quant weights; quantize_x's B32K mode or a
// producer's); qb32: q_out is written as B32 rows (32 rows per workgroup, each
// quantising its own block: n_rows a multiple of 32, one token).
// xh / oh: the coopmat prefill's f16 rows (matmul_coopmat.comp XH / OH): x is
// f16 (x_off a float offset, x_stride in halves); with EPI 4 the product goes
// as f16 to half index xg_off + y's float index (rows in pairs: even chunk rows).
struct SpanFusion {
  uint32_t epi = 0;
  bool xprod = false;
  bool pair = false;
  SpanRole role = kRoleOther;
  bool int8 = false;
  bool xb32 = false;
  bool qb32 = false;
  bool xh = false;
  bool oh = false;
  // EPI 3 with qb32, one token (an MoE decode's wo): the router's f32 weights
  // (binding 5) folded in, routing in the last row group (SpanMatmulPush rt_*).
  bool router = false;
};

// Push constants of quantize_x.comp (QuantParams): x'[t] = x[t] (· x2[t]) (· s_t)
// to int8 blocks at word q_off + t · q_stride of the same buffer.
struct QuantPush {
  uint32_t n = 0, n_tok = 0, x_off = 0, x_stride = 0, x2_off = 0;
  uint32_t inv_in = 0xFFFFFFFFu, inv_parts = 0;
  float eps = 0;
  uint32_t q_off = 0, q_stride = 0;
};
static_assert(sizeof(QuantPush) == 40);

struct MatvecConfig {
  uint32_t wg = 128;   // workgroup size
  uint32_t rows = 1;   // rows per subgroup (team); span: per slice
  uint32_t slices = 1; // span: slices of the workgroup, each its own rows (matvec_span.comp)
  // Span forwards of 2..kMaxSpanMatvecTokens tokens (matvec_span.comp's NB):
  // a workgroup takes a token group of nt·nb tokens, nt of them in registers
  // at a time; nb = 0: the one-token decode.
  uint32_t nt = 1, nb = 0;
  // Token groups only: rows across the lanes (matvec_span.comp's LANES), each
  // row's units split over `lanes` lanes of every slice; 0: a slice's lanes split
  // the units of its own rows.
  uint32_t lanes = 0;
  // Rows per workgroup (wg: the whole workgroup).
  uint32_t wg_rows() const { return lanes ? (wg / slices / lanes) * rows : rows * slices; }
  // matvec_span.comp's shared memory for token groups (part_sh, fin_sh, RL's
  // rl_sh), bytes; pair: two matrices' rows per invocation.
  uint32_t group_shared_bytes(bool pair) const {
    const uint32_t rt = pair ? 2 * rows : rows, ntt = nt * std::max(nb, 1u);
    return 4 * ((rt + 1) * ntt * 32 + wg_rows() * ntt + (lanes ? rt * ntt * wg : 1));
  }
};

class MatmulKernels {
 public:
  static constexpr uint32_t kMaxMatvecTokens = 4;  // above: the tiled kernel
  // A span's products of up to 32 tokens (its rows: decode of several
  // sequences, a verify chunk) run the span matvec with token groups
  // (span_matvec_config), where a prefill tile would cost a whole 64- or
  // 128-token tile; above, the tiled / coopmat kernels.
  static constexpr uint32_t kMaxSpanMatvecTokens = 32;
  static constexpr uint32_t kTileRows = 64, kTileTokens = 64;
  static constexpr uint32_t kCoopRows = 128, kCoopTokens = 64;  // matmul_coopmat.comp's tile
  // matmul_coopmat.comp's shared memory: the weight tile (kCoopRows rows) and
  // the widest x tile (2 · kCoopTokens tokens), rows of 64 + 8 halves, and
  // eight 16 x 16 f32 staging areas (45056 bytes: within NVIDIA's 48 KiB).
  static constexpr uint32_t kCoopSharedBytes = (kCoopRows + 2 * kCoopTokens) * (64 + 8) * 2 + 8 * 16 * 16 * 4;
  static_assert(kCoopSharedBytes == 45056);

  MatmulKernels(const Device& dev, Pipelines& pipelines);

  const Layout& layout() const { return *layout_; }  // bindings: 0 W, 1 x, 2 y
  // The span variants: 0 W, 1 the span's arena (x), 2 the span's parameters,
  // 3 the arena (y), 4 the arena (coherent: EPI 3's partials), 5 the second
  // weight of a pair (any weight buffer otherwise: bind W again).
  const Layout& span_layout() const { return *span_layout_; }
  bool uses_subgroups() const { return subgroups_; }

  // Records one chunk's product; set binds (W chunk, x, y) as the layout says.
  void record(VkCommandBuffer cmd, const MatmulType& t, VkDescriptorSet set, const MatmulPush& pc, bool int8 = false);
  // The same for a span (matvec for n_tok <= kMaxSpanMatvecTokens; tiled
  // above, without the norm and pair epilogues).
  void record_span(VkCommandBuffer cmd, const MatmulType& t, VkDescriptorSet set, const SpanMatmulPush& pc,
                   SpanFusion fz);
  // The span matvec's row groups (workgroups' worth of rows; EPI 3 writes one
  // Σy² partial per group and token), 0 for the tiled kernel.
  uint32_t span_row_groups(const MatmulType& t, uint32_t n_in, uint32_t n_rows, uint32_t n_tok, SpanFusion fz) const;

  // The matvec shape for a chunk of n_rows rows of n_in elements of type t and
  // n_tok tokens (measured heuristic, or the FISH_VK_MV_* / set_override values).
  MatvecConfig matvec_config(const MatmulType& t, uint32_t n_in, uint32_t n_rows, uint32_t n_tok) const;
  // The span's matvec (one workgroup per row group): rows per group (per
  // matrix for a pair) and the workgroup size. One token: FISH_VK_SPAN_MV's
  // shape for the role when set, else a heuristic (rows so that >= 512
  // workgroups remain, about two units per invocation, 32..128), clamped so
  // that a workgroup accumulates at most 32 (row, token) sums; fz.qb32: 32
  // rows. 2..32 tokens: token groups in slices of one subgroup (measured rule).
  MatvecConfig span_matvec_config(const MatmulType& t, uint32_t n_in, uint32_t n_rows, uint32_t n_tok = 1,
                                  SpanFusion fz = {}) const;
  void set_override(uint32_t rows, uint32_t wg) { override_rows_ = rows; override_wg_ = wg; }
  // FISH_VK_SPAN_MV's shapes (per SpanRole); benchmarks change them between recordings.
  void set_span_shape(SpanRole role, SpanMvShape s) { span_shape_[role] = s; }
  // Bit (1 << role) set: that role's int8 Q4_K / Q5_K span matvecs take units
  // of 64 elements (one header read and scale decode per 32 qs bytes;
  // matvec_units_i8.glsl) instead of 32 (backend.cpp sets the device's default).
  void set_span_u64(uint32_t role_bits) { span_u64_ = role_bits; }
  // Benchmarks: the shape of every span matvec on 2..kMaxSpanMatvecTokens
  // tokens (c.wg the whole workgroup); c.nb = 0 restores the heuristic.
  void set_span_group_override(const MatvecConfig& c) { group_override_ = c; }
  // (One row only: token groups measured faster on 32-element units.)
  bool span_u64(const MatmulType& t, SpanFusion fz, uint32_t n_tok) const;
  SpanMvShape span_shape(SpanRole role) const { return span_shape_[role]; }

  // ---- int8 activations (shaderIntegerDotProduct) ----
  // int8 activations for every type with an int8 kernel, when the backend
  // asks (at open: FISH_VK_INT8, else the device's default, backend.cpp) and
  // the device has integer dot products and subgroup arithmetic.
  void set_int8(bool on) { int8_ = on && subgroups_ && dev_.caps().int_dot; }
  bool int8() const { return int8_; }
  // Whether products with weights of type t run on int8 x (matvec and tiled).
  bool int8_for(const MatmulType& t) const { return int8_ && q8_block(t) != 0; }
  // The same for a product on n_tok tokens: prefill on cooperative matrices reads f32 x.
  bool int8_for(const MatmulType& t, uint32_t n_tok) const { return int8_for(t) && !coopmat_for(n_tok); }
  // The same for a span's product (its matvec takes up to kMaxSpanMatvecTokens).
  bool span_int8_for(const MatmulType& t, uint32_t n_tok) const {
    return int8_for(t) && (n_tok <= kMaxSpanMatvecTokens || !coopmat_);
  }

  // ---- cooperative matrices (tensor cores) ----
  // Prefill (n_tok > kMaxMatvecTokens) on matmul_coopmat.comp, when the
  // backend asks (FISH_VK_COOPMAT, default on) and the device has them and
  // kCoopSharedBytes of shared memory.
  void set_coopmat(bool on) {
    coopmat_ = on && dev_.caps().coopmat && dev_.caps().max_shared_bytes >= kCoopSharedBytes;
  }
  bool coopmat() const { return coopmat_; }
  // Whether the coopmat loader takes c·sc/1024 from one f16 fma (its FUSED_F16:
  // exact only where the fma rounds once, measured on NVIDIA devices; kernels.cpp).
  bool fused_f16() const;
  // matmul_coopmat.comp's specialisation: spec (its constants 0..3, the
  // variant's own) then WIDE / NARROW for bn tokens per tile and FUSED_F16
  // (constants 4..6).
  std::vector<uint32_t> coop_spec(std::vector<uint32_t> spec, uint32_t bn) const;
  bool coopmat_for(uint32_t n_tok) const { return coopmat_ && n_tok > kMaxMatvecTokens; }
  // Tokens per tile of the coopmat kernel for weights of type t: 128 (WIDE)
  // for Q6_K where a grid of them still has coop_fill() workgroups, 32
  // (NARROW) where even 64-token tiles fall short of it, else 64
  // (coop_tokens_rule); set_coop_tokens (tests, benchmarks: 32, 64, 128; 0:
  // the rule) fixes it.
  uint32_t coop_tokens(const MatmulType& t, uint32_t n_rows, uint32_t n_tok) const;
  static uint32_t coop_tokens_rule(uint32_t ggml_type, uint32_t n_rows, uint32_t n_tok, uint32_t fill);
  void set_coop_tokens(uint32_t bn) { coop_tokens_ = bn; }
  uint32_t coop_tokens_set() const { return coop_tokens_; }  // set_coop_tokens' value (0: the rule)
  // Workgroups that fill the device: three quarters of its compute units
  // (DeviceCaps::compute_units), kCoopFillUnknown where it does not say.
  uint32_t coop_fill() const { return coop_fill_; }
  static uint32_t coop_fill_for(uint32_t compute_units) {
    return compute_units ? std::max(1u, compute_units * 3u / 4u) : kCoopFillUnknown;
  }
  static constexpr uint32_t kCoopFillUnknown = 128;
  // The CPU's activation block for t: 256 (Q8_K: Q4_K, Q5_K, Q6_K, FQ3), 32
  // (Q8_0: Q4_0, Q8_0), 0 (no int8 kernel).
  static uint32_t q8_block(const MatmulType& t);
  // 32-bit words of one token's quantised row of n elements in blocks of bs
  // (qs | d | sums, see shaders/quantize_x.comp), a multiple of 4.
  static uint32_t q8_row_words(uint32_t bs, uint32_t n);
  // The same for the span's B32 rows (blocks of 32 with the Q8_K rule, sums
  // per 16: shaders/quant_block.glsl).
  static uint32_t b32_row_words(uint32_t n);
  // The quantiser's layout: binding 0 = the buffer holding x, x2, the scales and the output.
  const Layout& quant_layout() const { return *quant_layout_; }
  // b32k: B32 rows (bs 32, the Q8_K rule, sums per 16) for K-quant weights.
  void record_quantize(VkCommandBuffer cmd, VkDescriptorSet set, const QuantPush& pc, uint32_t bs, bool xprod,
                       bool b32k = false);
  // record() / record_span() with int8 read x (binding 1) as quantised rows:
  // x_off / x_stride in words (q_off / q_stride of the quantiser); mvi_ /
  // mvsi_ for n_tok <= 4, tiledi_ / tlsi_ above.

  // Creates the pipelines a type needs now (so that the first product is not
  // slowed by compilation); returns false for a type without kernels.
  bool warm_up(const MatmulType& t, uint32_t n_in, uint32_t n_rows);

 private:
  std::string matvec_module(const MatmulType& t) const;

  const Device& dev_;
  Pipelines& pipelines_;
  const Layout* layout_;
  const Layout* span_layout_;
  const Layout* quant_layout_;
  bool subgroups_;
  bool int8_ = false;
  bool coopmat_ = false;
  uint32_t override_rows_ = 0, override_wg_ = 0;
  uint32_t coop_tokens_ = 0;
  uint32_t coop_fill_ = kCoopFillUnknown;
  SpanMvShape span_shape_[kRoles];
  uint32_t span_u64_ = 0;
  MatvecConfig group_override_{0, 0, 0, 0, 0};
};

}  // namespace fish::vk
