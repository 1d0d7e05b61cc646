// The experts of a mixture-of-experts FFN on the CPU, for a chunk of n tokens
// whose routing is known (cpu/moe_routing.h):
//   y[t] += Σ_j w[t, j] · down_e((silu(gate_e(x[t])) * up_e(x[t])))   e = ids[t, j]
// The tokens are grouped by expert (each expert's rows gathered into one
// block, in token order), so each chosen expert's weights are read once per
// chunk and the experts nobody chose are not read at all; all the gate/up
// products run as one matmul_batch job, then all the down products as
// another (the pool splits experts and rows). The weighted sums are added in
// each token's slot order, so the result does not depend on the thread count.
#pragma once
#include <cstdint>
#include <vector>

#include "cpu/matmul.h"

namespace fish {

class ThreadPool;

// Expert e's matrices: gate[e], up[e] [n_embd -> n_ff], down[e] [n_ff -> n_embd].
struct MoeExpertViews {
  const WeightView* gate = nullptr;
  const WeightView* up = nullptr;
  const WeightView* down = nullptr;
  int32_t n_expert = 0;
};

// Buffers reused across calls (grown to the largest chunk).
struct MoeScratch {
  std::vector<float> logits, weights, xg, g, u, d, shexp_g, shexp_u, shexp_d;
  std::vector<int32_t> ids, count, first, row_of;
};

// x [n, n_embd] (the normed stream), ids / w [n, k]; y [n, n_embd] += the experts' sum.
void moe_experts(ThreadPool& pool, const MoeExpertViews& ex, const float* x, int64_t n_embd, int32_t n,
                 const int32_t* ids, const float* w, int32_t k, float* y, MoeScratch& s);

}  // namespace fish
