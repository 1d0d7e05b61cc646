// Shared helpers of the fish_vulkan tests (see vk_test_util.h).
#include "vk_test_util.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>

#include "cpu/matmul.h"
#include "cpu/moe_routing.h"
#include "common/fp16.h"
#include "kernels.h"
#include "quant/blocks.h"
#include "quant/quant.h"

namespace fish::vktest {

const vk::VkConfig& test_config() {
  static const vk::VkConfig cfg = [] {
    vk::VkConfig c = vk::VkConfig::from_env();
    if (c.gpu == vk::VkConfig::GpuMode::Default && c.error.empty() && vk::probe_devices(c, nullptr).chosen < 0)
      c.gpu = vk::VkConfig::GpuMode::Cpu;  // no GPU here: lavapipe, if installed
    return c;
  }();
  return cfg;
}

vk::VulkanBackend::Options test_options(const vk::VkConfig& cfg) {
  vk::VulkanBackend::Options o;
  o.config = cfg;
  return o;
}

std::unique_ptr<vk::VulkanBackend> open_backend(const std::string& test, vk::VulkanBackend::Options opt) {
  auto be = std::make_unique<vk::VulkanBackend>(opt);
  if (!be->open()) {
    skip_reason() = test + ": no Vulkan device: " + be->error();
    return nullptr;
  }
  std::printf("%s: on %s\n", test.c_str(), be->status().c_str());
  return be;
}

std::string& skip_reason() {
  static std::string s;
  return s;
}

std::string type_name(GgmlType t) { return ggml_type_name(t); }

Matrix random_matrix(GgmlType type, int64_t n_in, int64_t n_out, uint64_t seed) {
  Matrix m;
  m.type = type;
  m.n_in = n_in;
  m.n_out = n_out;
  m.row_bytes = *ggml_row_bytes(uint32_t(type), n_in);
  m.data.resize(m.row_bytes * uint64_t(n_out));
  m.name = type_name(type) + " " + std::to_string(n_out) + "x" + std::to_string(n_in);
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::uniform_real_distribution<float> ud(-2.0f, 0.0f);
  std::vector<float> row(static_cast<size_t>(n_in));
  for (int64_t r = 0; r < n_out; ++r) {
    const float scale = 0.05f * std::pow(10.0f, ud(rng));
    for (auto& v : row) {
      v = nd(rng) * scale;
      if ((rng() & 255) == 0) v *= 8.0f;  // outliers stress the block scales
    }
    quantize_row(type, row.data(), m.data.data() + uint64_t(r) * m.row_bytes, n_in);
  }
  return m;
}

std::vector<float> random_x(int n_tok, int64_t n_in, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> x(size_t(n_tok) * size_t(n_in));
  for (auto& v : x) v = nd(rng);
  return x;
}

vk::WeightUpload upload_desc(const Matrix& m) {
  vk::WeightUpload u;
  u.type = uint32_t(m.type);
  u.name = m.name.c_str();
  u.n_in = m.n_in;
  u.n_out = m.n_out;
  u.data = m.data.data();
  u.nbytes = m.data.size();
  return u;
}

double bound_ratio(const Matrix& w, const float* x, int n_tok, const float* y, int64_t* n_bad, double rel) {
  WeightView v;
  v.type = w.type;
  v.data = w.data.data();
  v.n_in = w.n_in;
  v.n_out = w.n_out;
  v.row_bytes = w.row_bytes;
  std::vector<float> ref(size_t(n_tok) * size_t(w.n_out));
  matmul_ref_f32(v, x, n_tok, ref.data());
  // Σ_r |w_r| (element-wise column sums of |W|), then S_t = Σ_i colsum_i |x_ti|.
  std::vector<double> colsum(size_t(w.n_in), 0.0);
  std::vector<float> row(static_cast<size_t>(w.n_in));
  for (int64_t r = 0; r < w.n_out; ++r) {
    dequant_row(w.type, w.data.data() + uint64_t(r) * w.row_bytes, row.data(), w.n_in);
    for (int64_t i = 0; i < w.n_in; ++i) colsum[size_t(i)] += std::fabs(double(row[size_t(i)]));
  }
  double worst = 0;
  int64_t bad = 0;
  for (int t = 0; t < n_tok; ++t) {
    double s = 0;
    for (int64_t i = 0; i < w.n_in; ++i) s += colsum[size_t(i)] * std::fabs(double(x[size_t(t) * size_t(w.n_in) + size_t(i)]));
    const double bound = rel * s / double(w.n_out);
    for (int64_t r = 0; r < w.n_out; ++r) {
      const size_t k = size_t(t) * size_t(w.n_out) + size_t(r);
      const double err = std::fabs(double(y[k]) - double(ref[k]));
      const double ratio = bound > 0 ? err / bound : (err > 0 ? INFINITY : 0.0);
      if (!(ratio <= 1.0)) ++bad;  // also catches NaN
      if (!(ratio <= worst)) worst = std::isnan(ratio) ? INFINITY : ratio;
    }
  }
  *n_bad = bad;
  return worst;
}

std::vector<uint32_t> cpu_q8_row(const float* x, int n, uint32_t bs) {
  const uint32_t words = vk::MatmulKernels::q8_row_words(bs, uint32_t(n));
  std::vector<uint32_t> out(words, 0);
  auto* qs = reinterpret_cast<int8_t*>(out.data());
  float* d = reinterpret_cast<float*>(out.data() + n / 4);
  auto* sums = reinterpret_cast<int32_t*>(out.data() + n / 4 + n / int(bs));
  const uint32_t sg = bs == 256 ? 16 : 32;
  if (bs == 256) {
    std::vector<BlockQ8_K> q(size_t(n) / QK_K);
    quantize_row(GgmlType::Q8_K, x, q.data(), n);
    for (size_t b = 0; b < q.size(); ++b) {
      std::memcpy(qs + 256 * b, q[b].qs, 256);
      d[b] = q[b].d;
    }
  } else {
    std::vector<BlockQ8_0> q(size_t(n) / QK8_0);
    quantize_row(GgmlType::Q8_0, x, q.data(), n);
    for (size_t b = 0; b < q.size(); ++b) {
      std::memcpy(qs + 32 * b, q[b].qs, 32);
      d[b] = fp16_to_fp32(q[b].d);
    }
  }
  for (int g = 0; g < n / int(sg); ++g) {
    int s = 0;
    for (uint32_t i = 0; i < sg; ++i) s += qs[g * int(sg) + int(i)];
    sums[g] = s;
  }
  return out;
}

std::vector<double> b32_values(const std::vector<uint32_t>& row, int n) {
  const auto* qs = reinterpret_cast<const int8_t*>(row.data());
  const auto* d = reinterpret_cast<const float*>(row.data() + n / 4);
  std::vector<double> v(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) v[size_t(i)] = double(d[i / 32]) * qs[i];
  return v;
}

RouteCheck check_route_words(const uint32_t* words, const float* logits, int n_expert, int k, bool renorm) {
  std::vector<int32_t> ids(static_cast<size_t>(k));
  std::vector<float> wts(static_cast<size_t>(k));
  moe_route(logits, n_expert, k, renorm, ids.data(), wts.data());
  RouteCheck c;
  for (int j = 0; j < k; ++j) {
    c.id_bad += words[2 * j] != uint32_t(ids[size_t(j)]);
    float gw;
    std::memcpy(&gw, &words[2 * j + 1], 4);
    c.wrel = std::max(c.wrel, std::fabs(double(gw) - wts[size_t(j)]) / std::max(1e-30, double(wts[size_t(j)])));
  }
  return c;
}

std::vector<uint32_t> cpu_b32_row(const float* x, int n) {
  std::vector<uint32_t> out(vk::MatmulKernels::b32_row_words(uint32_t(n)), 0);
  auto* qs = reinterpret_cast<int8_t*>(out.data());
  float* d = reinterpret_cast<float*>(out.data() + n / 4);
  auto* sums = reinterpret_cast<int32_t*>(out.data() + n / 4 + n / 32);
  std::vector<float> pad(QK_K, 0.0f);
  BlockQ8_K q;
  for (int b = 0; b < n / 32; ++b) {
    std::copy(x + 32 * b, x + 32 * b + 32, pad.begin());
    quantize_row(GgmlType::Q8_K, pad.data(), &q, QK_K);
    std::memcpy(qs + 32 * b, q.qs, 32);
    d[b] = q.d;
  }
  for (int g = 0; g < n / 16; ++g) {
    int s = 0;
    for (int i = 0; i < 16; ++i) s += qs[16 * g + i];
    sums[g] = s;
  }
  return out;
}

}  // namespace fish::vktest
