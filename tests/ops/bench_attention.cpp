// fish_bench_attention: the CPU attention (cpu/attention.h) on a prompt chunk
// of T tokens after D positions of context, Llama-3.2-1B or 3.1-8B heads or
// Qwen3-0.6B's (16 x 128, 8 KV heads): milliseconds per layer and GFLOP/s
// (4 · heads · head_dim · Σ positions seen), the driver (blocks of up to 8
// tokens, 32 for the AVX-512 variant, × a KV group's query heads per work
// item, sharing each K/V row's loads) with each block variant named (attention_block_variant; "best" by
// default) against one token and head per item (the best variant), all
// interleaved, the fastest of N repetitions (the figures of one noisy machine
// need both).
//
//   fish_bench_attention [--shape 1b|8b|0.6b|H/KVH/HD] [--tokens 128] [--depths 0,2048] [--threads 1,2] [--reps 5]
//                        [--variants best,avx2,avx512] [--no-per-head] [--paged]
//
// --paged: the cache as the model hands it over (AttentionArgs::rows, one row
// per token over a table of 64-position pages), not as one array.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <sstream>
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
  std::vector<std::string> variants = {"best"};
  bool per_head_col = true, paged = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : "";
    if (a == "--shape") shape = v, ++i;
    else if (a == "--tokens") T = std::atoi(v), ++i;
    else if (a == "--depths") depths = int_list(v), ++i;
    else if (a == "--threads") threads = int_list(v), ++i;
    else if (a == "--reps") reps = std::atoi(v), ++i;
    else if (a == "--no-per-head") per_head_col = false;
    else if (a == "--paged") paged = true;
    else if (a == "--variants") {
      variants.clear();
      std::stringstream ss(v);
      for (std::string x; std::getline(ss, x, ',');) variants.push_back(x);
      ++i;
    } else {
      std::fprintf(stderr, "usage: fish_bench_attention [--shape 1b|8b|0.6b|H/KVH/HD] [--tokens 128] [--depths 0,2048] "
                           "[--threads 1,2] [--reps 5] [--variants best,avx2,avx512] [--no-per-head] [--paged]\n");
      return 2;
    }
  }
  // Query heads, KV heads, head dim: by name or as H/KVH/HD (64/8/128: a GQA group of 8).
  int H = 32, KVH = 8, hd = 64;
  if (shape == "8b") hd = 128;
  else if (shape == "0.6b") H = 16, hd = 128;
  else if (shape != "1b" && std::sscanf(shape.c_str(), "%d/%d/%d", &H, &KVH, &hd) != 3) H = 0;
  if (H < 1 || KVH < 1 || hd < 1 || H % KVH != 0 || T < 1 || reps < 1 || depths.empty() || threads.empty() ||
      variants.empty()) {
    std::fprintf(stderr, "fish_bench_attention: bad arguments\n");
    return 2;
  }
  std::vector<AttentionBlockFn> fns;
  for (const std::string& name : variants) {
    fns.push_back(name == "best" ? attention_block_best() : attention_block_variant(name.c_str()));
    if (!fns.back()) {
      std::fprintf(stderr, "fish_bench_attention: no variant %s on this CPU\n", name.c_str());
      return 2;
    }
  }
  const int G = H / KVH;
  const int max_d = *std::max_element(depths.begin(), depths.end());
  const int64_t kvd = int64_t(KVH) * hd, qd = int64_t(H) * hd;
  std::mt19937 rng(1);
  std::normal_distribution<float> nd(0.f, 1.f);
  std::vector<uint16_t> k(size_t(max_d + T) * kvd), v(k.size());
  for (auto& x : k) x = fp32_to_fp16(nd(rng));
  for (auto& x : v) x = fp32_to_fp16(nd(rng));
  std::vector<float> q(size_t(T) * qd), out(q.size());
  for (auto& x : q) x = nd(rng) * 0.3f;
  // Pages of 64 positions over the same arrays, for --paged.
  const int32_t page_shift = 6;
  std::vector<const uint16_t*> ktab, vtab;
  for (size_t p = 0; p < k.size(); p += size_t(kvd) << page_shift) ktab.push_back(k.data() + p), vtab.push_back(v.data() + p);
  std::vector<AttentionRow> rows(static_cast<size_t>(T));
  std::printf("CPU attention, %s heads (%d x %d, %d KV heads), %d tokens%s; ms per layer (fastest of %d), GFLOP/s\n",
              shape.c_str(), H, hd, KVH, T, paged ? ", paged rows" : "", reps);
  std::printf("| depth | threads |");
  for (const std::string& name : variants) std::printf(" blocks %s: ms | GFLOP/s |", name.c_str());
  if (per_head_col) std::printf(" one token and head per item: ms | GFLOP/s |");
  std::printf("\n| ---: | ---: |");
  for (size_t i = 0; i < variants.size() + (per_head_col ? 1 : 0); ++i) std::printf(" ---: | ---: |");
  std::printf("\n");
  for (const int nth : threads) {
    ThreadPool pool(nth);
    AttentionScratch scratch;
    std::vector<std::vector<float>> scores(size_t(nth), std::vector<float>(size_t(max_d + T)));
    for (const int d : depths) {
      AttentionArgs a;
      a.q = q.data(), a.n_tok = T, a.pos0 = d, a.k = k.data(), a.v = v.data(), a.kv_stride = kvd;
      a.n_head = H, a.n_head_kv = KVH, a.head_dim = hd, a.scale = 1.0f / 8, a.out = out.data();
      if (paged) {
        for (int t = 0; t < T; ++t) rows[size_t(t)] = {ktab.data(), vtab.data(), d + t};
        a.rows = rows.data(), a.page_shift = page_shift;
      }
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
      std::vector<double> best(fns.size() + 1, 1e30);
      for (int r = 0; r < reps + 1; ++r) {  // the first round warms up
        for (size_t vi = 0; vi <= fns.size(); ++vi) {
          if (vi == fns.size() && !per_head_col) break;
          const double t0 = now_s();
          if (vi < fns.size()) {
            a.block = fns[vi];
            attention(pool, a, scratch);
          } else {
            per_head();
          }
          if (r > 0) best[vi] = std::min(best[vi], now_s() - t0);
        }
      }
      const double flop = 4.0 * H * hd * (double(d) * T + double(T) * (T + 1) / 2);
      std::printf("| %d | %d |", d, nth);
      for (size_t vi = 0; vi < fns.size() + (per_head_col ? 1 : 0); ++vi)
        std::printf(" %.2f | %.1f |", best[vi] * 1e3, flop / best[vi] / 1e9);
      std::printf("\n");
      std::fflush(stdout);
    }
  }
  return 0;
}
