// Conformance suite: the synthetic decoder and the host-side reference span.
#include "backend/conformance_synth.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "backend/host_services.h"

namespace fish::backend::conf {

const std::vector<Variant>& span_variants() {
  static const std::vector<Variant> v = {
      // name      E    H  KVH  D   FF  L  rope            base    scale attn  freqs  bias   qknorm  type
      {"llama", 64, 4, 2, 16, 96, 2, RopeType::Normal, 10000.f, 1.0f, 0.0f, true, false, false, GgmlType::F32},
      {"qwen2", 64, 4, 1, 16, 96, 2, RopeType::NeoX, 1000000.f, 1.0f, 0.3f, false, true, false, GgmlType::F32},
      {"qwen3", 64, 2, 2, 32, 128, 2, RopeType::NeoX, 1000000.f, 0.5f, 0.0f, false, false, true, GgmlType::F32},
      {"llama", 64, 4, 2, 16, 96, 2, RopeType::Normal, 500000.f, 1.0f, 0.0f, true, false, false, GgmlType::Q8_0},
      {"llama", 256, 4, 2, 64, 512, 1, RopeType::Normal, 10000.f, 1.0f, 0.0f, false, false, false, GgmlType::Q4_K},
  };
  return v;
}

void rmsnorm_ref(const float* x, const float* w, float* out, int n, float eps) {
  double ss = 0;
  for (int i = 0; i < n; ++i) ss += double(x[i]) * x[i];
  const double inv = 1.0 / std::sqrt(ss / n + eps);
  for (int i = 0; i < n; ++i) out[i] = float(x[i] * inv) * w[i];
}

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
  if (v.freqs)
    for (int i = 0; i < v.head_dim / 2; ++i) s.rope_freqs.push_back(1.0f + 3.0f * float(i) / float(v.head_dim / 2));
  s.head = make_weight(GgmlType::F32, kVocab, E, 1.0f, rng, "output.weight");
  s.head_norm = ones(E);
  return s;
}

void upload_synth(PluginBackend& be, Synth& s) {
  static constexpr TensorRole kRoles[7] = {TensorRole::AttnQ,   TensorRole::AttnK, TensorRole::AttnV, TensorRole::AttnOut,
                                           TensorRole::FfnGate, TensorRole::FfnUp, TensorRole::FfnDown};
  const Variant& v = s.v;
  s.desc.clear();
  for (auto& L : s.layers) {
    SpanLayer d;
    auto vec = [&](TensorRole r, const std::vector<float>& data) {
      if (!data.empty()) d.tensors.push_back(SpanTensor{r, nullptr, data.data(), int64_t(data.size())});
    };
    vec(TensorRole::AttnNorm, L.attn_norm);
    vec(TensorRole::FfnNorm, L.ffn_norm);
    vec(TensorRole::AttnQBias, L.bq);
    vec(TensorRole::AttnKBias, L.bk);
    vec(TensorRole::AttnVBias, L.bv);
    vec(TensorRole::AttnQNorm, L.q_norm);
    vec(TensorRole::AttnKNorm, L.k_norm);
    for (int i = 0; i < 7; ++i) {
      L.h[i] = be.upload(desc_of(L.w[i]));
      expect(L.h[i] != nullptr, "upload " + L.w[i].name + " (" + ggml_type_name(v.type) + "): " + be.last_error());
      d.tensors.push_back(SpanTensor{kRoles[i], L.h[i], nullptr, 0});
    }
    s.desc.push_back(std::move(d));
  }
}

void release_synth(PluginBackend& be, Synth& s) {
  for (auto& L : s.layers)
    for (auto*& h : L.h) {
      be.release(h);
      h = nullptr;
    }
}

SpanDesc span_desc(const Synth& s, int n_ctx, int n_seq) {
  SpanDesc d;
  const Variant& v = s.v;
  d.first_layer = 3;
  d.n_embd = v.n_embd;
  d.n_head = v.n_head;
  d.n_head_kv = v.n_head_kv;
  d.head_dim = v.head_dim;
  d.n_ff = v.n_ff;
  d.n_ctx = n_ctx;
  d.n_seq = n_seq;
  d.arch.norm_eps = 1e-5f;
  d.arch.rope = v.rope;
  d.arch.n_rot = v.head_dim;
  d.arch.rope_freq_base = v.base;
  d.arch.rope_freq_scale = v.scale;
  d.arch.rope_freqs = s.rope_freqs.empty() ? nullptr : s.rope_freqs.data();
  d.arch.attn_scale = v.attn_scale;
  d.layers = s.desc;
  return d;
}

std::vector<SpanLayer> without_weights(const std::vector<SpanLayer>& layers) {
  std::vector<SpanLayer> out = layers;
  for (auto& l : out)
    for (auto& t : l.tensors) t.weight = nullptr;
  return out;
}

// ---- RefSpan -------------------------------------------------------------------

RefSpan::RefSpan(PluginBackend& be, const Synth& s, int n_seq, int capacity) : be_(be), s_(s), capacity_(capacity) {
  const size_t kd = size_t(s.v.n_head_kv * s.v.head_dim);
  k_.assign(size_t(n_seq), std::vector<std::vector<float>>(s.layers.size(), std::vector<float>(size_t(capacity) * kd)));
  v_ = k_;
  len_.assign(size_t(n_seq), 0);
}

void RefSpan::truncate(int seq, int n) { len_[size_t(seq)] = std::min(len_[size_t(seq)], n); }

void RefSpan::copy(int src, int dst, int p0, int p1) {
  if (src == dst) return;
  const size_t kd = size_t(s_.v.n_head_kv * s_.v.head_dim);
  for (size_t l = 0; l < s_.layers.size(); ++l) {
    std::copy(k_[size_t(src)][l].begin() + ptrdiff_t(size_t(p0) * kd), k_[size_t(src)][l].begin() + ptrdiff_t(size_t(p1) * kd),
              k_[size_t(dst)][l].begin() + ptrdiff_t(size_t(p0) * kd));
    std::copy(v_[size_t(src)][l].begin() + ptrdiff_t(size_t(p0) * kd), v_[size_t(src)][l].begin() + ptrdiff_t(size_t(p1) * kd),
              v_[size_t(dst)][l].begin() + ptrdiff_t(size_t(p0) * kd));
  }
  len_[size_t(dst)] = p1;
}

void RefSpan::forward(float* x, int n_tok, const int32_t* seq, const int32_t* pos) {
  const Variant& v = s_.v;
  const int E = v.n_embd, H = v.n_head, KVH = v.n_head_kv, D = v.head_dim, F = v.n_ff;
  const int QD = H * D, KD = KVH * D, group = H / KVH;
  const size_t n = size_t(n_tok);
  const float scale = v.attn_scale != 0 ? v.attn_scale : float(1.0 / std::sqrt(double(D)));
  auto sq = [&](size_t t) { return size_t(seq ? seq[t] : 0); };
  for (size_t t = 0; t < n; ++t) expect(pos[t] < capacity_, "the reference span holds fewer positions than the check uses");
  std::vector<float> a(n * E), q(n * QD), k(n * KD), vv(n * KD), att(n * QD), o(n * E), g(n * F), u(n * F);
  for (size_t l = 0; l < s_.layers.size(); ++l) {
    const SynthLayer& L = s_.layers[l];
    for (size_t t = 0; t < n; ++t) rmsnorm_ref(x + t * E, L.attn_norm.data(), &a[t * E], E, 1e-5f);
    mm(L, 0, a.data(), n_tok, q.data());
    mm(L, 1, a.data(), n_tok, k.data());
    mm(L, 2, a.data(), n_tok, vv.data());
    for (size_t t = 0; t < n; ++t) {
      if (v.biases) {
        for (int i = 0; i < QD; ++i) q[t * QD + i] += L.bq[size_t(i)];
        for (int i = 0; i < KD; ++i) k[t * KD + i] += L.bk[size_t(i)], vv[t * KD + i] += L.bv[size_t(i)];
      }
      if (v.qk_norm) {
        for (int h = 0; h < H; ++h) rmsnorm_ref(&q[t * QD + h * D], L.q_norm.data(), &q[t * QD + h * D], D, 1e-5f);
        for (int h = 0; h < KVH; ++h) rmsnorm_ref(&k[t * KD + h * D], L.k_norm.data(), &k[t * KD + h * D], D, 1e-5f);
      }
      rope(&q[t * QD], H, pos[t]);
      rope(&k[t * KD], KVH, pos[t]);
      std::copy_n(&k[t * KD], KD, &k_[sq(t)][l][size_t(pos[t]) * KD]);
      std::copy_n(&vv[t * KD], KD, &v_[sq(t)][l][size_t(pos[t]) * KD]);
    }
    for (size_t t = 0; t < n; ++t) {
      const int p = pos[t];
      const std::vector<float>& kc = k_[sq(t)][l];
      const std::vector<float>& vc = v_[sq(t)][l];
      for (int h = 0; h < H; ++h) {
        const int kvh = h / group;
        std::vector<double> w(size_t(p) + 1);
        double mx = -INFINITY, sum = 0;
        for (int j = 0; j <= p; ++j) {
          double dot = 0;
          for (int i = 0; i < D; ++i) dot += double(q[t * QD + h * D + i]) * kc[size_t(j) * KD + kvh * D + i];
          w[size_t(j)] = dot * scale;
          mx = std::max(mx, w[size_t(j)]);
        }
        for (auto& e : w) sum += (e = std::exp(e - mx));
        for (int i = 0; i < D; ++i) {
          double acc = 0;
          for (int j = 0; j <= p; ++j) acc += w[size_t(j)] * vc[size_t(j) * KD + kvh * D + i];
          att[t * QD + h * D + i] = float(acc / sum);
        }
      }
    }
    mm(L, 3, att.data(), n_tok, o.data());
    for (size_t i = 0; i < n * E; ++i) x[i] += o[i];
    for (size_t t = 0; t < n; ++t) rmsnorm_ref(x + t * E, L.ffn_norm.data(), &a[t * E], E, 1e-5f);
    mm(L, 4, a.data(), n_tok, g.data());
    mm(L, 5, a.data(), n_tok, u.data());
    for (size_t i = 0; i < n * F; ++i) g[i] = g[i] / (1.0f + std::exp(-g[i])) * u[i];
    mm(L, 6, g.data(), n_tok, o.data());
    for (size_t i = 0; i < n * E; ++i) x[i] += o[i];
  }
  // A sequence's length becomes its last row's position + 1 (rows come in position order).
  for (size_t t = 0; t < n; ++t) len_[sq(t)] = pos[t] + 1;
}

void RefSpan::mm(const SynthLayer& L, int i, const float* x, int n_tok, float* y) {
  expect(be_.matmul(L.h[i], x, n_tok, y), "per-matmul path: matmul " + L.w[i].name + ": " + be_.last_error());
}

void RefSpan::rope(float* vec, int n_heads, int pos) const {
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

// ---- logits and comparison ------------------------------------------------------

std::vector<double> head_logits(const Synth& s, const float* x, int n_tok) {
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

std::vector<double> ref_row_logits(const Synth& s, const float* x_row) {
  std::vector<float> xn(size_t(s.v.n_embd));
  rmsnorm_ref(x_row, s.head_norm.data(), xn.data(), s.v.n_embd, 1e-5f);
  return head_logits(s, xn.data(), 1);
}

void Compare::add(const Synth& s, const float* x_span, const float* x_ref, int n_tok, const std::string& step) {
  const auto a = head_logits(s, x_span, n_tok), b = head_logits(s, x_ref, n_tok);
  for (int t = 0; t < n_tok; ++t)
    add_logits(&a[size_t(t) * kVocab], &b[size_t(t) * kVocab], step + " row " + std::to_string(t));
}

void Compare::add_logits(const double* la, const double* lb, const std::string& what) {
  const int ia = int(std::max_element(la, la + kVocab) - la), ib = int(std::max_element(lb, lb + kVocab) - lb);
  double tok_abs = 0, tok_diff = 0;
  for (int r = 0; r < kVocab; ++r) {
    if (!std::isfinite(la[r])) max_diff = INFINITY;
    tok_diff = std::max(tok_diff, std::fabs(la[r] - lb[r]));
    tok_abs = std::max(tok_abs, std::fabs(lb[r]));
  }
  max_diff = std::max(max_diff, tok_diff);
  max_abs = std::max(max_abs, tok_abs);
  ++tokens;
  // A flip between two logits the reference sees as tied is not a
  // disagreement: tied within this row's own difference, at least 0.1% and at
  // most 1% of its largest logit (int8 activations round that much: 0.5-0.9%
  // measured on these shapes; f32 paths differ by ~0.02%). The differences
  // themselves are held to the 2% bound apart.
  const double tie_tol = std::clamp(tok_diff, 1e-3 * tok_abs, 1e-2 * tok_abs);
  const bool tie = std::fabs(lb[ia] - lb[ib]) <= tie_tol;
  if (ia == ib || tie) ++argmax_equal;
  else if (first_bad.empty())
    first_bad = what + ": argmax " + std::to_string(ia) + " vs " + std::to_string(ib) + " (the reference's " +
                std::to_string(ib) + " leads " + std::to_string(ia) + " by " + fmt(100 * (lb[ib] - lb[ia]) / tok_abs) +
                "% of the row's max |logit|; the span's " + std::to_string(ia) + " leads by " +
                fmt(100 * (la[ia] - la[ib]) / tok_abs) + "%)";
}

void Compare::require(double rel) const {
  expect(first_bad.empty(), first_bad);
  expect(max_diff <= rel * max_abs, "max |Δlogit| " + fmt(max_diff) + " > " + fmt(100 * rel) + "% of max |logit| " +
                                        fmt(max_abs));
}

std::string Compare::summary() const {
  return "argmax equal " + std::to_string(argmax_equal) + "/" + std::to_string(tokens) + ", max |Δlogit| " +
         fmt(100.0 * max_diff / std::max(max_abs, 1e-30)) + "% of max |logit|";
}

// ---- SpanRig --------------------------------------------------------------------

void SpanRig::both(const Rows& r, Compare& cmp, const std::string& what, std::mt19937_64& rng, bool may_refuse,
                   const std::vector<float>* x_in) {
  const int E = s.v.n_embd;
  xs = x_in ? *x_in : random_vector(size_t(r.n()) * size_t(E), 1.0f, rng);
  xr = xs;
  SpanBatch b;
  b.n_tok = r.n();
  b.x = xs.data();
  b.seq = r.seq.data();
  b.pos = r.pos.data();
  b.x_out = true;
  if (!be->span_forward_once(span, b)) {
    if (may_refuse && be->last_status() == FISH_E_UNSUPPORTED)
      skip("the plugin does not run " + what + " (unsupported): " + be->last_error());
    fail(what + ": span_forward: " + be->last_error());
  }
  ref->forward(xr.data(), r.n(), r.seq.data(), r.pos.data());
  cmp.add(s, xs.data(), xr.data(), r.n(), what);
}

std::string SpanRig::refused(const Rows& r, int status, const std::string& what, std::mt19937_64& rng, bool logits) {
  const int E = s.v.n_embd;
  std::vector<float> x = random_vector(size_t(r.n()) * size_t(E), 1.0f, rng), before = x;
  std::vector<float> lg(size_t(std::max(1, r.n_wanted())) * kVocab, -7.0f);
  SpanBatch b;
  b.n_tok = r.n();
  b.x = x.data();
  b.seq = r.seq.data();
  b.pos = r.pos.data();
  b.x_out = true;
  if (logits) {
    b.logits_rows = r.want.data();
    b.logits_view = true;
  }
  const float* sentinel = lg.data();
  b.view = sentinel;
  expect(!be->span_forward_once(span, b), what + " was accepted");
  expect(be->last_status() == status, what + ": status " + std::string(status_name(be->last_status())) + ", expected " +
                                          status_name(status) + " (" + be->last_error() + ")");
  expect(std::memcmp(x.data(), before.data(), x.size() * sizeof(float)) == 0, what + ": x was modified");
  expect(b.view == sentinel, what + ": the logits view pointer was changed");
  const std::string msg = be->last_error();
  expect(!msg.empty(), what + ": refused without a message");
  return msg;
}

void SpanRig::kv_is(int seq, int want, const std::string& when) {
  const int got = be->span_kv_len(span, seq);
  expect(got == want, "span_kv_len(" + std::to_string(seq) + ") is " + std::to_string(got) + " " + when +
                          ", expected " + std::to_string(want) + (got < 0 ? " (" + be->last_error() + ")" : ""));
}

}  // namespace fish::backend::conf
