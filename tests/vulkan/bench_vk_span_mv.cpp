// fish_bench_vk_span --kernels, second half: the span's matvec variants per
// projection role, timed as the span runs them (see bench_vk_span_mv.h).
#include "bench_vk_span_mv.h"

#include <algorithm>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

#include "vk_test_util.h"

namespace fish::vktest {

using vk::SpanFusion;
using vk::SpanMvShape;
using vk::SpanRole;

std::string shape_str(SpanMvShape s) { return std::to_string(s.rows) + "x" + std::to_string(s.wg); }

void step_barrier(vk::VulkanBackend& be, VkCommandBuffer cmd, VkPipelineStageFlags src, VkAccessFlags src_access) {
  auto mb = vk::vk_init<VkMemoryBarrier>(VK_STRUCTURE_TYPE_MEMORY_BARRIER);
  mb.srcAccessMask = src_access;
  mb.dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT;
  be.device()->fns().vkCmdPipelineBarrier(cmd, src, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0, 1, &mb, 0, nullptr, 0,
                                           nullptr);
}

Mat make_mat(vk::VulkanBackend& be, GgmlType type, int64_t n_in, int64_t n_out, int copies, uint64_t seed) {
  Mat m{type, n_in, n_out, {}, 0};
  const int64_t distinct = std::min<int64_t>(n_out, 64);
  const Matrix few = random_matrix(type, n_in, distinct, seed);
  Matrix full = few;
  full.n_out = n_out;
  full.data.resize(few.row_bytes * uint64_t(n_out));
  for (int64_t r = distinct; r < n_out; ++r)
    std::copy_n(few.data.data() + (r % distinct) * few.row_bytes, few.row_bytes, full.data.data() + r * few.row_bytes);
  m.bytes = full.data.size();
  for (int i = 0; i < copies; ++i) {
    vk::Weight* w = be.upload(upload_desc(full));
    if (!w || w->chunks.size() != 1) throw std::runtime_error("upload of " + full.name + " failed: " + be.error());
    m.w.push_back(w);
  }
  return m;
}

int span_mv_sweep(vk::VulkanBackend& be, const SpanMvDims& d, const TimeFn& time, const std::string& env_out) {
  const int C = d.copies;
  std::printf("\nspan matvec variants, %d layers' worth of each matrix, a barrier after each step as in the span; "
              "us per layer-step (GB/s of weights)\n", C);
  // Q4_K_M's types: q, k, o, gate, up Q4_K; v and half the downs Q6_K.
  const GgmlType t4 = d.fq3 ? GgmlType::FQ3 : GgmlType::Q4_K, t6 = d.fq3 ? GgmlType::Q4_K : GgmlType::Q6_K;
  std::printf("types: %s (Q4_K_M's Q4_K), %s (its Q6_K)\n", d.fq3 ? "FQ3" : "Q4_K", d.fq3 ? "Q4_K" : "Q6_K");
  Mat q = make_mat(be, t4, d.E, d.QD, C, 1), k = make_mat(be, t4, d.E, d.KD, C, 2);
  Mat v = make_mat(be, t6, d.E, d.KD, C, 3), o = make_mat(be, t4, d.QD, d.E, C, 4);
  Mat gate = make_mat(be, t4, d.E, d.F, C, 5), up = make_mat(be, t4, d.E, d.F, C, 6);
  Mat down4 = make_mat(be, t4, d.F, d.E, C / 2, 7), down6 = make_mat(be, t6, d.F, d.E, C - C / 2, 8);

  // Arena words: ctrl [0, 64), x [64, +F), x2, y (F), xg (F), sq (4·F).
  const uint32_t F = uint32_t(std::max(d.F, d.E)), x_off = 64, x2_off = x_off + F, y_off = x2_off + F,
                 xg_off = y_off + F, sq_off = xg_off + F;
  SpanRig rig(be, sq_off + 4 * F + 64, 4, F, 4);
  {
    std::vector<float> x(size_t(2) * F), g(F, 1.0f), inv(8, 0.5f);
    for (size_t i = 0; i < x.size(); ++i) x[i] = float(int(i * 2654435761u % 2001u) - 1000) / 1000.0f;
    rig.put(rig.arena(), x_off, x);
    rig.put(rig.arena(), 16, inv);
    rig.put(rig.params(), 0, g);
  }
  auto sets = [&](const Mat& m, const Mat* second) {
    std::vector<VkDescriptorSet> s;
    for (size_t i = 0; i < m.w.size(); ++i) s.push_back(rig.matmul_set(m.w[i]->chunks[0], second ? &second->w[i]->chunks[0] : nullptr));
    return s;
  };
  const auto sq_ = sets(q, nullptr), sk = sets(k, nullptr), sv = sets(v, nullptr), so = sets(o, nullptr);
  const auto sg = sets(gate, nullptr), su = sets(up, nullptr), sgu = sets(gate, &up);
  const auto sd4 = sets(down4, nullptr), sd6 = sets(down6, nullptr);
  vk::MatmulKernels& mk = *be.kernels();
  // One dispatch of copy i of m; parts: the consumer reduces 1/rms from that
  // many partials at sq (0: 1/rms from the ctrl block). Returns its row groups.
  auto disp = [&](VkCommandBuffer cmd, const Mat& m, const std::vector<VkDescriptorSet>& s, size_t i, SpanFusion fz,
                  uint32_t parts) {
    vk::SpanMatmulPush pc;
    pc.m = {uint32_t(m.n_in), uint32_t(m.n_out), 1, uint32_t(m.n_in), x_off, uint32_t(m.n_out), y_off};
    pc.inv_in = parts ? sq_off : 16, pc.inv_parts = parts, pc.eps = 1e-5f, pc.x2_off = x2_off, pc.norm_off = 0;
    pc.xg_off = xg_off, pc.sq_off = sq_off;
    mk.record_span(cmd, *m.w[0]->type, s[i], pc, fz);
    return mk.span_row_groups(*m.w[0]->type, uint32_t(m.n_in), uint32_t(m.n_out), 1, fz);
  };
  // The four steps of a layer's matvecs; each records every copy with a barrier
  // after each. wo's / down's partials feed the next consumer.
  struct Mode {
    bool pair;
  };
  uint32_t g_o = 0, g_d = 0;  // row groups of the last wo / down (the consumers' partials)
  auto rec_qkv = [&](VkCommandBuffer cmd, Mode) {
    for (int i = 0; i < C; ++i) {
      const SpanFusion f{0, false, false, vk::kRoleQkv};
      disp(cmd, q, sq_, size_t(i), f, g_d);
      disp(cmd, k, sk, size_t(i), f, g_d);
      disp(cmd, v, sv, size_t(i), f, g_d);
      step_barrier(be, cmd);
    }
  };
  auto rec_wo = [&](VkCommandBuffer cmd, Mode) {
    for (int i = 0; i < C; ++i) {
      g_o = disp(cmd, o, so, size_t(i), SpanFusion{3, false, false, vk::kRoleWo}, 0);
      step_barrier(be, cmd);
    }
  };
  auto rec_gu = [&](VkCommandBuffer cmd, Mode md) {
    for (int i = 0; i < C; ++i) {
      if (md.pair) {
        disp(cmd, gate, sgu, size_t(i), SpanFusion{4, false, true, vk::kRoleGateUp}, g_o);
      } else {
        disp(cmd, gate, sg, size_t(i), SpanFusion{2, false, false, vk::kRoleGateUp}, g_o);
        disp(cmd, up, su, size_t(i), SpanFusion{0, false, false, vk::kRoleGateUp}, g_o);
      }
      step_barrier(be, cmd);
    }
  };
  auto rec_down = [&](VkCommandBuffer cmd, Mode md) {
    for (int i = 0; i < C; ++i) {  // alternating Q4_K / Q6_K layers, as Q4_K_M has them
      const SpanFusion f{3, !md.pair, false, vk::kRoleDown};
      g_d = i % 2 == 0 ? disp(cmd, down4, sd4, size_t(i / 2), f, 0) : disp(cmd, down6, sd6, size_t(i / 2), f, 0);
      step_barrier(be, cmd);
    }
  };
  // Prime the row-group counts with the current shapes.
  rig.run([&](VkCommandBuffer cmd) {
    rec_wo(cmd, {false});
    rec_down(cmd, {false});
  });

  const uint32_t rows_list[] = {1, 2, 4, 8, 16}, wg_list[] = {64, 128, 256};
  struct RoleSweep {
    const char* name;
    SpanRole role;
    bool pair;
    std::function<void(VkCommandBuffer, Mode)> rec;
    double bytes;
    SpanMvShape best{};
    double best_s = 1e30, default_s = 0;
  };
  const double layer_bytes_qkv = double(q.bytes + k.bytes + v.bytes), bytes_gu = double(gate.bytes + up.bytes),
               bytes_d = 0.5 * double(down4.bytes + down6.bytes);
  std::vector<RoleSweep> roles = {
      {"q/k/v", vk::kRoleQkv, false, rec_qkv, layer_bytes_qkv},
      {"wo (+add, norm)", vk::kRoleWo, false, rec_wo, double(o.bytes)},
      {"gate/up (2 dispatches)", vk::kRoleGateUp, false, rec_gu, bytes_gu},
      {"gate|up pair", vk::kRoleGateUp, true, rec_gu, bytes_gu},
      {"down x*x2 (+add, norm)", vk::kRoleDown, false, rec_down, bytes_d},
      {"down (pair's input)", vk::kRoleDown, true, rec_down, bytes_d},
  };
  std::printf("| role | rows x wg | us | GB/s |\n| --- | --- | ---: | ---: |\n");
  for (RoleSweep& r : roles) {
    const SpanMvShape saved = mk.span_shape(r.role);
    auto run_one = [&](SpanMvShape s, const char* label) {
      mk.set_span_shape(r.role, s);
      const double sec = time([&](VkCommandBuffer cmd) { r.rec(cmd, Mode{r.pair}); }) / C;
      std::printf("| %s | %s | %.1f | %.0f |\n", r.name, label, sec * 1e6, r.bytes / sec / 1e9);
      std::fflush(stdout);
      return sec;
    };
    r.default_s = run_one(SpanMvShape{}, "default");
    for (uint32_t rows : rows_list)
      for (uint32_t wg : wg_list) {
        const SpanMvShape s{rows, wg};
        const double sec = run_one(s, shape_str(s).c_str());
        if (sec < r.best_s) r.best_s = sec, r.best = s;
      }
    mk.set_span_shape(r.role, saved);
  }
  auto best_of = [&](SpanRole role, bool pair) {
    for (const RoleSweep& r : roles)
      if (r.role == role && (r.pair == pair || role == vk::kRoleQkv || role == vk::kRoleWo)) return r.best;
    return SpanMvShape{};
  };
  auto mv_env = [&](bool pair) {
    return "q=" + shape_str(best_of(vk::kRoleQkv, pair)) + ",o=" + shape_str(best_of(vk::kRoleWo, pair)) +
           ",gu=" + shape_str(best_of(vk::kRoleGateUp, pair)) + ",d=" + shape_str(best_of(vk::kRoleDown, pair));
  };

  // A layer's four matvec steps (attention left out), per mode, with the best shapes vs the defaults.
  std::printf("\n| layer's matvecs (4 steps, barriers) | shapes | us per layer |\n| --- | --- | ---: |\n");
  struct Combo {
    const char* name;
    Mode md;
    bool best;
  };
  const Combo combos[] = {{"separate gate/up", {false}, false},
                          {"separate gate/up", {false}, true},
                          {"gate|up pair", {true}, true},
                          {"gate|up pair", {true}, false}};
  double best_layer = 1e30;
  std::string best_env;
  for (const Combo& c : combos) {
    for (uint32_t role = 1; role < vk::kRoles; ++role)
      mk.set_span_shape(SpanRole(role), c.best ? best_of(SpanRole(role), c.md.pair) : SpanMvShape{});
    auto rec = [&](VkCommandBuffer cmd) {
      // The partial counts the consumers read come from the previous recording's producers.
      rec_qkv(cmd, c.md);
      rec_wo(cmd, c.md);
      rec_gu(cmd, c.md);
      rec_down(cmd, c.md);
    };
    rig.run(rec);  // sets g_o / g_d for these shapes
    const double sec = time(rec) / C;
    const std::string env = c.best ? "FISH_VK_SPAN_MV=" + mv_env(c.md.pair) : "";
    std::printf("| %s | %s | %.1f |\n", c.name, c.best ? "best per role" : "default", sec * 1e6);
    std::fflush(stdout);
    if (sec < best_layer) best_layer = sec, best_env = env;
  }
  for (uint32_t role = 1; role < vk::kRoles; ++role) mk.set_span_shape(SpanRole(role), SpanMvShape{});
  std::printf("BEST_SEP: FISH_VK_SPAN_MV=%s\nBEST_PAIR: FISH_VK_SPAN_MV=%s\nBEST_ENV: %s\n", mv_env(false).c_str(),
              mv_env(true).c_str(), best_env.c_str());
  if (!env_out.empty()) {
    if (FILE* f = std::fopen(env_out.c_str(), "w")) {
      std::fprintf(f, "MV_SEP='%s'\nMV_PAIR='%s'\nBEST_ENV='%s'\n", mv_env(false).c_str(), mv_env(true).c_str(),
                   best_env.c_str());
      std::fclose(f);
    }
  }
  for (Mat* m : {&q, &k, &v, &o, &gate, &up, &down4, &down6})
    for (vk::Weight* w : m->w) be.release(w);
  return 0;
}

}  // namespace fish::vktest
