#include "moe_reference.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

#include "common/fp16.h"
#include "gguf/gguf_file.h"
#include "quant/quant.h"

namespace fish::test {

namespace {

// A matrix [n_out rows of n_in] (experts: n_mat of them), dequantised.
struct Mat {
  int64_t n_in = 0, n_out = 0;
  std::vector<float> w;
  // y[r] = Σ_i W[m][r][i] x[i], in double
  std::vector<double> mul(const std::vector<double>& x, int64_t m = 0) const {
    std::vector<double> y(static_cast<size_t>(n_out));
    const float* base = w.data() + m * n_out * n_in;
    for (int64_t r = 0; r < n_out; ++r) {
      double s = 0;
      const float* row = base + r * n_in;
      for (int64_t i = 0; i < n_in; ++i) s += double(row[i]) * x[size_t(i)];
      y[size_t(r)] = s;
    }
    return y;
  }
};

}  // namespace

struct MoeReference::Impl {
  std::unique_ptr<gguf::File> f;
  std::string arch;
  int64_t E = 0, L = 0, H = 0, HKV = 0, D = 0, NE = 0, K = 0, V = 0;
  double eps = 0, base = 10000;
  bool neox = false, qk_norm = false, qkv_bias = false, norm_topk = true;
  Mat tok, out;

  Mat mat(const std::string& name) const {
    const gguf::TensorInfo* t = f->tensor(name);
    if (!t) throw std::runtime_error("reference: no tensor " + name);
    Mat m;
    m.n_in = t->ne[0];
    m.n_out = t->ne[1];
    m.w.resize(size_t(t->n_elements()));
    dequant_row(t->type, t->data, m.w.data(), t->n_elements());
    return m;
  }
  std::vector<double> vec(const std::string& name) const {
    const Mat m = mat(name);
    return std::vector<double>(m.w.begin(), m.w.end());
  }
  void rmsnorm(std::vector<double>& x, const std::vector<double>& w, size_t off = 0, size_t n = 0) const {
    if (n == 0) n = x.size();
    double ss = 0;
    for (size_t i = 0; i < n; ++i) ss += x[off + i] * x[off + i];
    const double r = 1.0 / std::sqrt(ss / double(n) + eps);
    for (size_t i = 0; i < n; ++i) x[off + i] = x[off + i] * r * w[i];
  }
  void rope(std::vector<double>& v, int64_t heads, int64_t pos) const {
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t i = 0; i < D / 2; ++i) {
        const double theta = double(pos) * std::pow(base, -2.0 * double(i) / double(D));
        const double c = std::cos(theta), s = std::sin(theta);
        const size_t a = size_t(h * D + (neox ? i : 2 * i)), b = size_t(h * D + (neox ? i + D / 2 : 2 * i + 1));
        const double x0 = v[a], x1 = v[b];
        v[a] = x0 * c - x1 * s;
        v[b] = x0 * s + x1 * c;
      }
  }
};

MoeReference::MoeReference(const std::string& path) : impl_(std::make_shared<Impl>()) {
  Impl& m = *impl_;
  m.f = gguf::File::open(path);
  m.arch = std::string(*m.f->get_str("general.architecture"));
  const std::string p = m.arch + ".";
  m.E = *m.f->get_u32(p + "embedding_length");
  m.L = *m.f->get_u32(p + "block_count");
  m.H = *m.f->get_u32(p + "attention.head_count");
  m.HKV = *m.f->get_u32(p + "attention.head_count_kv");
  m.D = m.f->get_u32(p + "attention.key_length") ? *m.f->get_u32(p + "attention.key_length") : m.E / m.H;
  m.NE = m.f->get_u32(p + "expert_count") ? *m.f->get_u32(p + "expert_count") : 0;  // 0: dense
  m.K = m.NE ? *m.f->get_u32(p + "expert_used_count") : 0;
  m.eps = *m.f->get_f64(p + "attention.layer_norm_rms_epsilon");
  if (auto b = m.f->get_f64(p + "rope.freq_base")) m.base = *b;
  m.neox = m.arch != "llama";
  m.qk_norm = m.arch == "qwen3moe";
  m.qkv_bias = m.arch == "qwen2moe";
  m.norm_topk = m.arch != "qwen2moe";
  m.tok = m.mat("token_embd.weight");
  m.out = m.f->tensor("output.weight") ? m.mat("output.weight") : m.tok;
  m.V = m.tok.n_out;
  n_vocab = int32_t(m.V);
}

std::vector<std::vector<double>> MoeReference::forward(const std::vector<int32_t>& tokens) {
  Impl& m = *impl_;
  const int64_t n = int64_t(tokens.size()), E = m.E, D = m.D, QD = m.H * D, KD = m.HKV * D;
  std::vector<std::vector<double>> x(static_cast<size_t>(n), std::vector<double>(static_cast<size_t>(E)));
  for (int64_t t = 0; t < n; ++t)
    for (int64_t i = 0; i < E; ++i) x[size_t(t)][size_t(i)] = m.tok.w[size_t(tokens[size_t(t)] * E + i)];
  min_route_gap = std::numeric_limits<double>::infinity();
  auto f16 = [](double v) { return double(fp16_to_fp32(fp32_to_fp16(float(v)))); };

  for (int64_t l = 0; l < m.L; ++l) {
    const std::string b = "blk." + std::to_string(l) + ".";
    const std::vector<double> an = m.vec(b + "attn_norm.weight"), fn = m.vec(b + "ffn_norm.weight");
    const Mat wq = m.mat(b + "attn_q.weight"), wk = m.mat(b + "attn_k.weight"), wv = m.mat(b + "attn_v.weight"),
              wo = m.mat(b + "attn_output.weight");
    std::vector<double> qn, kn, bq, bk, bv;
    if (m.qk_norm) qn = m.vec(b + "attn_q_norm.weight"), kn = m.vec(b + "attn_k_norm.weight");
    if (m.qkv_bias) bq = m.vec(b + "attn_q.bias"), bk = m.vec(b + "attn_k.bias"), bv = m.vec(b + "attn_v.bias");
    // Attention: q, k, v of every position first (k, v as the KV cache holds them).
    std::vector<std::vector<double>> q(static_cast<size_t>(n)), k(static_cast<size_t>(n)), v(static_cast<size_t>(n));
    for (int64_t t = 0; t < n; ++t) {
      std::vector<double> a = x[size_t(t)];
      m.rmsnorm(a, an);
      q[size_t(t)] = wq.mul(a), k[size_t(t)] = wk.mul(a), v[size_t(t)] = wv.mul(a);
      if (m.qkv_bias)
        for (int64_t i = 0; i < QD; ++i) q[size_t(t)][size_t(i)] += bq[size_t(i)];
      if (m.qkv_bias)
        for (int64_t i = 0; i < KD; ++i) k[size_t(t)][size_t(i)] += bk[size_t(i)], v[size_t(t)][size_t(i)] += bv[size_t(i)];
      if (m.qk_norm) {
        for (int64_t h = 0; h < m.H; ++h) m.rmsnorm(q[size_t(t)], qn, size_t(h * D), size_t(D));
        for (int64_t h = 0; h < m.HKV; ++h) m.rmsnorm(k[size_t(t)], kn, size_t(h * D), size_t(D));
      }
      m.rope(q[size_t(t)], m.H, t);
      m.rope(k[size_t(t)], m.HKV, t);
      for (auto& e : k[size_t(t)]) e = f16(e);
      for (auto& e : v[size_t(t)]) e = f16(e);
    }
    const bool dense = m.NE == 0;
    const Mat router = dense ? Mat{} : m.mat(b + "ffn_gate_inp.weight");
    const Mat gate = m.mat(b + (dense ? "ffn_gate.weight" : "ffn_gate_exps.weight")),
              up = m.mat(b + (dense ? "ffn_up.weight" : "ffn_up_exps.weight")),
              down = m.mat(b + (dense ? "ffn_down.weight" : "ffn_down_exps.weight"));
    for (int64_t t = 0; t < n; ++t) {
      std::vector<double> o(static_cast<size_t>(QD), 0.0);
      for (int64_t h = 0; h < m.H; ++h) {
        const int64_t kh = h / (m.H / m.HKV);
        std::vector<double> s(static_cast<size_t>(t + 1));
        double mx = -1e300;
        for (int64_t p = 0; p <= t; ++p) {
          double d = 0;
          for (int64_t i = 0; i < D; ++i) d += q[size_t(t)][size_t(h * D + i)] * k[size_t(p)][size_t(kh * D + i)];
          s[size_t(p)] = d / std::sqrt(double(D));
          mx = std::max(mx, s[size_t(p)]);
        }
        double sum = 0;
        for (auto& e : s) sum += (e = std::exp(e - mx));
        for (int64_t p = 0; p <= t; ++p)
          for (int64_t i = 0; i < D; ++i) o[size_t(h * D + i)] += s[size_t(p)] / sum * v[size_t(p)][size_t(kh * D + i)];
      }
      const std::vector<double> ao = wo.mul(o);
      for (int64_t i = 0; i < E; ++i) x[size_t(t)][size_t(i)] += ao[size_t(i)];

      // MoE FFN (a dense model: its one FFN).
      std::vector<double> h = x[size_t(t)];
      m.rmsnorm(h, fn);
      if (dense) {
        std::vector<double> g = gate.mul(h);
        const std::vector<double> u = up.mul(h);
        for (size_t i = 0; i < g.size(); ++i) g[i] = g[i] / (1.0 + std::exp(-g[i])) * u[i];
        const std::vector<double> d = down.mul(g);
        for (int64_t i = 0; i < E; ++i) x[size_t(t)][size_t(i)] += d[size_t(i)];
        continue;
      }
      const std::vector<double> logit = router.mul(h);
      std::vector<int64_t> order(static_cast<size_t>(m.NE));
      for (int64_t e = 0; e < m.NE; ++e) order[size_t(e)] = e;
      std::stable_sort(order.begin(), order.end(),
                       [&](int64_t a, int64_t c) { return logit[size_t(a)] > logit[size_t(c)]; });
      if (m.K < m.NE)
        min_route_gap = std::min(min_route_gap, logit[size_t(order[size_t(m.K - 1)])] - logit[size_t(order[size_t(m.K)])]);
      double mx = *std::max_element(logit.begin(), logit.end()), z = 0;
      for (double e : logit) z += std::exp(e - mx);
      std::vector<double> w(static_cast<size_t>(m.K));
      double chosen = 0;
      for (int64_t j = 0; j < m.K; ++j) chosen += (w[size_t(j)] = std::exp(logit[size_t(order[size_t(j)])] - mx) / z);
      for (int64_t j = 0; j < m.K; ++j) {
        const int64_t e = order[size_t(j)];
        std::vector<double> g = gate.mul(h, e);
        const std::vector<double> u = up.mul(h, e);
        for (size_t i = 0; i < g.size(); ++i) g[i] = g[i] / (1.0 + std::exp(-g[i])) * u[i];
        const std::vector<double> d = down.mul(g, e);
        const double wj = m.norm_topk ? w[size_t(j)] / chosen : w[size_t(j)];
        for (int64_t i = 0; i < E; ++i) x[size_t(t)][size_t(i)] += wj * d[size_t(i)];
      }
      // qwen2moe's shared expert, scaled by sigmoid(h · ffn_gate_inp_shexp).
      if (m.f->tensor(b + "ffn_gate_inp_shexp.weight")) {
        const std::vector<double> sg = m.vec(b + "ffn_gate_inp_shexp.weight");
        std::vector<double> g = m.mat(b + "ffn_gate_shexp.weight").mul(h);
        const std::vector<double> u = m.mat(b + "ffn_up_shexp.weight").mul(h);
        for (size_t i = 0; i < g.size(); ++i) g[i] = g[i] / (1.0 + std::exp(-g[i])) * u[i];
        const std::vector<double> d = m.mat(b + "ffn_down_shexp.weight").mul(g);
        double zs = 0;
        for (int64_t i = 0; i < E; ++i) zs += h[size_t(i)] * sg[size_t(i)];
        const double gs = 1.0 / (1.0 + std::exp(-zs));
        for (int64_t i = 0; i < E; ++i) x[size_t(t)][size_t(i)] += gs * d[size_t(i)];
      }
    }
  }
  const std::vector<double> on = m.vec("output_norm.weight");
  std::vector<std::vector<double>> logits;
  hidden.clear();
  for (int64_t t = 0; t < n; ++t) {
    std::vector<double> h = x[size_t(t)];
    m.rmsnorm(h, on);
    logits.push_back(m.out.mul(h));
    hidden.push_back(std::move(h));
  }
  return logits;
}

}  // namespace fish::test
