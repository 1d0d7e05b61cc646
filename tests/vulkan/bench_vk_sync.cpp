// fish_bench_vk_span --sync: what a dependency between two steps costs on this
// device (shaders/bench_sync.comp). K phases, each streaming B bytes with the
// whole grid, run three ways:
//   barrier    one dispatch per phase, a compute->compute pipeline barrier between
//   no-barrier one dispatch per phase, nothing between (the phases overlap)
//   grid-sync  one dispatch, a grid-wide barrier (atomic counter + spin) between
// for several grid sizes (multiples of --sms), and the first two again with
// every other dispatch through a second pipeline of the same code (what a
// change of pipeline costs by itself). Device time per phase.
#include "bench_vk_sync.h"

#include <cstdio>
#include <string>
#include <vector>

namespace fish::vktest {

int sync_bench(vk::VulkanBackend& be, SpanRig& rig, uint64_t stream_bytes, uint32_t sms, const TimeFn& time) {
  struct Push {
    uint32_t iters, mode, phase_v4, out_off, cnt_off, phase0, span_v4;
  };
  const vk::DeviceFns& f = be.device()->fns();
  const vk::Layout& lay = be.span_kernels()->aux_layout();
  // Two pipelines of the same code (VARIANT 0 and 1).
  const VkPipeline pipes[2] = {be.pipelines()->get("bench_sync", lay, {0}), be.pipelines()->get("bench_sync", lay, {1})};
  const uint32_t cnt_off = 64, out_off = 128;
  const uint32_t span_v4 = uint32_t(stream_bytes / 16);
  const int K = 32;
  auto dispatch = [&](VkCommandBuffer cmd, const Push& p, uint32_t groups, VkPipeline pl) {
    VkDescriptorSet set = rig.aux_set();
    f.vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, pl);
    f.vkCmdBindDescriptorSets(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, lay.pipeline_layout, 0, 1, &set, 0, nullptr);
    f.vkCmdPushConstants(cmd, lay.pipeline_layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, sizeof p, &p);
    f.vkCmdDispatch(cmd, groups, 1, 1);
  };
  std::printf("\nsync: %d phases per run, device time per phase (us) and GB/s of the phase's reads\n", K);
  std::printf("| MB per phase | workgroups | barrier | no-barrier | barrier, alternating pipelines | no-barrier, alternating "
              "pipelines | grid-sync (volatile) | grid-sync (atomic) | timeouts |\n"
              "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n");
  const double mbs[] = {0.0, 2.4, 9.4, 33.0, 66.0};
  for (double mb : mbs) {
    const uint32_t pv4 = uint32_t(mb * 1e6 / 16) / 512 * 512;
    if (uint64_t(pv4) * 16 > stream_bytes) continue;
    for (uint32_t mult : {1u, 2u, 4u, 8u, 16u}) {
      const uint32_t groups = sms * mult;
      // K dispatches of one phase each, with or without a barrier after each,
      // all through pipes[0] or alternating between the two.
      auto chain = [&](bool barriers, bool alternate) {
        return time([&](VkCommandBuffer cmd) {
                 for (int i = 0; i < K; ++i) {
                   const Push p{1, 0, pv4, out_off, cnt_off, uint32_t(i), span_v4};
                   dispatch(cmd, p, groups, pipes[alternate ? i % 2 : 0]);
                   if (barriers) step_barrier(be, cmd);
                 }
               }) / K;
      };
      const double t_bar = chain(true, false), t_free = chain(false, false);
      const double t_alt[2] = {chain(true, true), chain(false, true)};
      double t_grid[2] = {0, 0};
      uint32_t timeouts = 0;
      for (uint32_t mode : {1u, 2u}) {
        const Push g{uint32_t(K), mode, pv4, out_off, cnt_off, 0, span_v4};
        t_grid[mode - 1] = time([&](VkCommandBuffer cmd) {
          f.vkCmdFillBuffer(cmd, rig.arena().buffer, uint64_t(cnt_off) * 4, 8, 0);
          step_barrier(be, cmd, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_ACCESS_TRANSFER_WRITE_BIT);
          dispatch(cmd, g, groups, pipes[0]);
        }) / K;
        timeouts += rig.get_words(rig.arena(), cnt_off + 1, 1)[0];
      }
      auto gbs = [&](double t) { return mb > 0 ? pv4 * 16.0 / t / 1e9 : 0.0; };
      std::printf("| %.1f | %u | %.2f (%.0f) | %.2f (%.0f) | %.2f (%.0f) | %.2f (%.0f) | %.2f (%.0f) | %.2f (%.0f) | %u |\n",
                  mb, groups, t_bar * 1e6, gbs(t_bar), t_free * 1e6, gbs(t_free), t_alt[0] * 1e6, gbs(t_alt[0]),
                  t_alt[1] * 1e6, gbs(t_alt[1]), t_grid[0] * 1e6, gbs(t_grid[0]), t_grid[1] * 1e6, gbs(t_grid[1]),
                  timeouts);
      std::fflush(stdout);
      if (timeouts) break;  // larger grids are not resident either
    }
  }
  return 0;
}

// The span's decode matvecs (int8, B32 x rows as the H200's default decode
// reads them; zero rows: the values do not matter for timing), `copies`
// layers' worth of distinct matrices, each step with and without a barrier
// after it: how far a step's time is from its weights' streaming time.
int sync_matvec_bench(vk::VulkanBackend& be, SpanRig& rig, int copies, bool small, const TimeFn& time) {
  const int E = small ? 256 : 4096, F = small ? 512 : 14336, KD = small ? 128 : 1024, C = copies;
  Mat q = make_mat(be, GgmlType::Q4_K, E, E, C, 1), k = make_mat(be, GgmlType::Q4_K, E, KD, C, 2);
  Mat v = make_mat(be, GgmlType::Q6_K, E, KD, C, 3), o = make_mat(be, GgmlType::Q4_K, E, E, C, 4);
  Mat gate = make_mat(be, GgmlType::Q4_K, E, F, C, 5), up = make_mat(be, GgmlType::Q4_K, E, F, C, 6);
  Mat down4 = make_mat(be, GgmlType::Q4_K, F, E, (C + 1) / 2, 7), down6 = make_mat(be, GgmlType::Q6_K, F, E, C / 2, 8);
  if (!be.kernels()->int8_for(*q.w[0]->type)) {
    std::printf("\nmatvec: SKIPPED (no int8 activations on this device)\n");
    return 0;
  }
  // Arena words: x B32 rows at 1024, y at 32768, xg, sq, the fold's B32 output rows.
  const uint32_t x_off = 1024, y_off = 32768, xg_off = y_off + 16384, sq_off = xg_off + 16384, qo_off = sq_off + 16384;
  auto sets = [&](const Mat& m) {
    std::vector<VkDescriptorSet> s;
    for (vk::Weight* w : m.w) s.push_back(rig.matmul_set(w->chunks[0]));
    return s;
  };
  const auto sq_ = sets(q), sk = sets(k), sv = sets(v), so = sets(o), sg = sets(gate), su = sets(up);
  const auto sd4 = sets(down4), sd6 = sets(down6);
  vk::MatmulKernels& mk = *be.kernels();
  // epi 3 (wo, down): + residual, the next norm's x·g and Σy² partials, and the B32 rows of the result.
  bool q8k = false;  // x as Q8_K rows (the CPU's) instead of B32
  auto disp = [&](VkCommandBuffer cmd, const Mat& m, const std::vector<VkDescriptorSet>& s, size_t i, uint32_t epi) {
    vk::SpanMatmulPush pc;
    const uint32_t n_in = uint32_t(m.n_in), n_out = uint32_t(m.n_out);
    const uint32_t xs = q8k ? vk::MatmulKernels::q8_row_words(256, n_in) : vk::MatmulKernels::b32_row_words(n_in);
    pc.m = {n_in, n_out, 1, xs, x_off, n_out, y_off};
    pc.eps = 1e-5f, pc.xg_off = xg_off, pc.sq_off = sq_off;
    vk::SpanFusion fz{epi, false, false, vk::kRoleOther};
    fz.int8 = true, fz.xb32 = !q8k;
    if (epi == 3) {
      fz.qb32 = true;
      pc.q_out = qo_off, pc.q_stride = vk::MatmulKernels::b32_row_words(n_out);
    }
    fz.role = &m == &q || &m == &k || &m == &v ? vk::kRoleQkv
              : &m == &o                     ? vk::kRoleWo
              : &m == &gate || &m == &up     ? vk::kRoleGateUp
                                             : vk::kRoleDown;
    mk.record_span(cmd, *m.w[0]->type, s[i], pc, fz);
  };
  struct Step {
    const char* name;
    std::function<void(VkCommandBuffer, size_t)> rec;
    double bytes;
  };
  const Step steps[] = {
      {"q/k/v", [&](VkCommandBuffer c, size_t i) { disp(c, q, sq_, i, 0), disp(c, k, sk, i, 0), disp(c, v, sv, i, 0); },
       double(q.bytes + k.bytes + v.bytes)},
      {"wo (+add, norm, B32 out)", [&](VkCommandBuffer c, size_t i) { disp(c, o, so, i, 3); }, double(o.bytes)},
      {"gate, up", [&](VkCommandBuffer c, size_t i) { disp(c, gate, sg, i, 2), disp(c, up, su, i, 0); },
       double(gate.bytes + up.bytes)},
      {"down (+add, norm, B32 out)",
       [&](VkCommandBuffer c, size_t i) { i % 2 == 0 ? disp(c, down4, sd4, i / 2, 3) : disp(c, down6, sd6, i / 2, 3); },
       0.5 * double(down4.bytes + down6.bytes)},
  };
  auto measure = [&](const Step& st, const char* label) {
    double t[2];
    for (int b = 0; b < 2; ++b)
      t[b] = time([&](VkCommandBuffer cmd) {
        for (int i = 0; i < C; ++i) {
          st.rec(cmd, size_t(i));
          if (b == 0) step_barrier(be, cmd);
        }
      }) / C;
    std::printf("| %s | %s | %.1f | %.2f (%.0f) | %.2f (%.0f) |\n", st.name, label, st.bytes / 1e6, t[0] * 1e6,
                st.bytes / t[0] / 1e9, t[1] * 1e6, st.bytes / t[1] / 1e9);
    std::fflush(stdout);
  };
  std::printf("\nspan decode matvecs (int8, B32 x), %d layers' worth; us per step (GB/s of weights)\n", C);
  std::printf("| step | shape | MB | barrier after each | no barriers |\n| --- | --- | ---: | ---: | ---: |\n");
  for (const Step& st : steps) measure(st, "default");
  const Step d4{"down Q4_K only", [&](VkCommandBuffer c, size_t i) { disp(c, down4, sd4, i % down4.w.size(), 3); },
                double(down4.bytes)};
  const Step d6{"down Q6_K only", [&](VkCommandBuffer c, size_t i) { disp(c, down6, sd6, i % down6.w.size(), 3); },
                double(down6.bytes)};
  measure(d4, "default");
  measure(d6, "default");
  const Step qs[] = {{"q alone", [&](VkCommandBuffer c, size_t i) { disp(c, q, sq_, i, 0); }, double(q.bytes)},
                     {"k alone", [&](VkCommandBuffer c, size_t i) { disp(c, k, sk, i, 0); }, double(k.bytes)},
                     {"v alone (Q6_K)", [&](VkCommandBuffer c, size_t i) { disp(c, v, sv, i, 0); }, double(v.bytes)},
                     {"v, k, q", [&](VkCommandBuffer c, size_t i) { disp(c, v, sv, i, 0), disp(c, k, sk, i, 0), disp(c, q, sq_, i, 0); },
                      double(q.bytes + k.bytes + v.bytes)}};
  for (const Step& st : qs) measure(st, "default");
  q8k = true;
  measure(steps[2], "Q8_K x");
  measure(d4, "Q8_K x");
  q8k = false;
  // Shapes of gate/up (rows x workgroup size).
  for (const vk::SpanMvShape sh : {vk::SpanMvShape{1, 128}, vk::SpanMvShape{2, 128}, vk::SpanMvShape{8, 128},
                                   vk::SpanMvShape{2, 64}, vk::SpanMvShape{4, 64}, vk::SpanMvShape{8, 64},
                                   vk::SpanMvShape{4, 256}, vk::SpanMvShape{8, 32}, vk::SpanMvShape{16, 32}}) {
    mk.set_span_shape(vk::kRoleGateUp, sh);
    measure(steps[2], shape_str(sh).c_str());
    mk.set_span_shape(vk::kRoleGateUp, {});
  }
  return 0;
}

}  // namespace fish::vktest
