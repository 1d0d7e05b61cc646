// The MoE kernels of a span (plugins/vulkan/moe_kernels.h) one at a time
// against plain CPU references, as test_vk_span_kernels does for the dense ones:
//   moe_route    softmax, top-k (equal logits: the lower expert first), both
//                gatings; the expert ids and the grouped lists word for word,
//                the weights within f32 rounding; NaN logits: still k distinct
//                valid experts per row;
//   mvm_<T>      every weight type (F32, F16, Q4_0, Q8_0, Q4_K, Q5_K, Q6_K, FQ3;
//                the quantised ones from real quantize_row bytes), gate|up with
//                silu·up and down × routing weight, decode (one chunk per pair)
//                and prefill (4 pairs per chunk; on a CPU device F32 and Q4_K
//                only, for compile time) routings, 6 experts of which 3
//                are used, row counts that are not a multiple of the 4 rows of
//                a workgroup; held to the spec's matmul bound 1e-3·Σ|w||x|/n_out
//                on each product (propagated through silu·up and the weight);
//                decode routings also through the down with the layer's sum
//                folded in (x += Σ weighted rows, + the gated shared expert),
//                their gate|up by pairs (ROUTE: one workgroup row per pair,
//                its expert from the pair's words, as the router's tail
//                writes them: test_vk_span_matvec checks that tail);
//   mvmi_<T>     the decode's gate|up on int8 B32 rows (K-quants), against the
//                products of the values the rows hold, same bound; the gate|up
//                writing h's B32 rows (word for word the CPU's rule on its h),
//                the summed down on B32 rows;
//   tlm_<T>      the same products as tiled matmuls per expert (prompt chunks:
//                gate with silu, up multiplied onto it, down × weight), every
//                type, an expert with more pairs than one tile, same bound;
//   tcm_<T>      the same on cooperative matrices (f16 products into f32: 3x
//                the bound, as test_vk_kernels holds the dense tc_<T>), tiles
//                of 32 and 64 pairs; skipped where the device has none;
//   moe_combine  x += Σ_j d + sigmoid(n·g)·sh, with and without a shared expert.
// The routing words the matvec and combine read are built here on the CPU
// (moe_common.glsl's layout), so each kernel is judged on its own.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <numeric>

#include "cpu/matmul.h"
#include "moe_kernels.h"
#include "quant/quant.h"
#include "span_rig.h"
#include "vk_test_math.h"
#include "vk_test_util.h"

using namespace fish;
using namespace fish::vktest;

namespace {

// The routing of n_tok tokens: expert id and weight per pair p = t·k + j.
struct Routing {
  int n_tok = 0, n_expert = 0, k = 0;
  std::vector<uint32_t> expert;
  std::vector<double> weight;
};

// plugin_abi.h's routing: softmax over the router logits, the k largest (equal
// logits: the lower index first), weights r_e or r_e / Σ_chosen r (renorm).
Routing ref_route(const std::vector<float>& logits, int n_tok, int NE, int K, bool renorm) {
  Routing r{n_tok, NE, K, {}, {}};
  for (int t = 0; t < n_tok; ++t) {
    const float* l = &logits[size_t(t) * NE];
    std::vector<int> idx(static_cast<size_t>(NE));
    std::iota(idx.begin(), idx.end(), 0);
    std::stable_sort(idx.begin(), idx.end(), [&](int a, int b) { return l[a] > l[b]; });  // stable: ties by index
    const double mx = l[idx[0]];
    double sum = 0, chosen = 0;
    for (int e = 0; e < NE; ++e) sum += std::exp(double(l[e]) - mx);
    for (int j = 0; j < K; ++j) chosen += std::exp(double(l[idx[size_t(j)]]) - mx);
    for (int j = 0; j < K; ++j) {
      r.expert.push_back(uint32_t(idx[size_t(j)]));
      r.weight.push_back(std::exp(double(l[idx[size_t(j)]]) - mx) / (renorm ? chosen : sum));
    }
  }
  return r;
}

// The pairs' words a kernel wrote (got[0 .. 2P)) against r: experts that
// differ, and the largest relative error of a weight.
struct PairCheck {
  int64_t id_bad = 0;
  double wrel = 0;
};
PairCheck check_pairs(const std::vector<uint32_t>& got, const Routing& r) {
  PairCheck c;
  for (uint32_t p = 0; p < uint32_t(r.n_tok * r.k); ++p) {
    c.id_bad += got[2 * p] != r.expert[p];
    float g;
    std::memcpy(&g, &got[2 * p + 1], 4);
    c.wrel = std::max(c.wrel, std::fabs(double(g) - r.weight[p]) / r.weight[p]);
  }
  return c;
}

// The routing words of moe_common.glsl for r (weights as f32 bits).
std::vector<uint32_t> route_words(const Routing& r) {
  const uint32_t P = uint32_t(r.n_tok * r.k), NE = uint32_t(r.n_expert);
  std::vector<uint32_t> w(vk::moe_route_words(uint64_t(r.n_tok), NE, uint64_t(r.k)), 0);
  for (uint32_t p = 0; p < P; ++p) {
    const float f = float(r.weight[p]);
    w[2 * p] = r.expert[p];
    std::memcpy(&w[2 * p + 1], &f, 4);
  }
  const uint32_t G = 2 * P, L = G + 2 + 2 * NE;
  uint32_t n = 0, run = 0;
  for (uint32_t e = 0; e < NE; ++e) {
    uint32_t c = 0;
    for (uint32_t p = 0; p < P; ++p)
      if (r.expert[p] == e) w[L + run + c++] = p;
    if (c == 0) continue;
    w[G + 1 + n] = e;
    w[G + 1 + NE + n] = run;
    run += c;
    ++n;
  }
  w[G + 1 + NE + n] = run;
  w[G] = n;
  return w;
}

// MoeKernels on the test's backend, with a descriptor set of its layout over
// {w0, arena, params, arena, arena, w5} (the span's moe_set).
struct MoeRig {
  vk::VulkanBackend& be;
  SpanRig rig;
  vk::MoeKernels moe;
  std::vector<VkDescriptorSet> sets;
  MoeRig(vk::VulkanBackend& b, uint64_t arena_words, uint64_t param_words)
      : be(b), rig(b, arena_words, 4, param_words, 4), moe(*b.device(), *b.pipelines(), *b.kernels()) {}
  ~MoeRig() {
    for (VkDescriptorSet s : sets) be.pipelines()->free_set(s);
  }
  VkDescriptorSet set(const vk::Buffer& w0, const vk::Buffer& w5) {
    VkDescriptorSet s = be.pipelines()->allocate_set(moe.layout());
    const vk::Buffer& a = rig.arena();
    const VkBuffer bufs[6] = {w0.buffer, a.buffer, rig.params().buffer, a.buffer, a.buffer, w5.buffer};
    const uint64_t offs[6] = {0, 0, 0, 0, 0, 0};
    const uint64_t ranges[6] = {w0.size, a.size, rig.params().size, a.size, a.size, w5.size};
    be.pipelines()->write_set(s, 6, bufs, offs, ranges);
    sets.push_back(s);
    return s;
  }
  VkDescriptorSet aux() { return set(rig.arena(), rig.arena()); }
};

// Router logits with exact ties: multiples of 1/4 (many equal values), a row
// of all-equal logits and a row whose k-th and k+1-th are equal.
std::vector<float> tie_logits(int n_tok, int NE, uint64_t seed) {
  auto l = randn(size_t(n_tok) * NE, seed, 1.5f);
  for (auto& v : l) v = std::round(v * 4.0f) / 4.0f;
  if (n_tok > 1) std::fill(&l[NE], &l[2 * size_t(NE)], 0.5f);
  return l;
}

}  // namespace

TEST_CASE("moe_route kernel vs CPU: top-k with ties, both gatings, grouped lists", "[vulkan][span][moe]") {
  auto be = open_backend("moe_route");
  if (!be) FISH_SKIP(skip_reason());
  struct Case {
    int NE, K, n_tok;
    bool ties;
  };
  const Case cases[] = {{6, 3, 1, false}, {6, 3, 7, true},  {8, 2, 40, true},  {8, 2, 1, true},
                        {128, 8, 5, false}, {60, 4, 300, true}, {16, 16, 3, false}, {512, 16, 2, false}};
  uint64_t seed = 900;
  for (const Case& c : cases)
    for (const bool renorm : {false, true}) {
      const uint32_t P = uint32_t(c.n_tok * c.K), words = uint32_t(vk::moe_route_words(uint64_t(c.n_tok), c.NE, c.K));
      const uint32_t rl_off = 64, route_off = rl_off + uint32_t(c.n_tok * c.NE) + 4;
      MoeRig m(*be, route_off + words + 64, 4);
      const auto logits = c.ties ? tie_logits(c.n_tok, c.NE, seed++) : randn(size_t(c.n_tok) * c.NE, seed++, 2.0f);
      m.rig.put(m.rig.arena(), rl_off, logits);
      // Stale words from an earlier layer must not matter: fill the region first.
      m.rig.put(m.rig.arena(), route_off, std::vector<uint32_t>(words, 0xDEADBEEFu));
      vk::MoePush pc;
      pc.n_expert = uint32_t(c.NE), pc.k = uint32_t(c.K), pc.route_off = route_off, pc.flags = renorm ? 1 : 0;
      pc.s.m = {uint32_t(c.NE), 0, uint32_t(c.n_tok), uint32_t(c.NE), rl_off, 0, 0};
      const VkDescriptorSet set = m.aux();
      m.rig.run([&](VkCommandBuffer cmd) { m.moe.route(cmd, set, pc); });
      const auto got = m.rig.get_words(m.rig.arena(), route_off, words);
      const Routing r = ref_route(logits, c.n_tok, c.NE, c.K, renorm);
      const auto want = route_words(r);
      const auto [id_bad, wrel] = check_pairs(got, r);
      int64_t list_bad = 0;
      // The grouped part: n_active, active experts, offsets (n_active + 1) and the list (P words).
      const uint32_t G = 2 * P, n_act = want[G];
      std::vector<uint32_t> idx = {G};
      for (uint32_t s = 0; s < n_act; ++s) idx.push_back(G + 1 + s);
      for (uint32_t s = 0; s <= n_act; ++s) idx.push_back(G + 1 + uint32_t(c.NE) + s);
      for (uint32_t i = 0; i < P; ++i) idx.push_back(G + 2 + 2 * uint32_t(c.NE) + i);
      for (uint32_t i : idx) list_bad += got[i] != want[i];
      INFO(c.NE << " experts, " << c.K << " used, " << c.n_tok << " tokens" << (c.ties ? " (ties)" : "")
                << (renorm ? ", renormalised" : ", softmax") << ": wrong ids " << id_bad << ", wrong list words "
                << list_bad << ", max weight rel err " << wrel);
      CHECK(id_bad == 0);
      CHECK(list_bad == 0);
      CHECK(wrel <= 2e-6);  // f32 exp / sum vs double: a few ulps
    }
}

TEST_CASE("moe_route kernel: NaN router logits still choose k distinct valid experts", "[vulkan][span][moe]") {
  auto be = open_backend("moe_route NaN");
  if (!be) FISH_SKIP(skip_reason());
  // Row 0 all NaN, row 1 NaN at the largest logits, rows 2..5 NaN here and there (6 rows: both phases' paths).
  const int NE = 40, K = 5, n_tok = 6;
  auto logits = randn(size_t(n_tok) * NE, 1300, 2.0f);
  const float nan = std::nanf("");
  for (int e = 0; e < NE; ++e) logits[size_t(e)] = nan;
  for (int e = 0; e < NE; e += 3) logits[size_t(NE + e)] = nan;
  for (int t = 2; t < n_tok; ++t) logits[size_t(t * NE + t)] = nan;
  for (const int rows : {2, n_tok}) {  // one dispatch (<= 4 rows) and a workgroup per row
    const uint32_t P = uint32_t(rows * K), words = uint32_t(vk::moe_route_words(uint64_t(rows), NE, K));
    const uint32_t rl_off = 64, route_off = rl_off + uint32_t(n_tok * NE) + 4;
    MoeRig m(*be, route_off + words + 64, 4);
    m.rig.put(m.rig.arena(), rl_off, logits);
    m.rig.put(m.rig.arena(), route_off, std::vector<uint32_t>(words, 0xDEADBEEFu));
    vk::MoePush pc;
    pc.n_expert = NE, pc.k = K, pc.route_off = route_off, pc.flags = 1;
    pc.s.m = {uint32_t(NE), 0, uint32_t(rows), uint32_t(NE), rl_off, 0, 0};
    const VkDescriptorSet set = m.aux();
    m.rig.run([&](VkCommandBuffer cmd) { m.moe.route(cmd, set, pc); });
    const auto got = m.rig.get_words(m.rig.arena(), route_off, words);
    // Every row: k distinct experts < NE; the grouped part: the lists a permutation of the pairs.
    int64_t bad = 0;
    for (int t = 0; t < rows; ++t)
      for (int j = 0; j < K; ++j) {
        const uint32_t e = got[2 * size_t(t * K + j)];
        bad += e >= uint32_t(NE);
        for (int i = 0; i < j; ++i) bad += got[2 * size_t(t * K + i)] == e;
      }
    const uint32_t G = 2 * P, n_act = got[G];
    std::vector<uint32_t> list(got.begin() + G + 2 + 2 * NE, got.begin() + G + 2 + 2 * NE + P);
    std::sort(list.begin(), list.end());
    for (uint32_t i = 0; i < P; ++i) bad += list[i] != i;
    INFO(rows << " rows: wrong words " << bad << ", " << n_act << " active experts, the end offset " << got[G + 1 + NE + n_act]);
    CHECK(bad == 0);
    CHECK((n_act >= uint32_t(K) && n_act <= uint32_t(NE) && got[G + 1 + NE + n_act] == P));
  }
}

namespace {

// A stack of n_expert random matrices [n_out x n_in] of one type, as one upload.
struct Stack {
  std::vector<Matrix> m;  // per expert (random_matrix: real quantised bytes)
  std::vector<uint8_t> bytes;
  vk::Weight* w = nullptr;
};

Stack make_stack(vk::VulkanBackend& be, GgmlType t, int NE, int64_t n_in, int64_t n_out, uint64_t seed) {
  Stack s;
  for (int e = 0; e < NE; ++e) {
    s.m.push_back(random_matrix(t, n_in, n_out, seed + uint64_t(e)));
    s.bytes.insert(s.bytes.end(), s.m.back().data.begin(), s.m.back().data.end());
  }
  vk::WeightUpload u = upload_desc(s.m[0]);
  u.n_mat = NE, u.data = s.bytes.data(), u.nbytes = s.bytes.size();
  s.w = be.upload(u);
  REQUIRE(s.w);
  REQUIRE(s.w->chunks.size() == 1);
  return s;
}

// y = W·x in double-free f32 reference (matmul_ref_f32) and the spec's bound
// 1e-3·Σ_r Σ_i |w_ri||x_i| / n_out of one x row.
void product(const Matrix& w, const float* x, std::vector<float>& y, double& bound) {
  WeightView v;
  v.type = w.type, v.data = w.data.data(), v.n_in = w.n_in, v.n_out = w.n_out, v.row_bytes = w.row_bytes;
  y.assign(size_t(w.n_out), 0.0f);
  matmul_ref_f32(v, x, 1, y.data());
  std::vector<float> row(static_cast<size_t>(w.n_in));
  double s = 0;
  for (int64_t r = 0; r < w.n_out; ++r) {
    dequant_row(w.type, w.data.data() + uint64_t(r) * w.row_bytes, row.data(), w.n_in);
    for (int64_t i = 0; i < w.n_in; ++i) s += std::fabs(double(row[size_t(i)]) * x[i]);
  }
  bound = 1e-3 * s / double(w.n_out);
}

double silu(double v) { return v / (1.0 + std::exp(-v)); }

// Runs mvm_<T> gate|up (n_in E, FE rows per expert) and down (n_in FD, ER
// rows) over one routing of n_tok tokens and checks every pair's rows; down
// reads random rows of its own (h of FD values per pair), so the two shapes are
// free. Returns the worst |err| / bound of the two (three: decode shapes of
// up to MoeKernels::kSumTokens tokens also run the down with the layer's sum
// folded in, x += Σ_j w·(W_e·h) (+ sigmoid(n·g)·sh when n_tok > 1), vs the
// same products on the CPU). Decode shapes scale gate|up's sums by each
// token's 1/rms from random Σx² partials (a norm epilogue's, inv_parts); the
// sum without a shared expert (one token) also writes the next norm: x_new ∘
// weights and Σ x_new² per row group of MoeKernels::kRows (NEXT).
// tiled: the prompt-chunk path instead (tlm_<T>: gate with silu, up multiplied
// onto it, down × the weight), on a routing where every token also takes
// expert 2 (n_tok pairs: more than one tile of 64).
// int8 (a decode, K-quants): the gate|up reads x as the span's B32 rows
// (mvmi_<T>; cpu_b32_row's bytes), judged against the products of the values
// those rows hold (qs·d), with the same bound. int8_down (FE a multiple of
// 128): the gate|up also writes h's B32 rows (QOUT), which must equal
// cpu_b32_row of the h it wrote word for word, and the summed down reads B32
// rows of its hd (cpu_b32_row's), judged on the values they hold.
// sum_rows (one token, ER a multiple of 32): the summed down also writes its
// x_new ∘ norm as B32 rows (QOUT, blocks quantised by their last workgroup to
// arrive), which must equal cpu_b32_row of the x·norm it wrote word for word,
// its arrival counters back at 0.
// slack: the bound's factor (3 for the f16 products of cooperative matrices).
double run_experts(vk::VulkanBackend& be, GgmlType t, int NE, int K, int n_tok, int64_t E, int64_t FE, int64_t FD,
                   int64_t ER, uint64_t seed, bool tiled = false, bool int8 = false, bool int8_down = false,
                   bool sum_rows = false, double slack = 1.0) {
  Stack gate = make_stack(be, t, NE, E, FE, seed), up = make_stack(be, t, NE, E, FE, seed + 100);
  Stack down = make_stack(be, t, NE, FD, ER, seed + 200);
  const uint32_t P = uint32_t(n_tok * K), words = uint32_t(vk::moe_route_words(uint64_t(n_tok), NE, K));
  const uint32_t route_off = 64, x_off = route_off + (words + 3) / 4 * 4;
  const uint32_t hx_off = x_off + uint32_t(n_tok * E), hd_off = hx_off + (P * uint32_t(FE) + 3) / 4 * 4;
  const uint32_t dx_off = hd_off + P * uint32_t(FD), xs_off = dx_off + P * uint32_t(ER);
  const uint32_t sh_off = xs_off + uint32_t(n_tok * ER), n_off = sh_off + uint32_t(n_tok * ER);
  constexpr uint32_t kParts = 5;
  const uint32_t groups = vk::MoeKernels::row_groups(uint32_t(ER));
  const uint32_t pin_off = n_off + uint32_t(n_tok * ER), sq_off = pin_off + uint32_t(n_tok) * kParts;
  const uint32_t rl_off = sq_off + (uint32_t(n_tok) * groups + 3) / 4 * 4;
  const uint32_t row_words = vk::MatmulKernels::b32_row_words(uint32_t(E));  // a multiple of 4
  const uint32_t hq_words = vk::MatmulKernels::b32_row_words(uint32_t(FE)), dq_words = vk::MatmulKernels::b32_row_words(uint32_t(FD));
  const uint32_t xq_off = (rl_off + uint32_t(n_tok * NE) + 3) / 4 * 4, hq_off = xq_off + uint32_t(n_tok) * row_words;
  const uint32_t dq_off = hq_off + (int8_down ? P * hq_words : 0), sr_off = dq_off + (int8_down ? P * dq_words : 0);
  const uint32_t sr_words = vk::MatmulKernels::b32_row_words(uint32_t(ER)), cnt_off = sr_off + (sum_rows ? sr_words : 0);
  const uint32_t n_cnt = sum_rows ? uint32_t(ER) / 32 : 0, end = cnt_off + (n_cnt + 3) / 4 * 4;
  MoeRig m(be, end + 64, uint64_t(std::max<int64_t>(4, ER)));
  auto logits = randn(size_t(n_tok) * NE, seed + 300, 2.0f);
  if (tiled)
    for (int tk = 0; tk < n_tok; ++tk) logits[size_t(tk) * NE + 2] += 10.0f;
  const Routing r = ref_route(logits, n_tok, NE, K, (seed & 1) != 0);
  auto x = randn(size_t(n_tok) * E, seed + 301, 1.0f);
  const auto hd = randn(size_t(P) * FD, seed + 302, 0.5f);
  const bool decode = !tiled && n_tok <= int(vk::MoeKernels::kSumTokens);
  REQUIRE((!int8 || decode));
  REQUIRE((!int8_down || (int8 && FE % 128 == 0)));
  REQUIRE((!sum_rows || (decode && n_tok == 1 && ER % 32 == 0)));
  std::vector<float> hdq = hd;  // what the summed down multiplies: hd, or the values of its B32 rows
  for (uint32_t p = 0; int8_down && p < P; ++p) {
    const std::vector<uint32_t> q = cpu_b32_row(&hd[size_t(p) * FD], int(FD));
    m.rig.put(m.rig.arena(), dq_off + p * dq_words, q);
    const std::vector<double> v = b32_values(q, int(FD));
    std::transform(v.begin(), v.end(), hdq.begin() + ptrdiff_t(p * FD), [](double e) { return float(e); });
  }
  m.rig.put(m.rig.arena(), route_off, route_words(r));
  m.rig.put(m.rig.arena(), x_off, x);
  for (int tk = 0; int8 && tk < n_tok; ++tk) {  // B32 rows; the reference then takes the values they hold
    const std::vector<uint32_t> q = cpu_b32_row(&x[size_t(tk) * E], int(E));
    m.rig.put(m.rig.arena(), xq_off + uint32_t(tk) * row_words, q);
    const std::vector<double> v = b32_values(q, int(E));
    std::transform(v.begin(), v.end(), x.begin() + ptrdiff_t(tk * E), [](double e) { return float(e); });
  }
  m.rig.put(m.rig.arena(), hd_off, hd);
  const auto xs = randn(size_t(n_tok) * ER, seed + 303, 2.0f), sh = randn(size_t(n_tok) * ER, seed + 304, 0.5f);
  const auto nn = randn(size_t(n_tok) * ER, seed + 305, 1.0f), gv = randn(size_t(ER), seed + 306, 0.1f);
  m.rig.put(m.rig.arena(), xs_off, xs);
  m.rig.put(m.rig.arena(), sh_off, sh);
  m.rig.put(m.rig.arena(), n_off, nn);
  m.rig.put(m.rig.params(), 0, gv);
  auto pin = randn(size_t(n_tok) * kParts, seed + 307, 1.0f);
  for (float& v : pin) v = v * v * float(E) / kParts;  // Σx² partials: 1/rms around 1
  m.rig.put(m.rig.arena(), pin_off, pin);
  std::vector<double> sc(size_t(n_tok), 1.0);  // 1/rms per token
  for (int tk = 0; decode && tk < n_tok; ++tk) {
    float ss = 0;
    for (uint32_t i = 0; i < kParts; ++i) ss += pin[size_t(tk) * kParts + i];
    sc[size_t(tk)] = 1.0 / std::sqrt(double(ss) / double(E) + 1e-5);
  }
  // NaN where nothing may be written: after gate|up's rows and after down's.
  const std::vector<uint32_t> nan(64, 0x7FC00000u);
  m.rig.put(m.rig.arena(), end, nan);
  vk::MoePush mp;
  mp.n_expert = uint32_t(NE), mp.k = uint32_t(K), mp.route_off = route_off;
  vk::MoePush gu = mp, dn = mp;
  gu.s.m = {uint32_t(E), uint32_t(FE), uint32_t(n_tok), uint32_t(E), x_off, uint32_t(FE), hx_off};
  gu.flags = (seed & 1) != 0 ? 1u : 0u;
  if (decode) gu.s.inv_in = pin_off, gu.s.inv_parts = kParts, gu.s.eps = 1e-5f, gu.flags |= vk::MoePush::kPairs;
  if (int8) gu.s.m.x_off = xq_off, gu.s.m.x_stride = row_words;
  if (int8_down) gu.s.q_out = hq_off, gu.s.q_stride = hq_words;
  dn.s.m = {uint32_t(FD), uint32_t(ER), uint32_t(n_tok), uint32_t(FD), hd_off, uint32_t(ER), dx_off};
  const VkDescriptorSet gs = m.set(gate.w->chunks[0].buf, up.w->chunks[0].buf);
  const VkDescriptorSet us = m.set(up.w->chunks[0].buf, up.w->chunks[0].buf);
  const VkDescriptorSet ds = m.set(down.w->chunks[0].buf, down.w->chunks[0].buf);
  if (tiled) {
    m.rig.run([&](VkCommandBuffer cmd) { m.moe.tiled(cmd, *gate.w->type, gs, gu, vk::MoeKernels::kSilu, true); });
    m.rig.run([&](VkCommandBuffer cmd) { m.moe.tiled(cmd, *up.w->type, us, gu, vk::MoeKernels::kMulY, true); });
    m.rig.run([&](VkCommandBuffer cmd) { m.moe.tiled(cmd, *down.w->type, ds, dn, vk::MoeKernels::kRouteWeight, false); });
  } else {
    m.rig.run([&](VkCommandBuffer cmd) { m.moe.matvec(cmd, *gate.w->type, gs, gu, true, false, false, int8); });
    m.rig.run([&](VkCommandBuffer cmd) { m.moe.matvec(cmd, *down.w->type, ds, dn, false); });
  }
  const bool sum = decode, shexp = n_tok > 1, next = sum && !shexp;
  if (sum) {
    vk::MoePush su = dn;
    su.s.m.y_off = xs_off;
    su.s.x2_off = sh_off, su.s.xg_off = n_off, su.s.norm_off = shexp ? 0 : vk::kNone;
    if (next) su.s.norm_off = 0, su.s.sq_off = sq_off;  // gv as the next norm's weights, x·gv over n
    if (int8_down) su.s.m.x_off = dq_off, su.s.m.x_stride = dq_words;
    if (sum_rows) {
      su.s.q_out = sr_off, su.cnt_off = cnt_off;
      m.rig.put(m.rig.arena(), cnt_off, std::vector<uint32_t>(n_cnt, 0u));
    }
    m.rig.run([&](VkCommandBuffer cmd) { m.moe.matvec(cmd, *down.w->type, ds, su, false, true, next, int8_down); });
  }
  const auto xs_after = m.rig.get(m.rig.arena(), xs_off, uint64_t(n_tok) * ER);
  if (next) {  // x_new ∘ gv exactly (one f32 product); Σ x_new² per row group of kRows rows
    const auto xg = m.rig.get(m.rig.arena(), n_off, uint64_t(n_tok) * ER);
    const auto sq = m.rig.get(m.rig.arena(), sq_off, uint64_t(n_tok) * groups);
    int64_t wrong = 0;
    double worst_sq = 0;
    for (int tk = 0; tk < n_tok; ++tk)
      for (uint32_t g0 = 0; g0 < groups; ++g0) {
        double ref = 0;
        for (uint32_t row = g0 * vk::MoeKernels::kRows; row < std::min<uint32_t>(uint32_t(ER), (g0 + 1) * vk::MoeKernels::kRows); ++row) {
          const size_t at = size_t(tk) * ER + row;
          wrong += xg[at] != xs_after[at] * gv[row];
          ref += double(xs_after[at]) * xs_after[at];
        }
        worst_sq = std::max(worst_sq, std::fabs(sq[size_t(tk) * groups + g0] - ref) / std::max(ref, 1e-30));
      }
    INFO("next norm: " << wrong << " of " << n_tok * ER << " x·norm values differ; Σx² partials worst relative error " << worst_sq);
    CHECK(wrong == 0);
    CHECK(worst_sq <= 1e-5);
    if (sum_rows) {  // the B32 rows of the x·norm it wrote, word for word; the counters at 0 again
      const std::vector<uint32_t> want = cpu_b32_row(xg.data(), int(ER));
      const auto got = m.rig.get_words(m.rig.arena(), sr_off, sr_words);
      const auto cnt = m.rig.get_words(m.rig.arena(), cnt_off, n_cnt);
      int64_t bad_words = 0;
      for (uint32_t i = 0; i < sr_words; ++i) bad_words += got[i] != want[i];
      INFO("summed down's B32 rows: " << bad_words << " of " << sr_words << " words differ from cpu_b32_row(x·norm)");
      CHECK(bad_words == 0);
      CHECK(cnt == std::vector<uint32_t>(n_cnt, 0u));
    }
  }
  const auto h = m.rig.get(m.rig.arena(), hx_off, uint64_t(P) * FE);
  if (int8_down) {  // h's B32 rows: the CPU's rule on the h the kernel wrote, word for word
    const auto hq = m.rig.get_words(m.rig.arena(), hq_off, uint64_t(P) * hq_words);
    int64_t wrong = 0;
    for (uint32_t p = 0; p < P; ++p) {
      const std::vector<uint32_t> want = cpu_b32_row(&h[size_t(p) * FE], int(FE));
      for (uint32_t i = 0; i < hq_words; ++i) wrong += hq[size_t(p) * hq_words + i] != want[i];
    }
    INFO("gate|up B32 rows: " << wrong << " of " << P * hq_words << " words differ from cpu_b32_row(h)");
    CHECK(wrong == 0);
  }
  const auto hd_after = m.rig.get_words(m.rig.arena(), hd_off, uint64_t(P) * FD);
  const auto d = m.rig.get(m.rig.arena(), dx_off, uint64_t(P) * ER);
  const auto tail = m.rig.get_words(m.rig.arena(), end, 64);
  for (Stack* s : {&gate, &up, &down}) REQUIRE(be.release(s->w));
  CHECK(tail == nan);
  CHECK(std::memcmp(hd_after.data(), hd.data(), hd.size() * 4) == 0);  // gate|up stays within its P·FE rows
  double worst_h = 0, worst_d = 0, worst_s = 0;
  int64_t bad = 0;
  std::vector<float> g, u, y;
  // The summed down: x + Σ_j w·y_j (+ gate·sh), and its bound Σ_j w·bd_j + f32 additions.
  std::vector<double> s_ref(size_t(n_tok) * ER), s_bound(size_t(n_tok) * ER, 0.0);
  for (int tk = 0; tk < n_tok; ++tk) {
    double dot = 0;
    for (int64_t i = 0; i < ER; ++i) dot += double(nn[size_t(tk) * ER + size_t(i)]) * gv[size_t(i)];
    const double sg = shexp ? 1.0 / (1.0 + std::exp(-dot)) : 0.0;  // the shared expert's gate
    for (int64_t i = 0; i < ER; ++i) {
      const size_t at = size_t(tk) * ER + size_t(i);
      s_ref[at] = xs[at] + sg * sh[at];
      s_bound[at] = 1e-6 * (std::fabs(xs[at]) + std::fabs(sg * sh[at]));
    }
  }
  for (uint32_t p = 0; p < P; ++p) {
    const uint32_t e = r.expert[p], tok = p / uint32_t(K);
    double bg, bu, bd;
    product(gate.m[e], &x[size_t(tok) * E], g, bg);
    product(up.m[e], &x[size_t(tok) * E], u, bu);
    const double s = sc[tok];  // the products of x·norm times 1/rms
    for (float& v : g) v = float(v * s);
    for (float& v : u) v = float(v * s);
    bg *= s, bu *= s;
    // gate|up: h = silu(g)·u; |silu'| < 1.1, so an error within bg on g and bu on
    // u moves h by at most 1.1·bg·(|u| + bu) + |silu(g)|·bu.
    for (int64_t i = 0; i < FE; ++i) {
      const double ref = silu(g[size_t(i)]) * u[size_t(i)];
      const double bound = 1.1 * bg * (std::fabs(u[size_t(i)]) + bu) + std::fabs(silu(g[size_t(i)])) * bu;
      const double ratio = std::fabs(h[size_t(p) * FE + size_t(i)] - ref) / (slack * bound);
      bad += !(ratio <= 1.0);
      worst_h = std::max(worst_h, std::isnan(ratio) ? INFINITY : ratio);
    }
    // down: w_p · (W_e · h_p), w_p the routing weight as the kernel reads it (f32).
    product(down.m[e], &hd[size_t(p) * FD], y, bd);
    const double wp = double(float(r.weight[p]));
    for (int64_t i = 0; i < ER; ++i) {
      const double ratio = std::fabs(d[size_t(p) * ER + size_t(i)] - wp * y[size_t(i)]) / (slack * wp * bd);
      bad += !(ratio <= 1.0);
      worst_d = std::max(worst_d, std::isnan(ratio) ? INFINITY : ratio);
    }
    if (int8_down) product(down.m[e], &hdq[size_t(p) * FD], y, bd);  // the summed down's input: the B32 values
    for (int64_t i = 0; i < ER; ++i) {
      s_ref[size_t(tok) * ER + size_t(i)] += wp * y[size_t(i)];
      s_bound[size_t(tok) * ER + size_t(i)] += wp * bd + 1e-6 * std::fabs(wp * y[size_t(i)]);
    }
  }
  for (size_t i = 0; sum && i < s_ref.size(); ++i) {
    const double ratio = std::fabs(xs_after[i] - s_ref[i]) / s_bound[i];
    bad += !(ratio <= 1.0);
    worst_s = std::max(worst_s, std::isnan(ratio) ? INFINITY : ratio);
  }
  if (!sum) CHECK(std::memcmp(xs_after.data(), xs.data(), xs.size() * 4) == 0);  // nothing else writes x
  INFO(type_name(t) << (tiled ? " tiled" : int8_down ? " matvec, gate|up and down on B32 rows" : int8 ? " matvec, gate|up on B32 rows" : " matvec") << " " << NE << " experts, " << K << " used, " << n_tok
                    << " tokens, gate|up " << FE << "x" << E
                    << ", down " << ER << "x" << FD << ": worst |err|/bound gate|up " << worst_h << ", down " << worst_d
                    << (sum ? ", down summed into x " : "") << (sum ? std::to_string(worst_s) : "")
                    << (sum && shexp ? " (+ shared expert)" : ""));
  CHECK(bad == 0);
  return std::max({worst_h, worst_d, worst_s});
}

}  // namespace

TEST_CASE("mvm_<T> kernels vs CPU: the chosen experts' gate|up (silu·up) and down (× weight), every type",
          "[vulkan][span][moe]") {
  auto be = open_backend("mvm");
  if (!be) FISH_SKIP(skip_reason());
  uint64_t seed = 1000;
  const bool cpu = be->device()->caps().cpu_device;
  for (GgmlType t : {GgmlType::F32, GgmlType::F16, GgmlType::Q4_0, GgmlType::Q8_0, GgmlType::Q4_K, GgmlType::Q5_K,
                     GgmlType::Q6_K, GgmlType::FQ3}) {
    const bool plain = t == GgmlType::F32 || t == GgmlType::F16;
    // Inputs: the type's block (256 for the quantised, 4 for F32 / F16). Rows
    // per expert not a multiple of a workgroup's 4 (70) or of 64 (132).
    const int64_t E = plain ? 200 : 256, FD = plain ? 68 : 512;
    double worst = 0;
    worst = std::max(worst, run_experts(*be, t, 6, 3, 1, E, 70, FD, 132, seed += 400));   // decode: 1 pair per chunk
    // Prefill (4 pairs per chunk): its pipelines take llvmpipe ~2 s each to
    // compile, so on a CPU device two unit families only (F32, Q4_K); every type on a GPU.
    if (!cpu || t == GgmlType::F32 || t == GgmlType::Q4_K)
      worst = std::max(worst, run_experts(*be, t, 6, 3, 9, E, 70, FD, 132, seed += 400));
    worst = std::max(worst, run_experts(*be, t, 8, 2, 3, E, 132, FD, 70, seed += 400));   // 6 pairs over 8: chunks of 1
    // 8 of 16 used (qwen3moe-like): the summed down has more (pair, unit) items than invocations.
    worst = std::max(worst, run_experts(*be, t, 16, 8, 1, E, 70, FD, 70, seed += 400));
    // The summed down writing the next layer's B32 rows (the B32 decode's, f32 h): 4 blocks of 32.
    if (!plain) worst = std::max(worst, run_experts(*be, t, 8, 2, 1, E, 70, FD, 128, seed += 400, false, false, false, true));
    std::printf("  mvm %-5s worst |err|/bound %.5f\n", type_name(t).c_str(), worst);
  }
}

TEST_CASE("mvmi_<T> kernels vs CPU: a decode's gate|up on int8 B32 rows (and writing them), its summed down on them, every K-quant",
          "[vulkan][span][moe]") {
  auto be = open_backend("mvmi");
  if (!be) FISH_SKIP(skip_reason());
  if (!be->kernels()->int8()) FISH_SKIP("no int8 dot products on this device");
  uint64_t seed = 7000;
  for (GgmlType t : {GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K, GgmlType::FQ3}) {
    // One token and 3 (of 4 allowed) tokens, rows not a multiple of 4; E of two superblocks.
    double worst = run_experts(*be, t, 6, 3, 1, 512, 70, 256, 132, seed += 400, false, true);
    worst = std::max(worst, run_experts(*be, t, 8, 2, 3, 512, 132, 256, 70, seed += 400, false, true));
    worst = std::max(worst, run_experts(*be, t, 16, 8, 1, 256, 70, 256, 70, seed += 400, false, true));
    // The gate|up writing h's B32 rows (32 rows per workgroup), the summed down on B32 rows.
    worst = std::max(worst, run_experts(*be, t, 6, 3, 1, 512, 128, 256, 132, seed += 400, false, true, true));
    worst = std::max(worst, run_experts(*be, t, 16, 8, 3, 256, 256, 512, 70, seed += 400, false, true, true));
    // ... and the summed down writing the next layer's B32 rows too (8 blocks).
    worst = std::max(worst, run_experts(*be, t, 16, 8, 1, 256, 128, 256, 256, seed += 400, false, true, true, true));
    std::printf("  mvmi %-5s worst |err|/bound %.5f\n", type_name(t).c_str(), worst);
  }
}

TEST_CASE("tlm_<T> kernels vs CPU: a prompt chunk's experts as tiled products per expert, every type",
          "[vulkan][span][moe]") {
  auto be = open_backend("tlm");
  if (!be) FISH_SKIP(skip_reason());
  be->kernels()->set_coopmat(false);  // the f32 tiles (tcm_<T> below takes the device's cooperative matrices)
  uint64_t seed = 5000;
  for (GgmlType t : {GgmlType::F32, GgmlType::F16, GgmlType::Q4_0, GgmlType::Q8_0, GgmlType::Q4_K, GgmlType::Q5_K,
                     GgmlType::Q6_K, GgmlType::FQ3}) {
    const bool plain = t == GgmlType::F32 || t == GgmlType::F16;
    const int64_t E = plain ? 200 : 256, FD = plain ? 68 : 512;
    // 70 tokens x 3 of 6 experts, expert 2 in every token's choice: 70 pairs
    // (two tiles of 64), the others ~28; rows 70 and 132 (not multiples of 64).
    const double w = run_experts(*be, t, 6, 3, 70, E, 70, FD, 132, seed += 400, true);
    std::printf("  tlm %-5s worst |err|/bound %.5f\n", type_name(t).c_str(), w);
  }
}

TEST_CASE("tcm_<T> kernels vs CPU: a prompt chunk's experts on cooperative matrices, every type, tiles of 32 and 64 pairs",
          "[vulkan][span][moe][coopmat]") {
  auto be = open_backend("tcm");
  if (!be) FISH_SKIP(skip_reason());
  be->kernels()->set_coopmat(true);
  if (!be->kernels()->coopmat())
    FISH_SKIP("the device lists no 16x16x16 f16 cooperative matrices at subgroup scope of 32, or has less than " +
              std::to_string(vk::MatmulKernels::kCoopSharedBytes) + " bytes of shared memory");
  uint64_t seed = 9000;
  for (GgmlType t : {GgmlType::F32, GgmlType::F16, GgmlType::Q4_0, GgmlType::Q8_0, GgmlType::Q4_K, GgmlType::Q5_K,
                     GgmlType::Q6_K, GgmlType::FQ3}) {
    const bool plain = t == GgmlType::F32 || t == GgmlType::F16;
    const int64_t E = plain ? 200 : 256, FD = plain ? 68 : 512;
    double worst = 0;
    for (uint32_t bn : {32u, 64u}) {
      be->kernels()->set_coop_tokens(bn);
      INFO(bn << "-pair tiles");
      // As tlm_<T>: expert 2 takes all 70 tokens (3 tiles of 32, 2 of 64), rows
      // 70 and 132 (partial 128-row tiles), F32 / F16 rows of 200 and 68 (not whole 64-steps).
      worst = std::max(worst, run_experts(*be, t, 6, 3, 70, E, 70, FD, 132, seed += 400, true, false, false, false, 3.0));
      // 8 of 16 experts on 40 tokens (20 pairs each on average), 256 rows (two whole tiles).
      worst = std::max(worst, run_experts(*be, t, 16, 8, 40, E, 256, FD, 256, seed += 400, true, false, false, false, 3.0));
    }
    be->kernels()->set_coop_tokens(0);
    std::printf("  tcm %-5s worst |err|/(3 x bound) %.5f\n", type_name(t).c_str(), worst);
  }
}

TEST_CASE("moe_combine kernel vs CPU: x += the k weighted rows (+ the gated shared expert)", "[vulkan][span][moe]") {
  auto be = open_backend("moe_combine");
  if (!be) FISH_SKIP(skip_reason());
  const int E = 264, K = 3, n_tok = 5, NE = 6;
  const uint32_t dx_off = 64, x_off = dx_off + uint32_t(n_tok * K * E), sh_off = x_off + uint32_t(n_tok * E);
  const uint32_t n_off = sh_off + uint32_t(n_tok * E), end = n_off + uint32_t(n_tok * E);
  for (const bool shexp : {false, true}) {
    MoeRig m(*be, end + 64, E);
    const auto dx = randn(size_t(n_tok) * K * E, 1200, 0.5f), x = randn(size_t(n_tok) * E, 1201, 2.0f);
    const auto sh = randn(size_t(n_tok) * E, 1202, 0.5f), n = randn(size_t(n_tok) * E, 1203, 1.0f);
    const auto gv = randn(size_t(E), 1204, 0.1f);
    m.rig.put(m.rig.arena(), dx_off, dx);
    m.rig.put(m.rig.arena(), x_off, x);
    m.rig.put(m.rig.arena(), sh_off, sh);
    m.rig.put(m.rig.arena(), n_off, n);
    m.rig.put(m.rig.params(), 0, gv);
    vk::MoePush pc;
    pc.n_expert = NE, pc.k = K;
    pc.s.m = {uint32_t(E), 0, uint32_t(n_tok), uint32_t(E), dx_off, uint32_t(E), x_off};
    pc.s.x2_off = sh_off, pc.s.xg_off = n_off, pc.s.norm_off = shexp ? 0 : vk::kNone;
    const VkDescriptorSet set = m.aux();
    m.rig.run([&](VkCommandBuffer cmd) { m.moe.combine(cmd, set, pc); });
    const auto y = m.rig.get(m.rig.arena(), x_off, size_t(n_tok) * E);
    double worst = 0, mx = 0;
    for (int t = 0; t < n_tok; ++t) {
      double dot = 0;
      for (int i = 0; i < E; ++i) dot += double(n[size_t(t) * E + i]) * gv[size_t(i)];
      const double gate = 1.0 / (1.0 + std::exp(-dot));
      for (int i = 0; i < E; ++i) {
        double ref = x[size_t(t) * E + i];
        for (int j = 0; j < K; ++j) ref += dx[(size_t(t) * K + size_t(j)) * E + size_t(i)];
        if (shexp) ref += gate * sh[size_t(t) * E + i];
        worst = std::max(worst, std::fabs(y[size_t(t) * E + i] - ref));
        mx = std::max(mx, std::fabs(ref));
      }
    }
    INFO((shexp ? "with" : "without") << " a shared expert: max |y - ref| " << worst << " of max |ref| " << mx);
    CHECK(worst <= 1e-6 * mx);  // a few f32 additions and one f32 dot of 264
  }
}
