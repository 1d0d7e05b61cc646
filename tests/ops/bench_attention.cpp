// fish_bench_attention: the CPU attention (cpu/attention.h) on a prompt chunk
// of T tokens after D positions of context, Llama-3.2-1B or 3.1-8B heads:
// milliseconds per layer and GFLOP/s (4 · heads · head_dim · Σ positions seen),
// the driver (blocks of up to 8 tokens × a KV group's query heads per work
// item, sharing each K/V row's loads) against one token and head per item,
// interleaved, the fastest of N repetitions (the figures of one noisy machine
// need both).
//
//   fish_bench_attention [--shape 1b|8b] [--tokens 128] [--depths 0,2048] [--threads 1,2] [--reps 5]
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "bench_args.h"
#include "common/fp16.h"
#include "cpu/attention.h"
#include "cpu/thread_pool.h"

using namespace fish;

using bench::int_list;
using bench::now_s;

int main(int argc, char** argv) {
  std::string shape = "1b";
  int T = 128, reps = 5;
  std::vector<int> depths = {0, 2048}, threads = {1, 2};
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : "";
    if (a == "--shape") shape = v, ++i;
    else if (a == "--tokens") T = std::atoi(v), ++i;
    else if (a == "--depths") depths = int_list(v), ++i;
    else if (a == "--threads") threads = int_list(v), ++i;
    else if (a == "--reps") reps = std::atoi(v), ++i;
    else {
      std::fprintf(stderr, "usage: fish_bench_attention [--shape 1b|8b] [--tokens 128] [--depths 0,2048] "
                           "[--threads 1,2] [--reps 5]\n");
      return 2;
    }
  }
  if ((shape != "1b" && shape != "8b") || T < 1 || reps < 1 || depths.empty() || threads.empty()) {
    std::fprintf(stderr, "fish_bench_attention: bad arguments\n");
    return 2;
  }
  const int H = 32, KVH = 8, hd = shape == "8b" ? 128 : 64, G = H / KVH;
  const int max_d = *std::max_element(depths.begin(), depths.end());
  const int64_t kvd = int64_t(KVH) * hd, qd = int64_t(H) * hd;
  std::mt19937 rng(1);
  std::normal_distribution<float> nd(0.f, 1.f);
  std::vector<uint16_t> k(size_t(max_d + T) * kvd), v(k.size());
  for (auto& x : k) x = fp32_to_fp16(nd(rng));
  for (auto& x : v) x = fp32_to_fp16(nd(rng));
  std::vector<float> q(size_t(T) * qd), out(q.size());
  for (auto& x : q) x = nd(rng) * 0.3f;
  std::printf("CPU attention, %s heads (%d x %d, %d KV heads), %d tokens; ms per layer (fastest of %d), GFLOP/s\n",
              shape.c_str(), H, hd, KVH, T, reps);
  std::printf("| depth | threads | blocks: ms | GFLOP/s | one token and head per item: ms | GFLOP/s |\n"
              "| ---: | ---: | ---: | ---: | ---: | ---: |\n");
  for (const int nth : threads) {
    ThreadPool pool(nth);
    AttentionScratch scratch;
    std::vector<std::vector<float>> scores(size_t(nth), std::vector<float>(size_t(max_d + T)));
    for (const int d : depths) {
      AttentionArgs a;
      a.q = q.data(), a.n_tok = T, a.pos0 = d, a.k = k.data(), a.v = v.data(), a.kv_stride = kvd;
      a.n_head = H, a.n_head_kv = KVH, a.head_dim = hd, a.scale = 1.0f / 8, a.out = out.data();
      const AttentionBlockFn fn = attention_block_best();
      // One row per item, interleaved over (token, head) as the driver interleaves its items.
      const auto per_head = [&] {
        pool.run([&](int ith, int n) {
          KvView kv;
          kv.k = &a.k, kv.v = &a.v, kv.stride = kvd;
          for (int64_t it = ith; it < int64_t(T) * H; it += n) {
            const int t = int(it / H), h = int(it % H);
            kv.off = int64_t(h / G) * hd;
            AttentionBlock b;
            b.q = q.data() + t * qd + h * hd, b.out = out.data() + t * qd + h * hd, b.n_kv0 = d + t + 1;
            fn(b, kv, hd, a.scale, scores[size_t(ith)].data());
          }
        });
      };
      double best_g = 1e30, best_h = 1e30;
      for (int r = 0; r < reps + 1; ++r) {  // the first round warms up
        double t0 = now_s();
        attention(pool, a, scratch);
        const double tg = now_s() - t0;
        t0 = now_s();
        per_head();
        const double th = now_s() - t0;
        if (r > 0) best_g = std::min(best_g, tg), best_h = std::min(best_h, th);
      }
      const double flop = 4.0 * H * hd * (double(d) * T + double(T) * (T + 1) / 2);
      std::printf("| %d | %d | %.2f | %.1f | %.2f | %.1f |\n", d, nth, best_g * 1e3, flop / best_g / 1e9, best_h * 1e3,
                  flop / best_h / 1e9);
      std::fflush(stdout);
    }
  }
  return 0;
}
