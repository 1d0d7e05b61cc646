// The FFN of a mixture-of-experts layer (Hparams::moe()) on the CPU:
//   logits = xn · routerᵀ            [n, n_expert]   (linear(): on the device in stage 1)
//   ids, w = moe_route(logits)       [n, k]          (cpu/moe_routing.h; the rule: hparams.h MoeGating)
//   x     += Σ_j w_j · expert_ids_j(xn)              (cpu/moe.h: grouped by expert)
//   x     += sigmoid(xn · shexp_gate) · shared(xn)   (qwen2moe only)
#include <cmath>

#include "cpu/moe_routing.h"
#include "cpu/ops.h"
#include "model/llama_model.h"

namespace fish {

void LlamaModel::moe_ffn(int32_t l, const float* xn, float* x, int32_t n) {
  const Hparams& h = hp_;
  const Layer& L = layers_[size_t(l)];
  const int32_t NE = h.n_expert, k = h.n_expert_used;
  const int64_t E = h.n_embd;
  MoeScratch& s = moe_;
  if (int64_t(s.logits.size()) < int64_t(n) * NE) s.logits.resize(size_t(n) * size_t(NE));
  if (int64_t(s.ids.size()) < int64_t(n) * k) {
    s.ids.resize(size_t(n) * size_t(k));
    s.weights.resize(size_t(n) * size_t(k));
  }
  linear(L.router, xn, n, s.logits.data());
  const bool norm = h.gating == MoeGating::SoftmaxTopKNorm;
  pool_->parallel_for(n, 8, [&](int64_t b, int64_t e, int) {
    for (int64_t t = b; t < e; ++t)
      moe_route(s.logits.data() + t * NE, NE, k, norm, s.ids.data() + t * k, s.weights.data() + t * k);
  });

  // The shared expert first (its own buffers g_/u_, o_), added after the routed ones.
  const bool shexp = L.gate_shexp.tensor != nullptr;
  if (shexp) {
    const int64_t F = h.n_ff_shexp;
    const Linear* gu[2] = {&L.gate_shexp, &L.up_shexp};
    float* gu_out[2] = {g_.data(), u_.data()};
    linear_group(gu, 2, xn, n, gu_out);
    pool_->parallel_for(n * F, 4096, [&](int64_t b, int64_t e, int) {
      silu_mul(g_.data() + b, u_.data() + b, g_.data() + b, e - b);
    });
    linear(L.down_shexp, g_.data(), n, o_.data());
  }

  const MoeExpertViews ex{L.gate_exps.cpu.data(), L.up_exps.cpu.data(), L.down_exps.cpu.data(), NE};
  moe_experts(*pool_, ex, xn, E, n, s.ids.data(), s.weights.data(), k, x, s);

  if (shexp) {
    pool_->parallel_for(n, 1, [&](int64_t b, int64_t e, int) {
      for (int64_t t = b; t < e; ++t) {
        const float* xt = xn + t * E;
        double z = 0.0;
        for (int64_t i = 0; i < E; ++i) z += double(xt[i]) * double(L.shexp_gate[i]);
        const float gate = float(1.0 / (1.0 + std::exp(-z)));
        float* yt = x + t * E;
        const float* ot = o_.data() + t * E;
        for (int64_t i = 0; i < E; ++i) yt[i] += gate * ot[i];
      }
    });
  }
}

}  // namespace fish
