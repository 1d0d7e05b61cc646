// fish_bench_vk: fish_vulkan kernel throughput measured with device timestamps
// (run by hand, e.g. on the H200; not a test).
//
//   fish_bench_vk [--types Q4_K,Q6_K,...] [--shapes 8b|1b|all] [--sweep] [--reps N]
//                 [--warm-ms N] [--group-mb M] [--prefill N] [--no-check]
//
// For every type and shape it uploads enough copies of one random matrix that a
// group product streams >= M MB (default 1024, far beyond any L2), runs
// matmul_group on them (one submission, one dispatch per copy) and reports:
//   matvec GB/s    weight bytes / device time of the kernels, n_tok = 1
//   wall GB/s      the same over the whole call (x/y copies, submit, fence wait)
//   prefill GFLOP/s  2·n_in·n_out·n_tok / device time of the submission: the prefill
//                  kernel the device uses (coopmat where it has cooperative
//                  matrices), then the tiled one (f32 or int8) beside it. The
//                  submission includes copying y to host memory, which bounds
//                  large outputs on a discrete GPU (the H200: ~16 GB/s, every
//                  kernel then reads ~32 TFLOP/s); the span's prefill stages
//                  (FISH_GPU_PROFILE=2 fish bench) time the kernels alone.
// --sweep repeats the matvec for every (rows per subgroup, workgroup size).
// First it measures the device's copy bandwidth (vkCmdCopyBuffer of 1 GiB,
// counted as read + write) as the reference the matvec figures are read against.
// One copy per shape is also checked against the CPU f32 reference (spec bound).
// Every timing follows a warm-up of repeated calls (--warm-ms): an idle H200
// runs its SMs at ~345 MHz and takes a while to reach 1980 MHz.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "common/fp16.h"
#include "cpu/matmul.h"
#include "cpu/thread_pool.h"
#include "quant/quant.h"
#include "vk_test_util.h"

using fish::GgmlType;
using namespace fish::vktest;

namespace {

// The int8 path (FISH_VK_INT8=1) follows the CPU's int8 product, not the f32
// reference: one token against the engine's matmul, per element within
// 2e-5 · Σ_i |w_ri x_i| (test_vk_int8's bound). Returns the worst ratio; the
// elements outside go to *bad.
double int8_ratio(const Matrix& m, const std::vector<float>& x, const float* y, int64_t* bad) {
  static fish::ThreadPool pool(0);
  std::vector<float> cpu(size_t(m.n_out));
  const fish::WeightView v{m.type, m.data.data(), m.n_in, m.n_out, m.row_bytes};
  fish::matmul(pool, v, x.data(), 1, cpu.data());
  std::vector<float> w(size_t(m.n_in));
  double worst = 0;
  *bad = 0;
  for (int64_t r = 0; r < m.n_out; ++r) {
    fish::dequant_row(m.type, m.data.data() + size_t(r) * m.row_bytes, w.data(), m.n_in);
    double mag = 0;
    for (int64_t i = 0; i < m.n_in; ++i) mag += std::fabs(double(w[size_t(i)]) * x[size_t(i)]);
    const double q = std::fabs(double(y[r]) - double(cpu[size_t(r)])) / (2e-5 * mag + 1e-30);
    if (!(q <= 1.0)) ++*bad;
    if (!(q <= worst)) worst = q;
  }
  return worst;
}

struct Shape {
  const char* label;
  int64_t n_in, n_out;
};

// Llama-3.1-8B: q/o 4096², k/v 4096→1024, gate/up 4096→14336, down 14336→4096, output 4096→128256.
const Shape k8b[] = {{"8B attn_q 4096->4096", 4096, 4096},       {"8B attn_k 4096->1024", 4096, 1024},
                     {"8B ffn_up 4096->14336", 4096, 14336},     {"8B ffn_down 14336->4096", 14336, 4096},
                     {"8B output 4096->128256", 4096, 128256}};
// Llama-3.2-1B: 2048², 2048→512, 2048→8192, 8192→2048, 2048→128256.
const Shape k1b[] = {{"1B attn_q 2048->2048", 2048, 2048},   {"1B attn_k 2048->512", 2048, 512},
                     {"1B ffn_up 2048->8192", 2048, 8192},   {"1B ffn_down 8192->2048", 8192, 2048},
                     {"1B output 2048->128256", 2048, 128256}};

// Random blocks without quantising (fast for 500 MB matrices): random bytes,
// then every f16 scale set to a sane value (no NaN/Inf) and F32/F16 values drawn.
Matrix fast_random_matrix(GgmlType t, int64_t n_in, int64_t n_out, uint64_t seed) {
  Matrix m;
  m.type = t;
  m.n_in = n_in;
  m.n_out = n_out;
  const auto info = *fish::ggml_type_info(t);
  m.row_bytes = uint64_t(n_in) / uint64_t(info.block_size) * uint64_t(info.type_size);
  m.data.resize(m.row_bytes * uint64_t(n_out));
  m.name = fish::ggml_type_name(t) + " " + std::to_string(n_out) + "x" + std::to_string(n_in);
  std::mt19937_64 rng(seed);
  auto* p = m.data.data();
  const size_t n = m.data.size();
  for (size_t i = 0; i + 8 <= n; i += 8) {
    const uint64_t r = rng();
    std::memcpy(p + i, &r, 8);
  }
  auto put_half = [&](size_t off, float v) {
    const uint16_t h = fish::fp32_to_fp16(v);
    std::memcpy(p + off, &h, 2);
  };
  std::uniform_real_distribution<float> sc(0.0005f, 0.002f);
  std::normal_distribution<float> nd(0.0f, 0.02f);
  switch (t) {
    case GgmlType::F32:
      for (size_t i = 0; i + 4 <= n; i += 4) {
        const float v = nd(rng);
        std::memcpy(p + i, &v, 4);
      }
      break;
    case GgmlType::F16:
      for (size_t i = 0; i + 2 <= n; i += 2) put_half(i, nd(rng));
      break;
    case GgmlType::Q4_0:
    case GgmlType::Q8_0:
      for (size_t b = 0; b < n; b += size_t(info.type_size)) put_half(b, sc(rng) * 8);
      break;
    case GgmlType::Q4_K:
    case GgmlType::Q5_K:
    case GgmlType::FQ3:  // d, dmin first as in Q4_K
      for (size_t b = 0; b < n; b += size_t(info.type_size)) {
        put_half(b, sc(rng));
        put_half(b + 2, sc(rng));
      }
      break;
    case GgmlType::Q6_K:
      for (size_t b = 0; b < n; b += size_t(info.type_size)) put_half(b + 208, sc(rng));
      break;
    default: break;
  }
  return m;
}

// Device copy bandwidth, read + write counted, 1 GiB buffers: through the SMs
// (the copy_u4 kernel, what the matvec kernels compete with) and with
// vkCmdCopyBuffer. Both after a warm-up: the GPU idles at a low clock.
struct CopyBandwidth {
  double kernel_gbs = 0, transfer_gbs = 0;
};
CopyBandwidth copy_bandwidth(fish::vk::VulkanBackend& be) {
  CopyBandwidth out;
  const uint64_t size = uint64_t(1) << 30;
  fish::vk::Memory& mem = *be.memory();
  fish::vk::Buffer a, b;
  const VkBufferUsageFlags usage =
      VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT;
  try {
    a = mem.create(size, fish::vk::MemKind::Device, usage, "copy src");
    b = mem.create(size, fish::vk::MemKind::Device, usage, "copy dst");
  } catch (const fish::vk::Failure& f) {
    std::printf("copy bandwidth: skipped (%s)\n", f.what());
    mem.destroy(a);
    return out;
  }
  fish::vk::Submitter& sub = *be.submitter();
  fish::vk::Pipelines& pl = *be.pipelines();
  const auto& f = be.device()->fns();
  const fish::vk::Layout& lay = pl.layout(2, 4);
  VkPipeline copy = pl.get("copy_u4", lay, {});
  VkDescriptorSet set = pl.allocate_set(lay);
  const VkBuffer bufs[2] = {a.buffer, b.buffer};
  const uint64_t offs[2] = {0, 0}, ranges[2] = {size, size};
  pl.write_set(set, 2, bufs, offs, ranges);
  const uint32_t n = uint32_t(size / 16);
  for (int mode = 0; mode < 2; ++mode) {
    std::vector<double> t;
    const auto t0 = std::chrono::steady_clock::now();
    for (;;) {
      VkCommandBuffer cmd = sub.begin();
      sub.mark_begin();
      if (mode == 0) {
        f.vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, copy);
        f.vkCmdBindDescriptorSets(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, lay.pipeline_layout, 0, 1, &set, 0, nullptr);
        f.vkCmdPushConstants(cmd, lay.pipeline_layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, 4, &n);
        f.vkCmdDispatch(cmd, 132 * 16, 1, 1);
      } else {
        VkBufferCopy r{0, 0, size};
        f.vkCmdCopyBuffer(cmd, a.buffer, b.buffer, 1, &r);
      }
      sub.mark_end();
      sub.submit_and_wait();
      // Half a second of copies first (clocks up), then 10 timed ones.
      if (std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() > 0.5) t.push_back(sub.last_gpu_seconds());
      if (t.size() >= 10) break;
    }
    std::sort(t.begin(), t.end());
    const double gbs = t.empty() || t[t.size() / 2] <= 0 ? 0.0 : 2.0 * double(size) / t[t.size() / 2] / 1e9;
    (mode == 0 ? out.kernel_gbs : out.transfer_gbs) = gbs;
  }
  pl.free_set(set);
  mem.destroy(a);
  mem.destroy(b);
  return out;
}

struct Args {
  std::vector<GgmlType> types = {GgmlType::Q4_K, GgmlType::Q6_K, GgmlType::Q8_0, GgmlType::Q4_0,
                                 GgmlType::Q5_K, GgmlType::F16,  GgmlType::F32,  GgmlType::FQ3};
  std::string shapes = "8b";
  bool sweep = false;
  bool check = true;
  int reps = 10;
  int warm_ms = 300;
  uint64_t group_mb = 1024;
  int prefill = 256;
};

GgmlType parse_type(const std::string& s) {
  for (uint32_t t : {0u, 1u, 2u, 8u, 12u, 13u, 14u, 1000u})  // 1000: FQ3
    if (fish::ggml_type_name(t) == s) return GgmlType(t);
  std::fprintf(stderr, "unknown type %s\n", s.c_str());
  std::exit(2);
}

// Median device and wall seconds of `reps` group calls, after repeating the
// call for warm_ms (pipeline creation, and the GPU clocks up from idle).
struct Timing {
  double gpu_s = 0, wall_s = 0;
};
Timing time_group(fish::vk::VulkanBackend& be, std::vector<fish::vk::Weight*>& ws, const std::vector<float>& x, int n_tok,
                  std::vector<std::vector<float>>& ys, int reps, int warm_ms) {
  std::vector<float*> yp;
  for (auto& y : ys) yp.push_back(y.data());
  auto call = [&] {
    if (!be.matmul_group(ws.data(), int(ws.size()), x.data(), n_tok, yp.data())) {
      std::fprintf(stderr, "matmul_group failed: %s\n", be.error().c_str());
      std::exit(1);
    }
  };
  const auto t_warm = std::chrono::steady_clock::now();
  do call();
  while (std::chrono::duration<double>(std::chrono::steady_clock::now() - t_warm).count() * 1e3 < warm_ms);
  std::vector<double> gpu, wall;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    call();
    wall.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    gpu.push_back(be.last_gpu_seconds());
  }
  std::sort(wall.begin(), wall.end());
  std::sort(gpu.begin(), gpu.end());
  return {gpu[gpu.size() / 2], wall[wall.size() / 2]};
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string s = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s needs a value\n", s.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (s == "--types") {
      a.types.clear();
      std::string v = next();
      for (size_t p = 0; p <= v.size();) {
        const size_t q = std::min(v.find(',', p), v.size());
        a.types.push_back(parse_type(v.substr(p, q - p)));
        p = q + 1;
      }
    } else if (s == "--shapes") a.shapes = next();
    else if (s == "--sweep") a.sweep = true;
    else if (s == "--no-check") a.check = false;
    else if (s == "--reps") a.reps = std::max(1, std::atoi(next().c_str()));
    else if (s == "--warm-ms") a.warm_ms = std::max(0, std::atoi(next().c_str()));
    else if (s == "--group-mb") a.group_mb = uint64_t(std::max(1, std::atoi(next().c_str())));
    else if (s == "--prefill") a.prefill = std::atoi(next().c_str());
    else {
      std::fprintf(stderr, "usage: %s [--types T,..] [--shapes 8b|1b|all] [--sweep] [--reps N] [--group-mb M] [--prefill N] [--no-check]\n", argv[0]);
      return 2;
    }
  }
  auto be = open_backend("fish_bench_vk");
  if (!be) return 0;
  be->set_profiling(true);
  if (!be->submitter()->can_profile()) {
    std::printf("the device has no timestamps on its compute queue: nothing to measure\n");
    return 0;
  }
  const CopyBandwidth cb = copy_bandwidth(*be);
  const double copy_gbs = cb.kernel_gbs;
  std::printf("device copy bandwidth, 1 GiB, read + write: %.0f GB/s with a copy kernel, %.0f GB/s with vkCmdCopyBuffer\n\n",
              cb.kernel_gbs, cb.transfer_gbs);

  std::vector<Shape> shapes;
  if (a.shapes == "8b" || a.shapes == "all") shapes.insert(shapes.end(), std::begin(k8b), std::end(k8b));
  if (a.shapes == "1b" || a.shapes == "all") shapes.insert(shapes.end(), std::begin(k1b), std::end(k1b));

  std::printf("%-6s %-26s %6s %7s | %10s %7s %10s %9s | %11s\n", "type", "shape", "MB", "copies", "matvec GB/s",
              "of copy", "wall GB/s", "call us", "prefill GF/s");
  uint64_t seed = 1;
  for (GgmlType t : a.types) {
    for (const Shape& sh : shapes) {
      const Matrix m = fast_random_matrix(t, sh.n_in, sh.n_out, seed++);
      const uint64_t mb = m.data.size() >> 20;
      const int copies = int(std::max<uint64_t>(1, std::min<uint64_t>(64, (a.group_mb << 20) / m.data.size())));
      std::vector<fish::vk::Weight*> ws;
      for (int c = 0; c < copies; ++c) {
        fish::vk::Weight* w = be->upload(upload_desc(m));
        if (!w) {
          std::printf("upload failed: %s\n", be->error().c_str());
          break;
        }
        ws.push_back(w);
      }
      if (ws.empty()) continue;
      const double bytes = double(m.data.size()) * double(ws.size());
      const auto x1 = random_x(1, sh.n_in, seed++);
      std::vector<std::vector<float>> ys(ws.size(), std::vector<float>(size_t(sh.n_out) * size_t(std::max(1, a.prefill))));
      const Timing mv = time_group(*be, ws, x1, 1, ys, a.reps, a.warm_ms);
      // One weight alone: the per-call cost stage 1 pays.
      std::vector<fish::vk::Weight*> one = {ws[0]};
      std::vector<std::vector<float>> y1(1, std::vector<float>(size_t(sh.n_out)));
      const Timing single = time_group(*be, one, x1, 1, y1, a.reps, a.warm_ms / 3);
      double gflops = 0, gflops_tiled = 0;
      if (a.prefill > 4) {
        const auto xp = random_x(a.prefill, sh.n_in, seed++);
        std::vector<std::vector<float>> yp(1, std::vector<float>(size_t(sh.n_out) * size_t(a.prefill)));
        const bool coop = be->kernels()->coopmat();
        for (int pass = 0; pass < (coop ? 2 : 1); ++pass) {
          be->kernels()->set_coopmat(coop && pass == 0);
          const Timing pf = time_group(*be, one, xp, a.prefill, yp, std::max(1, a.reps / 2), a.warm_ms / 3);
          (pass == 0 ? gflops : gflops_tiled) = 2.0 * double(sh.n_in) * double(sh.n_out) * a.prefill / pf.gpu_s / 1e9;
        }
        be->kernels()->set_coopmat(coop);
      }
      const double gbs = bytes / mv.gpu_s / 1e9;
      std::printf("%-6s %-26s %6llu %7zu | %10.0f %6.0f%% %10.0f %9.1f | %11.0f", fish::ggml_type_name(t).c_str(),
                  sh.label, (unsigned long long)mb, ws.size(), gbs, copy_gbs > 0 ? 100.0 * gbs / copy_gbs : 0.0,
                  bytes / mv.wall_s / 1e9, single.wall_s * 1e6, gflops);
      if (gflops_tiled > 0) std::printf(" (coopmat; tiled %.0f)", gflops_tiled);
      std::printf("\n");
      std::fflush(stdout);
      if (a.sweep) {
        for (uint32_t rows : {1u, 2u, 4u}) {
          for (uint32_t wg : {64u, 128u, 256u}) {
            be->kernels()->set_override(rows, wg);
            const Timing s = time_group(*be, ws, x1, 1, ys, 5, 60);
            std::printf("         sweep rows %u wg %3u: %6.0f GB/s\n", rows, wg, bytes / s.gpu_s / 1e9);
          }
        }
        be->kernels()->set_override(0, 0);
        std::fflush(stdout);
      }
      if (a.check) {
        // Correctness at full size on this device: one token against the CPU
        // f32 reference (the spec's bound), or the CPU's int8 product (int8 path).
        int64_t bad = 0;
        const bool i8 = be->kernels()->int8_for(*fish::vk::matmul_type(uint32_t(t)));
        const double r = i8 ? int8_ratio(m, x1, ys[0].data(), &bad) : bound_ratio(m, x1.data(), 1, ys[0].data(), &bad);
        if (bad) std::printf("         CHECK FAILED: %lld elements outside the bound (worst ratio %.3g)\n", (long long)bad, r);
        else std::printf("         checked vs CPU %s: worst |err|/bound %.5f\n", i8 ? "int8 (2e-5 of sum |w||x|)" : "f32", r);
      }
      for (auto* w : ws) be->release(w);
    }
  }
  return 0;
}
