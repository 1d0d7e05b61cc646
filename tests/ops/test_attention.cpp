// Attention over the f16 KV cache: each variant against a double-precision
// softmax(q·K·scale)·V, and the threaded driver's causal masking and GQA
// (also with one thread and with more threads than work: the heads grouped
// otherwise, the same bits).
#include <catch2/catch.hpp>
#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "common/fp16.h"
#include "cpu/attention.h"
#include "cpu/thread_pool.h"

using namespace fish;

namespace {

// out[d] for one head, from f16 k/v rows at stride, in double.
std::vector<double> ref_head(const float* q, const uint16_t* k, const uint16_t* v, int64_t stride, int n_kv, int hd,
                             float scale) {
  std::vector<double> s(n_kv), out(hd, 0.0);
  double mx = -1e300, sum = 0;
  for (int j = 0; j < n_kv; ++j) {
    double d = 0;
    for (int i = 0; i < hd; ++i) d += double(q[i]) * fp16_to_fp32(k[j * stride + i]);
    s[j] = d * scale;
    mx = std::max(mx, s[j]);
  }
  for (int j = 0; j < n_kv; ++j) sum += (s[j] = std::exp(s[j] - mx));
  for (int j = 0; j < n_kv; ++j)
    for (int i = 0; i < hd; ++i) out[i] += s[j] / sum * fp16_to_fp32(v[j * stride + i]);
  return out;
}

}  // namespace

// Each variant on 1, 3, 4 and 5 query heads of one KV head (the AVX2 one
// shares K/V rows among four and two heads at a time) against the double
// reference, over one array and over pages; and every head's output exactly
// the bits of that head computed alone (what makes a batch's rows equal to
// each row evaluated alone, whatever the driver groups).
TEST_CASE("attention heads variants vs double reference", "[attention]") {
  std::mt19937 rng(7);
  std::normal_distribution<float> nd(0.f, 1.f);
  for (int hd : {8, 16, 64, 72, 128}) {
    for (int n_kv : {1, 5, 33, 300}) {
      const int64_t stride = hd * 3;
      std::vector<uint16_t> k(size_t(n_kv) * stride), v(k.size());
      for (auto& x : k) x = fp32_to_fp16(nd(rng));
      for (auto& x : v) x = fp32_to_fp16(nd(rng));
      const float scale = 1.0f / std::sqrt(float(hd));
      const uint16_t* kp = k.data();
      const uint16_t* vp = v.data();
      KvView kv;
      kv.k = &kp, kv.v = &vp, kv.stride = stride;
      // The same positions in pages of 4, stored in reverse page order.
      const int n_pages = (n_kv + 3) / 4;
      std::vector<uint16_t> kpg(size_t(n_pages) * 4 * stride), vpg(kpg.size());
      std::vector<const uint16_t*> ktab(n_pages), vtab(n_pages);
      for (int pg = 0; pg < n_pages; ++pg) {
        const size_t slot = size_t(n_pages - 1 - pg) * 4 * stride;
        ktab[pg] = kpg.data() + slot, vtab[pg] = vpg.data() + slot;
        for (int j = pg * 4; j < std::min(n_kv, pg * 4 + 4); ++j)
          for (int64_t i = 0; i < stride; ++i) {
            kpg[slot + (j - pg * 4) * stride + i] = k[j * stride + i];
            vpg[slot + (j - pg * 4) * stride + i] = v[j * stride + i];
          }
      }
      KvView paged;
      paged.k = ktab.data(), paged.v = vtab.data(), paged.page_shift = 2, paged.stride = stride;
      for (int nh : {1, 3, 4, 5}) {
        std::vector<float> q(size_t(nh) * hd), out(q.size()), alone(hd), scores(size_t(nh) * n_kv);
        for (auto& x : q) x = nd(rng);
        for (AttentionHeadsFn fn : {&attention_heads_scalar, attention_heads_best()}) {
          for (const KvView* view : {&kv, &paged}) {
            fn(q.data(), nh, *view, n_kv, hd, scale, out.data(), scores.data());
            int64_t differ = 0;
            for (int h = 0; h < nh; ++h) {
              const auto want = ref_head(q.data() + h * hd, k.data(), v.data(), stride, n_kv, hd, scale);
              for (int i = 0; i < hd; ++i) CHECK(std::fabs(out[h * hd + i] - want[i]) < 1e-4);
              fn(q.data() + h * hd, 1, *view, n_kv, hd, scale, alone.data(), scores.data());
              for (int i = 0; i < hd; ++i) differ += out[h * hd + i] != alone[i];
            }
            INFO("hd " << hd << " n_kv " << n_kv << " heads " << nh);
            CHECK(differ == 0);
          }
        }
      }
    }
  }
}

TEST_CASE("attention: causal mask and GQA head mapping over threads", "[attention]") {
  const int n_head = 8, n_head_kv = 2, hd = 16, n_tok = 5, pos0 = 3;
  const int64_t kvd = n_head_kv * hd;
  std::mt19937 rng(3);
  std::normal_distribution<float> nd(0.f, 1.f);
  std::vector<uint16_t> k(size_t(pos0 + n_tok) * kvd), v(k.size());
  for (auto& x : k) x = fp32_to_fp16(nd(rng));
  for (auto& x : v) x = fp32_to_fp16(nd(rng));
  std::vector<float> q(size_t(n_tok) * n_head * hd), out(q.size());
  for (auto& x : q) x = nd(rng);
  ThreadPool pool(2);
  AttentionScratch scratch;
  AttentionArgs a;
  a.q = q.data();
  a.n_tok = n_tok;
  a.pos0 = pos0;
  a.k = k.data();
  a.v = v.data();
  a.kv_stride = kvd;
  a.n_head = n_head;
  a.n_head_kv = n_head_kv;
  a.head_dim = hd;
  a.scale = 0.25f;
  a.out = out.data();
  attention(pool, a, scratch);
  // One thread (whole KV groups per item) and seven (28 items wanted: one head
  // per item): the same bits.
  for (const int threads : {1, 7}) {
    ThreadPool other(threads);
    AttentionScratch sc;
    std::vector<float> o2(out.size());
    a.out = o2.data();
    attention(other, a, sc);
    int64_t differ = 0;
    for (size_t i = 0; i < out.size(); ++i) differ += o2[i] != out[i];
    INFO(threads << " threads");
    CHECK(differ == 0);
  }
  for (int t = 0; t < n_tok; ++t)
    for (int h = 0; h < n_head; ++h) {
      const int kvh = h / (n_head / n_head_kv);
      const auto want = ref_head(q.data() + (t * n_head + h) * hd, k.data() + kvh * hd, v.data() + kvh * hd, kvd,
                                 pos0 + t + 1, hd, 0.25f);
      for (int i = 0; i < hd; ++i) CHECK(std::fabs(out[(t * n_head + h) * hd + i] - want[i]) < 1e-4);
    }
}

TEST_CASE("attention: rows of two sequences over their own pages", "[attention]") {
  // Sequence A: 7 positions, sequence B: 5; pages of 2 positions. A batch of
  // rows (A at 5, B at 3, A at 6, B at 4) equals each row attending alone.
  const int n_head = 4, n_head_kv = 2, hd = 8, P = 2;
  const int64_t kvd = n_head_kv * hd;
  std::mt19937 rng(5);
  std::normal_distribution<float> nd(0.f, 1.f);
  const int lens[2] = {7, 5};
  std::vector<std::vector<uint16_t>> kc(2), vc(2);
  std::vector<std::vector<uint16_t>> kpages, vpages;
  std::vector<std::vector<const uint16_t*>> kt(2), vt(2);
  for (int s = 0; s < 2; ++s) {
    kc[s].resize(size_t(lens[s]) * kvd), vc[s].resize(kc[s].size());
    for (auto& x : kc[s]) x = fp32_to_fp16(nd(rng));
    for (auto& x : vc[s]) x = fp32_to_fp16(nd(rng));
    for (int pg = 0; pg * P < lens[s]; ++pg) {
      kpages.emplace_back(size_t(P) * kvd), vpages.emplace_back(size_t(P) * kvd);
      for (int j = pg * P; j < std::min(lens[s], pg * P + P); ++j)
        for (int64_t i = 0; i < kvd; ++i) {
          kpages.back()[(j - pg * P) * kvd + i] = kc[s][j * kvd + i];
          vpages.back()[(j - pg * P) * kvd + i] = vc[s][j * kvd + i];
        }
    }
  }
  size_t next = 0;
  for (int s = 0; s < 2; ++s)
    for (int pg = 0; pg * P < lens[s]; ++pg, ++next) kt[s].push_back(kpages[next].data()), vt[s].push_back(vpages[next].data());
  const int seqs[4] = {0, 1, 0, 1}, poss[4] = {5, 3, 6, 4};
  std::vector<AttentionRow> rows(4);
  for (int t = 0; t < 4; ++t) rows[t] = {kt[seqs[t]].data(), vt[seqs[t]].data(), poss[t]};
  std::vector<float> q(size_t(4) * n_head * hd), out(q.size());
  for (auto& x : q) x = nd(rng);
  ThreadPool pool(2);
  AttentionScratch scratch;
  AttentionArgs a;
  a.q = q.data();
  a.n_tok = 4;
  a.rows = rows.data();
  a.page_shift = 1;
  a.kv_stride = kvd;
  a.n_head = n_head;
  a.n_head_kv = n_head_kv;
  a.head_dim = hd;
  a.scale = 0.3f;
  a.out = out.data();
  attention(pool, a, scratch);
  for (int t = 0; t < 4; ++t)
    for (int h = 0; h < n_head; ++h) {
      const int kvh = h / (n_head / n_head_kv), s = seqs[t];
      const auto want = ref_head(q.data() + (t * n_head + h) * hd, kc[s].data() + kvh * hd, vc[s].data() + kvh * hd,
                                 kvd, poss[t] + 1, hd, 0.3f);
      for (int i = 0; i < hd; ++i) CHECK(std::fabs(out[(t * n_head + h) * hd + i] - want[i]) < 1e-4);
    }
}
