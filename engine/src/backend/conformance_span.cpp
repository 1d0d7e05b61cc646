// Conformance suite: spans against the same plugin's per-matmul path.
//
// A small synthetic decoder (llama / qwen2 / qwen3 shapes) is uploaded; the
// span runs it on the device while RefSpan runs the same layers with every
// projection through the plugin's matmul() and the rest (norms, RoPE,
// attention, SiLU, residuals) here in f32/double. Both outputs go through the
// same random "LM head" and are compared as logits: same argmax, max |Δlogit|
// <= 2% of max |logit| (the spec's bound for span ≡ per-matmul).
#include <algorithm>
#include <cmath>
#include <cstring>

#include "backend/conformance_internal.h"
#include "backend/host_services.h"

namespace fish::backend::conf {

namespace {

struct Variant {
  std::string name;
  int n_embd, n_head, n_head_kv, head_dim, n_ff, n_layers;
  RopeType rope;
  float base, scale, attn_scale;
  bool freqs, biases, qk_norm;
  GgmlType type;
};

struct SynthLayer {
  TestWeight w[7];  // wq wk wv wo gate up down
  BackendWeight* h[7] = {};
  std::vector<float> attn_norm, ffn_norm, bq, bk, bv, q_norm, k_norm;
};

struct Synth {
  Variant v;
  std::vector<SynthLayer> layers;
  std::vector<float> rope_freqs;
  TestWeight head;  // [n_vocab, n_embd] f32 "LM head", applied on the host
};

constexpr int kVocab = 97;
constexpr int kCtx = 96;

void rmsnorm(const float* x, const float* w, float* out, int n, float eps) {
  double ss = 0;
  for (int i = 0; i < n; ++i) ss += double(x[i]) * x[i];
  const double inv = 1.0 / std::sqrt(ss / n + eps);
  for (int i = 0; i < n; ++i) out[i] = float(x[i] * inv) * w[i];
}

// The per-matmul path: the same layers, projections through the plugin's matmul.
class RefSpan {
 public:
  RefSpan(PluginBackend& be, const Synth& s) : be_(be), s_(s) {
    const size_t kd = size_t(s.v.n_head_kv * s.v.head_dim);
    k_.assign(s.layers.size(), std::vector<float>(size_t(kCap) * kd));
    v_ = k_;
  }
  void truncate(int n) { len_ = std::min(len_, n); }
  int len() const { return len_; }

  void forward(float* x, int n_tok, int pos0) {
    const Variant& v = s_.v;
    const int E = v.n_embd, H = v.n_head, KVH = v.n_head_kv, D = v.head_dim, F = v.n_ff;
    const int QD = H * D, KD = KVH * D, group = H / KVH;
    const size_t n = size_t(n_tok);
    const float scale = v.attn_scale != 0 ? v.attn_scale : float(1.0 / std::sqrt(double(D)));
    std::vector<float> a(n * E), q(n * QD), k(n * KD), vv(n * KD), att(n * QD), o(n * E), g(n * F), u(n * F);
    for (size_t l = 0; l < s_.layers.size(); ++l) {
      const SynthLayer& L = s_.layers[l];
      for (size_t t = 0; t < n; ++t) rmsnorm(x + t * E, L.attn_norm.data(), &a[t * E], E, 1e-5f);
      mm(L, 0, a.data(), n_tok, q.data());
      mm(L, 1, a.data(), n_tok, k.data());
      mm(L, 2, a.data(), n_tok, vv.data());
      for (size_t t = 0; t < n; ++t) {
        if (v.biases) {
          for (int i = 0; i < QD; ++i) q[t * QD + i] += L.bq[size_t(i)];
          for (int i = 0; i < KD; ++i) k[t * KD + i] += L.bk[size_t(i)], vv[t * KD + i] += L.bv[size_t(i)];
        }
        if (v.qk_norm) {
          for (int h = 0; h < H; ++h) rmsnorm(&q[t * QD + h * D], L.q_norm.data(), &q[t * QD + h * D], D, 1e-5f);
          for (int h = 0; h < KVH; ++h) rmsnorm(&k[t * KD + h * D], L.k_norm.data(), &k[t * KD + h * D], D, 1e-5f);
        }
        rope(&q[t * QD], H, pos0 + int(t));
        rope(&k[t * KD], KVH, pos0 + int(t));
        std::copy_n(&k[t * KD], KD, &k_[l][size_t(pos0 + int(t)) * KD]);
        std::copy_n(&vv[t * KD], KD, &v_[l][size_t(pos0 + int(t)) * KD]);
      }
      for (size_t t = 0; t < n; ++t) {
        const int p = pos0 + int(t);
        for (int h = 0; h < H; ++h) {
          const int kvh = h / group;
          std::vector<double> w(size_t(p) + 1);
          double mx = -INFINITY, sum = 0;
          for (int j = 0; j <= p; ++j) {
            double dot = 0;
            for (int i = 0; i < D; ++i) dot += double(q[t * QD + h * D + i]) * k_[l][size_t(j) * KD + kvh * D + i];
            w[size_t(j)] = dot * scale;
            mx = std::max(mx, w[size_t(j)]);
          }
          for (auto& e : w) sum += (e = std::exp(e - mx));
          for (int i = 0; i < D; ++i) {
            double acc = 0;
            for (int j = 0; j <= p; ++j) acc += w[size_t(j)] * v_[l][size_t(j) * KD + kvh * D + i];
            att[t * QD + h * D + i] = float(acc / sum);
          }
        }
      }
      mm(L, 3, att.data(), n_tok, o.data());
      for (size_t i = 0; i < n * E; ++i) x[i] += o[i];
      for (size_t t = 0; t < n; ++t) rmsnorm(x + t * E, L.ffn_norm.data(), &a[t * E], E, 1e-5f);
      mm(L, 4, a.data(), n_tok, g.data());
      mm(L, 5, a.data(), n_tok, u.data());
      for (size_t i = 0; i < n * F; ++i) g[i] = g[i] / (1.0f + std::exp(-g[i])) * u[i];
      mm(L, 6, g.data(), n_tok, o.data());
      for (size_t i = 0; i < n * E; ++i) x[i] += o[i];
    }
    len_ = pos0 + n_tok;
  }

  static constexpr int kCap = 160;

 private:
  void mm(const SynthLayer& L, int i, const float* x, int n_tok, float* y) {
    expect(be_.matmul(L.h[i], x, n_tok, y), "per-matmul path: matmul " + L.w[i].name + ": " + be_.last_error());
  }
  void rope(float* vec, int n_heads, int pos) const {
    const Variant& v = s_.v;
    const int n_rot = v.head_dim, half = n_rot / 2;
    for (int i = 0; i < half; ++i) {
      const double ff = s_.rope_freqs.empty() ? 1.0 : s_.rope_freqs[size_t(i)];
      const double th = pos * std::pow(double(v.base), -2.0 * i / n_rot) / ff * v.scale;
      const double c = std::cos(th), sn = std::sin(th);
      for (int h = 0; h < n_heads; ++h) {
        float* hv = vec + h * v.head_dim;
        const int ia = v.rope == RopeType::NeoX ? i : 2 * i, ib = v.rope == RopeType::NeoX ? i + half : 2 * i + 1;
        const double x0 = hv[ia], x1 = hv[ib];
        hv[ia] = float(x0 * c - x1 * sn);
        hv[ib] = float(x0 * sn + x1 * c);
      }
    }
  }

  PluginBackend& be_;
  const Synth& s_;
  std::vector<std::vector<float>> k_, v_;
  int len_ = 0;
};

Synth make_synth(const Variant& v, std::mt19937_64& rng) {
  Synth s;
  s.v = v;
  const int E = v.n_embd, QD = v.n_head * v.head_dim, KD = v.n_head_kv * v.head_dim;
  const int64_t shapes[7][2] = {{QD, E}, {KD, E}, {KD, E}, {E, QD}, {v.n_ff, E}, {v.n_ff, E}, {E, v.n_ff}};
  const char* names[7] = {"attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"};
  std::uniform_real_distribution<float> near_one(0.8f, 1.2f);
  auto ones = [&](int n) {
    std::vector<float> r(static_cast<size_t>(n));
    for (auto& e : r) e = near_one(rng);
    return r;
  };
  for (int l = 0; l < v.n_layers; ++l) {
    SynthLayer L;
    for (int i = 0; i < 7; ++i)
      L.w[i] = make_weight(v.type, shapes[i][0], shapes[i][1], 1.5f / std::sqrt(float(shapes[i][1])), rng,
                           "blk." + std::to_string(l) + "." + names[i] + ".weight");
    L.attn_norm = ones(E);
    L.ffn_norm = ones(E);
    if (v.biases) {
      L.bq = random_vector(size_t(QD), 0.3f, rng);
      L.bk = random_vector(size_t(KD), 0.3f, rng);
      L.bv = random_vector(size_t(KD), 0.3f, rng);
    }
    if (v.qk_norm) {
      L.q_norm = ones(v.head_dim);
      L.k_norm = ones(v.head_dim);
    }
    s.layers.push_back(std::move(L));
  }
  if (v.freqs) {
    for (int i = 0; i < v.head_dim / 2; ++i) s.rope_freqs.push_back(1.0f + 3.0f * float(i) / float(v.head_dim / 2));
  }
  s.head = make_weight(GgmlType::F32, kVocab, E, 1.0f, rng, "output.weight");
  return s;
}

SpanDesc span_desc(const Synth& s, int n_ctx) {
  SpanDesc d;
  const Variant& v = s.v;
  d.first_layer = 3;
  d.n_layers = v.n_layers;
  d.n_embd = v.n_embd;
  d.n_head = v.n_head;
  d.n_head_kv = v.n_head_kv;
  d.head_dim = v.head_dim;
  d.n_ff = v.n_ff;
  d.n_ctx = n_ctx;
  d.rms_eps = 1e-5f;
  d.rope_type = v.rope;
  d.n_rot = v.head_dim;
  d.rope_freq_base = v.base;
  d.rope_freq_scale = v.scale;
  d.rope_freqs = s.rope_freqs.empty() ? nullptr : s.rope_freqs.data();
  d.attn_scale = v.attn_scale;
  for (const auto& L : s.layers) {
    SpanLayerDesc l;
    l.wq = L.h[0], l.wk = L.h[1], l.wv = L.h[2], l.wo = L.h[3], l.w_gate = L.h[4], l.w_up = L.h[5], l.w_down = L.h[6];
    l.attn_norm = L.attn_norm.data();
    l.ffn_norm = L.ffn_norm.data();
    if (v.biases) l.bq = L.bq.data(), l.bk = L.bk.data(), l.bv = L.bv.data();
    if (v.qk_norm) l.q_norm = L.q_norm.data(), l.k_norm = L.k_norm.data();
    d.layers.push_back(l);
  }
  return d;
}

// Logits [n_tok, kVocab] of residual streams x [n_tok, n_embd].
std::vector<double> logits(const Synth& s, const float* x, int n_tok) {
  const int E = s.v.n_embd;
  std::vector<double> out(size_t(n_tok) * kVocab);
  for (int t = 0; t < n_tok; ++t)
    for (int r = 0; r < kVocab; ++r) {
      double acc = 0;
      for (int i = 0; i < E; ++i) acc += double(s.head.values[size_t(r * E + i)]) * x[t * E + i];
      out[size_t(t) * kVocab + size_t(r)] = acc;
    }
  return out;
}

// Running comparison of span vs per-matmul logits.
struct Compare {
  int tokens = 0, argmax_equal = 0;
  double max_diff = 0, max_abs = 0;
  std::string first_bad;

  // Both residual streams through the synthetic head, token by token.
  void add(const Synth& s, const float* x_span, const float* x_ref, int n_tok, const std::string& step) {
    const auto a = logits(s, x_span, n_tok), b = logits(s, x_ref, n_tok);
    for (int t = 0; t < n_tok; ++t)
      add_logits(&a[size_t(t) * kVocab], &b[size_t(t) * kVocab], step + " token " + std::to_string(t));
  }
  // One token's logits la (the span) against lb (the reference).
  void add_logits(const double* la, const double* lb, const std::string& what) {
    const int ia = int(std::max_element(la, la + kVocab) - la), ib = int(std::max_element(lb, lb + kVocab) - lb);
    double tok_abs = 0;
    for (int r = 0; r < kVocab; ++r) {
      if (!std::isfinite(la[r])) max_diff = INFINITY;
      max_diff = std::max(max_diff, std::fabs(la[r] - lb[r]));
      tok_abs = std::max(tok_abs, std::fabs(lb[r]));
    }
    max_abs = std::max(max_abs, tok_abs);
    ++tokens;
    // A flip between two logits the per-matmul path itself sees as tied (within
    // 0.1% of the largest) is not a disagreement.
    const bool tie = std::fabs(lb[ia] - lb[ib]) <= 1e-3 * tok_abs;
    if (ia == ib || tie) ++argmax_equal;
    else if (first_bad.empty()) first_bad = what + ": argmax " + std::to_string(ia) + " vs " + std::to_string(ib);
  }
  void require() const {
    expect(first_bad.empty(), first_bad);
    expect(max_diff <= 0.02 * max_abs, "max |Δlogit| " + fmt(max_diff) + " > 2% of max |logit| " + fmt(max_abs));
  }
  std::string summary() const {
    return "argmax equal " + std::to_string(argmax_equal) + "/" + std::to_string(tokens) + ", max |Δlogit| " +
           fmt(100.0 * max_diff / std::max(max_abs, 1e-30)) + "% of max |logit|";
  }
};

void run_variant(Runner& run, const PluginLibrary* lib, const std::string& name, const Variant& v, std::mt19937_64& rng) {
  const std::string tag = "span " + v.name + " " + ggml_type_name(v.type);
  std::unique_ptr<PluginBackend> be;
  Synth s;
  std::unique_ptr<RefSpan> ref;
  BackendSpan* span = nullptr;
  uint64_t resident0 = 0, estimate = 0;
  std::vector<float> xs, xr;  // span / per-matmul residual streams
  const int E = v.n_embd;
  bool ok = true;             // set to false by a failing step: later steps depend on it
  auto step = [&](const std::string& what, auto&& body) {
    run.check(tag + ": " + what, [&]() -> std::string {
      if (!ok) fail("an earlier step of this span failed");
      try {
        return body();
      } catch (...) {
        ok = false;
        throw;
      }
    });
  };
  auto fwd_both = [&](int n_tok, int pos0, Compare& cmp, const std::string& what) {
    xs = random_vector(size_t(n_tok * E), 1.0f, rng);
    xr = xs;
    expect(be->span_forward(span, xs.data(), n_tok, pos0), what + ": span_forward: " + be->last_error());
    ref->forward(xr.data(), n_tok, pos0);
    cmp.add(s, xs.data(), xr.data(), n_tok, what);
  };
  auto kv_is = [&](int want, const std::string& when) {
    const int got = be->span_kv_len(span);
    if (got >= 0 || be->api().span_kv_len) expect(got == want, "span_kv_len " + std::to_string(got) + " " + when + ", expected " + std::to_string(want));
  };
  // A call that must be refused with FISH_E_RANGE and leave x bitwise untouched.
  auto refused = [&](int n_tok, int pos0, const std::string& what) {
    std::vector<float> x = random_vector(size_t(n_tok * E), 1.0f, rng), before = x;
    expect(!be->span_forward(span, x.data(), n_tok, pos0), what + " was accepted");
    expect(be->last_status() == FISH_E_RANGE, what + ": status " + std::string(status_name(be->last_status())) +
                                                  ", expected out of range");
    expect(std::memcmp(x.data(), before.data(), x.size() * sizeof(float)) == 0, what + ": x was modified");
    return be->last_error();
  };

  step("create", [&]() -> std::string {
    be = new_backend(lib, name);
    if (!be->has_spans()) skip("the plugin has no span support");
    for (GgmlType t : {v.type, GgmlType::F32})
      if (!be->supports(t)) skip(ggml_type_name(t) + " is not supported");
    s = make_synth(v, rng);
    for (auto& L : s.layers)
      for (int i = 0; i < 7; ++i) {
        L.h[i] = be->upload(desc_of(L.w[i]));
        expect(L.h[i] != nullptr, "upload " + L.w[i].name + ": " + be->last_error());
      }
    resident0 = be->bytes_resident();
    const SpanDesc d = span_desc(s, kCtx);
    estimate = be->span_bytes(d);
    span = be->span_create(d);
    expect(span != nullptr, "span_create: " + be->last_error());
    const uint64_t used = be->bytes_resident() - resident0;
    const uint64_t kv_min = uint64_t(v.n_layers) * kCtx * uint64_t(v.n_head_kv * v.head_dim) * 2 * 2;  // f16 K+V
    expect(estimate >= kv_min, "span_bytes " + std::to_string(estimate) + " is less than even an f16 KV (" +
                                   std::to_string(kv_min) + ")");
    expect(used > 0 && used <= estimate, "span_create took " + std::to_string(used) + " bytes, span_bytes said " +
                                             std::to_string(estimate));
    ref = std::make_unique<RefSpan>(*be, s);
    return "span_bytes " + std::to_string(estimate) + ", resident +" + std::to_string(used);
  });

  step("prefill 70 + decode 3 ≡ per-matmul", [&]() -> std::string {
    Compare cmp;
    fwd_both(70, 0, cmp, "prefill");
    for (int p = 70; p < 73; ++p) fwd_both(1, p, cmp, "decode at " + std::to_string(p));
    kv_is(73, "after 73 positions");
    cmp.require();
    return cmp.summary();
  });

  step("gap refused", [&]() -> std::string {
    const std::string msg = refused(1, 74, "span_forward at 74 after 73 positions");
    kv_is(73, "after the refused gap");
    return "\"" + msg + "\"";
  });

  step("truncate and continue", [&]() -> std::string {
    expect(be->span_kv_truncate(span, 50), "span_kv_truncate(50): " + be->last_error());
    ref->truncate(50);
    kv_is(50, "after truncating to 50");
    Compare cmp;
    fwd_both(2, 50, cmp, "2 tokens at 50");
    kv_is(52, "after 2 more");
    expect(!be->span_kv_truncate(span, 60), "span_kv_truncate(60) with 52 positions was accepted");
    cmp.require();
    return cmp.summary() + "; truncate past the end refused";
  });

  step("capacity refused, then span_kv_reserve", [&]() -> std::string {
    const std::string msg = refused(50, 52, "50 tokens at 52 with capacity " + std::to_string(kCtx));
    kv_is(52, "after the refused overflow");
    const uint64_t r0 = be->bytes_resident();
    expect(be->span_kv_reserve(span, 128), "span_kv_reserve(128): " + be->last_error());
    expect(be->bytes_resident() >= r0, "bytes_resident shrank after span_kv_reserve");
    Compare cmp;
    fwd_both(50, 52, cmp, "50 tokens at 52 after reserve");
    kv_is(102, "after the reserve + 50 tokens");
    cmp.require();
    return "\"" + msg + "\"; after reserve: " + cmp.summary();
  });

  step("redo positions (pos0 < KV length)", [&]() -> std::string {
    Compare cmp;
    fwd_both(3, 100, cmp, "3 tokens at 100 (replacing 100, 101)");
    kv_is(103, "after redoing from 100");
    cmp.require();
    return cmp.summary();
  });

  // ABI 1.1: the head in the span's submission. Not through step(): a plugin
  // without it skips, and the span goes on to the destroy check either way.
  run.check(tag + ": head in the span (span_set_head / span_forward_logits / its view)", [&]() -> std::string {
    if (!ok) fail("an earlier step of this span failed");
    if (!be->has_span_head()) skip("the plugin has no span head (plugin ABI 1.1)");
    BackendWeight* hw = be->upload(desc_of(s.head));
    expect(hw != nullptr, "upload " + s.head.name + ": " + be->last_error());
    struct Release {  // the head goes again whatever happens below
      PluginBackend& be;
      BackendSpan* span;
      BackendWeight* hw;
      ~Release() {
        be.span_set_head(span, nullptr, nullptr);
        be.release(hw);
      }
    } release{*be, span, hw};
    std::vector<float> norm(static_cast<size_t>(E));
    for (float& w : norm) w = 1.0f + 0.5f * random_vector(1, 1.0f, rng)[0];
    expect(be->span_set_head(span, hw, norm.data()), "span_set_head: " + be->last_error());
    const uint64_t held = be->bytes_resident();
    be->release(hw);
    expect(be->bytes_resident() == held, "release() of the attached head was not refused");
    // ABI 1.2's view (when the plugin has it) takes the second forward.
    const bool view = be->has_span_logits_view();
    Compare cmp, heads;  // the residual streams; the logits against the head on the reference stream
    for (const auto& [n_tok, pos0] : {std::pair<int, int>{1, 103}, {3, 104}}) {
      const bool by_view = view && n_tok == 3;
      const std::string what = std::to_string(n_tok) + " token(s) at " + std::to_string(pos0) + (by_view ? " (view)" : "");
      xs = random_vector(size_t(n_tok * E), 1.0f, rng);
      xr = xs;
      std::vector<float> lg(kVocab, NAN);
      if (by_view) {
        const float* v = nullptr;
        expect(be->span_forward_logits_view(span, xs.data(), n_tok, pos0, &v),
               what + ": span_forward_logits_view: " + be->last_error());
        expect(v != nullptr, what + ": span_forward_logits_view succeeded without a pointer");
        lg.assign(v, v + kVocab);
      } else {
        expect(be->span_forward_logits(span, xs.data(), n_tok, pos0, lg.data()),
               what + ": span_forward_logits: " + be->last_error());
      }
      ref->forward(xr.data(), n_tok, pos0);
      cmp.add(s, xs.data(), xr.data(), n_tok, what);
      // The head on the per-matmul stream's last token (its rmsnorm, then the synthetic head in double).
      std::vector<float> xn(static_cast<size_t>(E));
      rmsnorm(xr.data() + size_t(n_tok - 1) * E, norm.data(), xn.data(), E, 1e-5f);
      const std::vector<double> got(lg.begin(), lg.end()), want = logits(s, xn.data(), 1);
      heads.add_logits(got.data(), want.data(), what + ": logits");
    }
    kv_is(107, "after 4 tokens with the head");
    cmp.require();
    heads.require();
    // Detached: refused, x untouched.
    expect(be->span_set_head(span, nullptr, nullptr), "span_set_head(NULL): " + be->last_error());
    std::vector<float> x = random_vector(size_t(E), 1.0f, rng), before = x, lg(kVocab);
    expect(!be->span_forward_logits(span, x.data(), 1, 107, lg.data()), "span_forward_logits without a head was accepted");
    expect(be->last_status() == FISH_E_INVALID_ARGUMENT,
           "without a head: status " + std::string(status_name(be->last_status())) + ", expected invalid argument");
    expect(std::memcmp(x.data(), before.data(), x.size() * sizeof(float)) == 0, "without a head: x was modified");
    if (view) {
      const float* v = lg.data();
      expect(!be->span_forward_logits_view(span, x.data(), 1, 107, &v), "span_forward_logits_view without a head was accepted");
      expect(v == lg.data(), "span_forward_logits_view without a head: the pointer was changed");
      expect(std::memcmp(x.data(), before.data(), x.size() * sizeof(float)) == 0, "view without a head: x was modified");
    }
    kv_is(107, "after the refused call");
    return "stream " + cmp.summary() + "; logits " + heads.summary() + (view ? " (the second by the 1.2 view)" : "") +
           "; release while attached and forward without a head refused";
  });

  step("destroy releases its memory", [&]() -> std::string {
    be->span_destroy(span);
    span = nullptr;
    expect(be->bytes_resident() == resident0, "bytes_resident " + std::to_string(be->bytes_resident()) +
                                                  " after span_destroy, " + std::to_string(resident0) + " before create");
    for (auto& L : s.layers)
      for (auto* h : L.h) be->release(h);
    expect(be->bytes_resident() == 0, "bytes_resident " + std::to_string(be->bytes_resident()) + " after releasing all");
    return "back to " + std::to_string(resident0) + " then 0 bytes";
  });
}

}  // namespace

void run_span_checks(Runner& run, const PluginLibrary* lib, const std::string& name) {
  std::mt19937_64 rng(run.seed() + 17);
  {
    auto be = new_backend(lib, name);
    if (!be->has_spans()) {
      run.check("span", []() -> std::string { skip("the plugin has no span support"); });
      return;
    }
  }
  const std::vector<Variant> variants = {
      // name      E    H  KVH  D   FF  L  rope            base    scale attn  freqs  bias   qknorm  type
      {"llama", 64, 4, 2, 16, 96, 2, RopeType::Normal, 10000.f, 1.0f, 0.0f, true, false, false, GgmlType::F32},
      {"qwen2", 64, 4, 1, 16, 96, 2, RopeType::NeoX, 1000000.f, 1.0f, 0.3f, false, true, false, GgmlType::F32},
      {"qwen3", 64, 2, 2, 32, 128, 2, RopeType::NeoX, 1000000.f, 0.5f, 0.0f, false, false, true, GgmlType::F32},
      {"llama", 64, 4, 2, 16, 96, 2, RopeType::Normal, 500000.f, 1.0f, 0.0f, true, false, false, GgmlType::Q8_0},
      {"llama", 256, 4, 2, 64, 512, 1, RopeType::Normal, 10000.f, 1.0f, 0.0f, false, false, false, GgmlType::Q4_K},
  };
  for (const auto& v : variants) run_variant(run, lib, name, v, rng);
}

}  // namespace fish::backend::conf
