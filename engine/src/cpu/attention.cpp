#include "cpu/attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "common/fp16.h"
#include "cpu/cpu_features.h"
#include "cpu/thread_pool.h"

namespace fish {

void attention_block_avx2(const AttentionBlock& b, const KvView& kv, int32_t hd, float scale, float* scores);
void attention_block_avx512(const AttentionBlock& b, const KvView& kv, int32_t hd, float scale, float* scores);

namespace {

void attention_head_scalar(const float* q, const KvView& kv, int32_t n_kv, int32_t hd, float scale, float* out,
                           float* scores) {
  float mx = -INFINITY;
  for (int32_t j = 0; j < n_kv; ++j) {
    const uint16_t* kj = kv.key(j);
    float s = 0;
    for (int32_t d = 0; d < hd; ++d) s += q[d] * fp16_to_fp32(kj[d]);
    s *= scale;
    scores[j] = s;
    mx = std::max(mx, s);
  }
  double sum = 0;
  for (int32_t j = 0; j < n_kv; ++j) {
    scores[j] = std::exp(scores[j] - mx);
    sum += scores[j];
  }
  const float inv = float(1.0 / sum);
  for (int32_t d = 0; d < hd; ++d) out[d] = 0;
  for (int32_t j = 0; j < n_kv; ++j) {
    const uint16_t* vj = kv.value(j);
    const float p = scores[j] * inv;
    for (int32_t d = 0; d < hd; ++d) out[d] += p * fp16_to_fp32(vj[d]);
  }
}

}  // namespace

void attention_block_scalar(const AttentionBlock& b, const KvView& kv, int32_t hd, float scale, float* scores) {
  for (int32_t i = 0; i < b.n_tok; ++i)
    for (int32_t h = 0; h < b.n_heads; ++h)
      attention_head_scalar(b.q + i * b.q_stride + int64_t(h) * hd, kv, b.n_kv0 + i, hd, scale,
                            b.out + i * b.out_stride + int64_t(h) * hd, scores);
}

AttentionBlockFn attention_block_variant(const char* name) {
  const auto is = [&](const char* v) { return name && std::strcmp(name, v) == 0; };
  if (is("scalar")) return &attention_block_scalar;
#if defined(__x86_64__)
  const CpuFeatures& f = cpu_features();
  if (is("avx2")) return f.avx2 && f.fma && f.f16c ? &attention_block_avx2 : nullptr;
  if (is("avx512")) return f.avx512_vnni() ? &attention_block_avx512 : nullptr;
#endif
  return nullptr;
}

AttentionBlockFn attention_block_best() {
  static const AttentionBlockFn fn = [] {
    for (const char* v : {"avx512", "avx2"})
      if (AttentionBlockFn f = attention_block_variant(v)) return f;
    return &attention_block_scalar;
  }();
  return fn;
}

void attention(ThreadPool& pool, const AttentionArgs& a, AttentionScratch& scratch) {
  const int nth = pool.size();
  int32_t max_kv = a.pos0 + a.n_tok;
  if (a.rows)
    for (int32_t t = 0; t < a.n_tok; ++t) max_kv = std::max(max_kv, a.rows[t].pos + 1);
  const int32_t group = a.n_head / a.n_head_kv;
  // Runs of rows that can share a block: consecutive tokens of one sequence
  // at consecutive positions (one array: all of them; rows: a prompt's rows
  // of one sequence, whatever the other sequences in the batch). runs holds
  // each run's first token, then n_tok.
  std::vector<int32_t>& runs = scratch.runs;
  runs.clear();
  for (int32_t t = 0; t < a.n_tok; ++t)
    if (t == 0 || (a.rows && (a.rows[t].k_pages != a.rows[t - 1].k_pages || a.rows[t].v_pages != a.rows[t - 1].v_pages ||
                               a.rows[t].pos != a.rows[t - 1].pos + 1)))
      runs.push_back(t);
  runs.push_back(a.n_tok);
  const AttentionBlockFn block_fn = a.block ? a.block : attention_block_best();
  // Work items are blocks of up to tb tokens of a run × hb query heads of one
  // KV head, all sharing each K/V row's loads: up to 8 tokens (32 for the
  // AVX-512 variant, whose tiles serve every row of a block) and a whole KV
  // group, halved (tokens first) while there are fewer than 4 items per
  // thread or more rows than a block takes. The results are the same bits
  // whatever the blocks.
  static const AttentionBlockFn avx512 = attention_block_variant("avx512");
  int32_t tb = block_fn == avx512 ? 32 : 8, hb = group;
  const auto chunks_of = [&](int32_t tbs) {
    int64_t c = 0;
    for (size_t r = 0; r + 1 < runs.size(); ++r) c += (runs[r + 1] - runs[r] + tbs - 1) / tbs;
    return c;
  };
  const auto items = [&] { return chunks_of(tb) * a.n_head_kv * ((group + hb - 1) / hb); };
  while ((tb > 1 || hb > 1) && (items() < 4 * int64_t(nth) || tb * hb > kMaxBlockRows)) {
    if (tb > 1) tb = (tb + 1) / 2;
    else hb = (hb + 1) / 2;
  }
  // The blocks of tokens: first token and count.
  std::vector<int32_t>& chunks = scratch.chunks;
  chunks.clear();
  for (size_t r = 0; r + 1 < runs.size(); ++r)
    for (int32_t t = runs[r]; t < runs[r + 1]; t += tb) chunks.push_back(t), chunks.push_back(std::min(tb, runs[r + 1] - t));
  const int32_t blocks = (group + hb - 1) / hb;
  const int64_t tok_blocks = int64_t(chunks.size() / 2);
  const size_t per_thread = size_t(max_kv) * size_t(tb) * size_t(hb);
  if (int(scratch.scores.size()) < nth) scratch.scores.resize(size_t(nth));
  for (auto& s : scratch.scores)
    if (s.size() < per_thread) s.resize(per_thread);
  const int64_t q_stride = int64_t(a.n_head) * a.head_dim;
  // Items in order of KV head, then block of tokens: the threads walk one KV
  // head's blocks together, its K and V staying in their caches from one block
  // to the next. Later tokens see more positions, so a plain contiguous split
  // would be unbalanced for prefill: interleave instead.
  const int64_t per_g = tok_blocks * blocks, n_items = per_g * a.n_head_kv;
  pool.run([&](int ith, int nthr) {
    float* scores = scratch.scores[size_t(ith)].data();
    KvView kv;
    kv.stride = a.kv_stride;
    kv.page_shift = a.rows ? a.page_shift : 31;
    for (int64_t it = ith; it < n_items; it += nthr) {
      const int64_t c = it % per_g / blocks;
      const int32_t t = chunks[size_t(2 * c)], g = int32_t(it / per_g), hbi = int32_t(it % blocks);
      const int32_t h = g * group + hbi * hb;
      AttentionBlock b;
      b.n_tok = chunks[size_t(2 * c + 1)], b.n_heads = std::min(hb, group - hbi * hb);
      b.q = a.q + t * q_stride + int64_t(h) * a.head_dim, b.q_stride = q_stride;
      b.out = a.out + t * q_stride + int64_t(h) * a.head_dim, b.out_stride = q_stride;
      b.n_kv0 = a.pos0 + t + 1;
      if (a.rows) {
        kv.k = a.rows[t].k_pages, kv.v = a.rows[t].v_pages;
        b.n_kv0 = a.rows[t].pos + 1;
      } else {
        kv.k = &a.k, kv.v = &a.v;
      }
      kv.off = int64_t(g) * a.head_dim;
      block_fn(b, kv, a.head_dim, a.scale, scores);
    }
  });
}

}  // namespace fish
