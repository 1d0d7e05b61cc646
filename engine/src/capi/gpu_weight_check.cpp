#include "capi/gpu_weight_check.h"

#include <cmath>
#include <cstdio>
#include <vector>

#include "backend/compute_backend.h"
#include "backend/kernel_bound.h"
#include "cpu/matmul.h"
#include "fish/fish.h"
#include "quant/quant.h"

namespace fish::capi {

int check_gpu_weight(ComputeBackend& be, ThreadPool& pool, const std::string& name, const char* tensor_name,
                     GgmlType type, const uint8_t* data, uint64_t nbytes, int64_t n_in, int64_t n_out,
                     std::mt19937_64& rng, const std::function<void(const GpuCheck&)>& emit) {
  WeightDesc d;
  d.name = tensor_name;
  d.type = type;
  d.n_in = n_in;
  d.n_out = n_out;
  d.data = data;
  d.nbytes = nbytes;
  BackendWeight* w = be.upload(d);
  if (!w) {
    emit({name, "upload failed: " + be.last_error(), FISH_CHECK_FAIL});
    return 1;
  }
  const uint64_t row_bytes = nbytes / uint64_t(n_out);
  // Σ_r |w_ri| per input column: the bound is Σ_i colsum_i |x_ti| / n_out.
  std::vector<double> colsum(static_cast<size_t>(n_in), 0.0);
  std::vector<float> row(static_cast<size_t>(n_in));
  for (int64_t r = 0; r < n_out; ++r) {
    dequant_row(type, data + uint64_t(r) * row_bytes, row.data(), n_in);
    for (int64_t i = 0; i < n_in; ++i) colsum[size_t(i)] += std::fabs(row[size_t(i)]);
  }
  const WeightView view{type, data, n_in, n_out, row_bytes};
  std::normal_distribution<float> nd(0.0f, 1.0f);
  int failures = 0;
  for (int n_tok : {1, 3, 37, 256}) {
    GpuCheck c{name + " n_tok=" + std::to_string(n_tok), "", FISH_CHECK_PASS};
    std::vector<float> x(size_t(n_tok * n_in)), y(size_t(n_tok * n_out), -12345.0f), ref(y.size());
    for (auto& v : x) v = nd(rng);
    if (!be.matmul(w, x.data(), n_tok, y.data())) {
      c.outcome = FISH_CHECK_FAIL;
      c.detail = "matmul failed: " + be.last_error();
    } else {
      std::vector<double> bound(static_cast<size_t>(n_tok));  // per token
      for (int tk = 0; tk < n_tok; ++tk) {
        double s = 0;
        for (int64_t i = 0; i < n_in; ++i) s += colsum[size_t(i)] * std::fabs(x[size_t(tk * n_in + i)]);
        bound[size_t(tk)] = 1e-3 * s / double(n_out);
      }
      auto worst_vs = [&](const std::vector<float>& want, double scale) {
        return backend::worst_bound_ratio(y.data(), want.data(), bound.data(), n_tok, n_out, scale).ratio;
      };
      matmul_ref_f32(view, x.data(), n_tok, ref.data());
      const double worst = worst_vs(ref, 1.0);
      double worst8 = INFINITY;  // vs the CPU's int8 product (5% of the bound): only when the f32 check fails
      if (!(worst <= 1.0)) {
        matmul(pool, view, x.data(), n_tok, ref.data());
        worst8 = worst_vs(ref, 0.05);
      }
      char buf[160];
      if (worst <= 1.0 || !(worst8 <= 1.0))
        std::snprintf(buf, sizeof buf, "max error %.3g%% of the bound", worst * 100);
      else
        std::snprintf(buf, sizeof buf,
                      "int8 activations: %.3g%% of 5%% of the bound vs the CPU's int8 product (%.3g%% of the bound vs f32)",
                      worst8 * 100, worst * 100);
      c.detail = buf;
      if (!(worst <= 1.0) && !(worst8 <= 1.0)) c.outcome = FISH_CHECK_FAIL;
    }
    if (c.outcome == FISH_CHECK_FAIL) ++failures;
    emit(c);
  }
  be.release(w);
  return failures;
}

}  // namespace fish::capi
