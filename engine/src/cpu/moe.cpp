#include "cpu/moe.h"

#include <algorithm>
#include <cstring>

#include "common/error.h"
#include "cpu/matmul_batch.h"
#include "cpu/ops.h"
#include "cpu/thread_pool.h"

namespace fish {

void moe_experts(ThreadPool& pool, const MoeExpertViews& ex, const float* x, int64_t n_embd, int32_t n,
                 const int32_t* ids, const float* w, int32_t k, float* y, MoeScratch& s) {
  if (n <= 0) return;
  const int32_t NE = ex.n_expert;
  const int64_t rows = int64_t(n) * k;
  // Counting sort of the (token, slot) pairs by expert, tokens in order within one.
  s.count.assign(size_t(NE), 0);
  for (int64_t i = 0; i < rows; ++i) {
    if (ids[i] < 0 || ids[i] >= NE) throw Error("moe: expert id " + std::to_string(ids[i]) + " out of range");
    ++s.count[size_t(ids[i])];
  }
  s.first.assign(size_t(NE) + 1, 0);
  for (int32_t e = 0; e < NE; ++e) s.first[size_t(e) + 1] = s.first[size_t(e)] + s.count[size_t(e)];
  s.row_of.resize(size_t(rows));  // (token, slot) -> its row in the gathered block
  {
    std::vector<int32_t>& fill = s.count;  // reused as the next free row per expert
    for (int32_t e = 0; e < NE; ++e) fill[size_t(e)] = s.first[size_t(e)];
    for (int64_t i = 0; i < rows; ++i) s.row_of[size_t(i)] = fill[size_t(ids[i])]++;
  }
  const int64_t F = ex.gate[0].n_out;
  auto grow = [](std::vector<float>& b, int64_t sz) {
    if (int64_t(b.size()) < sz) b.resize(size_t(sz));
  };
  grow(s.xg, rows * n_embd);
  grow(s.g, rows * F);
  grow(s.u, rows * F);
  grow(s.d, rows * n_embd);
  // Gather: each chosen expert's rows, one block per expert.
  pool.parallel_for(rows, 64, [&](int64_t b, int64_t e, int) {
    for (int64_t i = b; i < e; ++i)
      std::memcpy(s.xg.data() + int64_t(s.row_of[size_t(i)]) * n_embd, x + (i / k) * n_embd,
                  size_t(n_embd) * sizeof(float));
  });

  // gate/up of every chosen expert, one job; rows of expert e at first[e] with stride F.
  std::vector<MatmulItem> items;
  items.reserve(size_t(NE));
  for (int32_t e = 0; e < NE; ++e) {
    const int32_t r0 = s.first[size_t(e)], c = s.first[size_t(e) + 1] - r0;
    if (c == 0) continue;
    MatmulItem it;
    it.w[0] = ex.gate[e];
    it.w[1] = ex.up[e];
    it.n_w = 2;
    it.x = s.xg.data() + int64_t(r0) * n_embd;
    it.n_tok = c;
    // The outputs are [c, n_ff_e] blocks: expert e's at r0 * F (F >= its n_ff).
    it.y[0] = s.g.data() + int64_t(r0) * F;
    it.y[1] = s.u.data() + int64_t(r0) * F;
    items.push_back(it);
  }
  matmul_batch(pool, items.data(), int(items.size()));
  // silu(gate) * up in place (the experts of one stack share n_ff = F: the
  // blocks are one [rows, F] array), then down.
  pool.parallel_for(rows * F, 4096, [&](int64_t b, int64_t e, int) {
    silu_mul(s.g.data() + b, s.u.data() + b, s.g.data() + b, e - b);
  });
  for (size_t i = 0, e = 0; i < items.size(); ++i, ++e) {
    while (s.first[e + 1] == s.first[e]) ++e;
    const int32_t r0 = s.first[e];
    MatmulItem& it = items[i];
    it.x = it.y[0];
    it.w[0] = ex.down[e];
    it.n_w = 1;
    it.y[0] = s.d.data() + int64_t(r0) * n_embd;
    it.y[1] = nullptr;
  }
  matmul_batch(pool, items.data(), int(items.size()));
  // Scatter: each token adds its experts' outputs in its slot order.
  pool.parallel_for(n, 1, [&](int64_t b, int64_t e, int) {
    for (int64_t t = b; t < e; ++t) {
      float* yt = y + t * n_embd;
      for (int32_t j = 0; j < k; ++j) {
        const float wj = w[t * k + j];
        const float* d = s.d.data() + int64_t(s.row_of[size_t(t * k + j)]) * n_embd;
        for (int64_t i = 0; i < n_embd; ++i) yt[i] += wj * d[i];
      }
    }
  });
}

}  // namespace fish
