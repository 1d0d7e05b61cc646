// A span: layers [first_layer, first_layer + n_layers) of a Llama-family
// decoder with their own KV cache (f32, [capacity][n_head_kv * head_dim] per
// layer for K and for V). The math is the one written out in plugin_abi.h above
// fish_span_layer; each step below is a plain loop so a plugin author can read
// it next to the spec.
#pragma once
#include <cstdint>
#include <vector>

#include "fish/plugin_abi.h"

namespace fish::reference {

class Backend;
struct Weight;

class Span {
 public:
  // Validates the description (shapes against the weights) and charges the
  // backend's budget for KV + parameters (span_bytes()). Throws Failure.
  Span(Backend& be, const fish_span_desc* d);
  ~Span();
  Span(const Span&) = delete;
  Span& operator=(const Span&) = delete;

  // What a span of this shape holds beyond its weights, in bytes.
  static uint64_t bytes_for(const fish_span_desc* d, int64_t capacity);

  // x: [n_tok, n_embd] in/out; see fish_plugin_api::span_forward. logits
  // (span_forward_logits, ABI 1.1): also the head's output for the last token.
  void forward(float* x, int n_tok, int pos0, float* logits = nullptr);
  // span_forward_logits_view (ABI 1.2): forward with the head; the logits stay
  // in this span (valid until its next forward or destruction).
  const float* forward_view(float* x, int n_tok, int pos0);
  // The output head (ABI 1.1 span_set_head): head = nullptr detaches.
  void set_head(Weight* head, const float* norm);
  void truncate(int n);
  void reserve(int n);
  int kv_len() const { return kv_len_; }
  int n_layers() const { return int(layers_.size()); }
  bool uses(const Weight* w) const;

 private:
  struct Layer {
    Weight *wq, *wk, *wv, *wo, *w_gate, *w_up, *w_down;
    std::vector<float> attn_norm, ffn_norm, bq, bk, bv, q_norm, k_norm;  // optional ones empty
    std::vector<float> k_cache, v_cache;  // [capacity][kv_dim]
  };
  void rope(float* v, int n_heads, int pos) const;

  Backend& be_;
  int first_layer_ = 0;
  int n_embd_ = 0, n_head_ = 0, n_head_kv_ = 0, head_dim_ = 0, n_ff_ = 0;
  float rms_eps_ = 1e-5f;
  uint32_t rope_type_ = FISH_ROPE_NORMAL;
  int n_rot_ = 0;
  float rope_base_ = 10000.0f, rope_scale_ = 1.0f, attn_scale_ = 0.0f;
  std::vector<float> rope_freqs_;  // [n_rot/2] or empty
  std::vector<Layer> layers_;
  Weight* head_ = nullptr;       // [n_vocab][n_embd] (set_head)
  std::vector<float> head_norm_;  // [n_embd]
  std::vector<float> view_;       // forward_view's logits [n_vocab]
  int capacity_ = 0;  // positions the KV can hold
  int kv_len_ = 0;    // positions it holds
  uint64_t charged_ = 0;
};

}  // namespace fish::reference
