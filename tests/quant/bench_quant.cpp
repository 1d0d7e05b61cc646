// fish_bench_quant: quantiser and dequantiser throughput (ns per weight, one
// thread, best of 5 runs over the row) and the
// relative RMS error of quantize -> dequantize on Gaussian data, per type,
// beside the round-to-nearest baselines of the K formats.
//   fish_bench_quant [n_weights (default 2^20)]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "quant_test_util.h"

using namespace fish;

int main(int argc, char** argv) {
  const int64_t n = argc > 1 ? (std::atoll(argv[1]) / 256) * 256 : (1 << 20);
  const std::vector<float> x = test::gaussian(size_t(n), 1234);
  const GgmlType types[] = {GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K, GgmlType::Q4_0,
                            GgmlType::Q8_0, GgmlType::Q8_1, GgmlType::Q8_K, GgmlType::F16, GgmlType::BF16};
  std::printf("%-6s %12s %12s %14s\n", "type", "quant ns/w", "dequant ns/w", "rel RMS err %");
  for (GgmlType t : types) {
    std::vector<uint8_t> q(test::row_bytes(t, n));
    std::vector<float> y(static_cast<size_t>(n));
    // The best of several runs (the machine is shared: the minimum is the
    // least disturbed one); the first run also touches q's pages.
    double qns = 1e30, dns = 1e30;
    for (int rep = 0; rep < 5; ++rep) {
      auto t0 = std::chrono::steady_clock::now();
      quantize_row(t, x.data(), q.data(), n);
      auto t1 = std::chrono::steady_clock::now();
      dequant_row(t, q.data(), y.data(), n);
      auto t2 = std::chrono::steady_clock::now();
      qns = std::min(qns, std::chrono::duration<double, std::nano>(t1 - t0).count() / double(n));
      dns = std::min(dns, std::chrono::duration<double, std::nano>(t2 - t1).count() / double(n));
    }
    std::printf("%-6s %12.2f %12.3f %14.4f\n", ggml_type_name(t).c_str(), qns, dns,
                100 * test::rel_rms(x.data(), y.data(), size_t(n)));
  }
  const auto b4 = test::rtn_affine_k(x, 15), b5 = test::rtn_affine_k(x, 31), b6 = test::rtn_q6_k(x);
  std::printf("round-to-nearest baselines: Q4_K %.4f %%  Q5_K %.4f %%  Q6_K %.4f %%\n",
              100 * test::rel_rms(x.data(), b4.data(), size_t(n)), 100 * test::rel_rms(x.data(), b5.data(), size_t(n)),
              100 * test::rel_rms(x.data(), b6.data(), size_t(n)));
  return 0;
}
