// fish_bench_vk_span --prefill: a prompt chunk's products (T tokens, f32 x) on
// one layer's matrix shapes, device timestamps: the span's prefill kernel
// (coopmat where the device has cooperative matrices, else tiled) on Q4_K_M's
// types and on F16 weights of the same shape, in TFLOP/s. F16 weights cost no
// decoding, so the two columns separate the kernel's decode of K-quant blocks
// from the rest of it (docs/experiments/vulkan-coopmat-prefill.md); on the
// coopmat kernel also with f16 x (SpanFusion::xh, as the span's prefill runs
// it: its producers write f16 rows), at the tile width MatmulKernels::
// coop_tokens picks and at each of 32, 64 and 128 tokens. Then the
// chunk's attention after 0 and 4096 positions of context: the per-token kernel
// (span_attention.comp: a workgroup per token and KV head, as decode and rows
// of several sequences run it) against the query tiles the span takes
// (span_attention_tiles.comp, as chosen for the device, and its scalar form).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

#include "bench_vk_span_mv.h"
#include "common/fp16.h"
#include "vk_test_util.h"

namespace fish::vktest {
namespace {

void prefill_attention_rows(vk::VulkanBackend& be, int D, const SpanMvDims& d, int T, const TimeFn& time) {
  const int H = d.QD / D, KVH = d.KD / D, depths[] = {0, 4096}, cap = 4096 + T;
  const uint32_t q_off = 64, att_off = q_off + uint32_t(T * d.QD);
  SpanRig rig(be, att_off + uint64_t(T) * d.QD + 64, uint64_t(cap) * d.KD, 4, 4);
  {
    std::vector<uint32_t> kv(size_t(cap) * d.KD);
    uint32_t x = 12345;
    for (auto& w : kv) x = x * 1664525u + 1013904223u, w = x & 0x3BFF3BFFu;  // f16 pairs in (-1, 1)
    rig.put(rig.kv(), 0, kv);
    rig.put(rig.arena(), q_off, random_x(T, d.QD, 6));
  }
  vk::SpanKernelShape per_token{uint32_t(D), uint32_t(H / KVH), uint32_t(KVH)}, tiles = per_token, scalar;
  be.span_kernels()->choose_tiles(tiles, be.kernels()->coopmat());
  scalar = tiles;
  be.span_kernels()->choose_tiles(scalar, false);
  vk::SpanPush p;
  p.n_tok = uint32_t(T), p.q_off = q_off, p.q_stride = uint32_t(d.QD), p.kv_cap = uint32_t(cap);
  p.att_off = att_off, p.scale = 1.0f / std::sqrt(float(D)), p.n_head = uint32_t(H);
  std::printf("\nthe chunk's attention (%d heads of %d, %d KV heads): us and TFLOP/s (4·heads·D·Σ positions seen)\n"
              "| depth | per token: us | TFLOP/s | query tiles (%s, %u positions): us | TFLOP/s | scalar tiles (%u): us | TFLOP/s |\n"
              "| ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n",
              H, D, KVH, tiles.tile_coop ? "coopmat" : "scalar", tiles.tile_bc, scalar.tile_bc);
  for (const int depth : depths) {
    const uint32_t n_kv = uint32_t(depth + T);
    rig.put(rig.arena(), 0, std::vector<uint32_t>{uint32_t(KVH), 1, uint32_t(T), 0, uint32_t(depth), 1, n_kv, 0});
    const double tp = time([&](VkCommandBuffer c) {
      be.span_kernels()->attention(c, rig.aux_set(), p, per_token, false, rig.arena().buffer);
    });
    const double tt = tiles.tile_bc ? time([&](VkCommandBuffer c) {
      be.span_kernels()->attention_tiles(c, rig.aux_set(), p, tiles);
    }) : 0.0;
    const double ts = scalar.tile_bc && tiles.tile_coop ? time([&](VkCommandBuffer c) {
      be.span_kernels()->attention_tiles(c, rig.aux_set(), p, scalar);
    }) : tt;
    const double fl = 4.0 * H * D * (double(depth) * T + double(T) * (T + 1) / 2) / 1e12;
    std::printf("| %d | %.1f | %.2f | %.1f | %.2f | %.1f | %.2f |\n", depth, tp * 1e6, fl / tp, tt * 1e6,
                tt > 0 ? fl / tt : 0.0, ts * 1e6, ts > 0 ? fl / ts : 0.0);
    std::fflush(stdout);
  }
}

}  // namespace

int span_prefill_bench(vk::VulkanBackend& be, const SpanMvDims& d, int head_dim, int T, const TimeFn& time) {
  vk::MatmulKernels& mk = *be.kernels();
  struct Shape {
    const char* name;
    GgmlType t;
    int n_in, n_out;
  };
  // Q4_K_M's types per role (v and down: Q6_K in about half the layers).
  const Shape shapes[] = {{"q", GgmlType::Q4_K, d.E, d.QD},        {"k", GgmlType::Q4_K, d.E, d.KD},
                          {"v", GgmlType::Q6_K, d.E, d.KD},        {"o", GgmlType::Q4_K, d.QD, d.E},
                          {"gate/up", GgmlType::Q4_K, d.E, d.F},   {"down", GgmlType::Q4_K, d.F, d.E},
                          {"down", GgmlType::Q6_K, d.F, d.E}};
  const uint32_t N = uint32_t(std::max({d.E, d.F, d.QD}));
  const uint32_t x_off = 64, y_off = x_off + uint32_t(T) * N;
  SpanRig rig(be, y_off + uint64_t(T) * N * 3 / 2 + 64, 4, N, 4);
  rig.put(rig.arena(), x_off, random_x(T, N, 5));
  const bool coop = mk.coopmat();
  const uint32_t xh_off = y_off + uint32_t(T) * N;  // f16 x: T · N halves
  {
    const std::vector<float> xf = random_x(T, N, 6);
    std::vector<uint32_t> xh(xf.size() / 2);
    for (size_t i = 0; i < xh.size(); ++i)
      xh[i] = uint32_t(fp32_to_fp16(xf[2 * i])) | uint32_t(fp32_to_fp16(xf[2 * i + 1])) << 16;
    if (coop) rig.put(rig.arena(), xh_off, xh);
  }
  std::printf("\nprefill products on %d tokens (f32 x), one matrix per step, the %s kernel: us and TFLOP/s "
              "(2·rows·n_in·T / device time) on the quantised weights and on F16 weights of the same shape\n",
              T, mk.coopmat() ? "coopmat" : "tiled");
  std::printf("| matrix | type | rows x n_in | us | TFLOP/s | F16: us | TFLOP/s |%s\n| --- | --- | --- | ---: | ---: | ---: | ---: |%s\n",
              coop ? " f16 x: us | TFLOP/s | tiles | f16 x, 32 / 64 / 128-token tiles: us |" : "",
              coop ? " ---: | ---: | ---: | ---: |" : "");
  double tot_q = 0, tot_h = 0, tot_x = 0, tot_bn[3] = {0, 0, 0};
  for (const Shape& s : shapes) {
    const Mat m = make_mat(be, s.t, s.n_in, s.n_out, 1, 40 + uint64_t(s.n_out));
    const Mat h = make_mat(be, GgmlType::F16, s.n_in, s.n_out, 1, 41);
    const VkDescriptorSet set_q = rig.matmul_set(m.w[0]->chunks[0]), set_h = rig.matmul_set(h.w[0]->chunks[0]);
    const vk::SpanFusion fz{0, false, false, vk::kRoleOther};
    vk::SpanMatmulPush pc;
    pc.m = {uint32_t(s.n_in), uint32_t(s.n_out), uint32_t(T), uint32_t(s.n_in), x_off, uint32_t(s.n_out), y_off};
    pc.inv_in = vk::kNone;
    const double tq = time([&](VkCommandBuffer c) { mk.record_span(c, *m.w[0]->type, set_q, pc, fz); });
    const double th = time([&](VkCommandBuffer c) { mk.record_span(c, *h.w[0]->type, set_h, pc, fz); });
    double tx = 0, tbn[3] = {0, 0, 0};
    if (coop) {
      vk::SpanFusion fx = fz;
      fx.xh = true;
      vk::SpanMatmulPush px = pc;
      px.m.x_off = xh_off;
      const auto run = [&](VkCommandBuffer c) { mk.record_span(c, *m.w[0]->type, set_q, px, fx); };
      tx = time(run);
      for (int i = 0; i < 3; ++i) {
        mk.set_coop_tokens(32u << i);
        tbn[i] = time(run);
      }
      mk.set_coop_tokens(0);
    }
    const double fl = 2.0 * s.n_in * s.n_out * T / 1e12;
    std::printf("| %s | %s | %d x %d | %.1f | %.1f | %.1f | %.1f |", s.name, type_name(s.t).c_str(), s.n_out, s.n_in,
                tq * 1e6, fl / tq, th * 1e6, fl / th);
    if (coop)
      std::printf(" %.1f | %.1f | %u | %.1f / %.1f / %.1f |", tx * 1e6, fl / tx,
                  mk.coop_tokens(*m.w[0]->type, uint32_t(s.n_out), uint32_t(T)), tbn[0] * 1e6, tbn[1] * 1e6, tbn[2] * 1e6);
    std::printf("\n");
    std::fflush(stdout);
    const double per_layer = std::string(s.name) == "gate/up" ? 2 : std::string(s.name) == "down" ? 0.5 : 1;
    tot_q += per_layer * tq, tot_h += per_layer * th, tot_x += per_layer * tx;
    for (int i = 0; i < 3; ++i) tot_bn[i] += per_layer * tbn[i];
    for (const Mat* mm : {&m, &h})
      for (vk::Weight* w : mm->w) be.release(w);
  }
  std::printf("one layer (q, k, v, o, gate, up, half each down type): %.1f us, F16 weights %.1f us", tot_q * 1e6,
              tot_h * 1e6);
  if (coop)
    std::printf(", f16 x %.1f us (32 / 64 / 128-token tiles throughout: %.1f / %.1f / %.1f)", tot_x * 1e6,
                tot_bn[0] * 1e6, tot_bn[1] * 1e6, tot_bn[2] * 1e6);
  std::printf("\n");
  prefill_attention_rows(be, head_dim, d, T, time);
  return 0;
}

}  // namespace fish::vktest
