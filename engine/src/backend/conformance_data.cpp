// Conformance suite: synthetic weights of every type, the f32 reference and the
// spec's error bound.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <cstring>

#include "backend/conformance_internal.h"
#include "backend/kernel_bound.h"
#include "common/error.h"
#include "common/fp16.h"
#include "cpu/matmul.h"
#include "cpu/thread_pool.h"
#include "quant/blocks.h"
#include "quant/quant.h"

namespace fish::backend::conf {

void Runner::record(CheckResult r) {
  if (r.outcome == CheckOutcome::Pass) ++sum_.passed;
  if (r.outcome == CheckOutcome::Fail) ++sum_.failed;
  if (r.outcome == CheckOutcome::Skip) ++sum_.skipped;
  if (opts_.on_result) opts_.on_result(r);
  sum_.results.push_back(std::move(r));
}

// FQ3 (ABI 2.1, fish's re-quantised device layout) is checked like any type a
// plugin says it takes; one from before 2.1 says no and its checks are skipped.
const std::vector<GgmlType>& test_types() {
  static const std::vector<GgmlType> t = {GgmlType::F32,  GgmlType::F16,  GgmlType::BF16, GgmlType::Q4_0,
                                          GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::Q8_0,
                                          GgmlType::Q2_K, GgmlType::Q3_K, GgmlType::Q4_K, GgmlType::Q5_K,
                                          GgmlType::Q6_K, GgmlType::FQ3};
  return t;
}

std::vector<float> random_vector(size_t n, float scale, std::mt19937_64& rng) {
  std::uniform_real_distribution<float> u(-scale, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = u(rng);
  return v;
}

namespace {

// Writes a half at byte offset off of a block (blocks are byte arrays here:
// GGUF rows are not aligned for the block structs).
void put_half(uint8_t* block, size_t off, float v) {
  const uint16_t h = fp32_to_fp16(v);
  std::memcpy(block + off, &h, 2);
}

// Random bytes with sane scales for the types the host cannot quantise to:
// d about scale / (levels / 2), mins small, so the decoded values stay in the
// same range as the others (and finite).
void random_blocks(GgmlType t, uint8_t* row, int64_t n_blocks, size_t block_bytes, float scale, std::mt19937_64& rng) {
  std::uniform_int_distribution<int> byte(0, 255);
  std::uniform_real_distribution<float> unit(0.5f, 1.0f);
  for (int64_t b = 0; b < n_blocks; ++b) {
    uint8_t* blk = row + size_t(b) * block_bytes;
    for (size_t i = 0; i < block_bytes; ++i) blk[i] = uint8_t(byte(rng));
    switch (t) {
      case GgmlType::Q4_1:
        put_half(blk, offsetof(BlockQ4_1, d), scale / 8 * unit(rng));
        put_half(blk, offsetof(BlockQ4_1, m), -scale * unit(rng));
        break;
      case GgmlType::Q5_0: put_half(blk, offsetof(BlockQ5_0, d), scale / 16 * unit(rng)); break;
      case GgmlType::Q5_1:
        put_half(blk, offsetof(BlockQ5_1, d), scale / 16 * unit(rng));
        put_half(blk, offsetof(BlockQ5_1, m), -scale * unit(rng));
        break;
      case GgmlType::Q2_K:
        // value = d * (scale4) * q - dmin * (min4), scale4/min4 up to 15, q up to 3
        put_half(blk, offsetof(BlockQ2_K, d), scale / 24 * unit(rng));
        put_half(blk, offsetof(BlockQ2_K, dmin), scale / 30 * unit(rng));
        break;
      case GgmlType::Q3_K:
        // value = d * (6-bit signed scale) * (q in -4..3)
        put_half(blk, offsetof(BlockQ3_K, d), scale / 128 * unit(rng));
        break;
      default: throw Error("random_blocks: no generator for " + ggml_type_name(t));
    }
  }
}

}  // namespace

TestWeight make_weight(GgmlType t, int64_t n_out, int64_t n_in, float scale, std::mt19937_64& rng,
                       const std::string& name) {
  TestWeight w;
  w.type = t;
  w.n_in = n_in;
  w.n_out = n_out;
  w.name = name;
  const auto rb = ggml_row_bytes(uint32_t(t), n_in);
  if (!rb) throw Error("make_weight: " + std::to_string(n_in) + " is not a whole number of " + ggml_type_name(t) + " blocks");
  w.bytes.resize(size_t(*rb * uint64_t(n_out)));
  w.values.resize(size_t(n_out * n_in));
  const auto info = ggml_type_info(t);
  for (int64_t r = 0; r < n_out; ++r) {
    uint8_t* row = w.bytes.data() + size_t(r) * *rb;
    if (can_quantize(t)) {
      std::vector<float> v = random_vector(size_t(n_in), scale, rng);
      quantize_row(t, v.data(), row, n_in);
    } else {
      random_blocks(t, row, n_in / info->block_size, size_t(info->type_size), scale, rng);
    }
    dequant_row(t, row, w.values.data() + r * n_in, n_in);
  }
  return w;
}

std::vector<float> reference_product(const TestWeight& w, const float* x, int n_tok) {
  WeightView v;
  v.type = w.type;
  v.data = w.bytes.data();
  v.n_in = w.n_in;
  v.n_out = w.n_out;
  v.row_bytes = *ggml_row_bytes(uint32_t(w.type), w.n_in);
  std::vector<float> y(size_t(n_tok) * size_t(w.n_out));
  matmul_ref_f32(v, x, n_tok, y.data());
  return y;
}

// The CPU's own product (int8 activations for quantised weights, as llama.cpp's CPU).
std::vector<float> cpu_product(const TestWeight& w, const float* x, int n_tok) {
  static ThreadPool pool(1);
  const WeightView v{w.type, w.bytes.data(), w.n_in, w.n_out, *ggml_row_bytes(uint32_t(w.type), w.n_in)};
  std::vector<float> y(size_t(n_tok) * size_t(w.n_out));
  matmul(pool, v, x, n_tok, y.data());
  return y;
}

double bound_ratio(const TestWeight& w, const float* x, int n_tok, const float* y, std::string* where) {
  // The bound of token t: 1e-3 · Σ_r Σ_i |w_ri||x_ti| / n_out (the mass over the whole matrix).
  std::vector<double> bound(static_cast<size_t>(n_tok));
  for (int t = 0; t < n_tok; ++t) {
    const float* xt = x + int64_t(t) * w.n_in;
    double mass = 0.0;
    for (int64_t r = 0; r < w.n_out; ++r) {
      const float* wr = w.values.data() + r * w.n_in;
      for (int64_t i = 0; i < w.n_in; ++i) mass += std::fabs(double(wr[i]) * double(xt[i]));
    }
    bound[size_t(t)] = 1e-3 * mass / double(w.n_out);
  }
  // Largest |y - want| / (scale · bound), and where it is.
  auto worst_vs = [&](const std::vector<float>& want, double scale, const char* what, std::string* at) {
    const BoundWorst bw = worst_bound_ratio(y, want.data(), bound.data(), n_tok, w.n_out, scale);
    if (at && bw.ratio > 0) {
      const size_t i = size_t(int64_t(bw.tok) * w.n_out + bw.row);
      *at = "token " + std::to_string(bw.tok) + " row " + std::to_string(bw.row) + ": got " + fmt(y[i], 6) + ", " +
            what + " " + fmt(want[i], 6) + ", bound " + fmt(scale * bound[size_t(bw.tok)], 6);
    }
    return bw.ratio;
  };
  const double worst = worst_vs(reference_product(w, x, n_tok), 1.0, "reference", where);
  if (worst <= 1.0) return worst;
  // A backend with int8 activations (as the CPU's) is held to the CPU's own
  // product at 5% of the bound instead: the f32 bound is for f32 activations.
  std::string where8;
  const double worst8 = worst_vs(cpu_product(w, x, n_tok), 0.05, "the CPU's int8 product", &where8);
  if (worst8 <= 1.0) {
    if (where) *where = where8 + " (int8 activations)";
    return worst8;
  }
  return worst;
}

WeightDesc desc_of(const TestWeight& w) {
  WeightDesc d;
  d.name = w.name.c_str();
  d.type = w.type;
  d.n_in = w.n_in;
  d.n_out = w.n_out;
  d.data = w.bytes.data();
  d.nbytes = w.bytes.size();
  return d;
}

std::string fmt(double v, int prec) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*g", prec, v);
  return buf;
}

std::unique_ptr<PluginBackend> new_backend(const PluginLibrary* lib, const std::string& name, uint64_t budget) {
  fish_backend_config cfg{};
  cfg.struct_size = sizeof cfg;
  cfg.device_index = -1;
  cfg.memory_budget = budget;
  std::string err;
  auto be = PluginBackend::create(lib, name, cfg, &err);
  if (!be) fail(err);
  return be;
}

}  // namespace fish::backend::conf
