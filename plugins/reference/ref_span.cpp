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

}  // namespace

uint64_t Span::bytes_for(const SpanIn& in, int64_t capacity) {
  const uint64_t kv_dim = uint64_t(in.n_head_kv) * uint64_t(in.head_dim);
  const uint64_t q_dim = uint64_t(in.n_head) * uint64_t(in.head_dim);
  // Per layer: K and V of every sequence, two norm vectors, at most three biases and two head norms.
  // (+ the shared expert's gate vector with MoE).
  const uint64_t per_layer = 2 * uint64_t(capacity) * kv_dim * uint64_t(in.n_seq) + 2 * uint64_t(in.n_embd) + q_dim +
                             2 * kv_dim + 2 * uint64_t(in.head_dim) + (in.n_ff_shexp > 0 ? uint64_t(in.n_embd) : 0);
  return (uint64_t(in.n_layers) * per_layer + uint64_t(in.n_rot / 2)) * sizeof(float);
}

Span::Span(Backend& be, const fish_span_desc* d) : be_(be), shape_(read_span_desc(be, d, true)) {
  const SpanIn& in = shape_;
  const int64_t E = in.n_embd, QD = int64_t(in.n_head) * in.head_dim, KD = int64_t(in.n_head_kv) * in.head_dim;
  rope_freqs_ = copy_vec(in.rope_freqs, in.n_rot / 2);
  for (const LayerIn& l : in.layers) {
    Layer L;
    L.wq = l.wq, L.wk = l.wk, L.wv = l.wv, L.wo = l.wo, L.gate = l.gate, L.up = l.up, L.down = l.down;
    L.router = l.router, L.gate_exps = l.gate_exps, L.up_exps = l.up_exps, L.down_exps = l.down_exps;
    L.gate_shexp = l.gate_shexp, L.up_shexp = l.up_shexp, L.down_shexp = l.down_shexp;
    L.shexp_gate = copy_vec(l.shexp_gate, E);
    L.attn_norm = copy_vec(l.attn_norm, E);
    L.ffn_norm = copy_vec(l.ffn_norm, E);
    L.bq = copy_vec(l.bq, QD);
    L.bk = copy_vec(l.bk, KD);
    L.bv = copy_vec(l.bv, KD);
    L.q_norm = copy_vec(l.q_norm, in.head_dim);
    L.k_norm = copy_vec(l.k_norm, in.head_dim);
    layers_.push_back(std::move(L));
  }
  // The pointers into the host's description are valid during this call only.
  shape_.layers.clear();
  shape_.rope_freqs = nullptr;

  const uint64_t bytes = bytes_for(in, in.n_ctx);
  be_.charge(bytes, "span_create (layers " + std::to_string(in.first_layer) + "..)");
  charged_ = bytes;
  try {
    for (auto& L : layers_) {
      L.k_cache.assign(size_t(in.n_seq), std::vector<float>(size_t(int64_t(in.n_ctx) * KD), 0.0f));
      L.v_cache.assign(size_t(in.n_seq), std::vector<float>(size_t(int64_t(in.n_ctx) * KD), 0.0f));
    }
  } catch (...) {
    be_.uncharge(charged_);
    throw;
  }
  capacity_ = in.n_ctx;
  kv_len_.assign(size_t(in.n_seq), 0);
}

Span::~Span() { be_.uncharge(charged_); }

std::vector<const Weight*> Span::Layer::weights() const {
  return {wq, wk, wv, wo, gate, up, down, router, gate_exps, up_exps, down_exps, gate_shexp, up_shexp, down_shexp};
}

bool Span::uses(const Weight* w) const {
  if (!w) return false;
  for (const auto& L : layers_)
    for (const Weight* lw : L.weights())
      if (lw == w) return true;
  return w == head_;
}

void Span::set_head(Weight* head, const float* norm) {
  if (!head) {
    head_ = nullptr;
    head_norm_.clear();
    return;
  }
  if (!norm) fail(FISH_E_INVALID_ARGUMENT, "span_set_head: no norm weights");
  if (head->n_in != shape_.n_embd || head->n_mat != 1)
    fail(FISH_E_INVALID_ARGUMENT, "span_set_head: " + head->name + " takes " + std::to_string(head->n_in) +
                                      " inputs, the span's n_embd is " + std::to_string(shape_.n_embd));
  head_ = head;
  head_norm_.assign(norm, norm + shape_.n_embd);
}

void Span::check_seq(int seq, const char* what) const {
  if (seq < 0 || seq >= shape_.n_seq)
    fail(FISH_E_INVALID_ARGUMENT, std::string(what) + ": sequence " + std::to_string(seq) + " is outside 0.." +
                                      std::to_string(shape_.n_seq - 1));
}

// RoPE on the first n_rot dims of each of n_heads vectors of head_dim at position pos.
void Span::rope(float* v, int n_heads, int pos) const {
  const int n_rot = shape_.n_rot, half = n_rot / 2;
  for (int i = 0; i < half; ++i) {
    const double ff = rope_freqs_.empty() ? 1.0 : double(rope_freqs_[size_t(i)]);
    const double theta = double(pos) * std::pow(double(shape_.rope_base), -2.0 * i / n_rot) / ff * double(shape_.rope_scale);
    const double c = std::cos(theta), s = std::sin(theta);
    for (int h = 0; h < n_heads; ++h) {
      float* hv = v + int64_t(h) * shape_.head_dim;
      // NORMAL rotates adjacent pairs (2i, 2i+1); NEOX pairs (i, i + n_rot/2).
      const int ia = shape_.rope == FISH_ROPE_NEOX ? i : 2 * i;
      const int ib = shape_.rope == FISH_ROPE_NEOX ? i + half : 2 * i + 1;
      const double a = hv[ia], b = hv[ib];
      hv[ia] = float(a * c - b * s);
      hv[ib] = float(a * s + b * c);
    }
  }
}

std::vector<Span::SeqRows> Span::check_batch(const fish_span_batch* b, int* n_wanted) const {
  if (!b || !FISH_STRUCT_HAS(b, fish_span_batch, logits_view))
    fail(FISH_E_INVALID_ARGUMENT, "span_forward: the batch is missing or too short");
  const uint32_t known = FISH_FORWARD_X_OUT | FISH_FORWARD_LOGITS_VIEW;
  if (b->flags & ~known) fail(FISH_E_UNSUPPORTED, "span_forward: unknown flags " + std::to_string(b->flags & ~known));
  if (b->n_tok < 1 || !b->x || !b->pos) fail(FISH_E_INVALID_ARGUMENT, "span_forward: needs n_tok >= 1, x and pos");
  std::vector<SeqRows> rows(size_t(shape_.n_seq));
  for (int t = 0; t < b->n_tok; ++t) {
    const int q = b->seq ? b->seq[t] : 0, p = b->pos[t];
    check_seq(q, ("span_forward row " + std::to_string(t)).c_str());
    SeqRows& r = rows[size_t(q)];
    const std::string at = "span_forward row " + std::to_string(t) + " (sequence " + std::to_string(q) +
                           ", position " + std::to_string(p) + ")";
    if (r.first < 0) {  // the sequence's first row: at or before its KV length
      if (p < 0) fail(FISH_E_INVALID_ARGUMENT, at + ": negative position");
      if (p > kv_len_[size_t(q)])
        fail(FISH_E_RANGE, at + ": would leave a gap after the " + std::to_string(kv_len_[size_t(q)]) + " cached positions");
      r.first = p;
    } else if (p != r.end) {  // the batch itself is malformed, whatever the KV holds
      fail(FISH_E_INVALID_ARGUMENT, at + ": not consecutive (the sequence's previous row is at position " +
                                        std::to_string(r.end - 1) + ")");
    }
    r.end = p + 1;
    if (r.end > capacity_)
      fail(FISH_E_RANGE, at + ": beyond the KV capacity " + std::to_string(capacity_) + " (span_kv_reserve first)");
  }
#ifdef FISH_REFERENCE_ONE_SEQ_PER_BATCH
  // Test builds only: a plugin that runs one sequence per forward refuses a mixed batch.
  if (std::count_if(rows.begin(), rows.end(), [](const SeqRows& r) { return r.first >= 0; }) > 1)
    fail(FISH_E_UNSUPPORTED, "span_forward: a batch of several sequences (this build runs one per forward)");
#endif
  *n_wanted = 0;
  for (int t = 0; b->logits_rows && t < b->n_tok; ++t) *n_wanted += b->logits_rows[t] != 0;
  if (*n_wanted > 0) {
    if (!head_) fail(FISH_E_INVALID_ARGUMENT, "span_forward: logits asked for without a head (span_set_head)");
    if (!(b->flags & FISH_FORWARD_LOGITS_VIEW) && !b->logits)
      fail(FISH_E_INVALID_ARGUMENT, "span_forward: logits asked for without a buffer (or FISH_FORWARD_LOGITS_VIEW)");
#ifdef FISH_REFERENCE_LAST_ROW_LOGITS
    // Test builds only: a plugin whose head gives the last row's logits alone refuses other rows.
    if (*n_wanted != 1 || !b->logits_rows[b->n_tok - 1])
      fail(FISH_E_UNSUPPORTED, "span_forward: logits of rows other than the last (this build gives the last row's)");
#endif
  }
  return rows;
}

void Span::forward(fish_span_batch* b) {
  int n_wanted = 0;
  const std::vector<SeqRows> rows = check_batch(b, &n_wanted);
  const int E = shape_.n_embd, n_tok = b->n_tok;
  const size_t n = size_t(n_tok);

  // Work on a copy: the caller's x is written only when everything succeeded.
  std::vector<float> x(b->x, b->x + n * size_t(E));
  // Positions at and after each sequence's first row are about to be replaced.
  for (size_t q = 0; q < rows.size(); ++q)
    if (rows[q].first >= 0) kv_len_[q] = std::min(kv_len_[q], rows[q].first);
  std::vector<int32_t> seq(n, 0);
  if (b->seq) std::copy(b->seq, b->seq + n_tok, seq.begin());
  for (Layer& L : layers_) layer_forward(L, x, seq.data(), b->pos, n_tok);

  // The head: logits = (rmsnorm(x_t) * head_norm) · headᵀ for the wanted rows, in row order.
  std::vector<float> logits;
  if (n_wanted > 0) {
    std::vector<float> xn(size_t(n_wanted) * size_t(E));
    for (int t = 0, k = 0; t < n_tok; ++t)
      if (b->logits_rows[t]) rmsnorm(&x[size_t(t) * E], head_norm_.data(), &xn[size_t(k++) * E], E, shape_.norm_eps);
    logits.resize(size_t(n_wanted) * size_t(head_->n_out));
    be_.matmul(*head_, xn.data(), n_wanted, logits.data());
  }

  // Success: publish what was asked for.
  if (b->flags & FISH_FORWARD_X_OUT) std::copy(x.begin(), x.end(), b->x);
  if (n_wanted > 0) {
    if (b->flags & FISH_FORWARD_LOGITS_VIEW) {
      view_.swap(logits);
      b->logits_view = view_.data();
    } else {
      std::copy(logits.begin(), logits.end(), b->logits);
    }
  }
  for (size_t q = 0; q < rows.size(); ++q)
    if (rows[q].first >= 0) kv_len_[q] = rows[q].end;
}

// One layer over every row of the batch: x [n_tok][n_embd] in and out.
void Span::layer_forward(Layer& L, std::vector<float>& x, const int32_t* seq, const int32_t* pos, int n_tok) {
  const int E = shape_.n_embd, H = shape_.n_head, KVH = shape_.n_head_kv, D = shape_.head_dim;
  const int F = shape_.n_expert > 0 ? 0 : shape_.n_ff;  // dense FFN rows
  const int QD = H * D, KD = KVH * D, group = H / KVH;
  const float eps = shape_.norm_eps;
  const float scale = shape_.attn_scale != 0.0f ? shape_.attn_scale : float(1.0 / std::sqrt(double(D)));
  const size_t n = size_t(n_tok);
  std::vector<float> a(n * size_t(E)), q(n * size_t(QD)), k(n * size_t(KD)), v(n * size_t(KD)), att(n * size_t(QD)),
      o(n * size_t(E)), g(n * size_t(F)), u(n * size_t(F));

  // Attention block: a = rmsnorm(x) * attn_norm; q, k, v projections (+ biases).
  for (size_t t = 0; t < n; ++t) rmsnorm(&x[t * E], L.attn_norm.data(), &a[t * E], E, eps);
  be_.matmul(*L.wq, a.data(), n_tok, q.data());
  be_.matmul(*L.wk, a.data(), n_tok, k.data());
  be_.matmul(*L.wv, a.data(), n_tok, v.data());
  for (size_t t = 0; t < n; ++t) {
    for (int i = 0; i < QD && !L.bq.empty(); ++i) q[t * QD + size_t(i)] += L.bq[size_t(i)];
    for (int i = 0; i < KD && !L.bk.empty(); ++i) k[t * KD + size_t(i)] += L.bk[size_t(i)];
    for (int i = 0; i < KD && !L.bv.empty(); ++i) v[t * KD + size_t(i)] += L.bv[size_t(i)];
    // qwen3: per-head RMS norm of q and k before RoPE.
    for (int h = 0; h < H && !L.q_norm.empty(); ++h) rmsnorm(&q[t * QD + size_t(h) * D], L.q_norm.data(), &q[t * QD + size_t(h) * D], D, eps);
    for (int h = 0; h < KVH && !L.k_norm.empty(); ++h) rmsnorm(&k[t * KD + size_t(h) * D], L.k_norm.data(), &k[t * KD + size_t(h) * D], D, eps);
    rope(&q[t * QD], H, pos[t]);
    rope(&k[t * KD], KVH, pos[t]);
    // This row's K and V go into its own sequence's cache at its position.
    std::copy_n(&k[t * KD], KD, &L.k_cache[size_t(seq[t])][size_t(pos[t]) * KD]);
    std::copy_n(&v[t * KD], KD, &L.v_cache[size_t(seq[t])][size_t(pos[t]) * KD]);
  }
  // Causal attention within the row's sequence: a row at position p sees that
  // sequence's positions 0..p (this batch's rows included: they are stored above).
  std::vector<double> w;
  for (size_t t = 0; t < n; ++t) {
    const int p = pos[t];
    const std::vector<float>& kc = L.k_cache[size_t(seq[t])];
    const std::vector<float>& vc = L.v_cache[size_t(seq[t])];
    w.resize(size_t(p) + 1);
    for (int h = 0; h < H; ++h) {
      const float* qh = &q[t * QD + size_t(h) * D];
      const int kvh = h / group;
      double mx = -INFINITY;
      for (int j = 0; j <= p; ++j) {
        const float* kj = &kc[size_t(j) * KD + size_t(kvh) * D];
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
        for (int j = 0; j <= p; ++j) acc += w[size_t(j)] * double(vc[size_t(j) * KD + size_t(kvh) * D + size_t(i)]);
        oh[i] = float(acc / sum);
      }
    }
  }
  // h = x + att · woᵀ
  be_.matmul(*L.wo, att.data(), n_tok, o.data());
  for (size_t i = 0; i < n * size_t(E); ++i) x[i] += o[i];
  // FFN block: x = h + (silu(n · gateᵀ) * (n · upᵀ)) · downᵀ with n = rmsnorm(h) * ffn_norm.
  for (size_t t = 0; t < n; ++t) rmsnorm(&x[t * E], L.ffn_norm.data(), &a[t * E], E, eps);
  if (shape_.n_expert > 0) {  // MoE: x = h + the chosen experts' weighted sum [+ the gated shared expert]
    moe_ffn(L, a.data(), n_tok, o.data());
    for (size_t i = 0; i < n * size_t(E); ++i) x[i] += o[i];
    return;
  }
  be_.matmul(*L.gate, a.data(), n_tok, g.data());
  be_.matmul(*L.up, a.data(), n_tok, u.data());
  for (size_t i = 0; i < n * size_t(F); ++i) g[i] = silu(g[i]) * u[i];
  be_.matmul(*L.down, g.data(), n_tok, o.data());
  for (size_t i = 0; i < n * size_t(E); ++i) x[i] += o[i];
}

// The MoE FFN as plugin_abi.h writes it, row by row: r = softmax(n·routerᵀ)
// (in double), the n_expert_used largest r (a tie: the lower expert index
// first), w_e = r_e or r_e / Σ chosen r (FISH_GATING_SOFTMAX_TOPK_NORM), then
// out = Σ w_e · (silu(n·gate_e ᵀ) * (n·up_e ᵀ))·down_e ᵀ [+ sigmoid(n·shexp_gate) · shared(n)].
void Span::moe_ffn(const Layer& L, const float* a, int n_tok, float* out) const {
  const int E = shape_.n_embd, NE = shape_.n_expert, K = shape_.n_expert_used, FE = shape_.n_ff_expert;
  const int FS = shape_.n_ff_shexp;
  std::vector<float> logits(size_t(n_tok) * size_t(NE));
  be_.matmul(*L.router, a, n_tok, logits.data());
  std::vector<float> g(static_cast<size_t>(std::max(FE, FS))), u(g.size()), y(static_cast<size_t>(E));
  std::vector<double> r(static_cast<size_t>(NE));
  std::vector<char> taken(static_cast<size_t>(NE));
  for (int t = 0; t < n_tok; ++t) {
    const float* at = a + size_t(t) * E;
    float* ot = out + size_t(t) * E;
    const float* lt = &logits[size_t(t) * NE];
    double mx = -INFINITY, sum = 0.0;
    for (int e = 0; e < NE; ++e) mx = std::max(mx, double(lt[e]));
    for (int e = 0; e < NE; ++e) sum += (r[size_t(e)] = std::exp(double(lt[e]) - mx));
    for (int e = 0; e < NE; ++e) r[size_t(e)] /= sum;
    std::vector<int> chosen;
    std::fill(taken.begin(), taken.end(), 0);
    double chosen_sum = 0.0;
    for (int k = 0; k < K; ++k) {
      int best = -1;
      for (int e = 0; e < NE; ++e)  // strict >: among equal r the lower index stays
        if (!taken[size_t(e)] && (best < 0 || r[size_t(e)] > r[size_t(best)])) best = e;
      taken[size_t(best)] = 1;
      chosen.push_back(best);
      chosen_sum += r[size_t(best)];
    }
    std::fill(ot, ot + E, 0.0f);
    for (int e : chosen) {
      const double w = shape_.gating == FISH_GATING_SOFTMAX_TOPK_NORM ? r[size_t(e)] / chosen_sum : r[size_t(e)];
      be_.matmul(*L.gate_exps, at, 1, g.data(), e, true);
      be_.matmul(*L.up_exps, at, 1, u.data(), e, true);
      for (int i = 0; i < FE; ++i) g[size_t(i)] = silu(g[size_t(i)]) * u[size_t(i)];
      be_.matmul(*L.down_exps, g.data(), 1, y.data(), e, true);
      for (int i = 0; i < E; ++i) ot[i] += float(w * double(y[size_t(i)]));
    }
    if (FS > 0) {
      double dot = 0.0;
      for (int i = 0; i < E; ++i) dot += double(at[i]) * double(L.shexp_gate[size_t(i)]);
      const double gate = 1.0 / (1.0 + std::exp(-dot));
      be_.matmul(*L.gate_shexp, at, 1, g.data());
      be_.matmul(*L.up_shexp, at, 1, u.data());
      for (int i = 0; i < FS; ++i) g[size_t(i)] = silu(g[size_t(i)]) * u[size_t(i)];
      be_.matmul(*L.down_shexp, g.data(), 1, y.data());
      for (int i = 0; i < E; ++i) ot[i] += float(gate * double(y[size_t(i)]));
    }
  }
}

int Span::kv_len(int seq) const {
  check_seq(seq, "span_kv_len");
  return kv_len_[size_t(seq)];
}

void Span::truncate(int seq, int n) {
  check_seq(seq, "span_kv_truncate");
  int& len = kv_len_[size_t(seq)];
  if (n < 0 || n > len)
    fail(FISH_E_RANGE, "span_kv_truncate: sequence " + std::to_string(seq) + " holds " + std::to_string(len) +
                           " positions, " + std::to_string(n) + " is outside 0.." + std::to_string(len));
  len = n;  // 0 drops the sequence; its cache stays allocated for its next tokens
}

void Span::copy(int src, int dst, int p0, int p1) {
  check_seq(src, "span_kv_copy source");
  check_seq(dst, "span_kv_copy destination");
  if (p0 < 0 || p0 > p1) fail(FISH_E_INVALID_ARGUMENT, "span_kv_copy: positions [" + std::to_string(p0) + ", " +
                                                           std::to_string(p1) + ") are not a range");
  if (p1 > kv_len_[size_t(src)])
    fail(FISH_E_RANGE, "span_kv_copy: sequence " + std::to_string(src) + " holds " +
                           std::to_string(kv_len_[size_t(src)]) + " positions, fewer than " + std::to_string(p1));
  if (p0 > kv_len_[size_t(dst)])
    fail(FISH_E_RANGE, "span_kv_copy: copying from position " + std::to_string(p0) + " would leave a gap after the " +
                           std::to_string(kv_len_[size_t(dst)]) + " positions of sequence " + std::to_string(dst));
  if (src == dst) return;
  const size_t KD = size_t(shape_.n_head_kv) * size_t(shape_.head_dim);
  for (Layer& L : layers_) {
    std::copy(L.k_cache[size_t(src)].begin() + ptrdiff_t(size_t(p0) * KD), L.k_cache[size_t(src)].begin() + ptrdiff_t(size_t(p1) * KD),
              L.k_cache[size_t(dst)].begin() + ptrdiff_t(size_t(p0) * KD));
    std::copy(L.v_cache[size_t(src)].begin() + ptrdiff_t(size_t(p0) * KD), L.v_cache[size_t(src)].begin() + ptrdiff_t(size_t(p1) * KD),
              L.v_cache[size_t(dst)].begin() + ptrdiff_t(size_t(p0) * KD));
  }
  kv_len_[size_t(dst)] = p1;
}

void Span::reserve(int n) {
  if (n < 0) fail(FISH_E_INVALID_ARGUMENT, "span_kv_reserve: negative size");
  if (n <= capacity_) return;
  const uint64_t kv_dim = uint64_t(shape_.n_head_kv) * uint64_t(shape_.head_dim);
  const uint64_t extra = 2 * uint64_t(n - capacity_) * kv_dim * sizeof(float) * uint64_t(shape_.n_seq) * layers_.size();
  be_.charge(extra, "span_kv_reserve " + std::to_string(n));
  try {
    for (auto& L : layers_)
      for (int q = 0; q < shape_.n_seq; ++q) {
        L.k_cache[size_t(q)].resize(size_t(n) * kv_dim, 0.0f);  // layout [pos][kv_dim]: growing keeps the contents
        L.v_cache[size_t(q)].resize(size_t(n) * kv_dim, 0.0f);
      }
  } catch (...) {
    be_.uncharge(extra);
    throw;
  }
  charged_ += extra;
  capacity_ = n;
}

}  // namespace fish::reference
