// Conformance suite: the small synthetic decoder the span checks run, and
// RefSpan, the host-side reference: the same layers with every projection
// through the plugin's own matmul() and the rest (norms, RoPE, attention,
// SiLU, residuals) here in f32/double, one KV per sequence. Span outputs are
// compared with it as logits through a random "LM head": same argmax, max
// |Δlogit| <= 2% of max |logit| (the spec's bound for span ≡ per-matmul).
#pragma once
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "backend/conformance_internal.h"

namespace fish::backend::conf {

struct Variant {
  std::string name;
  int n_embd, n_head, n_head_kv, head_dim, n_ff, n_layers;
  RopeType rope;
  float base, scale, attn_scale;
  bool freqs, biases, qk_norm;
  GgmlType type;
};

// The shapes every plugin is checked on (llama, qwen2, qwen3; f32 and quantised).
const std::vector<Variant>& span_variants();

struct SynthLayer {
  TestWeight w[7];  // attn_q attn_k attn_v attn_output ffn_gate ffn_up ffn_down
  BackendWeight* h[7] = {};
  std::vector<float> attn_norm, ffn_norm, bq, bk, bv, q_norm, k_norm;
};

constexpr int kVocab = 97;

struct Synth {
  Variant v;
  std::vector<SynthLayer> layers;
  std::vector<float> rope_freqs;
  TestWeight head;               // [kVocab, n_embd] f32 "LM head"
  std::vector<float> head_norm;  // [n_embd], for span_set_head
  std::vector<SpanLayer> desc;   // the layers by role (weights set by upload_synth)
};

Synth make_synth(const Variant& v, std::mt19937_64& rng);
// Uploads every layer matrix (a refusal fails the check) and fills s.desc.
void upload_synth(PluginBackend& be, Synth& s);
void release_synth(PluginBackend& be, Synth& s);
// The span of all of s's layers (a view of s.desc).
SpanDesc span_desc(const Synth& s, int n_ctx, int n_seq);
// The same layers with every weight NULL: what the host sizes before it uploads.
std::vector<SpanLayer> without_weights(const std::vector<SpanLayer>& layers);

// The per-matmul path over the same layers, with n_seq sequences of up to
// `capacity` positions each.
class RefSpan {
 public:
  RefSpan(PluginBackend& be, const Synth& s, int n_seq, int capacity);
  // x: [n_tok, n_embd] in/out; row t is sequence seq[t] (null: 0) at pos[t].
  void forward(float* x, int n_tok, const int32_t* seq, const int32_t* pos);
  void truncate(int seq, int n);
  void copy(int src, int dst, int p0, int p1);  // dst's [p0, p1) = src's; dst's length p1
  int len(int seq) const { return len_[size_t(seq)]; }

 private:
  void mm(const SynthLayer& L, int i, const float* x, int n_tok, float* y);
  void rope(float* vec, int n_heads, int pos) const;

  PluginBackend& be_;
  const Synth& s_;
  int capacity_;
  std::vector<std::vector<std::vector<float>>> k_, v_;  // [seq][layer][capacity * kv_dim]
  std::vector<int> len_;
};

void rmsnorm_ref(const float* x, const float* w, float* out, int n, float eps);
// Logits [n_tok][kVocab] of rows x [n_tok, n_embd] through the synthetic head (no norm).
std::vector<double> head_logits(const Synth& s, const float* x, int n_tok);
// What span_set_head's head gives for one row of the final stream: rmsnorm with head_norm, then the head.
std::vector<double> ref_row_logits(const Synth& s, const float* x_row);

// Running comparison of a span's results against the reference's.
struct Compare {
  int tokens = 0, argmax_equal = 0;
  double max_diff = 0, max_abs = 0;
  std::string first_bad;

  // Both residual streams through the synthetic head, row by row.
  void add(const Synth& s, const float* x_span, const float* x_ref, int n_tok, const std::string& step);
  // One row's logits la (the span) against lb (the reference).
  void add_logits(const double* la, const double* lb, const std::string& what);
  // Same argmax and max |Δlogit| <= rel * max |logit| (the spec's 2% by default).
  void require(double rel = 0.02) const;
  std::string summary() const;
};

// A batch under construction: rows (sequence, position), their inputs, which logits are wanted.
struct Rows {
  std::vector<int32_t> seq, pos;
  std::vector<uint8_t> want;
  void add(int q, int p0, int n, bool logits = false) {
    for (int i = 0; i < n; ++i) {
      seq.push_back(q);
      pos.push_back(p0 + i);
      want.push_back(logits ? 1 : 0);
    }
  }
  int n() const { return int(seq.size()); }
  int n_wanted() const {
    int k = 0;
    for (uint8_t w : want) k += w != 0;
    return k;
  }
};

// A span under test beside its reference: the moves the span checks share.
// Every forward goes through span_forward_once (the plugin's own answer, no
// per-sequence retry by the adapter).
struct SpanRig {
  std::unique_ptr<PluginBackend> be;
  Synth s;
  BackendSpan* span = nullptr;
  std::unique_ptr<RefSpan> ref;
  std::vector<float> xs, xr;  // the last forward's streams: the span's, the reference's

  // Rows on the span (X_OUT) and on the reference, compared through the head
  // into cmp. may_refuse: a FISH_E_UNSUPPORTED answer skips the check (the
  // plugin does not implement such a batch) instead of failing it.
  // x_in: the rows' inputs (default: random).
  void both(const Rows& r, Compare& cmp, const std::string& what, std::mt19937_64& rng, bool may_refuse = false,
            const std::vector<float>* x_in = nullptr);
  // A batch that must be refused with `status`, leaving x and the view pointer
  // untouched; returns the plugin's message.
  std::string refused(const Rows& r, int status, const std::string& what, std::mt19937_64& rng,
                      bool logits = false);
  // The span's KV length of seq must be `want` (when the call answers).
  void kv_is(int seq, int want, const std::string& when);
};

}  // namespace fish::backend::conf
