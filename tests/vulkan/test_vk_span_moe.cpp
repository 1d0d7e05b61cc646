// fish_vulkan's MoE spans (router, moe_route, mvm_<T>, moe_combine in the
// span's one submission) on the synthetic MoE layers of span_synth.h
// (qwen3moe-like 8x2 renormalised F32, qwen2moe-like 6x3 + shared expert
// Q8_0, mixtral-like 8x2 Q4_K, qwen3moe-like 128x8 Q8_0 as Qwen3-30B-A3B
// routes; chunks of 16 rows take the tiled per-expert path where they give
// at least 4 pairs per expert (8x2), else and at 4 or fewer rows the matvec), over a script of batches on 4 sequences:
// interleaved prefills, decode rows of several sequences, a prefill chunk
// among decode rows, a one-row decode, a truncate, 30 + 6 rows over three
// submissions of 16. Every row is compared
//   - with the reference plugin's span of the same layers fed the same
//     batches (f32 math): within 1% of max |x| and of max |logit|, as
//     test_vk_span_seq's dense comparison;
//   - with the same rows of its sequence run alone in a fish_vulkan span of
//     one sequence (other routings, other pairs per chunk, the same math up to
//     summation order): within 1e-3, test_vk_span_seq's f32 bound.
// Near ties (as conformance_moe.cpp): a row whose router logits, in some
// layer, have the k-th and (k+1)-th largest within 1e-3 of the row's max
// |logit| may take the other expert legitimately; such rows are counted, not
// compared. The router logits come from the reference plugin run layer by
// layer, each layer also in a copy whose experts' down projections are zero
// (its x out is then the FFN's input h: logits = router · rmsnorm(h)·ffn_norm
// in double). 1e-3, not conformance's 1%: activations are f32 here (int8 off),
// so the two plugins' router logits agree to ~1e-5 of their size.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>

#include "span.h"
#include "span_synth.h"
#include "vk_test_math.h"

using namespace fish;
using namespace fish::vktest;
using vk::VkConfig;

namespace {

constexpr int kVocab = 96;  // span_synth.cpp's head
constexpr int kCtx = 64;

// Layer l of s as a one-layer Synth; zero_down: the experts' (and the shared
// expert's) down projections all zero bytes (0 in every type), so the layer's
// x out is its FFN input h = x + attention.
Synth layer_of(const Synth& s, int l, bool zero_down) {
  Synth o = s;
  o.v.L = 1;
  const size_t L = size_t(l);
  o.w = {s.w[L]};
  o.attn_norm = {s.attn_norm[L]}, o.ffn_norm = {s.ffn_norm[L]}, o.bq = {s.bq[L]}, o.bk = {s.bk[L]};
  o.bv = {s.bv[L]}, o.qn = {s.qn[L]}, o.kn = {s.kn[L]}, o.shexp_gate = {s.shexp_gate[L]};
  if (zero_down)
    for (int k : {kSlotDownExps, kSlotDownSh}) std::fill(o.w[0][size_t(k)].data.begin(), o.w[0][size_t(k)].data.end(), 0);
  return o;
}

// The reference plugin layer by layer: which rows of a batch route through a near tie.
class TieWatch {
 public:
  TieWatch(const Synth& s, int n_seq) : s_(s) {
    for (int l = 0; l < s.v.L; ++l) {
      full_.push_back(reference_span(layer_of(s, l, false), kCtx, n_seq));
      ffn_in_.push_back(reference_span(layer_of(s, l, true), kCtx, n_seq));
    }
  }
  // Rows of x [n][E]; returns per row whether some layer's choice is a near tie.
  std::vector<char> forward(std::vector<float> x, const std::vector<int32_t>& seq, const std::vector<int32_t>& pos) {
    const int n = int(seq.size()), E = s_.v.E, NE = s_.v.n_expert, K = s_.v.n_used;
    std::vector<char> tie(size_t(n), 0);
    for (size_t l = 0; l < full_.size(); ++l) {
      std::vector<float> h = x;
      ffn_in_[l]->forward_rows(h.data(), n, seq.data(), pos.data(), nullptr, nullptr);
      full_[l]->forward_rows(x.data(), n, seq.data(), pos.data(), nullptr, nullptr);
      moe_move = std::max(moe_move, max_diff(x.data(), h.data(), x.size()));
      // Near-tie test on router · rmsnorm(h)·ffn_norm.
      const Matrix& router = s_.w[l][kSlotRouter];
      const float* rw = reinterpret_cast<const float*>(router.data.data());
      const std::vector<float>& g = s_.ffn_norm[l];
      for (int t = 0; t < n; ++t) {
        const float* hr = &h[size_t(t) * E];
        double ss = 0;
        for (int i = 0; i < E; ++i) ss += double(hr[i]) * hr[i];
        const double inv = 1.0 / std::sqrt(ss / E + 1e-5);
        std::vector<double> lg(static_cast<size_t>(NE));
        double top = 0;
        for (int e = 0; e < NE; ++e) {
          double acc = 0;
          for (int i = 0; i < E; ++i) acc += double(rw[size_t(e) * E + i]) * hr[i] * inv * g[size_t(i)];
          top = std::max(top, std::fabs(lg[size_t(e)] = acc));
        }
        std::sort(lg.begin(), lg.end(), std::greater<double>());
        const double gap = lg[size_t(K - 1)] - lg[size_t(K)];
        min_gap = std::min(min_gap, gap / top);
        if (gap <= 1e-3 * top) tie[size_t(t)] = 1;
      }
    }
    return tie;
  }
  void truncate_seq(int q, int n) {
    for (auto* v : {&full_, &ffn_in_})
      for (auto& sp : *v) sp->truncate_seq(q, n);
  }
  double min_gap = INFINITY;  // smallest (k-th - (k+1)-th) / max |logit| seen
  double moe_move = 0;        // largest |x out - h|: what the MoE FFNs add

 private:
  const Synth& s_;
  std::vector<std::unique_ptr<TestSpan>> full_, ffn_in_;
};

// A batch: runs of (sequence, rows), interleaved round-robin or one after the
// other, the logits of every row; or a truncate of runs[0] = (sequence, length).
struct Batch {
  std::vector<std::pair<int, int>> runs;
  bool interleave = false;
  bool truncate = false;
};

// Prefills of 7, 3, 12 interleaved; a decode row of three sequences; sequence
// 3's 9-row prefill among decode rows; one row of sequence 2 (a one-sequence
// decode); 4 rows of sequence 1 (the matvec's several tokens); a truncate and
// on; 30 + 5 + 1 rows (three submissions of 16); every sequence's decode row.
const std::vector<Batch> kScript = {
    {{{0, 7}, {1, 3}, {2, 12}}, true},
    {{{2, 1}, {0, 1}, {1, 1}}, false},
    {{{0, 1}, {3, 9}, {1, 2}, {2, 1}}, true},
    {{{2, 1}}, false},
    {{{1, 4}}, false},
    {{{1, 5}}, false, true},
    {{{1, 3}, {0, 1}}, true},
    {{{0, 30}, {2, 5}, {3, 1}}, true},
    {{{3, 1}, {2, 1}, {1, 1}, {0, 1}}, false},
};

struct Rows {
  std::vector<int32_t> seq, pos;
};

Rows rows_of(const Batch& b, std::vector<int>& len) {
  Rows r;
  auto add = [&](int q) { r.seq.push_back(q), r.pos.push_back(len[size_t(q)]++); };
  if (b.interleave) {
    for (int round = 0;; ++round) {
      bool any = false;
      for (const auto& run : b.runs)
        if (round < run.second) add(run.first), any = true;
      if (!any) break;
    }
  } else {
    for (const auto& run : b.runs)
      for (int k = 0; k < run.second; ++k) add(run.first);
  }
  return r;
}

struct Worst {
  double d = 0, m = 0;  // max |Δ|, max |reference|
  void add(const float* a, const float* b, size_t n) {
    d = std::max(d, max_diff(a, b, n));
    for (size_t i = 0; i < n; ++i) m = std::max(m, double(std::fabs(b[i])));
  }
  double rel() const { return m > 0 ? d / m : d; }
};

}  // namespace

TEST_CASE("MoE span of several sequences vs the reference plugin's span and vs each sequence alone",
          "[vulkan][span][moe]") {
  VkConfig cfg = test_config();
  cfg.int8 = 0;           // f32 activations: the two plugins compare within 1%
  cfg.span_tokens = 16;   // 36 rows: three submissions
  for (const SynthShape& v : kSynthMoeShapes) {
    const Synth s = make_synth(v, 71);
    auto many = vulkan_span(s, kCtx, cfg, 4);
    if (!many) FISH_SKIP(skip_reason());
    many->set_head(s);
    auto ref = reference_span(s, kCtx, 4);
    ref->set_head(s);
    std::vector<std::unique_ptr<TestSpan>> alone;
    for (int q = 0; q < 4; ++q) {
      alone.push_back(vulkan_span(s, kCtx, cfg));
      REQUIRE(alone.back());
      alone.back()->set_head(s);
    }
    // The plan's experts: a 16-row chunk (>= 4 pairs per expert) as tiled
    // products per expert (gate, up, down), 4 rows as the matvec (gate|up, down).
    // Decode shapes (<= 4 rows) sum into x in the down (no moe_combine step);
    // longer chunks keep the combine, tiled or not (6 rows: < 4 pairs per expert).
    auto count_steps = [&](int n_tok) {
      std::tuple<int, int, int> c{0, 0, 0};
      for (const vk::SpanStep& st : span_of(*many).plan(n_tok, false).steps) {
        std::get<0>(c) += std::holds_alternative<vk::MoeTiledStep>(st.kernel);
        std::get<1>(c) += std::holds_alternative<vk::MoeMatvecStep>(st.kernel);
        std::get<2>(c) += std::holds_alternative<vk::MoeCombineStep>(st.kernel);
      }
      return c;
    };
    // 128x8: 16 rows are 128 pairs over 128 experts, the matvec's (and a3b's short prompts').
    const bool tiled16 = vk::MoeKernels::use_tiled(16, uint32_t(v.n_expert), uint32_t(v.n_used));
    CHECK(tiled16 == (v.n_expert <= 8));
    CHECK(count_steps(16) == (tiled16 ? std::make_tuple(3 * v.L, 0, v.L) : std::make_tuple(0, 2 * v.L, v.L)));
    CHECK(count_steps(6) == std::make_tuple(0, 2 * v.L, v.L));
    CHECK(count_steps(4) == std::make_tuple(0, 2 * v.L, 0));
    CHECK(count_steps(1) == std::make_tuple(0, 2 * v.L, 0));
    // Every step reads only what an earlier step wrote (or the staging buffer,
    // the KV), across a barrier (as test_vk_span's plan check for dense spans).
    for (const auto& [n_tok, head_rows, multi] : {std::tuple{1, 1, false}, {2, 2, true}, {4, 0, false},
                                                  {6, 1, false}, {9, 3, true}, {16, 1, false}}) {
      vk::Span::Shape sh;
      sh.n_tok = n_tok, sh.head_rows = head_rows, sh.head_last = head_rows == 1, sh.multi = multi;
      std::set<vk::Region> written, pending;
      const vk::SpanPlan plan = span_of(*many).plan(sh);
      for (size_t i = 0; i < plan.steps.size(); ++i) {
        const vk::SpanStep& st = plan.steps[i];
        INFO(v.name << ": " << n_tok << " rows, step " << i << " of " << plan.steps.size());
        for (vk::Region r : st.reads) {
          CHECK((written.count(r) == 1 || r == vk::Region::Staging || r == vk::Region::Kv));
          CHECK(pending.count(r) == 0);
        }
        for (vk::Region r : st.writes) written.insert(r), pending.insert(r);
        if (st.barrier != vk::Barrier::None) pending.clear();
      }
      CHECK(plan.steps.back().barrier == vk::Barrier::Host);
    }
    TieWatch ties(s, 4);
    std::vector<int> len(4, 0);
    Worst vx, vl, ax, al;
    int rows = 0, tie_rows = 0, step = 0;
    for (const Batch& b : kScript) {
      ++step;
      if (b.truncate) {
        const auto [q, n] = b.runs[0];
        many->truncate_seq(q, n), ref->truncate_seq(q, n), alone[size_t(q)]->truncate(n), ties.truncate_seq(q, n);
        len[size_t(q)] = n;
        continue;
      }
      const Rows r = rows_of(b, len);
      const int n = int(r.seq.size()), E = v.E;
      const std::vector<float> x0 = randn(size_t(n) * E, 300 + uint64_t(step), 0.2f);
      const std::vector<uint8_t> want(size_t(n), 1);
      std::vector<float> xv = x0, xr = x0, lv(size_t(n) * kVocab, NAN), lr(lv.size(), NAN);
      many->forward_rows(xv.data(), n, r.seq.data(), r.pos.data(), want.data(), lv.data());
      ref->forward_rows(xr.data(), n, r.seq.data(), r.pos.data(), want.data(), lr.data());
      const std::vector<char> tie = ties.forward(x0, r.seq, r.pos);
      // Each sequence's rows alone, in order.
      std::vector<float> xa(x0.size()), la(lv.size(), NAN);
      for (int q = 0; q < 4; ++q) {
        std::vector<int> idx;
        for (int t = 0; t < n; ++t)
          if (r.seq[size_t(t)] == q) idx.push_back(t);
        if (idx.empty()) continue;
        const int m = int(idx.size());
        std::vector<float> xq, lq(size_t(m) * kVocab);
        std::vector<int32_t> sq(size_t(m), 0), pq;
        for (int t : idx) {
          xq.insert(xq.end(), x0.begin() + ptrdiff_t(size_t(t) * E), x0.begin() + ptrdiff_t(size_t(t + 1) * E));
          pq.push_back(r.pos[size_t(t)]);
        }
        const std::vector<uint8_t> wq(size_t(m), 1);
        alone[size_t(q)]->forward_rows(xq.data(), m, sq.data(), pq.data(), wq.data(), lq.data());
        for (int i = 0; i < m; ++i) {
          const size_t t = size_t(idx[size_t(i)]);
          std::copy_n(&xq[size_t(i) * E], E, &xa[t * E]);
          std::copy_n(&lq[size_t(i) * kVocab], kVocab, &la[t * kVocab]);
        }
      }
      for (int t = 0; t < n; ++t) {
        ++rows;
        if (tie[size_t(t)]) {
          ++tie_rows;
          continue;
        }
        const size_t xo = size_t(t) * E, lo = size_t(t) * kVocab;
        vx.add(&xv[xo], &xr[xo], size_t(E));
        vl.add(&lv[lo], &lr[lo], kVocab);
        ax.add(&xv[xo], &xa[xo], size_t(E));
        al.add(&lv[lo], &la[lo], kVocab);
      }
      for (int q = 0; q < 4; ++q) CHECK(many->kv_len_seq(q) == ref->kv_len_seq(q));
    }
    INFO(v.name << ": vs reference max |Δx| " << vx.rel() << " of max |x|, |Δlogit| " << vl.rel()
                << "; vs alone " << ax.rel() << ", " << al.rel() << "; " << tie_rows << " of " << rows
                << " rows near a tie; the MoE FFNs move x by up to " << ties.moe_move << "; "
                << span_of(*many).describe());
    std::printf("  MoE %-28s vs reference |dx| %.3g%% |dlogit| %.3g%%; batched vs alone %.3g / %.3g; "
                "%d of %d rows near a tie (min gap %.3g of max |logit|); MoE moves x by %.3g of max |x|\n",
                v.name, 100 * vx.rel(), 100 * vl.rel(), ax.rel(), al.rel(), tie_rows, rows, ties.min_gap,
                ties.moe_move / vx.m);
    CHECK(rows - tie_rows >= rows * 9 / 10);  // the comparison covers nearly every row
    CHECK(ties.moe_move > 0.1 * vx.m);        // the experts matter: a wrong one would show
    CHECK(vx.rel() <= 0.01);
    CHECK(vl.rel() <= 0.01);
    // With tensor cores prompt chunks multiply in f16: 3e-3 (test_vk_span_seq's bound).
    const double tol = span_of(*many).describe().find("prefill: coopmat") != std::string::npos ? 3e-3 : 1e-3;
    CHECK(ax.rel() <= tol);
    CHECK(al.rel() <= tol);
  }
}

// An MoE decode with int8 activations on B32 rows (the GPUs' default, forced
// here): the attention writes wo's rows itself, wo the experts' gate|up's
// (mvmi_<T>), that gate|up the down's, the summed down the next layer's
// q/k/v's (the plan of a two-layer span: its rows at the words layer 1's
// q/k/v read), wo routes (the f32 router folded in: no router step), and the norms are epilogues, so a one-row forward quantises x
// once (layer 0's q/k/v, from the host's x); a one-layer span's x and logits against the same span on the CPU's Q8_K rows
// (the two quantise x in blocks of 32 and of 256). Each is within the int8
// bound of f32 (10%), but int8 rounding also moves the router's logits, and a
// near tie taken the other way changes a token's experts wholesale (measured
// on lavapipe: 11.6% of max |x|, 9.4% of max |logit| over 12 decodes): 25%.
// Wrong rows (wo reading another token's, or stale ones) give O(1).
TEST_CASE("MoE span decode on B32 rows: the attention writes wo's rows, int8 within its bound", "[vulkan][span][moe]") {
  SynthShape v = kSynthMoeShapes[2];  // mixtral 8x2 Q4_K: every attention matrix a K-quant
  VkConfig b32 = test_config(), q8k = test_config();
  b32.int8 = q8k.int8 = 1;
  b32.decode_rows = vk::DecodeRows::B32;
  q8k.decode_rows = vk::DecodeRows::Q8K;
  {
    v.L = 2;  // layer 0's summed down writes layer 1's q/k/v rows
    const Synth s2 = make_synth(v, 74);
    auto a2 = vulkan_span(s2, kCtx, b32);
    if (!a2) FISH_SKIP(skip_reason());
    if (!backend_of(*a2).kernels()->int8()) FISH_SKIP("no int8 dot products on this device");
    INFO(span_of(*a2).describe());
    REQUIRE(span_of(*a2).describe().find("decode x in B32 rows, the experts' gate|up and down too, wo routes") !=
            std::string::npos);
    // The one-row plan: a quantise step only before layer 0's q/k/v (the router is F32 here).
    int quantise = 0, rows_before_wo = -1, gu_rows = 0, down_rows = 0, next_rows = 0, qkv_on_them = 0;
    int wo_routes = 0, router_steps = 0;
    uint32_t rows_at = vk::kNone;  // where the last summed down put the next layer's rows
    for (const vk::SpanStep& st : span_of(*a2).plan(1, false).steps) {
      quantise += std::holds_alternative<vk::QuantizeStep>(st.kernel);
      if (st.stage && std::string(st.stage).rfind("wo matvec", 0) == 0) rows_before_wo = quantise;
      if (const auto* mv = std::get_if<vk::MoeMatvecStep>(&st.kernel)) {
        gu_rows += mv->pair && mv->int8 && mv->push.s.q_out != vk::kNone;  // reading wo's rows, writing h's
        down_rows += mv->sum && mv->int8;
        if (mv->sum && mv->push.s.q_out != vk::kNone) ++next_rows, rows_at = mv->push.s.q_out;
      }
      if (const auto* mm = std::get_if<vk::MatmulStep>(&st.kernel)) {
        wo_routes += mm->fusion.router;
        router_steps += mm->fusion.epi == 5;
      }
      if (const auto* mm = std::get_if<vk::MatmulStep>(&st.kernel); mm && rows_at != vk::kNone) {
        // the three matrices q, k, v after the down: its rows, read as B32 rows
        qkv_on_them += mm->push.m.x_off == rows_at && mm->fusion.xb32 && mm->fusion.int8;
        if (qkv_on_them % 3 == 0) rows_at = vk::kNone;
      }
    }
    CHECK(rows_before_wo == 1);  // layer 0's q/k/v
    CHECK(quantise == 1);
    CHECK(gu_rows == v.L);  // every layer's gate|up on wo's B32 rows, writing h's for its down
    CHECK(down_rows == v.L);
    CHECK(next_rows == 1);     // every layer's summed down but the last's
    CHECK(qkv_on_them == 3);   // layer 1's q, k and v read them
    CHECK(wo_routes == v.L);   // every layer's wo computes the router's logits and routes (f32 routers)
    CHECK(router_steps == 0);
  }
  v.L = 1;
  const Synth s = make_synth(v, 73);
  auto a = vulkan_span(s, kCtx, b32), b = vulkan_span(s, kCtx, q8k);
  REQUIRE(a);
  REQUIRE(b);
  a->set_head(s), b->set_head(s);
  Worst dx, dl;
  std::vector<float> x = randn(size_t(5) * v.E, 401, 0.2f), xb = x, la(kVocab), lb(kVocab);
  a->forward(x.data(), 5, 0), b->forward(xb.data(), 5, 0);  // a 5-row prompt chunk first
  for (int t = 0; t < 12; ++t) {
    std::vector<float> r = randn(size_t(v.E), 410 + uint64_t(t), 0.2f), rb = r;
    a->forward(r.data(), 1, 5 + t, la.data());
    b->forward(rb.data(), 1, 5 + t, lb.data());
    dx.add(r.data(), rb.data(), size_t(v.E));
    dl.add(la.data(), lb.data(), size_t(kVocab));
  }
  INFO("B32 vs Q8_K rows: max |dx| " << dx.rel() << " of max |x|, max |dlogit| " << dl.rel() << " of max |logit|");
  std::printf("  MoE decode B32 vs Q8_K rows: max |dx| %.3g of max |x|, |dlogit| %.3g of max |logit|\n", dx.rel(), dl.rel());
  CHECK(dx.rel() <= 0.25);
  CHECK(dl.rel() <= 0.25);
  CHECK(dx.rel() > 0);  // the two paths differ (blocks of 32 against 256): both really ran
}
