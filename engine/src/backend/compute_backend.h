// ComputeBackend: what model code sees of a compute plugin (the C++ face of the
// C table in plugin_abi/include/fish/plugin_abi.h; backend/plugin_adapter.*
// implements it over a loaded plugin). Every call reports failure by return
// value with last_error() readable afterwards; nothing here throws.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/ggml_type.h"

namespace fish {

struct BackendWeight;  // opaque: a weight resident on the device
struct BackendSpan;    // opaque: a contiguous range of layers resident on the device

// A weight matrix to upload: n_out rows of n_in elements in GGUF layout.
struct WeightDesc {
  const char* name = "";  // tensor name, for messages and describe()
  GgmlType type = GgmlType::F32;
  int64_t n_in = 0;
  int64_t n_out = 0;
  const void* data = nullptr;
  uint64_t nbytes = 0;
};

enum class RopeType : uint32_t { Normal = 0, NeoX = 2 };

// One transformer layer of a span. Weights were uploaded before; the f32
// vectors are copied by span_create (the caller may free them afterwards).
struct SpanLayerDesc {
  BackendWeight *wq = nullptr, *wk = nullptr, *wv = nullptr, *wo = nullptr;
  BackendWeight *w_gate = nullptr, *w_up = nullptr, *w_down = nullptr;
  const float* attn_norm = nullptr;  // [n_embd]
  const float* ffn_norm = nullptr;   // [n_embd]
  const float *bq = nullptr, *bk = nullptr, *bv = nullptr;  // qwen2 biases or null
  const float *q_norm = nullptr, *k_norm = nullptr;          // qwen3 per-head RMS norm [head_dim] or null
};

// The hyper-parameters a span needs to run its layers (Llama-family decoder).
struct SpanDesc {
  int32_t first_layer = 0;  // model layer index of layers[0] (for messages)
  int32_t n_layers = 0;
  int32_t n_embd = 0, n_head = 0, n_head_kv = 0, head_dim = 0, n_ff = 0;
  int32_t n_ctx = 0;          // largest position + 1 the span must hold
  float rms_eps = 1e-5f;
  RopeType rope_type = RopeType::Normal;
  int32_t n_rot = 0;          // rotated dims per head (== head_dim for Llama)
  float rope_freq_base = 10000.0f;
  float rope_freq_scale = 1.0f;
  const float* rope_freqs = nullptr;  // [n_rot/2] Llama-3 frequency factors or null
  float attn_scale = 0.0f;            // 0: 1/sqrt(head_dim)
  std::vector<SpanLayerDesc> layers;
};

class ComputeBackend {
 public:
  virtual ~ComputeBackend() = default;

  virtual std::string name() const = 0;      // "vulkan", "reference"
  virtual std::string describe() = 0;        // one line: device, resident weights, span
  virtual std::string last_error() const = 0;
  // Added with the plugin ABI (defaults keep other implementations compiling):
  // "not opened" / "open: <device>" / "failed: <why>"; a multi-line timing
  // profile since the last call ("" when the backend keeps none); the
  // fish_status code of the last failure (plugin_abi.h, 0 = none).
  virtual std::string status() { return ""; }
  virtual std::string profile() { return ""; }
  virtual int last_status() const { return 0; }
  // Opens the device now (it opens lazily on the first query otherwise).
  virtual bool open() { return true; }

  virtual uint64_t memory_free() = 0;        // bytes the backend could still allocate
  virtual uint64_t bytes_resident() = 0;     // bytes it holds now (exact)
  virtual bool supports(GgmlType t) = 0;

  // nullptr on failure (budget, unsupported type, device error): see last_error().
  virtual BackendWeight* upload(const WeightDesc& w) = 0;
  virtual void release(BackendWeight* w) = 0;

  // x: [n_tok, n_in] f32, y: [n_tok, n_out] f32.
  virtual bool matmul(BackendWeight* w, const float* x, int n_tok, float* y) = 0;
  // Several weights on one input in one submit; ys[i]: [n_tok, n_out_i].
  virtual bool matmul_group(BackendWeight* const* ws, int n_w, const float* x, int n_tok, float* const* ys) = 0;

  // Spans (optional: span_create returns nullptr when unsupported).
  virtual bool has_spans() const = 0;
  // Bytes a span of this shape would need beyond its weights (KV for n_ctx + arena + params).
  virtual uint64_t span_bytes(const SpanDesc& d) = 0;
  virtual BackendSpan* span_create(const SpanDesc& d) = 0;
  // x: [n_tok, n_embd] f32 residual stream in/out for positions pos0..pos0+n_tok-1.
  // Refused (false, x untouched) when pos0 > the span's KV length (a gap), or
  // when pos0 + n_tok exceeds the KV capacity (SpanDesc::n_ctx or the last
  // span_kv_reserve): reserve first.
  virtual bool span_forward(BackendSpan* s, float* x, int n_tok, int pos0) = 0;
  virtual bool span_kv_truncate(BackendSpan* s, int n) = 0;  // keep positions < n
  virtual bool span_kv_reserve(BackendSpan* s, int n) = 0;   // grow device KV to hold n positions
  virtual int span_kv_len(BackendSpan* s) { return -1; }       // positions held, -1 when unknown
  // The model's head in the span's submission (plugin ABI 1.1, optional):
  // span_set_head attaches head [n_vocab, n_embd] and its rmsnorm weights
  // (false: unsupported or refused, see last_error()); span_forward_logits is
  // span_forward plus logits[n_vocab] = (rmsnorm(x[n_tok-1]) * norm) · headᵀ.
  virtual bool span_set_head(BackendSpan* s, BackendWeight* head, const float* norm) { return false; }
  virtual bool span_forward_logits(BackendSpan* s, float* x, int n_tok, int pos0, float* logits) { return false; }
  // The same without a copy (plugin ABI 1.2, optional): *logits points at the
  // backend's own host copy, valid until the next call with this span other
  // than span_kv_len.
  virtual bool has_span_logits_view() const { return false; }
  virtual bool span_forward_logits_view(BackendSpan* s, float* x, int n_tok, int pos0, const float** logits) {
    return false;
  }
  virtual void span_destroy(BackendSpan* s) = 0;
};

}  // namespace fish
