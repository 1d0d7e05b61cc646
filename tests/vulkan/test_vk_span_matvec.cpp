// The span matvec's run-time variants (shaders/matvec_span.comp), one dispatch
// at a time in a SpanRig:
//   - every FISH_VK_SPAN_MV shape (rows per workgroup 1..16 x workgroup 32..256)
//     for every weight type (FQ3 included), plain with a scaled x and with x·x2 + residual add
//     + the next norm's epilogue, within the spec's matmul bound of the CPU
//     reference (1e-3 · Σ|w||x| / n_out per element);
//   - the gate|up pair (EPI 4) against the same kernel's separate silu(gate)
//     and up dispatches multiplied on the host (1e-5 of max |y|: the sums are
//     the same sums in the same order);
//   - the consumer-side norm: 1/rms reduced from the producer's Σx² partials
//     (inv_parts) against 1/rms handed over directly, and EPI 3's partials
//     (their sum against Σy² of its output, 1e-5 relative);
//   - token groups (span forwards of 2..32 rows: several sequences' decode):
//     every type, 2, 3, 5, 8, 16, 17 and 32 tokens, 75 rows (partial row and
//     token groups), plain / x·x2 + residual + next norm / residual with
//     the consumer-side norm, within the same bound; the pair on 17 tokens;
//   - the MoE router's routing tail (EPI 5): the logits within the bound, and
//     the pairs' words the last workgroup writes equal to the CPU's routing
//     (cpu/moe_routing.h) of those logits (ids exactly, weights within 2e-6),
//     its arrival counter back at 0 (a second dispatch routes again).
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>

#include "cpu/matmul.h"
#include "span_rig.h"
#include "vk_test_util.h"
#include "vk_test_math.h"

using namespace fish;
using namespace fish::vktest;
using vk::SpanFusion;
using vk::SpanMvShape;

namespace {

// Arena words of one dispatch: ctrl [0, 64) (1/rms in at 16),
// x, x2 [n_tok][n_in], y, xg [n_tok][n_out], sq partials, Σx² partials in.
struct Offs {
  uint32_t x, x2, y, xg, sq, parts, end;
  Offs(uint32_t n_in, uint32_t n_out, uint32_t n_tok, uint32_t n_parts) {
    x = 64, x2 = x + n_tok * n_in, y = x2 + n_tok * n_in, xg = y + n_tok * n_out, sq = xg + n_tok * n_out;
    parts = sq + std::max(4u, n_tok) * n_out, end = parts + n_tok * n_parts + 64;
  }
};

struct Inputs {
  std::vector<float> x, x2, y0, g, inv, parts;  // inv: 1/rms per token; parts: [n_tok][n] Σx² partials
  uint32_t n_parts = 0;                          // > 0: the kernel reduces parts instead of reading inv
};

struct Outputs {
  std::vector<float> y, xg, sq;
  uint32_t groups = 0;
};

// One dispatch of m (and m2: a pair) with fz on n_tok tokens.
Outputs run_mv(vk::VulkanBackend& be, const Matrix& m, const Matrix* m2, int n_tok, SpanFusion fz, const Inputs& in) {
  const uint32_t n_in = uint32_t(m.n_in), n_out = uint32_t(m.n_out), nt = uint32_t(n_tok);
  const Offs o(n_in, n_out, nt, std::max(1u, in.n_parts));
  SpanRig rig(be, o.end, 4, n_out, 4);
  rig.put(rig.arena(), 16, in.inv);
  rig.put(rig.arena(), o.x, in.x);
  rig.put(rig.arena(), o.x2, in.x2);
  rig.put(rig.arena(), o.y, in.y0);
  if (in.n_parts) rig.put(rig.arena(), o.parts, in.parts);
  rig.put(rig.params(), 0, in.g);
  vk::Weight* w = be.upload(upload_desc(m));
  vk::Weight* w2 = m2 ? be.upload(upload_desc(*m2)) : nullptr;
  REQUIRE(w);
  REQUIRE(w->chunks.size() == 1);
  if (m2) REQUIRE(w2);
  vk::SpanMatmulPush pc;
  pc.m = {n_in, n_out, nt, n_in, o.x, n_out, o.y};
  pc.inv_in = in.n_parts ? o.parts : 16, pc.inv_parts = in.n_parts, pc.eps = 1e-5f, pc.x2_off = o.x2;
  pc.norm_off = 0, pc.xg_off = o.xg, pc.sq_off = o.sq;
  const VkDescriptorSet set = rig.matmul_set(w->chunks[0], w2 ? &w2->chunks[0] : nullptr);
  Outputs out;
  rig.run([&](VkCommandBuffer cmd) { be.kernels()->record_span(cmd, *w->type, set, pc, fz); });
  out.groups = be.kernels()->span_row_groups(*w->type, n_in, n_out, nt, fz);
  out.y = rig.get(rig.arena(), o.y, size_t(nt) * n_out);
  out.xg = rig.get(rig.arena(), o.xg, size_t(nt) * n_out);
  out.sq = rig.get(rig.arena(), o.sq, size_t(nt) * out.groups);
  REQUIRE(be.release(w));
  if (w2) REQUIRE(be.release(w2));
  return out;
}

Inputs make_inputs(const Matrix& m, int n_tok, uint64_t seed) {
  Inputs in;
  in.x = randn(size_t(n_tok) * size_t(m.n_in), seed, 2.0f);
  in.x2 = randn(size_t(n_tok) * size_t(m.n_in), seed + 1);
  in.y0 = randn(size_t(n_tok) * size_t(m.n_out), seed + 2);
  in.g = uniform(size_t(m.n_out), seed + 3, 0.7f, 1.3f);
  in.inv = uniform(size_t(std::max(4, n_tok)), seed + 4, 0.7f, 1.3f);  // at arena word 16: up to 48 tokens
  return in;
}

// Pipelines are compiled per shape (lavapipe takes seconds for the unrolled
// 16-row ones), so the cases pick a few: the extremes of rows per workgroup
// with small and large workgroups (partial row groups, several subgroups).
const SpanMvShape kShapes[] = {{16, 32}, {2, 256}};

}  // namespace

TEST_CASE("span matvec shapes (FISH_VK_SPAN_MV) within the spec's bound", "[vulkan][span]") {
  auto be = open_backend("span matvec shapes");
  if (!be) FISH_SKIP(skip_reason());
  uint64_t seed = 900;
  for (GgmlType t : {GgmlType::F32, GgmlType::F16, GgmlType::Q4_0, GgmlType::Q8_0, GgmlType::Q4_K, GgmlType::Q5_K,
                     GgmlType::Q6_K, GgmlType::FQ3}) {
    const int64_t n_in = (t == GgmlType::F32 || t == GgmlType::F16) ? 200 : 512;
    const Matrix m = random_matrix(t, n_in, 75, seed++);  // 75 rows: partial row groups for every shape
    double worst = 0;
    for (const SpanMvShape& s : kShapes) {
      be->kernels()->set_span_shape(vk::kRoleOther, s);
      for (int n_tok : {1, 3}) {
        if (n_tok > 1 && t != GgmlType::Q4_K) continue;  // the unit code is per type; the tokens' loop is not
        for (const SpanFusion fz : {SpanFusion{0, false}, SpanFusion{3, true}}) {
          const Inputs in = make_inputs(m, n_tok, seed++);
          const Outputs out = run_mv(*be, m, nullptr, n_tok, fz, in);
          std::vector<float> xe(in.x);
          if (fz.xprod)
            for (size_t i = 0; i < xe.size(); ++i) xe[i] *= in.x2[i];
          std::vector<float> prod(out.y.size());
          for (size_t i = 0; i < prod.size(); ++i) {
            const float sc = in.inv[i / size_t(m.n_out)];
            prod[i] = (fz.epi == 3 ? out.y[i] - in.y0[i] : out.y[i]) / sc;
          }
          int64_t bad = 0;
          const double r = bound_ratio(m, xe.data(), n_tok, prod.data(), &bad);
          INFO(type_name(t) << " rows " << s.rows << " wg " << s.wg << " n_tok " << n_tok << " epi " << fz.epi
                            << ": worst |err|/bound " << r);
          CHECK(bad == 0);
          CHECK(r <= 1.0);
          worst = std::max(worst, r);
        }
      }
    }
    be->kernels()->set_span_shape(vk::kRoleOther, {});
    std::printf("  span matvec shapes %-5s worst |err|/bound %.5f\n", type_name(t).c_str(), worst);
  }
}

TEST_CASE("span gate|up pair = silu(gate)·up of the separate dispatches", "[vulkan][span]") {
  auto be = open_backend("span gate|up pair");
  if (!be) FISH_SKIP(skip_reason());
  uint64_t seed = 1200;
  // FQ3: the pair's second matrix through its own uvec2 view (WB2).
  for (GgmlType t : {GgmlType::F16, GgmlType::Q4_K, GgmlType::Q6_K, GgmlType::FQ3}) {
    const int64_t n_in = t == GgmlType::F16 ? 200 : 512;
    const Matrix gate = random_matrix(t, n_in, 150, seed++), up = random_matrix(t, n_in, 150, seed++);
    for (const SpanMvShape& s : {SpanMvShape{}, SpanMvShape{16, 64}}) {
      if (s.rows != 0 && t != GgmlType::Q4_K) continue;  // the shape's loops are one code for every type
      be->kernels()->set_span_shape(vk::kRoleOther, s);
      for (int n_tok : {1, 3}) {
        if (n_tok > 1 && t != GgmlType::Q4_K) continue;
        const Inputs in = make_inputs(gate, n_tok, seed++);
        const Outputs g = run_mv(*be, gate, nullptr, n_tok, SpanFusion{2, false}, in);
        const Outputs u = run_mv(*be, up, nullptr, n_tok, SpanFusion{0, false}, in);
        const Outputs p = run_mv(*be, gate, &up, n_tok, SpanFusion{4, false, true}, in);
        std::vector<float> want(g.y.size());
        for (size_t i = 0; i < want.size(); ++i) want[i] = g.y[i] * u.y[i];
        const double d = max_diff(p.y, want), mx = max_abs(want);
        INFO(type_name(t) << " rows " << s.rows << " wg " << s.wg << " n_tok " << n_tok << ": max |pair - silu(g)·u| "
                          << d << " of max " << mx);
        CHECK(mx > 0);
        CHECK(d <= 1e-5 * mx);
      }
    }
    be->kernels()->set_span_shape(vk::kRoleOther, {});
  }
}

TEST_CASE("span matvec consumer-side norm: 1/rms from partials, EPI 3's partials", "[vulkan][span]") {
  auto be = open_backend("span consumer norm");
  if (!be) FISH_SKIP(skip_reason());
  uint64_t seed = 1500;
  for (GgmlType t : {GgmlType::Q4_K, GgmlType::F32}) {
    const int64_t n_in = t == GgmlType::F32 ? 200 : 512;
    const Matrix m = random_matrix(t, n_in, 300, seed++);
    for (const SpanMvShape& s : {SpanMvShape{}, SpanMvShape{8, 64}}) {
      be->kernels()->set_span_shape(vk::kRoleOther, s);
      for (int n_tok : {1, 3}) {
        for (uint32_t n_parts : {1u, 37u, 1024u}) {
          // Partials Σx² per token whose 1/rms is what the direct run gets.
          Inputs direct = make_inputs(m, n_tok, seed++), from_parts = direct;
          from_parts.n_parts = n_parts;
          from_parts.parts = uniform(size_t(n_tok) * n_parts, seed++, 0.0f, 2.0f);
          for (int tk = 0; tk < n_tok; ++tk) {
            double sum = 0;
            for (uint32_t i = 0; i < n_parts; ++i) sum += from_parts.parts[size_t(tk) * n_parts + i];
            direct.inv[size_t(tk)] = float(1.0 / std::sqrt(sum / double(n_in) + 1e-5));
          }
          for (const SpanFusion fz : {SpanFusion{2, false}}) {
            const Outputs a = run_mv(*be, m, nullptr, n_tok, fz, direct);
            const Outputs b = run_mv(*be, m, nullptr, n_tok, fz, from_parts);
            const double d = max_diff(a.y, b.y), mx = max_abs(a.y);
            INFO(type_name(t) << " rows " << s.rows << " n_tok " << n_tok << " parts " << n_parts << " epi " << fz.epi
                              << ": max |Δy| " << d << " of max " << mx);
            CHECK(d <= 1e-5 * mx);
          }
        }
        // EPI 3: Σ of its partials (one per row group and token) = Σy² of its output.
        const Inputs in = make_inputs(m, n_tok, seed++);
        const Outputs b = run_mv(*be, m, nullptr, n_tok, SpanFusion{3, true}, in);
        for (int tk = 0; tk < n_tok; ++tk) {
          double ss = 0, ps = 0;
          for (int64_t r = 0; r < m.n_out; ++r) {
            const double yr = b.y[size_t(tk) * size_t(m.n_out) + size_t(r)];
            ss += yr * yr;
          }
          for (uint32_t gi = 0; gi < b.groups; ++gi) ps += b.sq[size_t(tk) * b.groups + gi];
          INFO(type_name(t) << " rows " << s.rows << " token " << tk << ": Σ partials " << ps << ", Σy² " << ss);
          CHECK(std::fabs(ps - ss) <= 1e-5 * ss);
        }
      }
    }
    be->kernels()->set_span_shape(vk::kRoleOther, {});
  }
}

// Forwards of 2..32 rows (MatmulKernels::kMaxSpanMatvecTokens): the span
// matvec with token groups of 8 (NB > 0), each group's weights read once for
// its tokens. The token counts cover one partial group (2, 3, 5), whole groups
// (8, 16, 32) and a group of one token after two whole ones (17); the
// variants cycle over the token counts (one pipeline per type and variant:
// the pipelines do not depend on the token count).
// Then two layouts with rows across lanes (MatvecConfig::lanes,
// matvec_span.comp's LANES) forced by the benchmarks' override, on F16 (units
// of 4 elements, a partial one) and Q4_K, fewer token counts: the layout is
// one code for every type's unit (four layouts, 1, 2, 4 and 8 lanes per row,
// passed for every type on lavapipe once; too slow to compile for every run).
TEST_CASE("span matvec token groups (2..32 rows) within the spec's bound, every type", "[vulkan][span][batch]") {
  auto be = open_backend("span matvec token groups");
  if (!be) FISH_SKIP(skip_reason());
  uint64_t seed = 2100;
  // wg, rows, slices, nt, nb, lanes; the first: span_matvec_config's own choice.
  const vk::MatvecConfig layouts[] = {{0, 0, 0, 0, 0, 0}, {128, 1, 4, 4, 2, 1}, {64, 2, 2, 2, 4, 4}};
  for (const vk::MatvecConfig& layout : layouts) {
  be->kernels()->set_span_group_override(layout);
  for (GgmlType t : {GgmlType::F32, GgmlType::F16, GgmlType::Q4_0, GgmlType::Q8_0, GgmlType::Q4_K, GgmlType::Q5_K,
                     GgmlType::Q6_K, GgmlType::FQ3}) {
    if (layout.lanes && t != GgmlType::F16 && t != GgmlType::Q4_K) continue;
    // F16: n_in not a multiple of 8 (its 4-element units); F32: of 4 not 8.
    const int64_t n_in = t == GgmlType::F32 ? 196 : t == GgmlType::F16 ? 204 : t == GgmlType::Q4_0 || t == GgmlType::Q8_0 ? 352 : 512;
    const Matrix m = random_matrix(t, n_in, 75, seed++);
    double worst = 0;
    int v = 0;
    const std::vector<int> counts = layout.nb ? std::vector<int>{5, 17, 32} : std::vector<int>{2, 3, 5, 8, 16, 17, 32};
    for (int n_tok : counts) {
      for (int rep = 0; rep < 2; ++rep, ++v) {
        // 0: plain on a scaled x; 1: x·x2, residual, the next norm's x·g and Σy² partials;
        // 2: residual, 1/rms from 37 Σx² partials per token (the consumer-side norm).
        const int variant = v % 3;
        const SpanFusion fz = variant == 0 ? SpanFusion{0, false} : variant == 1 ? SpanFusion{3, true} : SpanFusion{1, false};
        Inputs in = make_inputs(m, n_tok, seed++);
        if (variant == 2) {
          in.n_parts = 37;
          in.parts = uniform(size_t(n_tok) * in.n_parts, seed++, 0.0f, 2.0f);
          for (int tk = 0; tk < n_tok; ++tk) {
            double sum = 0;
            for (uint32_t i = 0; i < in.n_parts; ++i) sum += in.parts[size_t(tk) * in.n_parts + i];
            in.inv[size_t(tk)] = float(1.0 / std::sqrt(sum / double(n_in) + 1e-5));
          }
        }
        const Outputs out = run_mv(*be, m, nullptr, n_tok, fz, in);
        std::vector<float> xe(in.x);
        if (fz.xprod)
          for (size_t i = 0; i < xe.size(); ++i) xe[i] *= in.x2[i];
        std::vector<float> prod(out.y.size());
        for (size_t i = 0; i < prod.size(); ++i)
          prod[i] = (fz.epi == 0 ? out.y[i] : out.y[i] - in.y0[i]) / in.inv[i / size_t(m.n_out)];
        int64_t bad = 0;
        const double r = bound_ratio(m, xe.data(), n_tok, prod.data(), &bad);
        INFO(type_name(t) << " n_tok " << n_tok << " epi " << fz.epi << ": worst |err|/bound " << r);
        CHECK(bad == 0);
        CHECK(r <= 1.0);
        worst = std::max(worst, r);
        if (fz.epi == 3) {
          for (size_t i = 0; i < out.y.size(); ++i) REQUIRE(out.xg[i] == out.y[i] * in.g[i % size_t(m.n_out)]);
          for (int tk = 0; tk < n_tok; ++tk) {
            double ss = 0, ps = 0;
            for (int64_t r2 = 0; r2 < m.n_out; ++r2) ss += double(out.y[size_t(tk) * size_t(m.n_out) + size_t(r2)]) *
                                                           out.y[size_t(tk) * size_t(m.n_out) + size_t(r2)];
            for (uint32_t gi = 0; gi < out.groups; ++gi) ps += out.sq[size_t(tk) * out.groups + gi];
            INFO(type_name(t) << " n_tok " << n_tok << " token " << tk << ": Σ partials " << ps << ", Σy² " << ss);
            CHECK(std::fabs(ps - ss) <= 1e-5 * ss);
          }
        }
      }
    }
    std::printf("  span matvec token groups %-5s lanes %u worst |err|/bound %.5f\n", type_name(t).c_str(), layout.lanes,
                worst);
  }
  // The pair (gate|up, EPI 4) with token groups = silu(gate)·up of the separate dispatches.
  const Matrix gate = random_matrix(GgmlType::Q4_K, 512, 75, seed++), up = random_matrix(GgmlType::Q4_K, 512, 75, seed++);
  const Inputs in = make_inputs(gate, 17, seed++);
  const Outputs g = run_mv(*be, gate, nullptr, 17, SpanFusion{2, false}, in);
  const Outputs u = run_mv(*be, up, nullptr, 17, SpanFusion{0, false}, in);
  const Outputs p = run_mv(*be, gate, &up, 17, SpanFusion{4, false, true}, in);
  std::vector<float> want(g.y.size());
  for (size_t i = 0; i < want.size(); ++i) want[i] = g.y[i] * u.y[i];
  const double d = max_diff(p.y, want), mx = max_abs(want);
  INFO("pair on 17 tokens: max |pair - silu(g)·u| " << d << " of max " << mx);
  CHECK(mx > 0);
  CHECK(d <= 1e-5 * mx);
  }
  be->kernels()->set_span_group_override(vk::MatvecConfig{0, 0, 0, 0, 0});
}

TEST_CASE("span matvec routing tail (EPI 5): the last workgroup routes the logits as the CPU does", "[vulkan][span]") {
  auto be = open_backend("span matvec routing tail");
  if (!be) FISH_SKIP(skip_reason());
  uint64_t seed = 3100;
  struct Case {
    GgmlType t;
    int64_t n_expert;
    uint32_t k;
    bool renorm;
  };
  // Qwen3-30B-A3B's 128 x 8 (renormalised), Mixtral's 8 x 2, 60 experts (not a multiple of 4) x 4.
  for (const Case c : {Case{GgmlType::F32, 128, 8, true}, Case{GgmlType::F32, 8, 2, false},
                       Case{GgmlType::Q8_0, 60, 4, false}}) {
    const Matrix m = random_matrix(c.t, 256, c.n_expert, seed++);
    for (int n_tok = 1; n_tok <= 4; ++n_tok) {
      Inputs in = make_inputs(m, n_tok, seed++);
      in.n_parts = 5;  // 1/rms from the producer's partials, as a decode's router reads it
      in.parts = uniform(size_t(n_tok) * in.n_parts, seed++, 0.0f, 2.0f);
      const uint32_t n_in = 256, NE = uint32_t(c.n_expert), nt = uint32_t(n_tok), P = nt * c.k;
      const Offs o(n_in, NE, nt, in.n_parts);
      const uint32_t route = o.end, cnt = route + 2 * P + 4;
      SpanRig rig(*be, cnt + 64, 4, NE, 4);
      rig.put(rig.arena(), o.x, in.x);
      rig.put(rig.arena(), o.parts, in.parts);
      rig.put(rig.arena(), route, std::vector<uint32_t>(2 * P, 0xDEADBEEFu));
      vk::Weight* w = be->upload(upload_desc(m));
      REQUIRE(w);
      vk::SpanMatmulPush pc;
      pc.m = {n_in, NE, nt, n_in, o.x, NE, o.y};
      pc.inv_in = o.parts, pc.inv_parts = in.n_parts, pc.eps = 1e-5f;
      pc.norm_off = route, pc.xg_off = c.k | (c.renorm ? 0x10000u : 0u), pc.sq_off = cnt;
      const VkDescriptorSet set = rig.matmul_set(w->chunks[0], nullptr);
      const SpanFusion fz{5, false};
      for (int pass = 0; pass < 2; ++pass) {  // the second finds the counter the first left
        if (pass == 1) rig.put(rig.arena(), route, std::vector<uint32_t>(2 * P, 0xDEADBEEFu));
        rig.run([&](VkCommandBuffer cmd) { be->kernels()->record_span(cmd, *w->type, set, pc, fz); });
        const auto y = rig.get(rig.arena(), o.y, size_t(nt) * NE);
        const auto words = rig.get_words(rig.arena(), route, 2 * P);
        CHECK(rig.get_words(rig.arena(), cnt, 1)[0] == 0u);
        std::vector<float> prod(y.size()), inv(nt);
        for (uint32_t tk = 0; tk < nt; ++tk) {
          double ss = 0;
          for (uint32_t i = 0; i < in.n_parts; ++i) ss += in.parts[tk * in.n_parts + i];
          inv[tk] = float(1.0 / std::sqrt(ss / double(n_in) + 1e-5));
        }
        for (size_t i = 0; i < y.size(); ++i) prod[i] = y[i] / inv[i / NE];
        int64_t bad = 0;
        const double r = bound_ratio(m, in.x.data(), n_tok, prod.data(), &bad);
        int id_bad = 0;
        double wrel = 0;
        for (uint32_t tk = 0; tk < nt; ++tk) {
          const RouteCheck rc = check_route_words(&words[2 * tk * c.k], &y[tk * NE], int(NE), int(c.k), c.renorm);
          id_bad += rc.id_bad, wrel = std::max(wrel, rc.wrel);
        }
        INFO(type_name(c.t) << " " << NE << " experts, k " << c.k << (c.renorm ? " renormalised" : "") << ", n_tok "
                            << n_tok << " pass " << pass << ": logits |err|/bound " << r << ", " << id_bad
                            << " wrong experts of " << P << ", weights max rel err " << wrel);
        CHECK(bad == 0);
        CHECK(r <= 1.0);
        CHECK(id_bad == 0);
        CHECK(wrel <= 2e-6);
      }
      REQUIRE(be->release(w));
    }
  }
}
