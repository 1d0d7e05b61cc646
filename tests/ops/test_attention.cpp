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

// Each variant on blocks of tokens × query heads of one KV head (the AVX2
// one shares K/V rows among them, by blocks of 32 positions; the AVX-512 one
// converts tiles of 32 or 64 positions for all of them) against the
// double reference, over one array and over pages; and every row's output
// exactly the bits of that row computed alone (what makes a batch's rows equal
// to each row evaluated alone, whatever blocks the driver forms). 80 rows: a
// block past kMaxBlockRows, split. The AVX-512 variant computes up to 8 rows
// (and a row alone) with one kernel, more with another: the same bits.
TEST_CASE("attention block variants vs double reference", "[attention]") {
  std::mt19937 rng(7);
  std::normal_distribution<float> nd(0.f, 1.f);
  for (int hd : {8, 16, 64, 72, 128, 256}) {
    for (int n_kv : {1, 5, 33, 300}) {
      const int max_tok = 10, n_pos = n_kv + max_tok;
      const int64_t stride = hd * 3;
      std::vector<uint16_t> k(size_t(n_pos) * stride), v(k.size());
      for (auto& x : k) x = fp32_to_fp16(nd(rng));
      for (auto& x : v) x = fp32_to_fp16(nd(rng));
      const float scale = 1.0f / std::sqrt(float(hd));
      const uint16_t* kp = k.data();
      const uint16_t* vp = v.data();
      KvView kv;
      kv.k = &kp, kv.v = &vp, kv.stride = stride;
      // The same positions in pages of 4, stored in reverse page order.
      const int n_pages = (n_pos + 3) / 4;
      std::vector<uint16_t> kpg(size_t(n_pages) * 4 * stride), vpg(kpg.size());
      std::vector<const uint16_t*> ktab(n_pages), vtab(n_pages);
      for (int pg = 0; pg < n_pages; ++pg) {
        const size_t slot = size_t(n_pages - 1 - pg) * 4 * stride;
        ktab[pg] = kpg.data() + slot, vtab[pg] = vpg.data() + slot;
        for (int j = pg * 4; j < std::min(n_pos, pg * 4 + 4); ++j)
          for (int64_t i = 0; i < stride; ++i) {
            kpg[slot + (j - pg * 4) * stride + i] = k[j * stride + i];
            vpg[slot + (j - pg * 4) * stride + i] = v[j * stride + i];
          }
      }
      KvView paged;
      paged.k = ktab.data(), paged.v = vtab.data(), paged.page_shift = 2, paged.stride = stride;
      const int shapes[][2] = {{1, 1}, {1, 3}, {1, 4}, {1, 5}, {2, 4}, {7, 1}, {3, 4}, {8, 4}, {5, 3}, {10, 8}};
      for (const auto& sh : shapes) {
        const int nt = sh[0], nh = sh[1];
        std::vector<float> q(size_t(nt) * nh * hd), out(q.size()), alone(hd), scores(size_t(nt) * nh * (n_kv + nt));
        for (auto& x : q) x = nd(rng);
        for (const char* name : {"scalar", "avx2", "avx512"}) {
          const AttentionBlockFn fn = attention_block_variant(name);
          if (!fn) continue;
          for (const KvView* view : {&kv, &paged}) {
            AttentionBlock b;
            b.q = q.data(), b.q_stride = int64_t(nh) * hd, b.out = out.data(), b.out_stride = int64_t(nh) * hd;
            b.n_tok = nt, b.n_heads = nh, b.n_kv0 = n_kv;
            fn(b, *view, hd, scale, scores.data());
            int64_t differ = 0;
            for (int i = 0; i < nt; ++i)
              for (int h = 0; h < nh; ++h) {
                const float* qr = q.data() + (i * nh + h) * hd;
                const auto want = ref_head(qr, k.data(), v.data(), stride, n_kv + i, hd, scale);
                for (int e = 0; e < hd; ++e) CHECK(std::fabs(out[(i * nh + h) * hd + e] - want[e]) < 1e-4);
                AttentionBlock one;
                one.q = qr, one.out = alone.data(), one.n_kv0 = n_kv + i;
                fn(one, *view, hd, scale, scores.data());
                for (int e = 0; e < hd; ++e) differ += out[(i * nh + h) * hd + e] != alone[e];
              }
            INFO(name << ": hd " << hd << " n_kv " << n_kv << ": " << nt << " tokens x " << nh << " heads");
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
  // One thread (blocks of 5 tokens x a KV group) and seven (28 items wanted:
  // one token and head per item): the same bits.
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

// The AVX-512 variant (K and V converted per tile of positions, two small
// matrix products over a block's rows) through the driver on odd sizes: head
// dims 64 and 128, GQA groups 1, 4 and 8 (two KV heads), depths 0, 1, 37, 384
// and 2048, 1, 3, 8, 37 and 128 tokens. Against the double reference (every
// 5th token, the last one, every head) within 2e-5, against the AVX2 variant
// within 2e-5 (every row), over pages (rows of one sequence, as the model
// passes them) the same bits as over one array, and sampled rows equal to the
// bit to that row computed alone. Skipped where the CPU lacks AVX-512.
TEST_CASE("attention avx512 variant vs double reference and avx2 on odd sizes", "[attention]") {
  const AttentionBlockFn v512 = attention_block_variant("avx512"), v2 = attention_block_variant("avx2");
  if (!v512 || !v2) {
    WARN("no AVX-512 (or AVX2) on this CPU: skipped");
    return;
  }
  constexpr float kTol = 2e-5f;
  std::mt19937 rng(11);
  std::normal_distribution<float> nd(0.f, 1.f);
  ThreadPool pool(2);
  AttentionScratch scratch;
  double worst_ref = 0, worst_avx2 = 0;
  for (int hd : {64, 128})
    for (int group : {1, 4, 8})
      for (int depth : {0, 1, 37, 384, 2048})
        for (int n_tok : {1, 3, 8, 37, 128}) {
          const int n_head_kv = 2, n_head = group * n_head_kv, n_pos = depth + n_tok;
          const int64_t kvd = int64_t(n_head_kv) * hd, qd = int64_t(n_head) * hd;
          std::vector<uint16_t> k(size_t(n_pos) * kvd), v(k.size());
          for (auto& x : k) x = fp32_to_fp16(nd(rng));
          for (auto& x : v) x = fp32_to_fp16(nd(rng));
          std::vector<float> q(size_t(n_tok) * qd);
          const float qs = depth == 37 ? 4.0f : 1.0f;  // one sharper softmax
          for (auto& x : q) x = nd(rng) * qs;
          std::vector<float> out(q.size()), out2(q.size()), outp(q.size());
          AttentionArgs a;
          a.q = q.data(), a.n_tok = n_tok, a.pos0 = depth, a.k = k.data(), a.v = v.data(), a.kv_stride = kvd;
          a.n_head = n_head, a.n_head_kv = n_head_kv, a.head_dim = hd, a.scale = 1.0f / std::sqrt(float(hd));
          a.out = out.data(), a.block = v512;
          attention(pool, a, scratch);
          a.out = out2.data(), a.block = v2;
          attention(pool, a, scratch);
          // Over pages of 64 positions.
          std::vector<const uint16_t*> kt, vt;
          for (int64_t p = 0; p < int64_t(n_pos); p += 64) kt.push_back(k.data() + p * kvd), vt.push_back(v.data() + p * kvd);
          std::vector<AttentionRow> rows(static_cast<size_t>(n_tok));
          for (int t = 0; t < n_tok; ++t) rows[size_t(t)] = {kt.data(), vt.data(), depth + t};
          AttentionArgs ap = a;
          ap.rows = rows.data(), ap.page_shift = 6, ap.out = outp.data(), ap.block = v512;
          attention(pool, ap, scratch);
          INFO("hd " << hd << " group " << group << " depth " << depth << " tokens " << n_tok);
          int64_t differ_paged = 0, far_avx2 = 0, far_ref = 0, differ_alone = 0;
          for (size_t i = 0; i < out.size(); ++i) {
            differ_paged += outp[i] != out[i];
            const double e = std::fabs(double(out[i]) - out2[i]);
            worst_avx2 = std::max(worst_avx2, e);
            far_avx2 += !(e < kTol);
          }
          std::vector<float> alone(static_cast<size_t>(hd)), sc(static_cast<size_t>(n_pos));
          for (int t = 0; t < n_tok; ++t) {
            if (t % 5 != 0 && t != n_tok - 1) continue;
            for (int h = 0; h < n_head; ++h) {
              const int g = h / group;
              const float* qr = q.data() + t * qd + int64_t(h) * hd;
              const auto want = ref_head(qr, k.data() + g * hd, v.data() + g * hd, kvd, depth + t + 1, hd, a.scale);
              const float* got = out.data() + t * qd + int64_t(h) * hd;
              for (int e = 0; e < hd; ++e) {
                const double d = std::fabs(got[e] - want[size_t(e)]);
                worst_ref = std::max(worst_ref, d);
                far_ref += !(d < kTol);
              }
              if (h % 3 == 0) {
                KvView kv;
                const uint16_t* kp = k.data();
                const uint16_t* vp = v.data();
                kv.k = &kp, kv.v = &vp, kv.stride = kvd, kv.off = int64_t(g) * hd;
                AttentionBlock one;
                one.q = qr, one.out = alone.data(), one.n_kv0 = depth + t + 1;
                v512(one, kv, hd, a.scale, sc.data());
                for (int e = 0; e < hd; ++e) differ_alone += alone[size_t(e)] != got[e];
              }
            }
          }
          CHECK(differ_paged == 0);
          CHECK(differ_alone == 0);
          CHECK(far_ref == 0);
          CHECK(far_avx2 == 0);
        }
  INFO("largest difference: from the double reference " << worst_ref << ", from avx2 " << worst_avx2);
  CHECK(worst_ref < kTol);
  WARN("avx512 attention: largest difference from the double reference " << worst_ref << ", from avx2 " << worst_avx2);
}

// The driver forms blocks from runs of rows of one sequence at consecutive
// positions (a prompt in a batch of rows): every row the same bits as that row
// attending alone, with each variant. Rows: A at 3..12, B at 0..6, A at 13
// (after B: a run of its own), B at 9 (a gap).
TEST_CASE("attention: runs of rows of one sequence form blocks, the same bits as rows alone", "[attention]") {
  const int n_head = 8, n_head_kv = 2, hd = 64, P = 4;
  const int64_t kvd = n_head_kv * hd;
  std::mt19937 rng(9);
  std::normal_distribution<float> nd(0.f, 1.f);
  const int lens[2] = {14, 10};
  std::vector<std::vector<uint16_t>> kc(2), vc(2);
  std::vector<std::vector<const uint16_t*>> kt(2), vt(2);
  for (int s = 0; s < 2; ++s) {
    kc[s].resize(size_t(lens[s] + P) * kvd), vc[s].resize(kc[s].size());
    for (auto& x : kc[s]) x = fp32_to_fp16(nd(rng));
    for (auto& x : vc[s]) x = fp32_to_fp16(nd(rng));
    for (int pg = 0; pg * P < lens[s]; ++pg) kt[s].push_back(kc[s].data() + pg * P * kvd), vt[s].push_back(vc[s].data() + pg * P * kvd);
  }
  std::vector<AttentionRow> rows;
  std::vector<int> seq;
  const auto add = [&](int s, int p0, int n) {
    for (int p = p0; p < p0 + n; ++p) rows.push_back({kt[s].data(), vt[s].data(), p}), seq.push_back(s);
  };
  add(0, 3, 10), add(1, 0, 7), add(0, 13, 1), add(1, 9, 1);
  const int n = int(rows.size());
  std::vector<float> q(size_t(n) * n_head * hd), out(q.size()), one(size_t(n_head) * hd);
  for (auto& x : q) x = nd(rng);
  for (const char* name : {"scalar", "avx2", "avx512"}) {
    const AttentionBlockFn fn = attention_block_variant(name);
    if (!fn) continue;
    ThreadPool pool(2);
    AttentionScratch scratch;
    AttentionArgs a;
    a.q = q.data(), a.n_tok = n, a.rows = rows.data(), a.page_shift = 2, a.kv_stride = kvd;
    a.n_head = n_head, a.n_head_kv = n_head_kv, a.head_dim = hd, a.scale = 0.125f, a.out = out.data(), a.block = fn;
    attention(pool, a, scratch);
    int64_t differ = 0, far = 0;
    for (int t = 0; t < n; ++t) {
      AttentionArgs b = a;
      b.q = q.data() + int64_t(t) * n_head * hd, b.n_tok = 1, b.rows = rows.data() + t, b.out = one.data();
      attention(pool, b, scratch);
      for (int i = 0; i < n_head * hd; ++i) differ += one[size_t(i)] != out[size_t(t) * n_head * hd + i];
      for (int h = 0; h < n_head; ++h) {
        const int g = h / (n_head / n_head_kv), s = seq[size_t(t)];
        const auto want = ref_head(q.data() + (int64_t(t) * n_head + h) * hd, kc[s].data() + g * hd, vc[s].data() + g * hd,
                                   kvd, rows[size_t(t)].pos + 1, hd, 0.125f);
        for (int i = 0; i < hd; ++i) far += !(std::fabs(out[(size_t(t) * n_head + h) * hd + i] - want[size_t(i)]) < 1e-4);
      }
    }
    INFO(name);
    CHECK(differ == 0);
    CHECK(far == 0);
  }
}
