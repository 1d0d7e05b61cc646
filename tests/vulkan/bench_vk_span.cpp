// fish_bench_vk_span: span throughput (run by hand, e.g. on the H200; not a test).
//
//   fish_bench_vk_span --model M.gguf [--depths 512,4096,16384] [--gen 64] [--chunk 512] [-t N]
//     The engine (LlamaModel, auto placement: the span + output projection on
//     the GPU when they fit) at each context depth d, ascending: the prompt is
//     extended to d positions (timed: prefill tok/s at that depth), then `gen`
//     tokens are decoded one at a time at positions d.. after 1 s of warm-up decoding (timed: generation
//     tok/s), then the KV is truncated back to d. Reports, per depth, tok/s,
//     ms/token and the effective bandwidth tok/s × (weight bytes + KV bytes
//     read per token), KV bytes = n_layers · 2 · kv_dim · 2 (f16) per position
//     × the mean context of the timed tokens. With FISH_GPU_PROFILE=1|2 the
//     backend's profile of each depth's decode follows (per-stage GPU time).
//
//   fish_bench_vk_span --kernels [--shape 8b|1b] [--ctx 512,4096,16384] [--reps N]
//     The span's own kernels alone, device timestamps (median of reps after a
//     warm-up): attention over an f16 KV of each context length (GB/s of K+V;
//     one layer's KV, so short contexts sit in L2), rmsnorm, q/k prep + KV store;
//     then the projections as the span runs them (layers' worth of distinct
//     copies, one dispatch each, with / without barriers) for the stage-1
//     kernel and each span variant (FISH_BENCH_NO_MATVEC=1 skips them).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "common/error.h"
#include "gguf/gguf_file.h"
#include "model/llama_model.h"
#include "span_rig.h"
#include "vk_test_util.h"

using namespace fish;

namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::vector<int> parse_list(const std::string& s) {
  std::vector<int> v;
  size_t at = 0;
  while (at < s.size()) {
    const size_t c = s.find(',', at);
    v.push_back(std::atoi(s.substr(at, c == std::string::npos ? std::string::npos : c - at).c_str()));
    if (c == std::string::npos) break;
    at = c + 1;
  }
  return v;
}

bool is_gpu_matrix(const std::string& n) {
  for (const char* k : {"attn_q.weight", "attn_k.weight", "attn_v.weight", "attn_output.weight", "ffn_gate.weight",
                        "ffn_up.weight", "ffn_down.weight"})
    if (n.size() > std::strlen(k) && n.compare(n.size() - std::strlen(k), std::strlen(k), k) == 0) return true;
  return false;
}

int run_model(const std::string& path, const std::vector<int>& depths, int gen, int chunk, int threads) {
  ModelOptions o;
  o.n_threads = threads;
  o.n_ctx = *std::max_element(depths.begin(), depths.end()) + gen + 64;
  const double t_load = now_s();
  auto m = LlamaModel::load(path, o);
  std::printf("model %s: loaded in %.1f s, n_ctx %d; %d of %d layers on %s%s%s\n  %s\n", path.c_str(), now_s() - t_load,
              m->n_ctx(), m->gpu_layers(), m->hparams().n_layer, m->backend() ? m->backend()->name().c_str() : "cpu",
              m->gpu_span() ? " as one span" : "", m->gpu_output() ? " + output" : "", m->gpu_detail().c_str());
  const Hparams& h = m->hparams();
  // Bytes streamed per token: the GPU layers' matrices + the output projection (when resident).
  uint64_t wbytes = 0;
  const int first_gpu = h.n_layer - m->gpu_layers();
  const gguf::TensorInfo* out = nullptr;
  for (const auto& t : m->file().tensors()) {
    if (t.name == "output.weight") out = &t;
    if (t.name.rfind("blk.", 0) != 0 || !is_gpu_matrix(t.name)) continue;
    if (std::atoi(t.name.c_str() + 4) >= first_gpu) wbytes += t.nbytes;
  }
  if (!out)
    for (const auto& t : m->file().tensors())
      if (t.name == "token_embd.weight") out = &t;
  if (m->gpu_output() && out) wbytes += out->nbytes;
  const double kv_pp = double(m->gpu_layers()) * 2.0 * h.kv_dim() * 2.0;  // f16 K + V bytes per position
  std::printf("weights read per token: %.1f MB; device KV per position: %.1f KB\n", double(wbytes) / 1e6, kv_pp / 1024);
  std::vector<int32_t> toks(size_t(o.n_ctx));
  uint64_t s = 0x9E3779B97F4A7C15ull;
  for (auto& x : toks) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    x = int32_t(3 + (s >> 33) % uint64_t(h.n_vocab - 3));
  }
  std::printf("| depth | prefill tok/s (to depth) | tg tok/s | ms/token | eff. GB/s (weights + KV) | KV MB/token |\n");
  std::printf("| ---: | ---: | ---: | ---: | ---: | ---: |\n");
  for (int d : depths) {
    const int from = m->kv_len();
    const double t0 = now_s();
    for (int p = from; p < d; p += chunk) m->eval(toks.data() + p, std::min(chunk, d - p), p, false);
    const double pp = d > from ? double(d - from) / (now_s() - t0) : 0;
    // Warm-up: an idle H200 runs at a low clock and takes a while to reach full speed.
    for (const double tw = now_s(); now_s() - tw < 1.0;) {
      for (int i = 0; i < 16; ++i) m->eval(&toks[size_t(d + i)], 1, d + i, false);
      m->kv_truncate(d);
    }
    if (m->backend()) m->backend()->profile();  // reset its counters
    const double t1 = now_s();
    for (int i = 0; i < gen; ++i) m->eval(&toks[size_t(d + i)], 1, d + i, false);
    const double dt = now_s() - t1;
    const double tg = gen / dt, kv_tok = kv_pp * (d + gen / 2.0);
    std::printf("| %d | %.1f | %.2f | %.3f | %.0f | %.1f |\n", d, pp, tg, 1e3 / tg, tg * (double(wbytes) + kv_tok) / 1e9,
                kv_tok / 1e6);
    if (std::getenv("FISH_GPU_PROFILE") && m->backend()) {
      const std::string p = m->backend()->profile();
      if (!p.empty()) std::printf("profile at depth %d:\n%s\n", d, p.c_str());
    }
    std::fflush(stdout);
    m->kv_truncate(d);
  }
  return 0;
}

// ---- kernels --------------------------------------------------------------------------------

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// The projections as the span runs them: `copies` layers' worth of one matrix
// (distinct uploads, so nothing stays in L2), one dispatch each in one
// submission, with or without a barrier between them (the span has one after
// every step), for the stage-1 kernel and each span variant. GB/s of weights.
void matvec_variants(vk::VulkanBackend& be, vktest::SpanRig& rig, GgmlType type, int64_t n_in, int64_t n_out,
                     int copies, int reps, const std::function<double(const std::function<void(VkCommandBuffer)>&)>& time) {
  const vktest::Matrix m = vktest::random_matrix(type, n_in, n_out, 7);
  std::vector<vk::Weight*> ws;
  for (int i = 0; i < copies; ++i) {
    ws.push_back(be.upload(vktest::upload_desc(m)));
    if (!ws.back()) {
      std::printf("upload failed: %s\n", be.error().c_str());
      ws.pop_back();
      break;
    }
  }
  if (ws.empty()) return;
  // Stage-1 sets bind the arena as x and as y (disjoint regions).
  std::vector<VkDescriptorSet> s1, sp;
  for (vk::Weight* w : ws) {
    const vk::WeightChunk& c = w->chunks[0];
    VkDescriptorSet set = be.pipelines()->allocate_set(be.kernels()->layout());
    const VkBuffer bufs[3] = {c.buf.buffer, rig.arena().buffer, rig.arena().buffer};
    const uint64_t offs[3] = {0, 0, 0}, ranges[3] = {c.buf.size, rig.arena().size, rig.arena().size};
    be.pipelines()->write_set(set, 3, bufs, offs, ranges);
    s1.push_back(set);
    sp.push_back(rig.matmul_set(c));
  }
  const uint32_t x_off = 64, x2_off = x_off + uint32_t(n_in), y_off = x2_off + uint32_t(n_in);
  const double bytes = double(m.data.size()) * double(ws.size());
  auto barrier = [&](VkCommandBuffer cmd) {
    auto mb = vk::vk_init<VkMemoryBarrier>(VK_STRUCTURE_TYPE_MEMORY_BARRIER);
    mb.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT;
    mb.dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT;
    be.device()->fns().vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                                             0, 1, &mb, 0, nullptr, 0, nullptr);
  };
  struct V {
    const char* name;
    int kind;  // 0 stage 1, 1 span
    vk::SpanFusion fz;
  };
  const V vs[] = {{"stage-1 kernel", 0, {}},           {"span, plain", 1, {}},
                  {"span, scaled x, silu", 1, {2, false}}, {"span, x*x2 +add", 1, {1, true}},
                  {"span, +add +next norm", 1, {3, false}}, {"span, x*x2 +add +next norm", 1, {3, true}}};
  for (const V& v : vs)
    for (bool barriers : {false, true}) {
      const double sec = time([&](VkCommandBuffer cmd) {
        for (size_t i = 0; i < ws.size(); ++i) {
          const vk::WeightChunk& c = ws[i]->chunks[0];
          if (v.kind == 0) {
            be.kernels()->record(cmd, *ws[i]->type, s1[i], vk::MatmulPush{uint32_t(n_in), c.rows, 1, uint32_t(n_in), x_off,
                                                                          uint32_t(n_out), y_off, 0});
          } else {
            vk::SpanMatmulPush pc;
            pc.m = {uint32_t(n_in), c.rows, 1, uint32_t(n_in), x_off, uint32_t(n_out), y_off, 0};
            pc.inv_in = 16, pc.eps = 1e-5f, pc.x2_off = x2_off, pc.norm_off = 0;
            pc.xg_off = y_off + uint32_t(n_out), pc.sq_off = pc.xg_off + uint32_t(n_out), pc.cnt = 8;
            pc.inv_out = 20;
            be.kernels()->record_span(cmd, *ws[i]->type, sp[i], pc, v.fz);
          }
          if (barriers) barrier(cmd);
        }
      });
      std::printf("| %s %lldx%lld | %s%s | %d | %.1f | %.0f |\n", vktest::type_name(type).c_str(), (long long)n_out,
                  (long long)n_in, v.name, barriers ? ", barriers" : "", int(ws.size()), sec * 1e6 / double(ws.size()),
                  bytes / sec / 1e9);
      std::fflush(stdout);
    }
  for (VkDescriptorSet set : s1) be.pipelines()->free_set(set);
  for (vk::Weight* w : ws) be.release(w);
  (void)reps;
}

int run_kernels(const std::string& shape, const std::vector<int>& ctxs, int reps) {
  auto be = vktest::open_backend("fish_bench_vk_span");
  if (!be) return 77;
  be->set_profiling(true);
  // Llama-3.1-8B: 32 heads of 128, 8 KV heads, n_embd 4096; Llama-3.2-1B: 32 x 64, 8 KV heads, n_embd 2048.
  const bool big = shape != "1b";
  const int D = big ? 128 : 64, H = 32, KVH = 8, E = big ? 4096 : 2048, G = H / KVH;
  const int QD = H * D, KD = KVH * D, QKV = QD + 2 * KD;
  std::printf("%s\n%s shapes: head_dim %d, %d heads, %d KV heads; device timestamps, median of %d\n",
              be->status().c_str(), shape.c_str(), D, H, KVH, reps);
  const int max_ctx = *std::max_element(ctxs.begin(), ctxs.end());
  const uint32_t q_off = 64, att_off = q_off + uint32_t(QKV), part_off = att_off + uint32_t(QD);
  const uint32_t cnt_off = part_off + uint32_t(KVH * 128 * G * (D + 2));
  vktest::SpanRig rig(*be, cnt_off + 128 * KVH + 64 + 2 * uint64_t(E), uint64_t(max_ctx) * KD, uint64_t(E) + 4 * QD,
                      uint64_t(max_ctx) * D);
  {
    std::mt19937_64 rng(1);
    std::vector<uint32_t> kv(size_t(max_ctx) * KD);
    for (auto& w : kv) w = uint32_t(rng()) & 0x3BFF3BFFu;  // f16 pairs in (-1, 1): no NaN/Inf
    rig.put(rig.kv(), 0, kv);
    std::vector<float> q(QKV), w(E, 1.0f);
    for (auto& e : q) e = float(int(rng() % 2000) - 1000) / 1000.0f;
    rig.put(rig.arena(), q_off, q);
    rig.put(rig.params(), 0, w);
    rig.put(rig.rope(), 0, vktest::rope_table(max_ctx, D, 500000.0, 1.0, nullptr));
  }
  const vk::VkConfig& cfg = be->config();
  const vk::SpanKernelShape ks{uint32_t(D), uint32_t(G), uint32_t(KVH)};
  auto time = [&](const std::function<void(VkCommandBuffer)>& rec) {
    for (int i = 0; i < 3; ++i) rig.run(rec);
    const double t_warm = now_s();
    while (now_s() - t_warm < 0.2) rig.run(rec);
    std::vector<double> t;
    for (int i = 0; i < reps; ++i) t.push_back(rig.run(rec));
    return median(t);
  };
  std::printf("| kernel | context | splits | us | GB/s |\n| --- | ---: | ---: | ---: | ---: |\n");
  for (int n_kv : ctxs) {
    const uint32_t splits = std::clamp<uint32_t>((uint32_t(n_kv) + uint32_t(cfg.attn_split) - 1) / uint32_t(cfg.attn_split),
                                                 1, uint32_t(cfg.attn_max_splits));
    const uint32_t len = (uint32_t(n_kv) + splits - 1) / splits;
    rig.put(rig.arena(), 0, std::vector<uint32_t>{uint32_t(KVH), splits, 1, 0, uint32_t(n_kv - 1), splits, len});
    for (bool fused : {false, true}) {
      vk::SpanPush p;
      p.n_tok = 1, p.q_off = q_off, p.q_stride = QKV, p.k_off = q_off + QD, p.v_off = q_off + QD + KD;
      p.kv_cap = uint32_t(max_ctx), p.att_off = att_off, p.part_off = part_off, p.cnt_off = cnt_off;
      p.scale = 1.0f / std::sqrt(float(D)), p.n_rot = D, p.n_head = H;
      const double s = time([&](VkCommandBuffer c) { be->span_kernels()->attention(c, rig.aux_set(), p, ks, fused, rig.arena().buffer); });
      const double bytes = 2.0 * n_kv * KD * 2;
      std::printf("| attention%s | %d | %u | %.1f | %.0f |\n", fused ? " (fused q/k prep)" : "", n_kv, splits, s * 1e6,
                  bytes / s / 1e9);
    }
  }
  vk::SpanPush r;
  r.n_tok = 1, r.n_embd = uint32_t(E), r.x_off = cnt_off + 128 * KVH + 64, r.y_off = r.x_off + uint32_t(E), r.norm_off = 0;
  r.eps = 1e-5f;
  std::printf("| rmsnorm | - | - | %.1f | - |\n",
              time([&](VkCommandBuffer c) { be->span_kernels()->rmsnorm(c, rig.aux_set(), r); }) * 1e6);
  vk::SpanPush q;
  q.n_tok = 1, q.q_off = q_off, q.q_stride = QKV, q.k_off = q_off + QD, q.v_off = q_off + QD + KD, q.qr_off = att_off;
  q.kv_cap = uint32_t(max_ctx), q.n_rot = D, q.n_head = H;
  std::printf("| q/k prep + KV store | - | - | %.1f | - |\n",
              time([&](VkCommandBuffer c) { be->span_kernels()->rope_store(c, rig.aux_set(), q, ks); }) * 1e6);
  if (std::getenv("FISH_BENCH_NO_MATVEC")) return 0;
  std::printf("\n| matrix | kernel | dispatches | us each | GB/s |\n| --- | --- | ---: | ---: | ---: |\n");
  const int F = big ? 14336 : 8192, copies = big ? 32 : 16;
  matvec_variants(*be, rig, GgmlType::Q4_K, E, F, copies, reps, time);
  matvec_variants(*be, rig, GgmlType::Q4_K, F, E, copies, reps, time);
  matvec_variants(*be, rig, GgmlType::Q6_K, F, E, copies, reps, time);
  matvec_variants(*be, rig, GgmlType::Q4_K, E, E, copies, reps, time);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string model, shape = "8b";
  std::vector<int> depths = {512, 4096, 16384}, ctxs = {512, 4096, 16384};
  int gen = 64, chunk = 512, threads = 0, reps = 20;
  bool kernels = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "fish_bench_vk_span: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--model" || a == "-m") model = next();
    else if (a == "--depths") depths = parse_list(next());
    else if (a == "--gen") gen = std::atoi(next().c_str());
    else if (a == "--chunk") chunk = std::atoi(next().c_str());
    else if (a == "-t") threads = std::atoi(next().c_str());
    else if (a == "--kernels") kernels = true;
    else if (a == "--shape") shape = next();
    else if (a == "--ctx") ctxs = parse_list(next());
    else if (a == "--reps") reps = std::atoi(next().c_str());
    else {
      std::fprintf(stderr, "usage: fish_bench_vk_span --model M [--depths 512,4096] [--gen 64] [--chunk 512] [-t N]\n"
                           "       fish_bench_vk_span --kernels [--shape 8b|1b] [--ctx 512,4096,16384] [--reps 20]\n");
      return 2;
    }
  }
  try {
    if (kernels) return run_kernels(shape, ctxs, std::max(1, reps));
    if (model.empty() || depths.empty() || gen < 1 || chunk < 1) {
      std::fprintf(stderr, "fish_bench_vk_span: --model, --depths, --gen and --chunk are required and positive\n");
      return 2;
    }
    std::sort(depths.begin(), depths.end());
    return run_model(model, depths, gen, chunk, threads);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fish_bench_vk_span: %s\n", e.what());
    return 1;
  }
}
