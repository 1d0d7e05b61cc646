// The mixture-of-experts kernels of a span (shaders/moe_*.comp, modules.txt):
// routing on the device (moe_route), the experts' products over the pairs
// grouped by expert (mvm_<T>: gate|up with silu·up, or down weighted by the
// routing weight; mvmi_<T> the same on int8 B32 rows), the same products as tiled matmuls per expert for prompt
// chunks (tlm_<T>; tcm_<T> on cooperative matrices where the dense prefill has them), and the sum of the k experts' rows (+ the sigmoid-gated
// shared expert) into x (moe_combine). One layout for the three: the span
// matmul's six bindings (0 W, 1 arena x, 2 parameters, 3 arena y, 4 arena
// routing words, 5 the pair's second weight) and MoePush.
#pragma once
#include <cstdint>

#include "kernels.h"

namespace fish::vk {

// MatmulParams with FISH_MOE (shaders/matmul_common.glsl): the span matmul's
// push constants and the routing fields.
struct MoePush {
  SpanMatmulPush s;
  uint32_t route_off = 0;  // word index of the routing words (shaders/moe_common.glsl)
  uint32_t n_expert = 0;
  uint32_t k = 0;          // experts per token
  // 1 = renormalise the chosen weights (moe_route); kPairs (a decode's gate|up,
  // moe_matvec.comp ROUTE): one workgroup row per pair, its expert from the
  // pair's words, which the router matvec's tail wrote (matvec_span.comp EPI 5).
  uint32_t flags = 0;
  static constexpr uint32_t kPairs = 2;
  // A summed down with s.q_out set (moe_matvec.comp SUM + QOUT): word index of
  // its B32 blocks' arrival counters (n_rows / 32 words, 0 between dispatches).
  uint32_t cnt_off = 0;
};
static_assert(sizeof(MoePush) == 108);

// Routing words of a forward of n_tok tokens (moe_common.glsl's layout).
inline uint64_t moe_route_words(uint64_t n_tok, uint64_t n_expert, uint64_t k) { return 3 * n_tok * k + 2 * n_expert + 2; }

class MoeKernels {
 public:
  static constexpr uint32_t kMaxExperts = 512;  // moe_route.comp's shared arrays
  static constexpr uint32_t kMaxUsed = 16;      // its per-token choice list
  static constexpr uint32_t kRows = 4;          // rows per moe_matvec workgroup
  static constexpr uint32_t kWg = 64;           // its invocations (QOUT: per slice)
  static constexpr uint32_t kQoutRows = 32;     // QOUT: a B32 block per workgroup

  // matmul: whether prompt chunks take cooperative matrices (MatmulKernels::coopmat(), read at record time).
  MoeKernels(const Device& dev, Pipelines& pipelines, const MatmulKernels& matmul);
  const Layout& layout() const { return *layout_; }

  // pc.s.m: n_tok tokens, router logits at x_off (x_stride apart); writes the routing words:
  // a workgroup per token, a barrier and the grouping's one workgroup (moe_route.comp's phases).
  void route(VkCommandBuffer cmd, VkDescriptorSet set, const MoePush& pc);
  // Experts' products: pc.s.m.n_rows rows per expert, n_in inputs; pair (gate|up) or down.
  // Grid: row groups x min(n_expert, n_tok·k) slots. A pair with MoePush::kPairs (n_tok <=
  // kSumTokens): grid row groups x n_tok·k pairs, their words written, no grouped lists. sum (down, n_tok <= kSumTokens):
  // the weighted rows summed into x instead (+ the gated shared expert: moe_matvec.comp's
  // SUM, the push as combine's with the down's n_in / x), grid: row groups x tokens.
  // next (sum, no shared expert): also the next rmsnorm's x·norm and Σx² partials
  // (pc.s.norm_off / xg_off / sq_off as matvec_span.comp's EPI 3), row_groups() of them.
  // A pair's pc.s.inv_in / inv_parts: the producer's partials of its x, 1/rms applied here.
  // int8 (K-quants, int8 dot products): x is B32 rows (mvmi_<T>), pc.s.m.x_stride words apart.
  // A gate|up by pairs with pc.s.q_out set (n_rows a multiple of 32): h also as B32 rows, pair p's
  // at q_out + p·q_stride (moe_matvec.comp QOUT: kQoutRows rows per workgroup in slices of kRows).
  // A summed down with next, one token and pc.s.q_out set (n_rows a multiple of 32): x_new·norm
  // also as B32 rows at q_out (the next layer's q/k/v read them), each block quantised by
  // the last of its workgroups to arrive (counters at pc.cnt_off).
  void matvec(VkCommandBuffer cmd, const MatmulType& t, VkDescriptorSet set, const MoePush& pc, bool pair,
              bool sum = false, bool next = false, bool int8 = false);
  static uint32_t row_groups(uint32_t n_rows) { return (n_rows + kRows - 1) / kRows; }
  // Decode shapes take the down with the sum folded in (no combine step).
  static constexpr uint32_t kSumTokens = 4;
  // x += the k rows per token (+ gate · shared): one workgroup per token.
  void combine(VkCommandBuffer cmd, VkDescriptorSet set, const MoePush& pc);
  // Pairs per chunk of moe_matvec: 1 for a decode (about one pair per expert), else 4.
  static uint32_t chunk_pairs(uint32_t n_tok, uint32_t n_expert, uint32_t k) { return n_tok * k >= 2 * n_expert ? 4 : 1; }
  // Epilogues of tiled(): silu (gate), y·v (up onto silu(gate)), v·w_pair (down).
  enum TiledEpi : uint32_t { kSilu = 2, kMulY = 4, kRouteWeight = 5 };
  // The experts' products as tiled matmuls (matmul_tiled.comp FISH_MOE), one
  // expert per z slot over its pairs in tiles of 64: gate_up = x rows by token
  // (p / k), else by pair. Grid: row tiles x pair tiles (n_tok at most per expert) x slots.
  // With cooperative matrices (tcm_<T>, matmul_coopmat.comp FISH_MOE): tiles of
  // 128 rows x coop_tokens() pairs.
  void tiled(VkCommandBuffer cmd, const MatmulType& t, VkDescriptorSet set, const MoePush& pc, TiledEpi epi, bool gate_up);
  // Pairs per coopmat tile: 32 where an active expert averages at most 32 of
  // them (a 512-token chunk of a 128-expert, 8-used model: 32), else 64;
  // MatmulKernels::set_coop_tokens fixes it (tests).
  uint32_t coop_tokens(uint32_t n_tok, uint32_t n_expert, uint32_t k) const;
  // The fixed rule between the two: a prompt-chunk shape (more than the
  // matvec's 4 tokens) with at least 4 pairs per expert on average, where
  // moe_matvec would read an expert's rows once per 4 pairs and the tiled
  // kernel once per 64 of them.
  static bool use_tiled(uint32_t n_tok, uint32_t n_expert, uint32_t k) {
    return n_tok > MatmulKernels::kMaxMatvecTokens && n_tok * k >= 4 * n_expert;
  }
  // tiled: also the tlm_ pipelines (spans whose chunks may take them); int8_pairs: the
  // decode's gate|up on B32 rows; int8_down: its gate|up writing B32 rows and the summed down on them;
  // sum_rows: the summed down writing the next layer's B32 rows.
  void warm_up(const MatmulType& gate_up, const MatmulType& down, bool tiled, bool int8_pairs = false,
               bool int8_down = false, bool sum_rows = false);

 private:
  void bind(VkCommandBuffer cmd, VkPipeline p, VkDescriptorSet set, const MoePush& pc);
  // The mvm_<T> pipeline of one kind (matvec() records, warm_up() creates the same):
  // a pair (gate|up), a down, the down summed into x (next: + the next norm), a
  // decode's gate|up by pairs (MoePush::kPairs); nt pairs per chunk.
  enum class Mvm { kPair, kDown, kSum, kPairs };
  VkPipeline mvm(const MatmulType& t, Mvm kind, bool next = false, uint32_t nt = 1, bool int8 = false,
                 bool qout = false);
  // tiled()'s pipeline: tcm_<T> with bn pairs per tile where MatmulKernels::coopmat(), else tlm_<T> (bn unused).
  VkPipeline tiled_pipeline(const MatmulType& t, TiledEpi epi, bool gate_up, uint32_t bn);
  // QOUT's workgroup: kQoutRows / kRows slices of whole subgroups, at most 32 subgroups.
  uint32_t qout_slice_width() const;
  const Device& dev_;
  Pipelines& pipelines_;
  const MatmulKernels& matmul_;
  const Layout* layout_;
};

}  // namespace fish::vk
