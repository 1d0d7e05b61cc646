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
//   fish_bench_vk_span --kernels [--shape 8b|1b|tiny] [--ctx 512,4096,16384] [--reps N] [--env-out FILE] [--fq3]
//     (--fq3: the matvec variants on FISH_GPU_REQUANT=3's types, FQ3 for Q4_K and Q4_K for Q6_K)
//     The span's own kernels alone, device timestamps (median of reps after a
//     warm-up): decode attention (fused) over an f16 KV of each context length
//     for 1..128 splits (GB/s of K+V; one layer's KV, so short contexts sit in
//     L2; BEST_ATTN_SPLIT per context; up to 2048 positions also one query head
//     per workgroup), rmsnorm, q/k prep + KV store, quantize_x; then the
//     span matvec on T = 1, 4, 8, 16, 32 rows (decode of T sequences in one
//     forward) and 64 (the prefill kernel), 4096 x 14336 Q4_K and 14336 x 4096
//     for 8b (GB/s of weight bytes); then the span matvec variants per
//     projection role (bench_vk_span_mv.h; BEST_ENV, and shell assignments in
//     FILE; FISH_BENCH_NO_MATVEC=1 skips the rows and the variants).
//   fish_bench_vk_span --rows [--sweep [--sweep-tokens 4,8,16,32]] [--shape 8b|1b|tiny] [--reps N]
//     The T-row table alone; --sweep: then the token-group shapes on those
//     numbers of rows (2..32; int8 Q4_K), the fastest against span_matvec_config's choice.
//
//   fish_bench_vk_span --prefill [--tokens 512] [--shape 8b|1b|tiny] [--reps N]
//     A prompt chunk's products per matrix shape, device timestamps, TFLOP/s:
//     Q4_K_M's types and F16 weights, then the chunk's attention after 0 and 4096
//     positions: the per-token kernel against query tiles (bench_vk_span_prefill.cpp).
//   fish_bench_vk_span --sync SMS [--reps N]
//     What a dependency between two steps costs: phases of streaming reads as
//     dispatches with / without a pipeline barrier between them, or as one
//     dispatch with a grid-wide barrier (grids of 1..16 x SMS workgroups).
#include <algorithm>
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
#include "bench_vk_span_mv.h"
#include "bench_vk_sync.h"
#include "span_rig.h"
#include "bench_args.h"
#include "vk_test_util.h"

using namespace fish;

namespace {

using bench::now_s;

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

// --sync: the cost of a dependency between steps (bench_vk_sync.cpp).
int run_sync(uint32_t sms, int reps) {
  auto be = vktest::open_backend("fish_bench_vk_span");
  if (!be) return 77;
  be->set_profiling(true);
  const uint64_t stream_bytes = uint64_t(512) << 20;  // far beyond any L2
  vktest::SpanRig rig(*be, 1 << 17, stream_bytes / 4, 1 << 15, 64);
  auto time = [&](const std::function<void(VkCommandBuffer)>& rec) {
    for (const double t0 = now_s(); now_s() - t0 < 0.1;) rig.run(rec);
    std::vector<double> t;
    for (int i = 0; i < reps; ++i) t.push_back(rig.run(rec));
    return median(t);
  };
  std::printf("%s\n", be->status().c_str());
  if (!std::getenv("FISH_BENCH_NO_STREAM") && vktest::sync_bench(*be, rig, stream_bytes, sms, time) != 0) return 1;
  return vktest::sync_matvec_bench(*be, rig, sms > 1 ? 16 : 2, sms == 1, time);
}

int run_kernels(const std::string& shape, const std::vector<int>& ctxs, int reps, const std::string& env_out,
                bool rows_only, bool sweep, const std::vector<int>& sweep_tokens, bool fq3, int prefill_tokens) {
  auto be = vktest::open_backend("fish_bench_vk_span");
  if (!be) return 77;
  be->set_profiling(true);
  // Llama-3.1-8B: 32 heads of 128, 8 KV heads, n_embd 4096; Llama-3.2-1B: 32 x 64, 8 KV heads, n_embd 2048.
  // "tiny" (E 256, 4 heads of 64, 2 KV heads, n_ff 512, 4 layers) checks the tool on lavapipe.
  const bool big = shape == "8b", tiny = shape == "tiny";
  const int D = big ? 128 : 64, H = tiny ? 4 : 32, KVH = tiny ? 2 : 8, E = big ? 4096 : tiny ? 256 : 2048, G = H / KVH;
  const int QD = H * D, KD = KVH * D, QKV = QD + 2 * KD;
  std::printf("%s\n%s shapes: head_dim %d, %d heads, %d KV heads; device timestamps, median of %d\n",
              be->status().c_str(), shape.c_str(), D, H, KVH, reps);
  const int max_ctx = *std::max_element(ctxs.begin(), ctxs.end());
  const uint32_t q_off = 64, att_off = q_off + uint32_t(QKV), part_off = att_off + uint32_t(QD);
  const uint32_t cnt_off = part_off + uint32_t(KVH * 128 * G * (D + 2));
  vktest::SpanRig rig(*be, cnt_off + 128 * KVH + 64 + 4 * uint64_t(E), uint64_t(max_ctx) * KD, uint64_t(E) + 4 * QD,
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
  const vk::SpanKernelShape ks{uint32_t(D), uint32_t(G), uint32_t(KVH)};
  bool warm = false;  // an idle H200 runs at a low clock: a longer warm-up before the first timing
  auto time = [&](const std::function<void(VkCommandBuffer)>& rec) {
    for (int i = 0; i < 3; ++i) rig.run(rec);
    const double t_warm = now_s();
    while (now_s() - t_warm < (warm ? 0.03 : 0.3)) rig.run(rec);
    warm = true;
    std::vector<double> t;
    for (int i = 0; i < reps; ++i) t.push_back(rig.run(rec));
    return median(t);
  };
  const int F = big ? 14336 : tiny ? 512 : 8192, copies = big ? 32 : tiny ? 4 : 16;
  if (prefill_tokens > 0) return vktest::span_prefill_bench(*be, vktest::SpanMvDims{E, F, QD, KD, 1, false}, D, prefill_tokens, time);
  if (rows_only) return vktest::span_rows_bench(*be, E, F, std::max(2, copies / 4), time, sweep, sweep_tokens);
  // Attention as decode runs it (fused q/k prep + KV store), per context and
  // number of splits (FISH_VK_ATTN_SPLIT = positions per split picks it).
  std::printf("| kernel | context | splits | positions per split | us | GB/s |\n| --- | ---: | ---: | ---: | ---: | ---: |\n");
  for (int n_kv : ctxs) {
    double best = 1e30;
    uint32_t best_len = 0;
    for (uint32_t splits : {1u, 2u, 4u, 8u, 16u, 32u, 64u, 128u}) {
      if (splits > uint32_t(n_kv) || splits > vk::Span::kPartSlots) continue;
      const uint32_t len = (uint32_t(n_kv) + splits - 1) / splits;
      if (len > 1024 || (n_kv >= 4096 && splits < 8)) continue;  // far too serial
      rig.put(rig.arena(), 0, std::vector<uint32_t>{uint32_t(KVH), splits, 1, 0, uint32_t(n_kv - 1), splits, len});
      vk::SpanPush p;
      p.n_tok = 1, p.q_off = q_off, p.q_stride = QKV, p.k_off = q_off + QD, p.v_off = q_off + QD + KD;
      p.kv_cap = uint32_t(max_ctx), p.att_off = att_off, p.part_off = part_off, p.cnt_off = cnt_off;
      p.scale = 1.0f / std::sqrt(float(D)), p.n_rot = D, p.n_head = H;
      const double s = time([&](VkCommandBuffer c) { be->span_kernels()->attention(c, rig.aux_set(), p, ks, true, rig.arena().buffer); });
      const double bytes = 2.0 * n_kv * KD * 2;
      std::printf("| attention (fused) | %d | %u | %u | %.1f | %.0f |\n", n_kv, splits, len, s * 1e6, bytes / s / 1e9);
      std::fflush(stdout);
      if (s < best) best = s, best_len = len;
      if (n_kv > 2048) continue;
      // The decode's default up to 2048 positions: one query head per workgroup.
      vk::SpanKernelShape narrow = ks;
      narrow.wg_heads = 1;
      rig.put(rig.arena(), 0, std::vector<uint32_t>{narrow.attn_groups()});
      const double sn = time([&](VkCommandBuffer c) { be->span_kernels()->attention(c, rig.aux_set(), p, narrow, true, rig.arena().buffer); });
      std::printf("| attention (fused, one head per workgroup) | %d | %u | %u | %.1f | %.0f |\n", n_kv, splits, len, sn * 1e6,
                  bytes / sn / 1e9);
    }
    std::printf("BEST_ATTN_SPLIT at %d: FISH_VK_ATTN_SPLIT=%u (%.1f us)\n", n_kv, best_len, best * 1e6);
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
  if (be->kernels()->int8()) {
    // quantize_x on one token's x (E elements): the CPU's Q8_K rows, and the B32 decode's rows.
    VkDescriptorSet qset = be->pipelines()->allocate_set(be->kernels()->quant_layout());
    const VkBuffer b = rig.arena().buffer;
    const uint64_t o = 0, range = rig.arena().size;
    be->pipelines()->write_set(qset, 1, &b, &o, &range);
    for (const bool b32 : {false, true}) {
      vk::QuantPush qp;
      qp.n = uint32_t(E), qp.n_tok = 1, qp.x_off = r.x_off, qp.x_stride = uint32_t(E);
      qp.q_off = (r.y_off + uint32_t(E) + 3) / 4 * 4, qp.q_stride = 0;
      std::printf("| quantize_x (%s rows) | - | - | %.1f | - |\n", b32 ? "B32" : "Q8_K",
                  time([&](VkCommandBuffer c) { be->kernels()->record_quantize(c, qset, qp, b32 ? 32 : 256, false, b32); }) * 1e6);
    }
    be->pipelines()->free_set(qset);
  }
  if (std::getenv("FISH_BENCH_NO_MATVEC")) return 0;
  if (const int rc = vktest::span_rows_bench(*be, E, F, std::max(2, copies / 4), time); rc != 0) return rc;
  return vktest::span_mv_sweep(*be, vktest::SpanMvDims{E, F, QD, KD, copies, fq3}, time, env_out);
}

}  // namespace

int main(int argc, char** argv) {
  std::string model, shape = "8b", env_out;
  std::vector<int> depths = {512, 4096, 16384}, ctxs = {512, 4096, 16384}, sweep_tokens = {4, 8, 16, 32};
  int gen = 64, chunk = 512, threads = 0, reps = 20;
  bool kernels = false, rows = false, sweep = false, fq3 = false;
  int prefill_tokens = 0;
  int sync_sms = 0;
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
    else if (a == "--depths") depths = bench::int_list(next());
    else if (a == "--gen") gen = std::atoi(next().c_str());
    else if (a == "--chunk") chunk = std::atoi(next().c_str());
    else if (a == "-t") threads = std::atoi(next().c_str());
    else if (a == "--kernels") kernels = true;
    else if (a == "--rows") rows = true;
    else if (a == "--sweep") sweep = true;
    else if (a == "--sweep-tokens") sweep_tokens = bench::int_list(next());
    else if (a == "--prefill") prefill_tokens = prefill_tokens > 0 ? prefill_tokens : 512;
    else if (a == "--tokens") prefill_tokens = std::atoi(next().c_str());
    else if (a == "--fq3") fq3 = true;
    else if (a == "--sync") sync_sms = std::atoi(next().c_str());
    else if (a == "--shape") shape = next();
    else if (a == "--ctx") ctxs = bench::int_list(next());
    else if (a == "--reps") reps = std::atoi(next().c_str());
    else if (a == "--env-out") env_out = next();
    else {
      std::fprintf(stderr, "usage: fish_bench_vk_span --model M [--depths 512,4096] [--gen 64] [--chunk 512] [-t N]\n"
                           "       fish_bench_vk_span --kernels [--shape 8b|1b|tiny] [--ctx 512,4096,16384] [--reps 20] [--env-out FILE] [--fq3]\n"
                           "       fish_bench_vk_span --rows [--sweep [--sweep-tokens 4,8,16,32]] [--shape 8b|1b|tiny] [--reps 20]\n"
                           "       fish_bench_vk_span --prefill [--tokens 512] [--shape 8b|1b|tiny] [--reps 20]\n"
                           "       fish_bench_vk_span --sync SMS [--reps 20]\n");
      return 2;
    }
  }
  for (const int T : sweep_tokens)
    if (T < 2 || T > int(vk::MatmulKernels::kMaxSpanMatvecTokens)) {
      std::fprintf(stderr, "fish_bench_vk_span: --sweep-tokens takes row counts of 2..%u (token groups), not %d\n",
                   vk::MatmulKernels::kMaxSpanMatvecTokens, T);
      return 2;
    }
  try {
    if (sync_sms > 0) return run_sync(uint32_t(sync_sms), std::max(1, reps));
    if (kernels || rows || prefill_tokens > 0)
      return run_kernels(shape, ctxs, std::max(1, reps), env_out, rows, sweep, sweep_tokens, fq3, prefill_tokens);
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
