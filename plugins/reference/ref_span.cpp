#include "ref_span.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "host.h"
#include "ref_backend.h"

namespace fish::reference {

namespace {

std::vector<float> copy_vec(const float* p, int64_t n) { return p ? std::vector<float>(p, p + n) : std::vector<float>(); }

// out = v / sqrt(mean(v²) + eps) * w   (v, w, out: [n]; out may alias v)
void rmsnorm(const float* v, const float* w, float* out, int n, float eps) {
  double ss = 0.0;
  for (int i = 0; i < n; ++i) ss += double(v[i]) * double(v[i]);
  const double inv = 1.0 / std::sqrt(ss / n + double(eps));
  for (int i = 0; i < n; ++i) out[i] = float(double(v[i]) * inv) * w[i];
}

float silu(float z) { return z / (1.0f + std::exp(-z)); }

void check_weight(const Weight* w, int64_t n_out, int64_t n_in, const std::string& what) {
  if (w->n_out != n_out || w->n_in != n_in)
    fail(FISH_E_INVALID_ARGUMENT, what + " (" + w->name + ") is [" + std::to_string(w->n_out) + " x " +
                                      std::to_string(w->n_in) + "], the span needs [" + std::to_string(n_out) + " x " +
                                      std::to_string(n_in) + "]");
}

}  // namespace

uint64_t Span::bytes_for(const fish_span_desc* d, int64_t capacity) {
  const uint64_t kv_dim = uint64_t(d->n_head_kv) * uint64_t(d->head_dim);
  const uint64_t q_dim = uint64_t(d->n_head) * uint64_t(d->head_dim);
  // Per layer: K and V caches, two norm vectors, at most three biases and two head norms.
  const uint64_t per_layer = 2 * uint64_t(capacity) * kv_dim + 2 * uint64_t(d->n_embd) + q_dim + 2 * kv_dim +
                             2 * uint64_t(d->head_dim);
  return (uint64_t(d->n_layers) * per_layer + uint64_t(d->n_rot / 2)) * sizeof(float);
}

Span::Span(Backend& be, const fish_span_desc* d) : be_(be) {
  if (!d || !FISH_STRUCT_HAS(d, fish_span_desc, layers))
    fail(FISH_E_INVALID_ARGUMENT, "span_create: the span description is missing or too short");
  const std::string where = "span_create (layers " + std::to_string(d->first_layer) + ".." +
                            std::to_string(d->first_layer + d->n_layers - 1) + ")";
  if (d->n_layers < 1 || d->n_embd < 1 || d->n_head < 1 || d->n_head_kv < 1 || d->head_dim < 1 || d->n_ff < 1 ||
      d->n_ctx < 1 || !d->layers)
    fail(FISH_E_INVALID_ARGUMENT, where + ": n_layers, n_embd, n_head, n_head_kv, head_dim, n_ff, n_ctx must be >= 1");
  if (d->n_head % d->n_head_kv != 0)
    fail(FISH_E_INVALID_ARGUMENT, where + ": n_head " + std::to_string(d->n_head) + " is not a multiple of n_head_kv " +
                                      std::to_string(d->n_head_kv));
  if (d->n_rot < 0 || d->n_rot % 2 != 0 || d->n_rot > d->head_dim)
    fail(FISH_E_INVALID_ARGUMENT, where + ": n_rot " + std::to_string(d->n_rot) + " must be even and <= head_dim");
  if (d->rope_type != FISH_ROPE_NORMAL && d->rope_type != FISH_ROPE_NEOX)
    fail(FISH_E_UNSUPPORTED, where + ": RoPE type " + std::to_string(d->rope_type) + " is not supported");

  first_layer_ = d->first_layer;
  n_embd_ = d->n_embd;
  n_head_ = d->n_head;
  n_head_kv_ = d->n_head_kv;
  head_dim_ = d->head_dim;
  n_ff_ = d->n_ff;
  rms_eps_ = d->rms_eps;
  rope_type_ = d->rope_type;
  n_rot_ = d->n_rot;
  rope_base_ = d->rope_freq_base;
  rope_scale_ = d->rope_freq_scale;
  attn_scale_ = d->attn_scale;
  rope_freqs_ = copy_vec(d->rope_freqs, n_rot_ / 2);

  const int64_t E = n_embd_, QD = int64_t(n_head_) * head_dim_, KD = int64_t(n_head_kv_) * head_dim_;
  for (int i = 0; i < d->n_layers; ++i) {
    const fish_span_layer* l = d->layers[i];
    const std::string lw = where + ": layer " + std::to_string(d->first_layer + i);
    if (!l || !FISH_STRUCT_HAS(l, fish_span_layer, ffn_norm) || !l->attn_norm || !l->ffn_norm)
      fail(FISH_E_INVALID_ARGUMENT, lw + ": missing layer description or norm vectors");
    Layer L;
    L.wq = be_.weight(l->wq);
    L.wk = be_.weight(l->wk);
    L.wv = be_.weight(l->wv);
    L.wo = be_.weight(l->wo);
    L.w_gate = be_.weight(l->w_gate);
    L.w_up = be_.weight(l->w_up);
    L.w_down = be_.weight(l->w_down);
    check_weight(L.wq, QD, E, lw + " wq");
    check_weight(L.wk, KD, E, lw + " wk");
    check_weight(L.wv, KD, E, lw + " wv");
    check_weight(L.wo, E, QD, lw + " wo");
    check_weight(L.w_gate, n_ff_, E, lw + " w_gate");
    check_weight(L.w_up, n_ff_, E, lw + " w_up");
    check_weight(L.w_down, E, n_ff_, lw + " w_down");
    L.attn_norm = copy_vec(l->attn_norm, E);
    L.ffn_norm = copy_vec(l->ffn_norm, E);
    // Optional fields: absent when NULL or beyond the struct_size the host wrote.
    if (FISH_STRUCT_HAS(l, fish_span_layer, bq)) L.bq = copy_vec(l->bq, QD);
    if (FISH_STRUCT_HAS(l, fish_span_layer, bk)) L.bk = copy_vec(l->bk, KD);
    if (FISH_STRUCT_HAS(l, fish_span_layer, bv)) L.bv = copy_vec(l->bv, KD);
    if (FISH_STRUCT_HAS(l, fish_span_layer, q_norm)) L.q_norm = copy_vec(l->q_norm, head_dim_);
    if (FISH_STRUCT_HAS(l, fish_span_layer, k_norm)) L.k_norm = copy_vec(l->k_norm, head_dim_);
    layers_.push_back(std::move(L));
  }
  const uint64_t bytes = bytes_for(d, d->n_ctx);
  be_.charge(bytes, where);
  charged_ = bytes;
  try {
    for (auto& L : layers_) {
      L.k_cache.assign(size_t(int64_t(d->n_ctx) * KD), 0.0f);
      L.v_cache.assign(size_t(int64_t(d->n_ctx) * KD), 0.0f);
    }
  } catch (...) {
    be_.uncharge(charged_);
    throw;
  }
  capacity_ = d->n_ctx;
}

Span::~Span() { be_.uncharge(charged_); }

bool Span::uses(const Weight* w) const {
  for (const auto& L : layers_)
    if (L.wq == w || L.wk == w || L.wv == w || L.wo == w || L.w_gate == w || L.w_up == w || L.w_down == w) return true;
  return w != nullptr && w == head_;
}

void Span::set_head(Weight* head, const float* norm) {
  if (!head) {
    head_ = nullptr;
    head_norm_.clear();
    return;
  }
  if (!norm) fail(FISH_E_INVALID_ARGUMENT, "span_set_head: no norm weights");
  if (head->n_in != n_embd_)
    fail(FISH_E_INVALID_ARGUMENT, "span_set_head: " + head->name + " takes " + std::to_string(head->n_in) +
                                      " inputs, the span's n_embd is " + std::to_string(n_embd_));
  head_ = head;
  head_norm_.assign(norm, norm + n_embd_);
}

// RoPE on the first n_rot dims of each of n_heads vectors of head_dim at position pos.
void Span::rope(float* v, int n_heads, int pos) const {
  const int half = n_rot_ / 2;
  for (int i = 0; i < half; ++i) {
    const double ff = rope_freqs_.empty() ? 1.0 : double(rope_freqs_[size_t(i)]);
    const double theta = double(pos) * std::pow(double(rope_base_), -2.0 * i / n_rot_) / ff * double(rope_scale_);
    const double c = std::cos(theta), s = std::sin(theta);
    for (int h = 0; h < n_heads; ++h) {
      float* hv = v + int64_t(h) * head_dim_;
      // NORMAL rotates adjacent pairs (2i, 2i+1); NEOX pairs (i, i + n_rot/2).
      const int ia = rope_type_ == FISH_ROPE_NEOX ? i : 2 * i;
      const int ib = rope_type_ == FISH_ROPE_NEOX ? i + half : 2 * i + 1;
      const double a = hv[ia], b = hv[ib];
      hv[ia] = float(a * c - b * s);
      hv[ib] = float(a * s + b * c);
    }
  }
}

const float* Span::forward_view(float* x, int n_tok, int pos0) {
  if (!head_) fail(FISH_E_INVALID_ARGUMENT, "span_forward_logits_view: no head attached (span_set_head)");
  std::vector<float> out(size_t(head_->n_out));
  forward(x, n_tok, pos0, out.data());  // throws before writing x on failure
  view_.swap(out);
  return view_.data();
}

void Span::forward(float* x_io, int n_tok, int pos0, float* logits) {
  if (!x_io || n_tok < 1 || pos0 < 0) fail(FISH_E_INVALID_ARGUMENT, "span_forward: needs x, n_tok >= 1 and pos0 >= 0");
  if (logits && !head_) fail(FISH_E_INVALID_ARGUMENT, "span_forward_logits: no head attached (span_set_head)");
  if (pos0 > kv_len_)
    fail(FISH_E_RANGE, "span_forward: pos0 " + std::to_string(pos0) + " would leave a gap after the " +
                           std::to_string(kv_len_) + " cached positions");
  if (int64_t(pos0) + n_tok > capacity_)
    fail(FISH_E_RANGE, "span_forward: positions up to " + std::to_string(int64_t(pos0) + n_tok) +
                           " exceed the KV capacity " + std::to_string(capacity_) + " (span_kv_reserve first)");
  const int E = n_embd_, H = n_head_, KVH = n_head_kv_, D = head_dim_, F = n_ff_;
  const int QD = H * D, KD = KVH * D, group = H / KVH;
  const float scale = attn_scale_ != 0.0f ? attn_scale_ : float(1.0 / std::sqrt(double(D)));
  const size_t n = size_t(n_tok);

  // Work on a copy: x_io is written only when everything succeeded.
  std::vector<float> x(x_io, x_io + n * size_t(E));
  std::vector<float> a(n * size_t(E)), q(n * size_t(QD)), k(n * size_t(KD)), v(n * size_t(KD)), att(n * size_t(QD)),
      o(n * size_t(E)), g(n * size_t(F)), u(n * size_t(F));
  kv_len_ = std::min(kv_len_, pos0);  // positions >= pos0 are about to be replaced

  for (Layer& L : layers_) {
    // Attention block: a = rmsnorm(x) * attn_norm; q, k, v projections (+ biases).
    for (size_t t = 0; t < n; ++t) rmsnorm(&x[t * E], L.attn_norm.data(), &a[t * E], E, rms_eps_);
    be_.matmul(*L.wq, a.data(), n_tok, q.data());
    be_.matmul(*L.wk, a.data(), n_tok, k.data());
    be_.matmul(*L.wv, a.data(), n_tok, v.data());
    for (size_t t = 0; t < n; ++t) {
      for (int i = 0; i < QD && !L.bq.empty(); ++i) q[t * QD + size_t(i)] += L.bq[size_t(i)];
      for (int i = 0; i < KD && !L.bk.empty(); ++i) k[t * KD + size_t(i)] += L.bk[size_t(i)];
      for (int i = 0; i < KD && !L.bv.empty(); ++i) v[t * KD + size_t(i)] += L.bv[size_t(i)];
      // qwen3: per-head RMS norm of q and k before RoPE.
      for (int h = 0; h < H && !L.q_norm.empty(); ++h) {
        float* qh = &q[t * QD + size_t(h) * D];
        rmsnorm(qh, L.q_norm.data(), qh, D, rms_eps_);
      }
      for (int h = 0; h < KVH && !L.k_norm.empty(); ++h) {
        float* kh = &k[t * KD + size_t(h) * D];
        rmsnorm(kh, L.k_norm.data(), kh, D, rms_eps_);
      }
      rope(&q[t * QD], H, pos0 + int(t));
      rope(&k[t * KD], KVH, pos0 + int(t));
      // Store this token's K and V at its position.
      std::copy_n(&k[t * KD], KD, &L.k_cache[size_t(pos0 + int(t)) * KD]);
      std::copy_n(&v[t * KD], KD, &L.v_cache[size_t(pos0 + int(t)) * KD]);
    }
    // Causal attention: token t (position p) sees positions 0..p; head h reads KV head h / group.
    std::vector<double> w;
    for (size_t t = 0; t < n; ++t) {
      const int p = pos0 + int(t);
      w.resize(size_t(p) + 1);
      for (int h = 0; h < H; ++h) {
        const float* qh = &q[t * QD + size_t(h) * D];
        const int kvh = h / group;
        double mx = -INFINITY;
        for (int j = 0; j <= p; ++j) {
          const float* kj = &L.k_cache[size_t(j) * KD + size_t(kvh) * D];
          double dot = 0.0;
          for (int i = 0; i < D; ++i) dot += double(qh[i]) * double(kj[i]);
          w[size_t(j)] = dot * scale;
          mx = std::max(mx, w[size_t(j)]);
        }
        double sum = 0.0;
        for (int j = 0; j <= p; ++j) sum += (w[size_t(j)] = std::exp(w[size_t(j)] - mx));
        float* oh = &att[t * QD + size_t(h) * D];
        for (int i = 0; i < D; ++i) {
          double acc = 0.0;
          for (int j = 0; j <= p; ++j) acc += w[size_t(j)] * double(L.v_cache[size_t(j) * KD + size_t(kvh) * D + size_t(i)]);
          oh[i] = float(acc / sum);
        }
      }
    }
    // h = x + att · woᵀ
    be_.matmul(*L.wo, att.data(), n_tok, o.data());
    for (size_t i = 0; i < n * size_t(E); ++i) x[i] += o[i];
    // FFN block: x = h + (silu(n · w_gateᵀ) * (n · w_upᵀ)) · w_downᵀ with n = rmsnorm(h) * ffn_norm.
    for (size_t t = 0; t < n; ++t) rmsnorm(&x[t * E], L.ffn_norm.data(), &a[t * E], E, rms_eps_);
    be_.matmul(*L.w_gate, a.data(), n_tok, g.data());
    be_.matmul(*L.w_up, a.data(), n_tok, u.data());
    for (size_t i = 0; i < n * size_t(F); ++i) g[i] = silu(g[i]) * u[i];
    be_.matmul(*L.w_down, g.data(), n_tok, o.data());
    for (size_t i = 0; i < n * size_t(E); ++i) x[i] += o[i];
  }
  // The head (span_forward_logits): logits = (rmsnorm(x_last) * norm) · headᵀ.
  std::vector<float> out;
  if (logits) {
    out.resize(size_t(head_->n_out));
    rmsnorm(&x[(n - 1) * size_t(E)], head_norm_.data(), a.data(), E, rms_eps_);
    be_.matmul(*head_, a.data(), 1, out.data());
  }
  std::copy(x.begin(), x.end(), x_io);
  if (logits) std::copy(out.begin(), out.end(), logits);
  kv_len_ = pos0 + n_tok;
}

void Span::truncate(int n) {
  if (n < 0 || n > kv_len_)
    fail(FISH_E_RANGE, "span_kv_truncate: " + std::to_string(n) + " is outside 0.." + std::to_string(kv_len_));
  kv_len_ = n;
}

void Span::reserve(int n) {
  if (n < 0) fail(FISH_E_INVALID_ARGUMENT, "span_kv_reserve: negative size");
  if (n <= capacity_) return;
  const uint64_t kv_dim = uint64_t(n_head_kv_) * uint64_t(head_dim_);
  const uint64_t extra = 2 * uint64_t(n - capacity_) * kv_dim * sizeof(float) * layers_.size();
  be_.charge(extra, "span_kv_reserve " + std::to_string(n));
  try {
    for (auto& L : layers_) {
      L.k_cache.resize(size_t(n) * kv_dim, 0.0f);  // layout [pos][kv_dim]: growing keeps the contents
      L.v_cache.resize(size_t(n) * kv_dim, 0.0f);
    }
  } catch (...) {
    be_.uncharge(extra);
    throw;
  }
  charged_ += extra;
  capacity_ = n;
}

}  // namespace fish::reference
