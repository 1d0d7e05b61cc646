// Conformance suite: mixture-of-experts spans (plugin_abi.h's MoE FFN) against
// a plain double reference written here (MoeRef: every step of the header's
// formula in double over the weights' decoded values, not the plugin's
// matmul). Synthetic layers of both gatings, with and without a shared expert,
// 8 experts / 2 used and 6 / 3; prefill and decode of one sequence, then rows
// of several sequences in one batch. Compared as the span checks are: logits
// through a random head, same argmax, max |Δlogit| <= 2% of max |logit|,
// except rows whose routing the reference sees as a near tie: the k-th and
// the (k+1)-th router logit within 1% of the row's largest |logit| (int8
// activations move router logits that much: such a row may take the other
// expert, legitimately). Those rows are counted, not compared.
// A plugin that refuses MoE spans (FISH_E_UNSUPPORTED) has these checks skipped
// with its message.
#include <algorithm>
#include <cmath>

#include "backend/conformance_synth.h"

namespace fish::backend::conf {

namespace {

struct MoeVariant {
  std::string name;
  int n_embd, n_head, n_head_kv, head_dim, n_layers;
  int n_expert, n_used, n_ff_expert, n_ff_shexp;  // n_ff_shexp 0: no shared expert
  Gating gating;
  GgmlType type;  // of every matrix but the router (f32, as GGUF MoE files keep it)
};

const std::vector<MoeVariant>& moe_variants() {
  static const std::vector<MoeVariant> v = {
      // name            E   H KVH  D  L  NE  K   FE   FS  gating                    type
      {"8x2 norm", 64, 4, 2, 16, 2, 8, 2, 32, 0, Gating::SoftmaxTopKNorm, GgmlType::F32},
      {"6x3 shared", 64, 4, 2, 16, 2, 6, 3, 32, 48, Gating::SoftmaxTopK, GgmlType::F32},
      {"8x2 norm shared", 64, 4, 2, 16, 2, 8, 2, 64, 64, Gating::SoftmaxTopKNorm, GgmlType::Q8_0},
      {"8x2", 256, 4, 2, 64, 1, 8, 2, 256, 0, Gating::SoftmaxTopK, GgmlType::Q4_K},
  };
  return v;
}

// One MoE layer: attention as a dense layer's, the router, the expert stacks
// (n_expert matrices in one weight), the optional shared expert.
struct MoeLayer {
  enum { kQ, kK, kV, kO, kRouter, kGateExps, kUpExps, kDownExps, kGateSh, kUpSh, kDownSh, kCount };
  TestWeight w[kCount];
  int64_t n_mat[kCount] = {};
  BackendWeight* h[kCount] = {};
  std::vector<float> attn_norm, ffn_norm, shexp_gate;
};

struct MoeSynth {
  MoeVariant v;
  std::vector<MoeLayer> layers;
  TestWeight head;  // [kVocab, n_embd] f32: compares streams as logits
  std::vector<SpanLayer> desc;
};

// n_mat matrices of [n_out, n_in] in one weight (GGUF's 3-D expert tensor).
TestWeight make_stack(GgmlType t, int n_mat, int64_t n_out, int64_t n_in, float scale, std::mt19937_64& rng,
                      const std::string& name) {
  TestWeight s = make_weight(t, n_out, n_in, scale, rng, name);
  for (int e = 1; e < n_mat; ++e) {
    const TestWeight m = make_weight(t, n_out, n_in, scale, rng, name);
    s.bytes.insert(s.bytes.end(), m.bytes.begin(), m.bytes.end());
    s.values.insert(s.values.end(), m.values.begin(), m.values.end());
  }
  return s;
}

MoeSynth make_moe(const MoeVariant& v, std::mt19937_64& rng) {
  MoeSynth s;
  s.v = v;
  const int E = v.n_embd, QD = v.n_head * v.head_dim, KD = v.n_head_kv * v.head_dim;
  std::uniform_real_distribution<float> near_one(0.8f, 1.2f);
  auto ones = [&](int n) {
    std::vector<float> r(size_t(n), 0.0f);
    for (auto& e : r) e = near_one(rng);
    return r;
  };
  for (int l = 0; l < v.n_layers; ++l) {
    MoeLayer L;
    const std::string p = "blk." + std::to_string(l) + ".";
    auto mat = [&](int k, GgmlType t, int n_mat, int64_t n_out, int64_t n_in, float gain, const char* name) {
      L.w[k] = make_stack(t, n_mat, n_out, n_in, gain / std::sqrt(float(n_in)), rng, p + name + ".weight");
      L.n_mat[k] = n_mat;
    };
    mat(MoeLayer::kQ, v.type, 1, QD, E, 1.5f, "attn_q");
    mat(MoeLayer::kK, v.type, 1, KD, E, 1.5f, "attn_k");
    mat(MoeLayer::kV, v.type, 1, KD, E, 1.5f, "attn_v");
    mat(MoeLayer::kO, v.type, 1, E, QD, 1.5f, "attn_output");
    // The router spreads its logits (std ~1.7) so the top-k choice is clear of ties.
    mat(MoeLayer::kRouter, GgmlType::F32, 1, v.n_expert, E, 3.0f, "ffn_gate_inp");
    mat(MoeLayer::kGateExps, v.type, v.n_expert, v.n_ff_expert, E, 1.5f, "ffn_gate_exps");
    mat(MoeLayer::kUpExps, v.type, v.n_expert, v.n_ff_expert, E, 1.5f, "ffn_up_exps");
    mat(MoeLayer::kDownExps, v.type, v.n_expert, E, v.n_ff_expert, 1.5f, "ffn_down_exps");
    if (v.n_ff_shexp > 0) {
      mat(MoeLayer::kGateSh, v.type, 1, v.n_ff_shexp, E, 1.5f, "ffn_gate_shexp");
      mat(MoeLayer::kUpSh, v.type, 1, v.n_ff_shexp, E, 1.5f, "ffn_up_shexp");
      mat(MoeLayer::kDownSh, v.type, 1, E, v.n_ff_shexp, 1.5f, "ffn_down_shexp");
      L.shexp_gate = random_vector(size_t(E), 2.0f / std::sqrt(float(E)), rng);
    }
    L.attn_norm = ones(E);
    L.ffn_norm = ones(E);
    s.layers.push_back(std::move(L));
  }
  s.head = make_weight(GgmlType::F32, kVocab, E, 1.0f, rng, "output.weight");
  return s;
}

void upload_moe(PluginBackend& be, MoeSynth& s) {
  static constexpr TensorRole kRoles[MoeLayer::kCount] = {
      TensorRole::AttnQ,       TensorRole::AttnK,        TensorRole::AttnV,        TensorRole::AttnOut,
      TensorRole::FfnRouter,   TensorRole::FfnGateExps,  TensorRole::FfnUpExps,    TensorRole::FfnDownExps,
      TensorRole::FfnGateShexp, TensorRole::FfnUpShexp,  TensorRole::FfnDownShexp};
  s.desc.clear();
  for (MoeLayer& L : s.layers) {
    SpanLayer d;
    d.tensors.push_back(SpanTensor{TensorRole::AttnNorm, nullptr, L.attn_norm.data(), int64_t(L.attn_norm.size())});
    d.tensors.push_back(SpanTensor{TensorRole::FfnNorm, nullptr, L.ffn_norm.data(), int64_t(L.ffn_norm.size())});
    if (!L.shexp_gate.empty())
      d.tensors.push_back(SpanTensor{TensorRole::FfnShexpGate, nullptr, L.shexp_gate.data(), int64_t(L.shexp_gate.size())});
    for (int k = 0; k < MoeLayer::kCount; ++k) {
      if (L.n_mat[k] == 0) continue;  // no shared expert
      WeightDesc wd = desc_of(L.w[k]);
      wd.n_mat = L.n_mat[k];
      L.h[k] = be.upload(wd);
      if (!L.h[k] && be.last_status() == FISH_E_UNSUPPORTED && L.n_mat[k] > 1)
        skip("upload of an expert stack (" + L.w[k].name + ", n_mat " + std::to_string(L.n_mat[k]) +
             ") is unsupported: " + be.last_error());
      expect(L.h[k] != nullptr, "upload " + L.w[k].name + " (" + ggml_type_name(L.w[k].type) + ", n_mat " +
                                    std::to_string(L.n_mat[k]) + "): " + be.last_error());
      d.tensors.push_back(SpanTensor{kRoles[k], L.h[k], nullptr, 0});
    }
    s.desc.push_back(std::move(d));
  }
}

void release_moe(PluginBackend& be, MoeSynth& s) {
  for (MoeLayer& L : s.layers)
    for (auto*& h : L.h)
      if (h) {
        be.release(h);
        h = nullptr;
      }
}

SpanDesc moe_desc(const MoeSynth& s, int n_ctx, int n_seq) {
  const MoeVariant& v = s.v;
  SpanDesc d;
  d.first_layer = 1;
  d.n_embd = v.n_embd;
  d.n_head = v.n_head;
  d.n_head_kv = v.n_head_kv;
  d.head_dim = v.head_dim;
  d.n_ff = 0;  // no dense FFN
  d.n_ctx = n_ctx;
  d.n_seq = n_seq;
  d.arch.norm_eps = 1e-5f;
  d.arch.rope = RopeType::NeoX;
  d.arch.n_rot = v.head_dim;
  d.arch.rope_freq_base = 1000000.0f;
  d.arch.n_expert = v.n_expert;
  d.arch.n_expert_used = v.n_used;
  d.arch.gating = v.gating;
  d.arch.n_ff_expert = v.n_ff_expert;
  d.arch.n_ff_shexp = v.n_ff_shexp;
  d.layers = s.desc;
  return d;
}

// The span's layers in double: rmsnorm, projections over the decoded values,
// NeoX RoPE, causal attention per sequence, the MoE FFN exactly as
// plugin_abi.h writes it (top-k ties: the lower expert index).
class MoeRef {
 public:
  MoeRef(const MoeSynth& s, int n_seq, int capacity) : s_(s), capacity_(capacity) {
    const size_t kd = size_t(s.v.n_head_kv * s.v.head_dim);
    k_.assign(size_t(n_seq), std::vector<std::vector<double>>(s.layers.size(), std::vector<double>(size_t(capacity) * kd)));
    v_ = k_;
  }
  // Smallest gap between the k-th and the (k+1)-th router logit seen (how
  // clear the choices were; a plugin's rounding could flip a choice closer than that).
  double min_margin = INFINITY;
  // Per row of the last forward: its routing had a near tie in some layer.
  std::vector<char> near_tie;

  void forward(float* x_io, int n_tok, const int32_t* seq, const int32_t* pos) {
    const MoeVariant& v = s_.v;
    const int E = v.n_embd, H = v.n_head, KVH = v.n_head_kv, D = v.head_dim, QD = H * D, KD = KVH * D;
    const size_t n = size_t(n_tok);
    for (size_t t = 0; t < n; ++t) expect(pos[t] < capacity_, "the MoE reference holds fewer positions than the check uses");
    std::vector<double> x(x_io, x_io + n * E), a(n * E), q(n * QD), k(n * KD), vv(n * KD), att(n * QD);
    near_tie.assign(n, 0);
    for (size_t l = 0; l < s_.layers.size(); ++l) {
      const MoeLayer& L = s_.layers[l];
      for (size_t t = 0; t < n; ++t) rms(&x[t * E], L.attn_norm.data(), &a[t * E], E);
      mm(L.w[MoeLayer::kQ], 0, &a[0], n, &q[0]);
      mm(L.w[MoeLayer::kK], 0, &a[0], n, &k[0]);
      mm(L.w[MoeLayer::kV], 0, &a[0], n, &vv[0]);
      for (size_t t = 0; t < n; ++t) {
        rope(&q[t * QD], H, pos[t]);
        rope(&k[t * KD], KVH, pos[t]);
        const size_t q_ = size_t(seq ? seq[t] : 0);
        std::copy_n(&k[t * KD], KD, &k_[q_][l][size_t(pos[t]) * KD]);
        std::copy_n(&vv[t * KD], KD, &v_[q_][l][size_t(pos[t]) * KD]);
      }
      const double scale = 1.0 / std::sqrt(double(D));
      for (size_t t = 0; t < n; ++t) {
        const size_t q_ = size_t(seq ? seq[t] : 0);
        const int p = pos[t];
        for (int h = 0; h < H; ++h) {
          const int kvh = h / (H / KVH);
          std::vector<double> w(size_t(p) + 1);
          double mx = -INFINITY, sum = 0;
          for (int j = 0; j <= p; ++j) {
            double dot = 0;
            for (int i = 0; i < D; ++i) dot += q[t * QD + h * D + i] * k_[q_][l][size_t(j) * KD + kvh * D + i];
            mx = std::max(mx, w[size_t(j)] = dot * scale);
          }
          for (auto& e : w) sum += (e = std::exp(e - mx));
          for (int i = 0; i < D; ++i) {
            double acc = 0;
            for (int j = 0; j <= p; ++j) acc += w[size_t(j)] * v_[q_][l][size_t(j) * KD + kvh * D + i];
            att[t * QD + h * D + i] = acc / sum;
          }
        }
      }
      std::vector<double> o(n * E);
      mm(L.w[MoeLayer::kO], 0, &att[0], n, &o[0]);
      for (size_t i = 0; i < n * E; ++i) x[i] += o[i];
      for (size_t t = 0; t < n; ++t) {
        rms(&x[t * E], L.ffn_norm.data(), &a[t * E], E);
        near_tie[t] |= moe_row(L, &a[t * E], &x[t * E]);
      }
    }
    for (size_t i = 0; i < n * E; ++i) x_io[i] = float(x[i]);
  }

 private:
  // y [n][n_out] = x [n][n_in] · W[mat]ᵀ over the decoded values.
  static void mm(const TestWeight& w, int64_t mat, const double* x, size_t n, double* y) {
    for (size_t t = 0; t < n; ++t)
      for (int64_t r = 0; r < w.n_out; ++r) {
        const float* row = &w.values[size_t((mat * w.n_out + r) * w.n_in)];
        double acc = 0;
        for (int64_t i = 0; i < w.n_in; ++i) acc += double(row[i]) * x[t * size_t(w.n_in) + size_t(i)];
        y[t * size_t(w.n_out) + size_t(r)] = acc;
      }
  }
  static double silu(double z) { return z / (1.0 + std::exp(-z)); }
  static void rms(const double* x, const float* w, double* out, int n) {
    double ss = 0;
    for (int i = 0; i < n; ++i) ss += x[i] * x[i];
    const double inv = 1.0 / std::sqrt(ss / n + 1e-5);
    for (int i = 0; i < n; ++i) out[i] = x[i] * inv * w[i];
  }
  void rope(double* vec, int n_heads, int pos) const {
    const int n_rot = s_.v.head_dim, half = n_rot / 2;
    for (int i = 0; i < half; ++i) {
      const double th = pos * std::pow(1000000.0, -2.0 * i / n_rot);
      const double c = std::cos(th), sn = std::sin(th);
      for (int h = 0; h < n_heads; ++h) {
        double* hv = vec + h * s_.v.head_dim;
        const double x0 = hv[i], x1 = hv[i + half];
        hv[i] = x0 * c - x1 * sn;
        hv[i + half] = x0 * sn + x1 * c;
      }
    }
  }
  // x_row += Σ_e w_e · expert_e(nrm) [+ sigmoid(nrm·shexp_gate) · shared(nrm)].
  // Returns whether the choice was a near tie.
  bool moe_row(const MoeLayer& L, const double* nrm, double* x_row) {
    const MoeVariant& v = s_.v;
    const int NE = v.n_expert, K = v.n_used, E = v.n_embd;
    std::vector<double> logit(static_cast<size_t>(NE)), r(static_cast<size_t>(NE));
    mm(L.w[MoeLayer::kRouter], 0, nrm, 1, logit.data());
    const double mx = *std::max_element(logit.begin(), logit.end());
    double sum = 0;
    for (int e = 0; e < NE; ++e) sum += (r[size_t(e)] = std::exp(logit[size_t(e)] - mx));
    for (auto& e : r) e /= sum;
    std::vector<int> order(static_cast<size_t>(NE));
    for (int e = 0; e < NE; ++e) order[size_t(e)] = e;
    // Largest first; equal values: the lower index first (stable).
    std::stable_sort(order.begin(), order.end(), [&](int p, int q) { return r[size_t(p)] > r[size_t(q)]; });
    double gap = INFINITY, top = 0;
    for (double l : logit) top = std::max(top, std::fabs(l));
    if (K < NE) min_margin = std::min(min_margin, gap = logit[size_t(order[size_t(K - 1)])] - logit[size_t(order[size_t(K)])]);
    double chosen = 0;
    for (int j = 0; j < K; ++j) chosen += r[size_t(order[size_t(j)])];
    std::vector<double> y(static_cast<size_t>(E));
    auto ffn = [&](int gate, int up, int down, int64_t mat, int64_t rows, double weight) {
      std::vector<double> g(static_cast<size_t>(rows)), u(static_cast<size_t>(rows));
      mm(L.w[gate], mat, nrm, 1, g.data());
      mm(L.w[up], mat, nrm, 1, u.data());
      for (size_t i = 0; i < g.size(); ++i) g[i] = silu(g[i]) * u[i];
      mm(L.w[down], mat, g.data(), 1, y.data());
      for (int i = 0; i < E; ++i) x_row[i] += weight * y[size_t(i)];
    };
    for (int j = 0; j < K; ++j) {
      const int e = order[size_t(j)];
      const double w = v.gating == Gating::SoftmaxTopKNorm ? r[size_t(e)] / chosen : r[size_t(e)];
      ffn(MoeLayer::kGateExps, MoeLayer::kUpExps, MoeLayer::kDownExps, e, v.n_ff_expert, w);
    }
    if (v.n_ff_shexp > 0) {
      double dot = 0;
      for (int i = 0; i < E; ++i) dot += nrm[i] * double(L.shexp_gate[size_t(i)]);
      ffn(MoeLayer::kGateSh, MoeLayer::kUpSh, MoeLayer::kDownSh, 0, v.n_ff_shexp, 1.0 / (1.0 + std::exp(-dot)));
    }
    return gap <= 0.01 * top;
  }

  const MoeSynth& s_;
  int capacity_;
  std::vector<std::vector<std::vector<double>>> k_, v_;  // [seq][layer][capacity * kv_dim]
};

// Logits of rows x [n][n_embd] through the synthetic head (no norm), in double.
std::vector<double> moe_logits(const MoeSynth& s, const float* x, int n) {
  const int E = s.v.n_embd;
  std::vector<double> out(size_t(n) * kVocab);
  for (int t = 0; t < n; ++t)
    for (int r = 0; r < kVocab; ++r) {
      double acc = 0;
      for (int i = 0; i < E; ++i) acc += double(s.head.values[size_t(r * E + i)]) * x[t * E + i];
      out[size_t(t) * kVocab + size_t(r)] = acc;
    }
  return out;
}

constexpr int kMoeCtx = 64;

void run_moe_variant(Runner& run, const PluginLibrary* lib, const std::string& name, const MoeVariant& v,
                     std::mt19937_64& rng) {
  const std::string tag = "moe " + v.name + " " + ggml_type_name(v.type);
  std::unique_ptr<PluginBackend> be;
  MoeSynth s;
  BackendSpan* span = nullptr;
  std::unique_ptr<MoeRef> ref;
  int near_ties = 0;  // rows left out of the current step's comparison
  uint64_t resident0 = 0;
  bool ok = true;
  std::string no_span;
  auto step = [&](const std::string& what, auto&& body) {
    run.check(
        tag + ": " + what,
        [&]() -> std::string {
          if (!no_span.empty()) skip(no_span);
          if (!ok) fail("an earlier step of this span failed");
          try {
            return body();
          } catch (const CheckSkip&) {
            throw;
          } catch (...) {
            ok = false;
            throw;
          }
        },
        true);
  };
  // Rows on a span and on its reference, compared through the head.
  auto both = [&](BackendSpan* sp, MoeRef& r, const Rows& rows, Compare& cmp, const std::string& what, bool may_refuse) {
    std::vector<float> xs = random_vector(size_t(rows.n()) * size_t(v.n_embd), 1.0f, rng), xr = xs;
    SpanBatch b;
    b.n_tok = rows.n();
    b.x = xs.data();
    b.seq = rows.seq.data();
    b.pos = rows.pos.data();
    b.x_out = true;
    if (!be->span_forward_once(sp, b)) {
      if (may_refuse && be->last_status() == FISH_E_UNSUPPORTED)
        skip("the plugin does not run " + what + " (unsupported): " + be->last_error());
      fail(what + ": span_forward: " + be->last_error());
    }
    r.forward(xr.data(), rows.n(), rows.seq.data(), rows.pos.data());
    const auto la = moe_logits(s, xs.data(), rows.n()), lb = moe_logits(s, xr.data(), rows.n());
    for (int t = 0; t < rows.n(); ++t) {
      if (r.near_tie[size_t(t)]) {
        ++near_ties;
        continue;
      }
      cmp.add_logits(&la[size_t(t) * kVocab], &lb[size_t(t) * kVocab], what + " row " + std::to_string(t));
    }
  };
  auto margin = [&](const MoeRef& r) {
    return "; routing margin >= " + fmt(r.min_margin, 4) + ", " + std::to_string(near_ties) + " near-tie row(s) not compared";
  };

  step("create", [&]() -> std::string {
    be = new_backend(lib, name);
    for (GgmlType t : {v.type, GgmlType::F32})
      if (!be->supports(t)) no_span = ggml_type_name(t) + " is not supported";
    if (!no_span.empty()) skip(no_span);
    s = make_moe(v, rng);
    try {
      upload_moe(*be, s);
    } catch (const CheckSkip& k) {
      no_span = k.detail;
      release_moe(*be, s);
      throw;
    }
    resident0 = be->bytes_resident();
    std::vector<SpanLayer> bare = without_weights(s.desc);
    SpanDesc d = moe_desc(s, kMoeCtx, 1);
    d.layers = bare;
    const uint64_t estimate = be->span_bytes(d);
    if (estimate > 0) span = be->span_create(moe_desc(s, kMoeCtx, 1));
    if (!span && be->last_status() == FISH_E_UNSUPPORTED) {
      no_span = "the plugin does not run MoE spans (" + be->last_error() + ")";
      release_moe(*be, s);
      skip(no_span);
    }
    expect(estimate > 0, "span_bytes without weights: " + be->last_error());
    expect(span != nullptr, "span_create: " + be->last_error());
    const uint64_t used = be->bytes_resident() - resident0;
    expect(used > 0 && used <= estimate,
           "span_create took " + std::to_string(used) + " bytes, span_bytes said " + std::to_string(estimate));
    ref = std::make_unique<MoeRef>(s, 1, kMoeCtx);
    return "span_bytes " + std::to_string(estimate) + ", resident +" + std::to_string(used);
  });

  step("prefill 40 + decode 3 ≡ f64 reference", [&]() -> std::string {
    Compare cmp;
    near_ties = 0;
    Rows pre;
    pre.add(0, 0, 40);
    both(span, *ref, pre, cmp, "prefill", false);
    for (int i = 0; i < 3; ++i) {
      Rows one;
      one.add(0, 40 + i, 1);
      both(span, *ref, one, cmp, "decode at " + std::to_string(40 + i), false);
    }
    Rows three;  // a few rows at once (the decode kernels of several tokens)
    three.add(0, 43, 3);
    both(span, *ref, three, cmp, "3 rows at 43", false);
    expect(be->span_kv_len(span, 0) == 46, "span_kv_len after 46 positions: " + std::to_string(be->span_kv_len(span, 0)));
    cmp.require();
    return cmp.summary() + margin(*ref);
  });

  step("sequences: rows of several sequences in one batch ≡ f64 reference", [&]() -> std::string {
    BackendSpan* multi = be->span_create(moe_desc(s, kMoeCtx, 3));
    if (!multi && be->last_status() == FISH_E_UNSUPPORTED)
      skip("the plugin holds one sequence per span (" + be->last_error() + ")");
    expect(multi != nullptr, "span_create with 3 sequences: " + be->last_error());
    MoeRef r3(s, 3, kMoeCtx);
    Compare cmp;
    near_ties = 0;
    std::string skipped;
    try {
      Rows a, b, mixed, dec;
      a.add(0, 0, 9);
      b.add(1, 0, 12);
      both(multi, r3, a, cmp, "sequence 0 alone", false);
      both(multi, r3, b, cmp, "sequence 1 alone", false);
      mixed.add(0, 9, 1), mixed.add(1, 12, 3), mixed.add(2, 0, 6);
      both(multi, r3, mixed, cmp, "1 + 3 + 6 rows of sequences 0, 1, 2", true);
      dec.add(2, 6, 1), dec.add(0, 10, 1), dec.add(1, 15, 1);
      both(multi, r3, dec, cmp, "one row of each sequence", true);
    } catch (...) {
      be->span_destroy(multi);
      throw;
    }
    be->span_destroy(multi);
    cmp.require();
    return cmp.summary() + margin(r3);
  });

  step("destroy releases its memory", [&]() -> std::string {
    be->span_destroy(span);
    span = nullptr;
    expect(be->bytes_resident() == resident0, "bytes_resident " + std::to_string(be->bytes_resident()) +
                                                  " after span_destroy, " + std::to_string(resident0) + " before create");
    release_moe(*be, s);
    expect(be->bytes_resident() == 0, "bytes_resident " + std::to_string(be->bytes_resident()) + " after releasing all");
    return "back to " + std::to_string(resident0) + " then 0 bytes";
  });
}

}  // namespace

void run_moe_checks(Runner& run, const PluginLibrary* lib, const std::string& name) {
  for (size_t i = 0; i < moe_variants().size(); ++i) {
    std::mt19937_64 rng(run.seed() + 29 + 1000 * i);
    run_moe_variant(run, lib, name, moe_variants()[i], rng);
  }
}

}  // namespace fish::backend::conf
