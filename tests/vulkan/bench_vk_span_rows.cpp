// fish_bench_vk_span --kernels / --rows: the span matvec on T rows at once
// (decode of T sequences in one forward; see bench_vk_span_mv.h).
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "bench_vk_span_mv.h"
#include "vk_test_util.h"

namespace fish::vktest {

namespace {

// A token-group shape, as span_matvec_config spells it (wg: the whole workgroup).
struct GroupShape {
  uint32_t slice_wg, slices, rows, nt, nb, lanes = 0;
  vk::MatvecConfig config() const { return {slice_wg * slices, rows, slices, nt, nb, lanes}; }
};

std::string group_str(const GroupShape& g) {
  char b[128];
  if (g.lanes)
    std::snprintf(b, sizeof b, "%ux%u wg, %u lanes per row, %u rows per lane, %ux%u tokens", g.slices, g.slice_wg,
                  g.lanes, g.rows, g.nt, g.nb);
  else
    std::snprintf(b, sizeof b, "%ux%u wg, %u rows, %ux%u tokens", g.slices, g.slice_wg, g.rows, g.nt, g.nb);
  return b;
}

// The shapes worth timing on T rows. Slices of one subgroup (the H200's
// fastest on 2 and 4 rows among 362 shapes of 1..8 slices of 32 or 64, 1..4
// rows, 4..16 tokens per group, 32- and 64-element units:
// docs/experiments/vulkan-span-batch-rows.md), 1 or 2 rows, 4..16 tokens per
// group. Tokens in registers (nt) past 2T only repeat the last row's work, so
// such shapes are left out.
std::vector<GroupShape> group_shapes(uint32_t sg, uint32_t shared, int T) {
  std::vector<GroupShape> out;
  const uint32_t swg = std::max(32u, sg);
  const auto fits = [&](uint32_t nt) { return nt < 2u * uint32_t(T); };
  for (const uint32_t slices : {1u, 4u})
    for (const uint32_t rows : {1u, 2u})
      for (const auto& [nt, nb] : {std::pair<uint32_t, uint32_t>{2, 2}, {1, 8}, {2, 4}, {4, 2}, {2, 8}})
        if (fits(nt)) out.push_back({swg, slices, rows, nt, nb});
  // Rows across lanes (matvec_span.comp's LANES): 1..8 lanes per row, 1..8
  // slices splitting the units, 1 or 2 rows per lane, 2..16 tokens per group.
  for (const uint32_t lanes : {1u, 2u, 4u, 8u})
    for (const uint32_t slices : {1u, 2u, 4u, 8u})
      for (const uint32_t rows : {1u, 2u})
        for (const auto& [nt, nb] : {std::pair<uint32_t, uint32_t>{2, 1}, {2, 2}, {4, 1}, {4, 2}, {8, 1}, {4, 4}}) {
          const GroupShape g{swg, slices, rows, nt, nb, lanes};
          if (fits(nt) && g.config().group_shared_bytes(true) <= shared) out.push_back(g);
        }
  return out;
}

std::string config_str(const vk::MatvecConfig& c) {
  return std::to_string(c.wg) + "," + std::to_string(c.rows) + "," + std::to_string(c.slices) + "," +
         std::to_string(c.nt) + "," + std::to_string(c.nb) + "," + std::to_string(c.lanes);
}

}  // namespace

// The shapes of the token-group matvec on T rows (int8 Q4_K, both matrices;
// T from --sweep-tokens, 4, 8, 16, 32 by default): the heuristic's shape and
// time and the fastest shapes', so that the heuristic in span_matvec_config
// can be chosen from measurements.
static void span_rows_sweep(vk::VulkanBackend& be, vk::MatmulKernels& mk, const Mat& m,
                            const std::vector<VkDescriptorSet>& sets, uint32_t words, uint32_t q_off, uint32_t y_off,
                            int copies, const TimeFn& time, const std::vector<int>& tokens) {
  std::printf("\ntoken-group shapes, %lld x %lld int8 Q4_K on B32 rows: us per matrix\n", (long long)m.n_out,
              (long long)m.n_in);
  std::printf("| T | shapes | heuristic (wg,rows,slices,nt,nb,lanes): us | fastest shapes (us) |\n| ---: | ---: | --- | --- |\n");
  std::vector<std::string> best;
  for (const int T : tokens) {
    const std::vector<GroupShape> shapes =
        group_shapes(be.device()->caps().subgroup_size, be.device()->caps().max_shared_bytes, T);
    vk::SpanFusion fz{0, false, false, vk::kRoleOther};
    fz.int8 = true, fz.xb32 = true;
    vk::SpanMatmulPush pc;
    pc.m = {uint32_t(m.n_in), uint32_t(m.n_out), uint32_t(T), words, q_off, uint32_t(m.n_out), y_off};
    pc.inv_in = vk::kNone;
    auto run = [&]() {
      return time([&](VkCommandBuffer cmd) {
               for (VkDescriptorSet set : sets) {
                 mk.record_span(cmd, *m.w[0]->type, set, pc, fz);
                 step_barrier(be, cmd);
               }
             }) / double(copies);
    };
    // Twice: the first timing of a matrix has been seen disturbed (an H200:
    // 216.6 us for the shape that took 41.0 a moment later).
    run();
    const double base = run();
    std::vector<std::pair<double, GroupShape>> r;
    for (const GroupShape& g : shapes) {
      mk.set_span_group_override(g.config());
      r.push_back({run(), g});
    }
    mk.set_span_group_override(vk::MatvecConfig{0, 0, 0, 0, 0});
    std::sort(r.begin(), r.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    const vk::MatvecConfig h = mk.span_matvec_config(*m.w[0]->type, uint32_t(m.n_in), uint32_t(m.n_out), uint32_t(T), fz);
    std::printf("| %d | %zu | %s: %.1f |", T, shapes.size(), config_str(h).c_str(), base * 1e6);
    for (size_t i = 0; i < std::min<size_t>(8, r.size()); ++i)
      std::printf(" %.1f (%s);", r[i].first * 1e6, group_str(r[i].second).c_str());
    std::printf(" |\n");
    best.push_back("best " + std::to_string(T) + ": " + config_str(r.front().second.config()));
    std::fflush(stdout);
  }
  // One line per T: the fastest shape as MatvecConfig spells it (wg,rows,slices,nt,nb,lanes).
  for (const std::string& l : best) std::printf("%s\n", l.c_str());
}

int span_rows_bench(vk::VulkanBackend& be, int E, int F, int copies, const TimeFn& time, bool sweep,
                    const std::vector<int>& sweep_tokens) {
  vk::MatmulKernels& mk = *be.kernels();
  const int T_max = 64;
  const uint32_t N = uint32_t(std::max(E, F));
  const uint32_t words = vk::MatmulKernels::q8_row_words(256, N), words32 = vk::MatmulKernels::b32_row_words(N);
  // Arena words: ctrl [0, 64), x [T_max][N], its int8 rows [T_max][words], y
  // [T_max][N], its B32 rows [T_max][words32] (the sweep's: a span's forward of
  // 2..32 rows reads B32 rows for K-quant weights).
  const uint32_t x_off = 64, q_off = x_off + T_max * N, y_off = q_off + T_max * words, q32_off = y_off + T_max * N;
  SpanRig rig(be, q32_off + uint64_t(T_max) * words32 + 64, 4, N, 4);
  {
    std::vector<float> x(size_t(T_max) * N);
    for (size_t i = 0; i < x.size(); ++i) x[i] = float(int(i * 2654435761u % 2001u) - 1000) / 1000.0f;
    rig.put(rig.arena(), x_off, x);
  }
  VkDescriptorSet qset = be.pipelines()->allocate_set(mk.quant_layout());
  {
    const VkBuffer b = rig.arena().buffer;
    const uint64_t o = 0, range = rig.arena().size;
    be.pipelines()->write_set(qset, 1, &b, &o, &range);
  }
  std::printf("\nspan matvec on T rows (decode of T sequences in one forward; T > %u: the prefill kernel), Q4_K, "
              "%d copies with a barrier after each; us per matrix, GB/s of weight bytes, us per row\n",
              vk::MatmulKernels::kMaxSpanMatvecTokens, copies);
  std::printf("| matrix | x | T | kernel | us | GB/s | us per row |\n| --- | --- | ---: | --- | ---: | ---: | ---: |\n");
  // gate / up's shape (n_in E, F rows) and down's (n_in F, E rows).
  for (const auto& [n_in, n_out] : {std::pair<int, int>{E, F}, std::pair<int, int>{F, E}}) {
    const Mat m = make_mat(be, GgmlType::Q4_K, n_in, n_out, copies, 11);
    std::vector<VkDescriptorSet> sets;
    for (vk::Weight* w : m.w) sets.push_back(rig.matmul_set(w->chunks[0]));
    for (const bool int8 : {false, true}) {
      if (int8 && !mk.int8_for(*m.w[0]->type)) continue;
      if (int8) {  // every row's Q8_K row once (not timed)
        vk::QuantPush qp;
        qp.n = uint32_t(n_in), qp.n_tok = T_max, qp.x_off = x_off, qp.x_stride = uint32_t(n_in);
        qp.q_off = q_off, qp.q_stride = words;
        rig.run([&](VkCommandBuffer c) { mk.record_quantize(c, qset, qp, 256, false); });
        qp.q_off = q32_off, qp.q_stride = vk::MatmulKernels::b32_row_words(uint32_t(n_in));
        rig.run([&](VkCommandBuffer c) { mk.record_quantize(c, qset, qp, 32, false, true); });
      }
      for (const int T : {1, 4, 8, 16, 32, 64}) {
        vk::SpanFusion fz{0, false, false, vk::kRoleOther};
        fz.int8 = int8 && mk.span_int8_for(*m.w[0]->type, uint32_t(T));
        if (int8 && !fz.int8) continue;  // the prefill kernel on this device reads f32 x
        vk::SpanMatmulPush pc;
        pc.m = {uint32_t(n_in), uint32_t(n_out), uint32_t(T), fz.int8 ? words : uint32_t(n_in), fz.int8 ? q_off : x_off,
                uint32_t(n_out), y_off};
        pc.inv_in = vk::kNone;
        const double s = time([&](VkCommandBuffer cmd) {
          for (size_t i = 0; i < sets.size(); ++i) {
            mk.record_span(cmd, *m.w[0]->type, sets[i], pc, fz);
            step_barrier(be, cmd);
          }
        });
        const double per = s / double(copies);
        const char* kernel = uint32_t(T) > vk::MatmulKernels::kMaxSpanMatvecTokens ? (mk.coopmat() && !fz.int8 ? "coopmat" : "tiled")
                             : T == 1                                               ? "matvec"
                                                                                    : "matvec, token groups";
        std::printf("| %d x %d | %s | %d | %s | %.1f | %.1f | %.2f |\n", n_out, n_in, fz.int8 ? "int8 Q8_K" : "f32", T,
                    kernel, per * 1e6, double(m.bytes) / per / 1e9, per * 1e6 / T);
        std::fflush(stdout);
      }
    }
    if (sweep && mk.int8_for(*m.w[0]->type))
      span_rows_sweep(be, mk, m, sets, vk::MatmulKernels::b32_row_words(uint32_t(n_in)), q32_off, y_off, copies, time,
                      sweep_tokens);
    for (vk::Weight* w : m.w) be.release(w);
  }
  be.pipelines()->free_set(qset);
  return 0;
}

}  // namespace fish::vktest
