// ComputeBackend: what model code sees of a compute plugin (the C++ face of the
// C table in plugin_abi/include/fish/plugin_abi.h; backend/plugin_adapter.*
// implements it over a loaded plugin and is the one place that converts to the
// C structs). Every call reports failure by return value with last_error()
// and last_status() readable afterwards; nothing here throws.
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "common/ggml_type.h"
#include "common/rope_type.h"

namespace fish {

struct BackendWeight;  // opaque: a weight resident on the device
struct BackendSpan;    // opaque: a contiguous range of layers resident on the device, with its KV

// A weight to upload: n_mat matrices (MoE experts; 1 otherwise) of n_out rows
// of n_in elements each, in GGUF layout, one after another.
struct WeightDesc {
  const char* name = "";  // tensor name, for messages and describe()
  GgmlType type = GgmlType::F32;
  int64_t n_in = 0;
  int64_t n_out = 0;
  int64_t n_mat = 1;
  const void* data = nullptr;
  uint64_t nbytes = 0;  // n_mat * n_out * row bytes
};

// ---- span descriptions -------------------------------------------------------
// What each tensor of a layer is; the numbers are plugin_abi.h's FISH_ROLE_*
// (shapes and the math they take part in are written out there).
enum class TensorRole : uint32_t {
  AttnNorm = 1, AttnQ = 2, AttnK = 3, AttnV = 4, AttnOut = 5,
  AttnQBias = 6, AttnKBias = 7, AttnVBias = 8, AttnQNorm = 9, AttnKNorm = 10,
  FfnNorm = 11, FfnGate = 12, FfnUp = 13, FfnDown = 14,
  FfnRouter = 15, FfnGateExps = 16, FfnUpExps = 17, FfnDownExps = 18,
  FfnGateShexp = 19, FfnUpShexp = 20, FfnDownShexp = 21, FfnShexpGate = 22,
};
// FISH_NORM_*, FISH_ACT_*, FISH_GATING_*.
enum class NormType : uint32_t { Rms = 0 };
enum class Activation : uint32_t { Silu = 0 };
enum class Gating : uint32_t { SoftmaxTopK = 0, SoftmaxTopKNorm = 1 };

// One tensor of a layer: weight for a matrix role (may be null while the span
// is only being sized: span_bytes), data + n for a vector role (f32, read
// during span_create only).
struct SpanTensor {
  TensorRole role = TensorRole::AttnNorm;
  BackendWeight* weight = nullptr;
  const float* data = nullptr;
  int64_t n = 0;
};

struct SpanLayer {
  std::vector<SpanTensor> tensors;  // any order, each role at most once
};

// What the layers compute besides their tensors (fish_arch).
struct SpanArch {
  NormType norm = NormType::Rms;
  float norm_eps = 1e-5f;
  Activation activation = Activation::Silu;
  RopeType rope = RopeType::Normal;
  int32_t n_rot = 0;                  // rotated dims per head (== head_dim for Llama)
  float rope_freq_base = 10000.0f;
  float rope_freq_scale = 1.0f;
  const float* rope_freqs = nullptr;  // [n_rot/2] Llama-3 frequency factors or null
  float attn_scale = 0.0f;            // 0: 1/sqrt(head_dim)
  int32_t n_expert = 0;               // 0: dense FFN
  int32_t n_expert_used = 0;
  Gating gating = Gating::SoftmaxTopK;
  int32_t n_ff_expert = 0;
  int32_t n_ff_shexp = 0;
};

// A span's description. `layers` is a view: the caller owns the layers (the
// model builds them once and hands a suffix of them to span_bytes/span_create),
// so a SpanDesc is cheap to pass and to copy.
struct SpanDesc {
  int32_t first_layer = 0;  // model layer index of layers[0] (for messages)
  int32_t n_embd = 0, n_head = 0, n_head_kv = 0, head_dim = 0;
  int32_t n_ff = 0;         // dense FFN rows (0 with experts)
  int32_t n_ctx = 0;        // KV positions per sequence to reserve up front
  int32_t n_seq = 1;        // sequences 0 .. n_seq-1, each with its own KV
  SpanArch arch;
  std::span<const SpanLayer> layers;
  int32_t n_layers() const { return int32_t(layers.size()); }
};

// ---- one forward -------------------------------------------------------------
// n_tok rows of the residual stream x [n_tok, n_embd] f32; row t is sequence
// seq[t] (null: all sequence 0) at position pos[t]. Per sequence the rows come
// in position order, consecutive, the first at or before its KV length.
struct SpanBatch {
  int32_t n_tok = 0;
  float* x = nullptr;
  const int32_t* seq = nullptr;          // [n_tok] or null
  const int32_t* pos = nullptr;          // [n_tok]
  const uint8_t* logits_rows = nullptr;  // [n_tok]: nonzero = this row's logits wanted; null: none
  bool x_out = false;                    // write the stream leaving the last layer back into x
  // Logits of the wanted rows in row order, [n_wanted, n_vocab] (needs span_set_head):
  // copied into `logits`, or with logits_view left in the backend's memory and
  // pointed at by `view` (valid until the next call with this span other than
  // span_kv_len).
  bool logits_view = false;
  float* logits = nullptr;
  const float* view = nullptr;  // out
};

class ComputeBackend {
 public:
  virtual ~ComputeBackend() = default;

  virtual std::string name() const = 0;      // "vulkan", "reference"
  virtual std::string describe() = 0;        // one line: device, resident weights, spans
  virtual std::string last_error() const = 0;
  // The fish_status code of the last failure (plugin_abi.h, 0 = none): the
  // engine tells FISH_E_UNSUPPORTED (do it another way) from a real failure.
  virtual int last_status() const = 0;
  static constexpr int kUnsupported = 2;  // FISH_E_UNSUPPORTED
  // "not opened" / "open: <device>" / "failed: <why>".
  virtual std::string status() = 0;
  // A multi-line timing profile since the last call ("" when the backend keeps none).
  virtual std::string profile() = 0;
  // Opens the device now (it opens lazily on the first query otherwise).
  virtual bool open() = 0;

  virtual uint64_t memory_free() = 0;        // bytes the backend could still allocate
  virtual uint64_t bytes_resident() = 0;     // bytes it holds now (exact)
  virtual bool supports(GgmlType t) = 0;

  // nullptr on failure (budget, unsupported type, device error): see last_error().
  virtual BackendWeight* upload(const WeightDesc& w) = 0;
  virtual void release(BackendWeight* w) = 0;

  // x: [n_tok, n_in] f32, y: [n_tok, n_out] f32 (single matrices only).
  virtual bool matmul(BackendWeight* w, const float* x, int n_tok, float* y) = 0;
  // Several weights on one input in one submit; ys[i]: [n_tok, n_out_i].
  virtual bool matmul_group(BackendWeight* const* ws, int n_w, const float* x, int n_tok, float* const* ys) = 0;

  // ---- spans (optional: has_spans() false, span_create returns nullptr) ----
  virtual bool has_spans() const = 0;
  // Bytes a span of this shape would need beyond its weights (KV for n_ctx
  // positions of n_seq sequences + work buffers + parameters); 0 on failure.
  virtual uint64_t span_bytes(const SpanDesc& d) = 0;
  // nullptr when refused; last_status() FISH_E_UNSUPPORTED names what the
  // plugin does not implement (a role, MoE, several sequences).
  virtual BackendSpan* span_create(const SpanDesc& d) = 0;
  virtual void span_destroy(BackendSpan* s) = 0;
  // Attaches the model's output head [n_vocab, n_embd] and its norm [n_embd]
  // to a span ending at the last layer (head null: detaches).
  virtual bool span_set_head(BackendSpan* s, BackendWeight* head, const float* norm) = 0;
  // Runs the batch. On failure x and the logits are untouched; each sequence
  // keeps its positions before its first row. A batch of several sequences
  // the plugin refuses is run as one forward per sequence.
  virtual bool span_forward(BackendSpan* s, SpanBatch& b) = 0;
  virtual int span_kv_len(BackendSpan* s, int32_t seq) = 0;  // positions held; -1 on failure
  // Keeps positions < n of seq (n = 0 drops the sequence).
  virtual bool span_kv_truncate(BackendSpan* s, int32_t seq, int32_t n) = 0;
  // dst's positions [p0, p1) become a copy of src's (optional: has_span_kv_copy()).
  virtual bool has_span_kv_copy() const = 0;
  virtual bool span_kv_copy(BackendSpan* s, int32_t src, int32_t dst, int32_t p0, int32_t p1) = 0;
  // Lets every sequence grow to n positions.
  virtual bool span_kv_reserve(BackendSpan* s, int32_t n) = 0;
};

}  // namespace fish
