// A span: layers [first_layer, first_layer + n_layers) of a decoder, holding
// n_seq sequences, each with its own f32 KV cache ([capacity][n_head_kv *
// head_dim] per layer for K and for V). The math is the one written out in
// plugin_abi.h above the roles; each step below is a plain loop so a plugin
// author can read it next to the header.
#pragma once
#include <cstdint>
#include <vector>

#include "fish/plugin_abi.h"
#include "ref_span_desc.h"

namespace fish::reference {

class Backend;
struct Weight;

class Span {
 public:
  // Reads and checks the description (ref_span_desc.h) and charges the
  // backend's budget for KV + parameters (bytes_for). Throws Failure.
  Span(Backend& be, const fish_span_desc* d);
  ~Span();
  Span(const Span&) = delete;
  Span& operator=(const Span&) = delete;

  // What a span of this shape holds beyond its weights, in bytes.
  static uint64_t bytes_for(const SpanIn& in, int64_t capacity);

  // span_forward: checks the whole batch first (a refusal changes nothing), then runs it.
  void forward(fish_span_batch* b);
  // span_set_head: head = nullptr detaches.
  void set_head(Weight* head, const float* norm);
  int kv_len(int seq) const;
  void truncate(int seq, int n);
  void copy(int src, int dst, int p0, int p1);
  void reserve(int n);
  int n_layers() const { return int(layers_.size()); }
  bool uses(const Weight* w) const;

 private:
  struct Layer {
    Weight *wq = nullptr, *wk = nullptr, *wv = nullptr, *wo = nullptr, *gate = nullptr, *up = nullptr, *down = nullptr;
    Weight *router = nullptr, *gate_exps = nullptr, *up_exps = nullptr, *down_exps = nullptr;  // MoE
    Weight *gate_shexp = nullptr, *up_shexp = nullptr, *down_shexp = nullptr;                  // shared expert
    std::vector<float> attn_norm, ffn_norm, bq, bk, bv, q_norm, k_norm, shexp_gate;  // optional ones empty
    std::vector<const Weight*> weights() const;  // every matrix it uses
    std::vector<std::vector<float>> k_cache, v_cache;  // per sequence: [capacity][kv_dim]
  };
  // Rows of one sequence in a batch: its first position and its last + 1.
  struct SeqRows {
    int first = -1, end = -1;
  };
  void check_seq(int seq, const char* what) const;
  // Checks a batch against the span; returns per sequence the positions it covers.
  std::vector<SeqRows> check_batch(const fish_span_batch* b, int* n_wanted) const;
  void layer_forward(Layer& L, std::vector<float>& x, const int32_t* seq, const int32_t* pos, int n_tok);
  void rope(float* v, int n_heads, int pos) const;
  // The MoE FFN of n_tok rows: a [n_tok][n_embd] (normalised) in, out [n_tok][n_embd] (added to h by the caller).
  void moe_ffn(const Layer& L, const float* a, int n_tok, float* out) const;

  Backend& be_;
  SpanIn shape_;                   // the description (its pointers are not kept)
  std::vector<float> rope_freqs_;  // [n_rot/2] or empty
  std::vector<Layer> layers_;
  Weight* head_ = nullptr;         // [n_vocab][n_embd] (set_head)
  std::vector<float> head_norm_;   // [n_embd]
  std::vector<float> view_;        // the last forward's logits for LOGITS_VIEW [n_wanted][n_vocab]
  int capacity_ = 0;               // positions each sequence can hold
  std::vector<int> kv_len_;        // positions each sequence holds
  uint64_t charged_ = 0;
};

}  // namespace fish::reference
