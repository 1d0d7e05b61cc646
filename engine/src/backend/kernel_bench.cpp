// The backend kernel benchmark (see kernel_bench.h).
#include "backend/kernel_bench.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>

#include "common/error.h"
#include "cpu/matmul.h"
#include "cpu/thread_pool.h"
#include "quant/quant.h"

namespace fish {
namespace {

// FQ3 (fish's re-quantised device layout) is timed where the backend takes it.
const GgmlType kDefaultTypes[] = {GgmlType::F32,  GgmlType::F16,  GgmlType::Q4_0, GgmlType::Q8_0,
                                  GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K, GgmlType::FQ3};

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// A matrix of real quantised rows: 64 distinct random rows (quantize_row),
// repeated to n_out rows. Repetition does not help any cache: the matrix is far
// larger than one, and every row is still read once per product.
std::vector<uint8_t> make_matrix(GgmlType t, int64_t n_in, int64_t n_out, uint64_t row_bytes, uint64_t seed) {
  const int64_t distinct = std::min<int64_t>(64, n_out);
  std::vector<uint8_t> rows(row_bytes * uint64_t(distinct));
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> nd(0.0f, 0.02f);
  std::vector<float> f(size_t(n_in), 0.0f);
  for (int64_t r = 0; r < distinct; ++r) {
    for (auto& v : f) v = nd(rng);
    quantize_row(t, f.data(), rows.data() + uint64_t(r) * row_bytes, n_in);
  }
  std::vector<uint8_t> m(row_bytes * uint64_t(n_out));
  for (int64_t r = 0; r < n_out; ++r)
    std::memcpy(m.data() + uint64_t(r) * row_bytes, rows.data() + uint64_t(r % distinct) * row_bytes, row_bytes);
  return m;
}

// Median seconds of fn over reps runs, after repeating it for warm_ms (at least
// once): first-call costs (pipeline creation) stay out, and a GPU that idled at
// a low clock gets time to clock up. false when a run fails.
template <class Fn>
bool median_time(int reps, int warm_ms, Fn&& fn, double* out) {
  const double t_warm = now_s();
  do {
    if (!fn()) return false;
  } while ((now_s() - t_warm) * 1e3 < warm_ms);
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    const double t0 = now_s();
    if (!fn()) return false;
    t.push_back(now_s() - t0);
  }
  std::sort(t.begin(), t.end());
  *out = t[t.size() / 2];
  return true;
}

}  // namespace

std::vector<KernelBenchShape> parse_kernel_bench_shapes(const std::string& s) {
  std::vector<KernelBenchShape> out;
  size_t p = 0;
  while (p <= s.size()) {
    const size_t q = std::min(s.find(',', p), s.size());
    const std::string item = s.substr(p, q - p);
    long long a = 0, b = 0;
    char x = 0, extra = 0;
    if (std::sscanf(item.c_str(), "%lld%c%lld%c", &a, &x, &b, &extra) != 3 || (x != 'x' && x != 'X') || a <= 0 ||
        b <= 0 || a > (1ll << 24) || b > (1ll << 24))
      throw Error("kernel bench: bad shape '" + item + "' (want n_in x n_out, e.g. 4096x14336)");
    out.push_back({a, b});
    p = q + 1;
  }
  return out;
}

std::vector<GgmlType> parse_kernel_bench_types(const std::string& s) {
  std::vector<GgmlType> out;
  size_t p = 0;
  while (p <= s.size()) {
    const size_t q = std::min(s.find(',', p), s.size());
    const std::string item = s.substr(p, q - p);
    bool found = false;
    for (GgmlType t : kDefaultTypes)
      if (ggml_type_name(t) == item) {
        out.push_back(t);
        found = true;
      }
    if (!found) throw Error("kernel bench: unknown or unsupported type '" + item + "' (F32, F16, Q4_0, Q8_0, Q4_K, Q5_K, Q6_K, FQ3)");
    p = q + 1;
  }
  return out;
}

KernelBenchReport run_kernel_bench(ComputeBackend& be, const KernelBenchOptions& o) {
  KernelBenchReport rep;
  rep.backend = be.describe();
  rep.prefill = o.prefill;
  const auto types = o.types.empty() ? std::vector<GgmlType>(std::begin(kDefaultTypes), std::end(kDefaultTypes)) : o.types;
  const auto shapes = o.shapes.empty() ? std::vector<KernelBenchShape>{{4096, 14336}, {14336, 4096}, {4096, 128256}}
                                       : o.shapes;
  const int reps = std::max(1, o.reps);
  std::unique_ptr<ThreadPool> pool;
  if (o.cpu) {
    pool = std::make_unique<ThreadPool>(o.n_threads);
    rep.cpu_threads = pool->size();
  }
  uint64_t seed = o.seed;
  for (GgmlType t : types) {
    if (!be.supports(t)) continue;
    for (const auto& sh : shapes) {
      KernelBenchRow row;
      row.type = ggml_type_name(t);
      row.n_in = sh.n_in;
      row.n_out = sh.n_out;
      const auto info = ggml_type_info(t);
      const auto rb = ggml_row_bytes(uint32_t(t), sh.n_in);
      if (!info || !rb) {
        row.error = "n_in " + std::to_string(sh.n_in) + " is not a whole number of " + row.type + " blocks";
        rep.rows.push_back(row);
        continue;
      }
      const uint64_t row_bytes = *rb;
      const std::vector<uint8_t> m = make_matrix(t, sh.n_in, sh.n_out, row_bytes, seed++);
      row.matrix_bytes = m.size();

      WeightDesc d;
      const std::string name = "bench." + row.type + "." + std::to_string(sh.n_in) + "x" + std::to_string(sh.n_out);
      d.name = name.c_str();
      d.type = t;
      d.n_in = sh.n_in;
      d.n_out = sh.n_out;
      d.data = m.data();
      d.nbytes = m.size();
      const uint64_t free = be.memory_free();
      const uint64_t want = std::min<uint64_t>(o.group_bytes, free / 2);
      const int copies = int(std::clamp<uint64_t>(want / std::max<uint64_t>(1, m.size()), 1, 64));
      std::vector<BackendWeight*> ws;
      for (int c = 0; c < copies; ++c) {
        BackendWeight* w = be.upload(d);
        if (!w) {
          if (ws.empty()) row.error = "upload: " + be.last_error();
          break;
        }
        ws.push_back(w);
      }
      row.copies = int(ws.size());
      if (!ws.empty()) {
        std::mt19937_64 rng(seed++);
        std::normal_distribution<float> nd(0.0f, 1.0f);
        std::vector<float> x(size_t(std::max(1, o.prefill)) * size_t(sh.n_in));
        for (auto& v : x) v = nd(rng);
        std::vector<std::vector<float>> ys(ws.size(), std::vector<float>(size_t(sh.n_out)));
        std::vector<float*> yp;
        for (auto& y : ys) yp.push_back(y.data());
        double s = 0;
        if (median_time(reps, o.warm_ms, [&] { return be.matmul_group(ws.data(), int(ws.size()), x.data(), 1, yp.data()); }, &s))
          row.matvec_gbs = double(m.size()) * double(ws.size()) / s / 1e9;
        else
          row.error = "matmul_group: " + be.last_error();
        if (row.error.empty() && median_time(reps, o.warm_ms / 3, [&] { return be.matmul(ws[0], x.data(), 1, yp[0]); }, &s))
          row.call_us = s * 1e6;
        if (row.error.empty() && o.prefill > 4) {
          std::vector<float> y(size_t(o.prefill) * size_t(sh.n_out));
          if (median_time(std::max(1, reps / 2), o.warm_ms / 3, [&] { return be.matmul(ws[0], x.data(), o.prefill, y.data()); }, &s))
            row.prefill_gflops = 2.0 * double(sh.n_in) * double(sh.n_out) * o.prefill / s / 1e9;
          else
            row.error = "matmul (prefill): " + be.last_error();
        }
        // The CPU's column: FQ3 exists only as a device copy, its CPU kernel is
        // the scalar reference (for checks), not something to time.
        if (pool && t != GgmlType::FQ3) {
          WeightView v;
          v.type = t;
          v.data = m.data();
          v.n_in = sh.n_in;
          v.n_out = sh.n_out;
          v.row_bytes = row_bytes;
          std::vector<float> y(size_t(std::max(1, o.prefill)) * size_t(sh.n_out));
          auto cpu = [&](int n_tok) {
            matmul(*pool, v, x.data(), n_tok, y.data());
            return true;
          };
          if (median_time(reps, 0, [&] { return cpu(1); }, &s)) row.cpu_matvec_gbs = double(m.size()) / s / 1e9;
          if (o.prefill > 4 && median_time(1, 0, [&] { return cpu(o.prefill); }, &s))
            row.cpu_prefill_gflops = 2.0 * double(sh.n_in) * double(sh.n_out) * o.prefill / s / 1e9;
        }
      }
      for (BackendWeight* w : ws) be.release(w);
      rep.rows.push_back(row);
    }
  }
  return rep;
}

std::string format_kernel_bench(const KernelBenchReport& r, bool json) {
  std::string s;
  char buf[512];
  if (json) {
    std::snprintf(buf, sizeof buf, "{\"backend\": \"%s\", \"prefill\": %d, \"cpu_threads\": %d, \"rows\": [", r.backend.c_str(),
                  r.prefill, r.cpu_threads);
    s = buf;
    for (size_t i = 0; i < r.rows.size(); ++i) {
      const auto& w = r.rows[i];
      std::snprintf(buf, sizeof buf,
                    "%s\n  {\"type\": \"%s\", \"n_in\": %lld, \"n_out\": %lld, \"bytes\": %llu, \"copies\": %d, "
                    "\"matvec_gbs\": %.2f, \"call_us\": %.2f, \"prefill_gflops\": %.2f, \"cpu_matvec_gbs\": %.2f, "
                    "\"cpu_prefill_gflops\": %.2f, \"error\": \"%s\"}",
                    i ? "," : "", w.type.c_str(), (long long)w.n_in, (long long)w.n_out, (unsigned long long)w.matrix_bytes,
                    w.copies, w.matvec_gbs, w.call_us, w.prefill_gflops, w.cpu_matvec_gbs, w.cpu_prefill_gflops,
                    w.error.c_str());
      s += buf;
    }
    s += "\n]}\n";
    return s;
  }
  s = "backend: " + r.backend + "\n";
  std::snprintf(buf, sizeof buf, "| %-5s | %13s | %7s | %6s | %11s | %9s | %14s | %8s | %8s | %7s |\n", "type", "n_in x n_out", "MB",
                "copies", "matvec GB/s", "call us", "pp GFLOP/s", "CPU GB/s", "CPU GF/s", "GPU/CPU");
  s += buf;
  s += "| ----- | ------------- | ------- | ------ | ----------- | --------- | -------------- | -------- | -------- | ------- |\n";
  for (const auto& w : r.rows) {
    const std::string shape = std::to_string(w.n_in) + "x" + std::to_string(w.n_out);
    if (!w.error.empty()) {
      std::snprintf(buf, sizeof buf, "| %-5s | %13s | %7.1f | failed: %s\n", w.type.c_str(), shape.c_str(),
                    double(w.matrix_bytes) / 1048576.0, w.error.c_str());
      s += buf;
      continue;
    }
    std::snprintf(buf, sizeof buf, "| %-5s | %13s | %7.1f | %6d | %11.1f | %9.1f | %14.1f | %8.1f | %8.1f | %6.1fx |\n",
                  w.type.c_str(), shape.c_str(), double(w.matrix_bytes) / 1048576.0, w.copies, w.matvec_gbs, w.call_us,
                  w.prefill_gflops, w.cpu_matvec_gbs, w.cpu_prefill_gflops,
                  w.cpu_matvec_gbs > 0 ? w.matvec_gbs / w.cpu_matvec_gbs : 0.0);
    s += buf;
  }
  std::snprintf(buf, sizeof buf, "matvec: n_tok 1, all copies in one matmul_group (wall clock); pp: n_tok %d; CPU: %d threads\n",
                r.prefill, r.cpu_threads);
  s += buf;
  return s;
}

}  // namespace fish
