// A batch of independent matrix products in one thread-pool job: each item is
// y_i = x · w_iᵀ for one or two weights sharing an input x [n_tok, n_in] (an
// MoE layer's experts, each on the rows routed to it). The same kernels and
// int8 activations as matmul(); every item's activations are quantised first
// (the threads share the rows), then the output rows of all the weights are
// split into units of about equal weight bytes that the threads take from one
// counter, so the pool splits both the experts and their rows. A row's result
// does not depend on the thread count.
#pragma once
#include "cpu/matmul.h"

namespace fish {

struct MatmulItem {
  WeightView w[2];
  int n_w = 1;               // 1 or 2 (gate + up); both must take the same n_in
  const float* x = nullptr;  // [n_tok, n_in]
  int n_tok = 0;
  float* y[2] = {nullptr, nullptr};  // [n_tok, w[i].n_out]
};

// Throws fish::Error (naming the item) for a weight matmul would refuse.
void matmul_batch(ThreadPool& pool, const MatmulItem* items, int n_items);

}  // namespace fish
