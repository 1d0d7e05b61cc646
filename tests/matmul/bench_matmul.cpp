// fish_bench_matmul: speed of the CPU matmul kernels on the Llama-3.2-1B shapes
// (Q4_K_M: Q4_K matrices, Q6_K for the output and for half of attn_v /
// ffn_down), with 1 and 2 threads: GB/s of weights streamed at n_tok = 1
// (generation), GFLOP/s at n_tok = 512 (prompt processing), and from those an
// estimate of tok/s for tg and pp of the whole model (matmuls only: attention,
// norms and RoPE are not counted). Also prints what a plain memory read reaches.
//
//   fish_bench_matmul [--threads 1,2] [--kernels scalar|avx2|avxvnni|avx512] [--pp-tokens 512] [--quick]
//                     [--only SHAPE_INDEX] [--tg-only | --pp-only] [--cpu-time] [--warm] [--best] [--pin]
//                     [--type TYPE]   (every shape in TYPE instead of the Q4_K_M mix) [--warm] [--best]
//                     [--prepared]    (weights through prepare_weight, as a model that repacks at load)
#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <vector>

#include "common/error.h"
#include "cpu/matmul.h"
#include "cpu/thread_pool.h"
#include "matmul_test_data.h"
#include "quant/quant.h"

using namespace fish;

namespace {

// Wall time, or with --cpu-time the calling thread's CPU time (robust against
// other processes on a shared machine; meaningful for 1 thread only).
bool g_cpu_time = false;
bool g_warm = false;
bool g_best = false;  // --best: the fastest repetition instead of the median
bool g_pin = false;   // --pin: pool thread i on CPU i (keeps the scheduler from stacking them)
bool g_prepared = false;  // --prepared: weights through prepare_weight (16-row strips for Q4_K / Q5_K / Q6_K and the 32-element types)

void pin_threads(ThreadPool& pool) {
  pool.run([](int ith, int) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(ith % CPU_SETSIZE, &set);
    pthread_setaffinity_np(pthread_self(), sizeof set, &set);
  });
}  // --warm: reuse one copy of each weight (cache-resident when small)
double now() {
  if (g_cpu_time) {
    timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
  }
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// A weight of the 1B model: rows quantised with quantize_row from random
// activations-like data (a pool of 256 distinct rows, repeated to fill large
// matrices: the kernels do not depend on the values, only on the bytes read).
struct Weight {
  GgmlType type;
  int64_t n_in, n_out;
  std::vector<uint8_t> data;
  WeightView view() const { return {type, data.data(), n_in, n_out, test::row_bytes_of(type, n_in)}; }
  double bytes() const { return double(data.size()); }
};

Weight make_weight(GgmlType t, int64_t n_in, int64_t n_out) {
  Weight w{t, n_in, n_out, {}};
  const uint64_t rb = test::row_bytes_of(t, n_in);
  const int64_t pool_rows = std::min<int64_t>(n_out, 256);
  std::vector<uint8_t> pool(rb * uint64_t(pool_rows));
  const auto x = test::random_acts(n_in * pool_rows, uint64_t(n_in) * 7 + uint64_t(t));
  if (can_quantize(t)) {
    for (int64_t r = 0; r < pool_rows; ++r) quantize_row(t, x.data() + r * n_in, pool.data() + rb * uint64_t(r), n_in);
  } else {  // types fish does not quantise to: random blocks with sane scales
    pool = test::random_weights(t, n_in, pool_rows, uint64_t(t));
  }
  w.data.resize(rb * uint64_t(n_out));
  for (int64_t r = 0; r < n_out; ++r) std::memcpy(w.data.data() + rb * uint64_t(r), pool.data() + rb * uint64_t(r % pool_rows), rb);
  return w;
}

// Median seconds of one call over reps (at least min_time in total).
template <class F>
double time_call(F&& f, double min_time, int min_reps) {
  f();  // warm-up (page faults, scratch growth)
  std::vector<double> ts;
  const double start = now();
  while (int(ts.size()) < min_reps || now() - start < min_time) {
    const double t0 = now();
    f();
    ts.push_back(now() - t0);
    if (ts.size() >= 2000) break;
  }
  std::sort(ts.begin(), ts.end());
  return g_best ? ts[0] : ts[ts.size() / 2];
}

double memory_read_gbs(ThreadPool& pool) {
  const size_t n = size_t(512) << 20;
  std::vector<uint64_t> buf(n / 8, 1);
  std::vector<uint64_t> sinks(size_t(pool.size()) * 8);
  auto read_all = [&] {
    pool.run([&](int ith, int nth) {
      const size_t b = buf.size() * size_t(ith) / size_t(nth), e = buf.size() * size_t(ith + 1) / size_t(nth);
      uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
      for (size_t i = b; i + 4 <= e; i += 4) {
        s0 += buf[i];
        s1 += buf[i + 1];
        s2 += buf[i + 2];
        s3 += buf[i + 3];
      }
      sinks[size_t(ith) * 8] = s0 + s1 + s2 + s3;
    });
  };
  const double t = time_call(read_all, 1.0, 3);
  return double(n) / t / 1e9;
}

constexpr double kColdBytes = 384e6;  // per-shape footprint that no cache holds

struct Shape {
  const char* name;
  GgmlType type;
  int64_t n_in, n_out;
};

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> threads = {1, 2};
  int pp_tokens = 512;
  bool quick = false, do_tg = true, do_pp_all = true;
  int only = -1;
  const char* type_override = nullptr;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--threads" && i + 1 < argc) {
      threads.clear();
      for (const char* p = argv[++i]; *p;) {
        threads.push_back(std::atoi(p));
        while (*p && *p != ',') ++p;
        if (*p == ',') ++p;
      }
    } else if (a == "--kernels" && i + 1 < argc) {
      const std::string k = argv[++i];
      matmul_use_kernels(k == "scalar"    ? MatmulKernels::Scalar
                         : k == "avx2"    ? MatmulKernels::Avx2
                         : k == "avxvnni" ? MatmulKernels::AvxVnni
                                          : MatmulKernels::Avx512);
    } else if (a == "--pp-tokens" && i + 1 < argc) {
      pp_tokens = std::atoi(argv[++i]);
    } else if (a == "--quick") {
      quick = true;
    } else if (a == "--pin") {
      g_pin = true;
    } else if (a == "--best") {
      g_best = true;
    } else if (a == "--prepared") {
      g_prepared = true;
    } else if (a == "--warm") {
      g_warm = true;
    } else if (a == "--cpu-time") {
      g_cpu_time = true;
    } else if (a == "--tg-only") {
      do_pp_all = false;
    } else if (a == "--pp-only") {
      do_tg = false;
    } else if (a == "--type" && i + 1 < argc) {
      type_override = argv[++i];
    } else if (a == "--only" && i + 1 < argc) {
      only = std::atoi(argv[++i]);
    } else {
      std::fprintf(stderr, "usage: %s [--threads 1,2] [--kernels scalar|avx2|avxvnni|avx512] [--pp-tokens N] [--quick]\n"
                   "          [--only SHAPE_INDEX] [--tg-only | --pp-only] [--cpu-time] [--warm] [--best] [--pin] [--type TYPE]\n"
                   "          [--prepared]\n", argv[0]);
      return 2;
    }
  }
  const double min_time = quick ? 0.2 : 0.6;
  std::printf("kernels: %s%s\n", matmul_kernel_name(), g_prepared ? ", prepared weights" : "");

  const Shape shapes[] = {
      {"attn_q/o 2048->2048", GgmlType::Q4_K, 2048, 2048}, {"attn_k/v 2048->512", GgmlType::Q4_K, 2048, 512},
      {"attn_v   2048->512", GgmlType::Q6_K, 2048, 512},   {"ffn_gate/up 2048->8192", GgmlType::Q4_K, 2048, 8192},
      {"ffn_down 8192->2048", GgmlType::Q4_K, 8192, 2048}, {"ffn_down 8192->2048", GgmlType::Q6_K, 8192, 2048},
      {"output 2048->128256", GgmlType::Q6_K, 2048, 128256},
  };
  constexpr int kShapes = int(sizeof shapes / sizeof shapes[0]);
  GgmlType forced = GgmlType::F32;
  if (type_override) {
    bool found = false;
    for (uint32_t t = 0; t < 64 && !found; ++t)
      if (ggml_type_name(t) == type_override) {
        forced = GgmlType(t);
        found = true;
      }
    if (!found) {
      std::fprintf(stderr, "unknown type %s\n", type_override);
      return 2;
    }
  }
  std::vector<Weight> ws;
  for (const Shape& s : shapes)
    if (only < 0 || &s == &shapes[only]) ws.push_back(make_weight(type_override ? forced : s.type, s.n_in, s.n_out));
    else ws.push_back(Weight{s.type, s.n_in, s.n_out, {}});

  for (int nt : threads) {
    ThreadPool pool(nt);
    if (g_pin) pin_threads(pool);
    std::printf("\n== %d thread%s ==\n", nt, nt == 1 ? "" : "s");
    if (only < 0) std::printf("plain memory read: %.1f GB/s\n", memory_read_gbs(pool));
    std::printf("%-24s %-5s %10s %10s %12s %10s\n", "matrix", "type", "MB", "tg GB/s", "tg us/call", "pp GFLOP/s");
    double t_tg[kShapes], t_pp[kShapes];
    const auto x1 = test::random_acts(8192, 1);
    const auto xp = test::random_acts(8192 * int64_t(pp_tokens), 2);
    std::vector<float> y(size_t(128256) * 1);
    std::vector<float> yp(size_t(8192) * size_t(pp_tokens));
    for (int i = 0; i < kShapes; ++i) {
      t_tg[i] = t_pp[i] = 0.0;
      if (only >= 0 && i != only) continue;
      const Weight& w = ws[size_t(i)];
      // Copies of the weight, used in turn, so that every call reads its
      // weights from DRAM as in a real decode step (the model's 800 MB do not
      // stay in any cache), not from the L2/L3 a small matrix would fit in.
      const size_t copies = g_warm ? 1 : std::max<size_t>(2, size_t(kColdBytes / w.bytes()));
      std::vector<uint8_t> cold;
      std::vector<PreparedWeight> prepared;
      if (g_prepared) {
        for (size_t c = 0; c < copies; ++c) prepared.push_back(prepare_weight(w.view(), &pool));
      } else {
        cold.resize(w.data.size() * copies);
        for (size_t c = 0; c < copies; ++c) std::memcpy(cold.data() + c * w.data.size(), w.data.data(), w.data.size());
      }
      size_t next = 0;
      auto view = [&] {
        if (g_prepared) return prepared[next++ % copies].view();
        WeightView v = w.view();
        v.data = cold.data() + (next++ % copies) * w.data.size();
        return v;
      };
      if (do_tg) t_tg[i] = time_call([&] { matmul(pool, view(), x1.data(), 1, y.data()); }, min_time, 5);
      const bool do_pp = do_pp_all && w.n_out <= 8192;  // pp needs the output matrix for the last token only
      t_pp[i] = do_pp ? time_call([&] { matmul(pool, view(), xp.data(), pp_tokens, yp.data()); }, min_time, 2) : 0.0;
      char pp[32] = "-";
      if (do_pp) std::snprintf(pp, sizeof pp, "%.1f", 2.0 * double(w.n_in) * double(w.n_out) * pp_tokens / t_pp[i] / 1e9);
      char tg[32] = "-", tgus[32] = "-";
      if (do_tg) {
        std::snprintf(tg, sizeof tg, "%.1f", w.bytes() / t_tg[i] / 1e9);
        std::snprintf(tgus, sizeof tgus, "%.1f", t_tg[i] * 1e6);
      }
      std::printf("%-24s %-5s %10.2f %10s %12s %10s\n", shapes[i].name, ggml_type_name(w.type).c_str(), w.bytes() / 1e6,
                  tg, tgus, pp);
    }
    // Llama-3.2-1B Q4_K_M: 16 layers; per layer q, o (2048^2 Q4_K), k (Q4_K),
    // v (Q6_K in half the layers), gate + up (Q4_K), down (Q6_K in half).
    const double layer_q4 = 2 * t_tg[0] + 2 * t_tg[1] + 2 * t_tg[3] + t_tg[4];
    const double layer_q6 = 2 * t_tg[0] + t_tg[1] + t_tg[2] + 2 * t_tg[3] + t_tg[5];
    const double tg = 8 * layer_q4 + 8 * layer_q6 + t_tg[6];
    const double pl_q4 = 2 * t_pp[0] + 2 * t_pp[1] + 2 * t_pp[3] + t_pp[4];
    const double pl_q6 = 2 * t_pp[0] + t_pp[1] + t_pp[2] + 2 * t_pp[3] + t_pp[5];
    const double pp = (8 * pl_q4 + 8 * pl_q6) / pp_tokens + t_tg[6] / pp_tokens;
    const double bytes = 8 * (2 * ws[0].bytes() + 2 * ws[1].bytes() + 2 * ws[3].bytes() + ws[4].bytes()) +
            8 * (2 * ws[0].bytes() + ws[1].bytes() + ws[2].bytes() + 2 * ws[3].bytes() + ws[5].bytes()) + ws[6].bytes();
    if (only >= 0 || !do_tg) continue;
    std::printf("estimate, Llama-3.2-1B Q4_K_M matmuls only (%.0f MB of weights per token):\n", bytes / 1e6);
    std::printf("  tg: %.1f tok/s (%.1f GB/s)", 1.0 / tg, bytes / tg / 1e9);
    if (do_pp_all) std::printf("   pp%d: %.1f tok/s", pp_tokens, 1.0 / pp);
    std::printf("\n");
  }
  return 0;
}
