// The backend kernel benchmark (see kernel_bench.h).
#include "backend/kernel_bench.h"

#include <algorithm>
#include <array>
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

// One MoE row (see kernel_bench.h): uploads, the span, the timings; every
// weight and the span released before it returns.
KernelBenchMoeRow bench_moe(ComputeBackend& be, GgmlType t, const KernelBenchMoeShape& sh, const KernelBenchOptions& o,
                            ThreadPool* pool, uint64_t& seed) {
  KernelBenchMoeRow row;
  row.type = ggml_type_name(t);
  row.shape = sh;
  const int64_t E = sh.n_embd, F = sh.n_ff, NE = sh.n_expert, K = sh.n_used, L = sh.n_layers;
  // The attention, as little as a span takes: one F16 head of 32; for K-quant
  // experts two heads of 128 in the experts' type, so a GPU span takes the
  // decode on B32 rows a K-quant model gets (its matrices all K-quants).
  const auto info = ggml_type_info(t);
  const bool kq = info && info->block_size == QK_K;
  const GgmlType at = kq ? t : GgmlType::F16;
  const int64_t n_head = kq ? 2 : 1, head_dim = kq ? 128 : 32, kHead = n_head * head_dim;
  const auto rb_e = ggml_row_bytes(uint32_t(t), E), rb_f = ggml_row_bytes(uint32_t(t), F);
  if (!rb_e || !rb_f) {
    row.error = "n_embd " + std::to_string(E) + " / n_ff " + std::to_string(F) + " is not a whole number of " + row.type +
                " blocks";
    return row;
  }
  const uint64_t gate_bytes = uint64_t(F) * *rb_e, down_bytes = uint64_t(E) * *rb_f;
  const uint64_t expert_bytes = 2 * gate_bytes + down_bytes;
  row.token_bytes = uint64_t(L) * uint64_t(K) * expert_bytes;
  // Host copies: one stack per matrix kind (gate and up share their bytes).
  const std::vector<uint8_t> gu = make_matrix(t, E, F * NE, *rb_e, seed++);
  const std::vector<uint8_t> dn = make_matrix(t, F, E * NE, *rb_f, seed++);
  const std::vector<uint8_t> attn = make_matrix(at, E, kHead, *ggml_row_bytes(uint32_t(at), E), seed++);
  const std::vector<uint8_t> attn_o = make_matrix(at, kHead, E, *ggml_row_bytes(uint32_t(at), kHead), seed++);
  const std::vector<float> ones(size_t(E), 1.0f);

  std::vector<BackendWeight*> all;
  BackendSpan* span = nullptr;
  auto up = [&](const char* name, GgmlType ty, int64_t n_in, int64_t n_out, int64_t n_mat, const std::vector<uint8_t>& b) {
    WeightDesc d;
    d.name = name, d.type = ty, d.n_in = n_in, d.n_out = n_out, d.n_mat = n_mat, d.data = b.data(), d.nbytes = b.size();
    BackendWeight* w = be.upload(d);
    if (!w) throw Error(std::string("upload ") + name + ": " + be.last_error());
    all.push_back(w);
    return w;
  };
  try {
    BackendWeight* q = up("moe.attn_q", at, E, kHead, 1, attn);
    BackendWeight* k = up("moe.attn_k", at, E, kHead, 1, attn);
    BackendWeight* v = up("moe.attn_v", at, E, kHead, 1, attn);
    BackendWeight* out = up("moe.attn_output", at, kHead, E, 1, attn_o);
    const uint64_t set_bytes = uint64_t(NE) * expert_bytes;
    const uint64_t want = std::min<uint64_t>(o.group_bytes, be.memory_free() / 2);
    const int copies = int(std::clamp<uint64_t>(want / std::max<uint64_t>(1, set_bytes), 1, uint64_t(L)));
    std::vector<std::array<BackendWeight*, 3>> sets;
    for (int c = 0; c < copies; ++c)
      sets.push_back({up("moe.ffn_gate_exps", t, E, F, NE, gu), up("moe.ffn_up_exps", t, E, F, NE, gu),
                      up("moe.ffn_down_exps", t, F, E, NE, dn)});
    row.copies = copies;
    std::vector<SpanLayer> layers(static_cast<size_t>(L));
    for (int64_t l = 0; l < L; ++l) {
      // A router of its own per layer (f32, as GGUF MoE files keep it): each layer chooses its own experts.
      const std::vector<uint8_t> r = make_matrix(GgmlType::F32, E, NE, uint64_t(E) * 4, seed++);
      BackendWeight* router = up("moe.ffn_gate_inp", GgmlType::F32, E, NE, 1, r);
      const auto& st = sets[size_t(l % copies)];
      layers[size_t(l)].tensors = {
          {TensorRole::AttnNorm, nullptr, ones.data(), E}, {TensorRole::FfnNorm, nullptr, ones.data(), E},
          {TensorRole::AttnQ, q},  {TensorRole::AttnK, k},  {TensorRole::AttnV, v},  {TensorRole::AttnOut, out},
          {TensorRole::FfnRouter, router}, {TensorRole::FfnGateExps, st[0]}, {TensorRole::FfnUpExps, st[1]},
          {TensorRole::FfnDownExps, st[2]}};
    }
    SpanDesc d;
    d.n_embd = int32_t(E), d.n_head = int32_t(n_head), d.n_head_kv = int32_t(n_head), d.head_dim = int32_t(head_dim);
    d.n_ff = 0;
    d.n_ctx = std::max(1, o.prefill) + 1;
    d.arch.n_rot = int32_t(head_dim);
    d.arch.n_expert = int32_t(NE), d.arch.n_expert_used = int32_t(K), d.arch.gating = Gating::SoftmaxTopKNorm;
    d.arch.n_ff_expert = int32_t(F);
    d.layers = layers;
    span = be.span_create(d);
    if (!span) throw Error("span_create: " + be.last_error());

    std::mt19937_64 rng(seed++);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    const int n_pp = std::max(1, o.prefill);
    std::vector<float> x0(size_t(n_pp) * size_t(E)), x;
    for (auto& e : x0) e = nd(rng);
    std::vector<int32_t> pos(static_cast<size_t>(n_pp));
    for (int i = 0; i < n_pp; ++i) pos[size_t(i)] = i;
    auto forward = [&](int n) {
      x.assign(x0.begin(), x0.begin() + ptrdiff_t(size_t(n) * size_t(E)));
      SpanBatch b;
      b.n_tok = n, b.x = x.data(), b.pos = pos.data(), b.x_out = true;
      return be.span_forward(span, b) && be.span_kv_truncate(span, 0, 0);
    };
    double sec = 0;
    be.profile();  // what came before this span is not its profile
    if (!median_time(std::max(1, o.reps), o.warm_ms, [&] { return forward(1); }, &sec))
      throw Error("span_forward (decode): " + be.last_error());
    row.decode_gbs = double(row.token_bytes) / sec / 1e9;
    row.layer_us = sec / double(L) * 1e6;
    // The prefill where it takes seconds, not hours (a plain C++ backend: one
    // token's ~0.1-1 s times the tokens): skipped (0) past 20 s by that estimate.
    if (o.prefill > 4 && sec * o.prefill <= 20.0) {
      if (!median_time(std::max(1, o.reps / 2), o.warm_ms / 3, [&] { return forward(o.prefill); }, &sec))
        throw Error("span_forward (prefill): " + be.last_error());
      row.prefill_gflops = 2.0 * 3.0 * double(E) * double(F) * double(K) * double(L) * o.prefill / sec / 1e9;
    }
    row.profile = be.profile();
  } catch (const Error& e) {
    row.error = e.what();
  }
  if (span) be.span_destroy(span);
  for (BackendWeight* w : all) be.release(w);
  // The CPU: one token through k experts (their gate, up and down: the same bytes).
  if (row.error.empty() && pool && t != GgmlType::FQ3) {
    std::vector<float> xe(size_t(std::max(E, F)), 0.5f), y(size_t(std::max(E, F)));
    auto view = [&](const std::vector<uint8_t>& b, int64_t n_in, int64_t n_out, uint64_t rb, int64_t e) {
      WeightView w;
      w.type = t, w.data = b.data() + uint64_t(e) * uint64_t(n_out) * rb, w.n_in = n_in, w.n_out = n_out, w.row_bytes = rb;
      return w;
    };
    double sec = 0;
    if (median_time(std::max(1, o.reps), 0,
                    [&] {
                      for (int64_t e = 0; e < K; ++e) {
                        matmul(*pool, view(gu, E, F, *rb_e, e), xe.data(), 1, y.data());
                        matmul(*pool, view(gu, E, F, *rb_e, e), xe.data(), 1, y.data());
                        matmul(*pool, view(dn, F, E, *rb_f, e), xe.data(), 1, y.data());
                      }
                      return true;
                    },
                    &sec))
      row.cpu_gbs = double(K) * double(expert_bytes) / sec / 1e9;
  }
  return row;
}

}  // namespace

const std::vector<KernelBenchMoeShape>& kernel_bench_moe_shapes() {
  static const std::vector<KernelBenchMoeShape> shapes = {{"qwen3-30b-a3b", 2048, 768, 128, 8, 48},
                                                          {"mixtral-8x7b", 4096, 14336, 8, 2, 32}};
  return shapes;
}

void parse_kernel_bench_shapes(const std::string& s, KernelBenchOptions& o) {
  size_t p = 0;
  while (p <= s.size()) {
    const size_t q = std::min(s.find(',', p), s.size());
    const std::string item = s.substr(p, q - p);
    p = q + 1;
    const auto& named = kernel_bench_moe_shapes();
    const auto moe = std::find_if(named.begin(), named.end(), [&](const KernelBenchMoeShape& m) { return m.name == item; });
    if (moe != named.end()) {
      o.moe_shapes.push_back(*moe);
      continue;
    }
    long long a = 0, b = 0;
    char x = 0, extra = 0;
    if (std::sscanf(item.c_str(), "%lld%c%lld%c", &a, &x, &b, &extra) != 3 || (x != 'x' && x != 'X') || a <= 0 ||
        b <= 0 || a > (1ll << 24) || b > (1ll << 24))
      throw Error("kernel bench: bad shape '" + item + "' (want n_in x n_out, e.g. 4096x14336, or qwen3-30b-a3b, mixtral-8x7b)");
    o.shapes.push_back({a, b});
  }
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
  const bool defaults = o.shapes.empty() && o.moe_shapes.empty();  // no shapes given: the 8B's and both MoE models'
  const auto shapes = defaults ? std::vector<KernelBenchShape>{{4096, 14336}, {14336, 4096}, {4096, 128256}} : o.shapes;
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
  const std::vector<KernelBenchMoeShape>& moe = defaults ? kernel_bench_moe_shapes() : o.moe_shapes;
  if (be.has_spans())
    for (const KernelBenchMoeShape& sh : moe) {
      if (sh.n_embd < 8 || sh.n_ff < 1 || sh.n_expert < 1 || sh.n_used < 1 || sh.n_used > sh.n_expert || sh.n_layers < 1)
        throw Error("kernel bench: bad MoE shape '" + sh.name + "'");
      for (GgmlType t : types)
        if (t != GgmlType::F32 && be.supports(t)) rep.moe_rows.push_back(bench_moe(be, t, sh, o, pool.get(), seed));
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
    s += "\n], \"moe_rows\": [";
    for (size_t i = 0; i < r.moe_rows.size(); ++i) {
      const auto& w = r.moe_rows[i];
      std::snprintf(buf, sizeof buf,
                    "%s\n  {\"type\": \"%s\", \"shape\": \"%s\", \"n_embd\": %lld, \"n_ff\": %lld, \"n_expert\": %d, "
                    "\"n_used\": %d, \"n_layers\": %d, \"token_bytes\": %llu, \"copies\": %d, \"decode_gbs\": %.2f, "
                    "\"layer_us\": %.2f, \"prefill_gflops\": %.2f, \"cpu_gbs\": %.2f, \"error\": \"%s\"}",
                    i ? "," : "", w.type.c_str(), w.shape.name.c_str(), (long long)w.shape.n_embd, (long long)w.shape.n_ff,
                    w.shape.n_expert, w.shape.n_used, w.shape.n_layers, (unsigned long long)w.token_bytes, w.copies,
                    w.decode_gbs, w.layer_us, w.prefill_gflops, w.cpu_gbs, w.error.c_str());
      s += buf;
    }
    s += "\n]}\n";
    return s;
  }
  s = "backend: " + r.backend + "\n";
  if (!r.rows.empty()) {  // only MoE shapes asked for: no matrix table
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
  }
  if (r.moe_rows.empty()) return s;
  std::snprintf(buf, sizeof buf, "%s| %-5s | %-13s | %13s | %7s | %8s | %6s | %11s | %8s | %10s | %8s | %7s |\n",
                r.rows.empty() ? "" : "\n", "type",
                "MoE", "n_embd x n_ff", "experts", "MB/token", "copies", "decode GB/s", "layer us", "pp GFLOP/s",
                "CPU GB/s", "GPU/CPU");
  s += buf;
  s += "| ----- | ------------- | ------------- | ------- | -------- | ------ | ----------- | -------- | ---------- | -------- | ------- |\n";
  for (const auto& w : r.moe_rows) {
    const std::string shape = std::to_string(w.shape.n_embd) + "x" + std::to_string(w.shape.n_ff);
    const std::string ex = std::to_string(w.shape.n_used) + "/" + std::to_string(w.shape.n_expert);
    if (!w.error.empty()) {
      std::snprintf(buf, sizeof buf, "| %-5s | %-13s | %13s | %7s | failed: %s\n", w.type.c_str(), w.shape.name.c_str(),
                    shape.c_str(), ex.c_str(), w.error.c_str());
      s += buf;
      continue;
    }
    std::snprintf(buf, sizeof buf, "| %-5s | %-13s | %13s | %7s | %8.1f | %6d | %11.1f | %8.1f | %10.1f | %8.1f | %6.1fx |\n",
                  w.type.c_str(), w.shape.name.c_str(), shape.c_str(), ex.c_str(), double(w.token_bytes) / 1048576.0,
                  w.copies, w.decode_gbs, w.layer_us, w.prefill_gflops, w.cpu_gbs,
                  w.cpu_gbs > 0 ? w.decode_gbs / w.cpu_gbs : 0.0);
    s += buf;
  }
  std::snprintf(buf, sizeof buf,
                "MoE: one token through all layers of k chosen experts (attention one F16 head of 32, K-quants: two heads "
                "of 128 in the type; an f32 router per layer); "
                "decode GB/s: the chosen experts' bytes / the forward's wall clock; pp: n_tok %d, the experts' FLOPs "
                "(0: skipped, over 20 s); CPU: one layer's k experts\n",
                r.prefill);
  s += buf;
  for (const auto& w : r.moe_rows)
    if (!w.profile.empty()) s += "\nprofile, " + w.type + " " + w.shape.name + " (warm-up included):\n" + w.profile + "\n";
  return s;
}

}  // namespace fish
