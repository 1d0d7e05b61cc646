// LlamaModel: a Llama-family decoder (llama, qwen2, qwen3) over a mapped GGUF.
// Weights stay in the mapping (no copies); the CPU path runs every layer with
// int8-activation matmuls; layers placed on a compute backend run there either
// per matmul (stage 1) or as one span (stage 2), see place_layers.cpp.
#pragma once
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "backend/compute_backend.h"
#include "common/engine_config.h"
#include "cpu/attention.h"
#include "cpu/matmul.h"
#include "cpu/moe.h"
#include "cpu/thread_pool.h"
#include "model/hparams.h"
#include "model/kv_cache.h"
#include "model/requant.h"

namespace fish {

namespace gguf { class File; struct TensorInfo; }
class Tokenizer;

struct ModelOptions {
  int32_t n_threads = 0;   // <= 0: one per physical core
  int32_t n_ctx = 0;       // <= 0: the model's training context
  int32_t gpu_layers = -1; // -1: the config's FISH_GPU_LAYERS or as many as fit; 0: CPU only
  int32_t gpu_span = -1;   // -1: the config's FISH_GPU_SPAN (on by default); 0: per-matmul; 1: span
  // -1: the config's FISH_GPU_REQUANT (off by default); else a RequantMode
  // (0 off, 1, 2, 3, 4 auto): smaller re-quantised device copies (model/requant.h).
  int32_t gpu_requant = -1;
  // MoE models: the layers (from the first) whose experts stay in host memory
  // while their attention and router run on the backend per matmul (stage 1);
  // the later layers' experts go into the span. -1: automatic (experts placed
  // from the last layer back while they fit, the first layers' stay on the host).
  int32_t n_cpu_moe = -1;
  // Sequences that can hold KV at once (ids 0..n_seq-1; eval_batch). A span
  // whose plugin holds fewer runs its layers per matmul instead.
  int32_t n_seq = 1;
  // Bound of the prefix cache's retained positions (seq_release), MB.
  int32_t prefix_cache_mb = 256;
  bool verbose = false;
  // The FISH_* configuration of this load (placement, spans, repacking);
  // null: EngineConfig::process(). Copied: it need not outlive the call.
  // Which backend there is comes from the process's backend (backend.h).
  const EngineConfig* config = nullptr;
  bool vocab_only = false;  // the tokenizer alone (vocab files); eval() refuses
  // Optional: the load's long steps as they run (phase, fraction done in [0, 1]).
  std::function<void(const char* phase, double fraction)> progress;
};

// A weight matrix: its CPU view and, when resident, its backend copy. cpu
// may be a repacked copy (prepare_weights); tensor->data is always the GGUF bytes.
struct Linear {
  const gguf::TensorInfo* tensor = nullptr;
  WeightView cpu;
  BackendWeight* gpu = nullptr;
  ComputeBackend* gpu_be = nullptr;   // the backend (device) holding gpu
  GgmlType gpu_type = GgmlType::F32;  // the type uploaded (tensor->type, or a re-quantised one)
  uint64_t gpu_bytes = 0;             // ... and its bytes
};

// The experts of an MoE layer: one stacked GGUF tensor [n_in, n_out, n_expert]
// (expert e's matrix at data + e * n_out * row_bytes). cpu[e] is expert e's
// view (repacked per expert like a dense matrix, prepare_cpu_weights); gpu is
// the whole stack uploaded as one weight of n_mat = n_expert (spans only).
// An older Mixtral file's per-expert tensors (gguf/tensor_stack.h) are read as
// a stack the model describes (tensor: the model's own TensorInfo): over their
// bytes when they lie one after another in the file; else tensor->data is null,
// parts lists them, cpu[e] views parts[e], and the upload gathers them into
// one staging copy (converted part by part when re-quantised).
struct Experts {
  const gguf::TensorInfo* tensor = nullptr;
  std::vector<const gguf::TensorInfo*> parts;  // per-expert tensors not contiguous in the file (else empty)
  std::vector<WeightView> cpu;
  BackendWeight* gpu = nullptr;
  ComputeBackend* gpu_be = nullptr;
  GgmlType gpu_type = GgmlType::F32;  // the type uploaded (tensor->type, or a re-quantised one)
  uint64_t gpu_bytes = 0;             // ... and its bytes
};

struct Layer {
  const float* attn_norm = nullptr;  // [n_embd]
  const float* ffn_norm = nullptr;   // [n_embd]
  const float *bq = nullptr, *bk = nullptr, *bv = nullptr;  // qwen2
  const float *q_norm = nullptr, *k_norm = nullptr;          // qwen3 [head_dim]
  Linear wq, wk, wv, wo, gate, up, down;  // gate/up/down: dense FFN only
  // MoE FFN (Hparams::moe()): router [n_embd -> n_expert] (ffn_gate_inp), the
  // experts' gate/up [n_embd -> n_ff_expert] and down [n_ff_expert -> n_embd];
  // qwen2moe's shared expert and its gate vector ffn_gate_inp_shexp [n_embd].
  Linear router;
  Experts gate_exps, up_exps, down_exps;
  Linear gate_shexp, up_shexp, down_shexp;
  const float* shexp_gate = nullptr;
};

// One device's part of the GPU layers (place_devices.cpp): layers [first, end)
// were given to it (consecutive ranges, device after device); [end - n_gpu,
// end) have their weights on it, and [span_first, end) run as its span, with
// the span's own KV for every sequence. The layers before end - n_gpu run on
// the CPU, those in [end - n_gpu, span_first) per matmul on this device (MoE
// layers whose experts stay in host memory, or a span the plugin refused).
struct DevicePart {
  ComputeBackend* be = nullptr;
  int32_t device = 0;   // the plugin's device index (FISH_GPU_DEVICE, else its default)
  int32_t slot = 0;     // its place in that list (FISH_TEST_SPAN_FAIL_AT=pos@slot)
  int32_t first = 0, end = 0, n_gpu = 0, span_first = 0;
  BackendSpan* span = nullptr;
  int32_t kv_cap = 0;   // positions the span's device KV holds now (grown on demand)
};

struct ModelStats {
  int64_t gpu_submits = 0;
  int64_t gpu_fallbacks = 0;
};

class LlamaModel {
 public:
  static std::unique_ptr<LlamaModel> load(const std::string& path, const ModelOptions& opt);
  ~LlamaModel();
  LlamaModel(const LlamaModel&) = delete;
  LlamaModel& operator=(const LlamaModel&) = delete;

  // Evaluates a batch of n rows: row i is token tokens[i] of sequence seq[i]
  // (null: all sequence 0) at position pos[i]. Per sequence the rows are
  // consecutive positions, the first at or before that sequence's length
  // (later positions are replaced first); rows of several sequences may
  // interleave. The matrices are read once for all rows. want[i] nonzero keeps
  // row i's logits (null: the last row's only). Throws fish::Error on bad input.
  void eval_batch(const int32_t* tokens, const int32_t* seq, const int32_t* pos, const uint8_t* want, int32_t n);
  // Sequence 0 alone: n tokens at positions pos..pos+n-1; the logits of every
  // token when all_logits, else of the last one.
  void eval(const int32_t* tokens, int32_t n, int32_t pos, bool all_logits);
  // Embeddings: as eval_batch, but each wanted row keeps the stream leaving
  // the last layer after the output norm (the LM head's input, [n_embd]) and
  // no logits are computed (none are readable after it: n_logits() == 0). A
  // span returns x (SpanBatch::x_out) and the norm runs here.
  void eval_batch_hidden(const int32_t* tokens, const int32_t* seq, const int32_t* pos, const uint8_t* want,
                         int32_t n);
  // The normed hidden state [n_embd] of batch row `row` of the last
  // eval_batch_hidden (null when it was not kept or a later eval ran).
  const float* hidden_row(int32_t row) const;
  // Logits [n_vocab] of the i-th kept row of the last eval (-1: the last kept).
  const float* logits(int32_t i) const;
  // ... of batch row `row` of the last eval (null when it was not kept).
  const float* logits_row(int32_t row) const;
  int32_t n_logits() const { return n_logits_; }

  // Sequences: their lengths, truncation (0 drops one) and prefix copies
  // (dst = src's first n positions, sharing the KV pages: copy on write).
  int32_t n_seq() const { return kv_.n_seq(); }
  int32_t seq_len(int32_t seq) const;
  void seq_truncate(int32_t seq, int32_t n);
  void seq_copy(int32_t src, int32_t dst, int32_t n);
  const KvCache& kv_cache() const { return kv_; }
  // The prefix cache (sequences.cpp): seq_release drops seq but keeps its
  // positions for reuse (within ModelOptions::prefix_cache_mb, least recently
  // used out first; not kept when the model has a span, whose device KV goes);
  // seq_reuse makes dst the longest prefix of tokens[0..n) found in a live
  // sequence or a released one (at most n - 1 positions, so the prompt's last
  // token is evaluated) and returns its length: evaluate from there.
  void seq_release(int32_t seq);
  int32_t seq_reuse(int32_t dst, const int32_t* tokens, int32_t n);
  uint64_t prefix_cache_bytes() const;
  int32_t prefix_cache_entries() const { return int32_t(prefix_cache_.size()); }
  struct PrefixStats {
    int64_t lookups = 0, hits = 0, reused_tokens = 0;
  };
  const PrefixStats& prefix_stats() const { return prefix_stats_; }
  int32_t kv_len() const { return kv_.len(0); }
  void kv_truncate(int32_t n) { seq_truncate(0, n); }

  const Hparams& hparams() const { return hp_; }
  const Tokenizer& tokenizer() const { return *tokenizer_; }
  const gguf::File& file() const { return *file_; }
  int32_t n_ctx() const { return n_ctx_; }
  int32_t n_threads() const { return pool_->size(); }
  int64_t n_params() const { return n_params_; }
  const ModelStats& stats() const { return stats_; }
  void reset_stats() { stats_ = {}; }

  // Placement (see place_layers.cpp).
  // The backend of the first device in use (null: CPU only); every device's part.
  ComputeBackend* backend() const { return backend_; }
  const std::vector<DevicePart>& device_parts() const { return parts_; }
  int32_t gpu_layers() const;
  bool gpu_output() const { return output_.gpu != nullptr; }
  bool gpu_span() const;
  // Layers in spans (0 without one) and MoE layers whose experts are on the host.
  int32_t span_layers() const;
  int32_t cpu_moe_layers() const { return hp_.moe() ? hp_.n_layer - span_layers() : 0; }
  // The output norm + projection run in the span's own forward.
  bool gpu_span_head() const { return span_head_; }
  bool vocab_only() const { return vocab_only_; }
  // The backend's describe() line, and the re-quantisation mix after it.
  std::string gpu_detail() const;
  std::string detail_of(ComputeBackend* be) const;  // one device's describe() + the re-quantisation
  // Re-quantised device copies (model/requant.h): the mode in effect (auto
  // resolved), what the placed weights became ("" for none: requant_mix_.str()),
  // and what the conversions cost at this load.
  RequantMode requant_mode() const { return requant_mode_; }
  std::string requant_detail() const { return requant_mix_.str(); }
  const RequantStats& requant_stats() const { return requant_stats_; }

 private:
  LlamaModel() = default;
  void load_weights();
  void place_layers(const ModelOptions& opt);
  // One device's layers [d.first, d.end) (and the output projection first when
  // with_output), the body of the placement: place_layers.cpp.
  void place_on_device(const ModelOptions& opt, DevicePart& d, bool with_output, std::unique_ptr<Requantizer>& requant);
  // Several devices (FISH_GPU_DEVICE=0,1): ranges by free memory or
  // FISH_TENSOR_SPLIT, the output projection on the device with the most room.
  void place_devices(const ModelOptions& opt, const std::vector<ComputeBackend*>& bes,
                     const std::vector<int32_t>& devices, int32_t want, std::unique_ptr<Requantizer>& requant);
  // The load's progress callback (ModelOptions::progress), set while load() runs.
  std::function<void(const char*, double)> progress_;
  void report(const char* phase, double fraction) const {
    if (progress_) progress_(phase, fraction);
  }
  void prepare_cpu_experts();  // ... and the experts on the host (per expert)
  void prepare_cpu_weights();  // repack the CPU-resident matrices (cpu/matmul.h prepare_weights)
  void release_backend();
  // Releases every backend resource and continues on the CPU (why: for the message).
  void fall_back_to_cpu(const char* what, const std::string& why = "");
  // Releases part k's span and weights (the output projection too when on
  // its backend): its layers continue on the CPU, the other parts as they were.
  void fall_back_part(size_t k, const char* what, const std::string& why);
  void release_part(DevicePart& d);
  bool grow_span_kv(DevicePart& d, int32_t n);  // span_kv_reserve so positions < n fit
  // Rebuilds every sequence's CPU KV of layers < layer_end after a span fallback.
  void replay_history(int32_t layer_end);

  // false: the span failed and x is untouched (nothing else was changed).
  // logits_out null: no final norm / LM head (a prompt chunk before the last).
  // may_view: the logits may stay in the backend's memory (logits_view_).
  // One chunk of a batch: n rows of (token, sequence, position); want: the
  // rows whose logits go to logits_out in row order (null: none).
  struct Rows {
    const int32_t* tok;
    const int32_t* seq;
    const int32_t* pos;
    int32_t n;
  };
  // layer_end < n_layer: only layers < layer_end run (a replay), no head.
  bool eval_chunk(const Rows& r, const uint8_t* want, float* logits_out, bool may_view, int32_t layer_end = -1);
  // The span's layers on x [n, n_embd] (positions pos..pos+n-1, sequence 0).
  enum class SpanOut {
    Failed,  // x untouched, span_fail_reason_ says why
    Logits,  // the head ran in the span: logits_out (or logits_view_) hold the wanted rows
    Stream,  // x holds the stream leaving the last layer (when logits_out wants it)
  };
  // The span of part d on x; last: its forward ends the model (may give the logits).
  SpanOut run_span(DevicePart& d, bool last, float* x, const Rows& r, const uint8_t* want, float* logits_out,
                   bool may_view);
  void embed(const int32_t* tokens, int32_t n, float* x);
  void cpu_layer(int32_t l, float* x, const Rows& r);
  void linear(const Linear& w, const float* x, int32_t n, float* y);
  void linear_group(const Linear* const* ws, int32_t n_w, const float* x, int32_t n, float* const* ys);
  const float* vector_tensor(const std::string& name, int64_t n, bool required);
  Linear matrix_tensor(const std::string& name, int64_t n_in, int64_t n_out, bool required);
  // kind "ffn_gate": the stacked p + "ffn_gate_exps.weight", or the experts'
  // own tensors p + "ffn_gate.E.weight" of an older file.
  Experts expert_tensor(const std::string& p, const std::string& kind, int64_t n_in, int64_t n_out);
  // The MoE FFN of layer l on xn [n, n_embd] (normed), its result added to x
  // (moe_ffn.cpp): router, routing, the chosen experts grouped by expert.
  void moe_ffn(int32_t l, const float* xn, float* x, int32_t n);

  EngineConfig cfg_;  // ModelOptions::config or the process's
  std::unique_ptr<gguf::File> file_;
  std::unique_ptr<Tokenizer> tokenizer_;
  std::unique_ptr<ThreadPool> pool_;
  Hparams hp_;
  int32_t n_ctx_ = 0;
  int64_t n_params_ = 0;

  const gguf::TensorInfo* tok_embd_ = nullptr;
  const float* output_norm_ = nullptr;
  const float* rope_freqs_ = nullptr;
  Linear output_;
  std::vector<Layer> layers_;
  std::vector<std::vector<float>> owned_vectors_;  // norms/biases stored as non-F32
  std::deque<gguf::TensorInfo> expert_stacks_;     // stacks of per-expert tensors (Experts::tensor)
  std::vector<PreparedWeight> prepared_;           // keeps the repacked CPU weights alive
  uint64_t repacked_bytes_ = 0;

  KvCache kv_;
  // Per sequence, the token at each position < its length (to rebuild KV after a fallback).
  std::vector<std::vector<int32_t>> history_;
  struct PrefixEntry {
    std::vector<int32_t> tokens;
    int32_t kv = -1;        // KvCache retained entry
    uint64_t last_use = 0;  // prefix_clock_ at its last use
  };
  std::vector<PrefixEntry> prefix_cache_;
  uint64_t prefix_clock_ = 0, prefix_cache_limit_ = 0;
  PrefixStats prefix_stats_;
  void trim_prefix_cache();
  std::vector<int32_t> row_logit_;  // batch row -> index among the kept logits, or -1
  std::vector<int32_t> seq_zero_, pos_buf_;  // scratch: eval()'s rows
  std::vector<int32_t> seq_lo_, seq_hi_;     // scratch: a chunk's positions per sequence
  std::vector<uint8_t> want_buf_;
  std::vector<AttentionRow> att_rows_;  // scratch: a chunk's attention rows

  // GPU placement
  ComputeBackend* backend_ = nullptr;  // the first part's (null: CPU only)
  std::vector<DevicePart> parts_;      // one per device in use, in layer order
  int32_t failed_part_ = -1;           // the part whose span failed in the last eval_chunk
  std::string part_label_;             // place_on_device's name for the device ("": one device)
  bool span_head_ = false;        // the span's forward gives the logits (cfg_ FISH_GPU_SPAN_HEAD=0: off)
  bool span_head_all_rows_ = true;  // ... of any rows, not only the last (cleared when the plugin refuses)
  bool span_view_ = false;        // ... left in the backend's memory, no copy (cfg_ FISH_GPU_LOGITS_VIEW=0: copied)
  const float* logits_view_ = nullptr;  // the last eval's logits [n_logits_, n_vocab] in the backend's memory, else null
  bool gpu_verbose_ = false;            // ModelOptions::verbose or cfg_ FISH_GPU_VERBOSE: say why placement changes
  void own_logits();  // copies logits_view_ into logits_ before a call that may invalidate it
  int32_t span_fail_at_ = -1;     // cfg_ FISH_TEST_SPAN_FAIL_AT: a simulated span failure (tests)
  int32_t span_fail_dev_ = -1;    // ... of this part only (-1: any)
  std::string span_fail_reason_;
  int32_t kv_replay_end_ = 0;  // a span fell back: the CPU KV of layers < this is to be rebuilt
  RequantMode requant_mode_ = RequantMode::Off;
  RequantMix requant_mix_;      // of the weights on the backend now
  RequantStats requant_stats_;  // of this load's conversions
  // FISH_GPU_REQUANT=auto: the mode whose device copies fit best (requant_auto.h).
  // Layers end - want .. end - 1 are the candidates; an MoE layer l >=
  // experts_from may have its expert stacks on the device (the span's), the
  // others keep them in host memory.
  RequantMode choose_requant_auto(ComputeBackend* be, int32_t end, int32_t want, int32_t experts_from,
                                  const std::vector<uint64_t>& reserve_for,
                                  const std::function<bool(GgmlType)>& supports);
  // FISH_TEST_REQUANT_HOST_EXPERTS: the re-quantised bytes of experts the CPU
  // multiplies from host memory (test-gpu's per-matmul reference only).
  std::vector<std::vector<uint8_t>> host_expert_bytes_;

  ModelStats stats_;

  // Scratch, sized for the largest chunk seen (no allocation once warm).
  std::vector<float> x_, xn_, q_, k_, v_, att_, o_, g_, u_, logits_;
  MoeScratch moe_;  // the MoE FFN's buffers (cpu/moe.h)
  std::vector<float> rope_cs_;   // the chunk's RoPE angles, [n, n_rot] (rope_angles per row)
  bool rope_cs_filled_ = false;  // rope_cs_ holds this chunk's rows (set by its first CPU layer)
  AttentionScratch att_scratch_;
  int32_t n_logits_ = 0;
  // eval_batch_hidden: the wanted rows get the normed stream in hidden_ [n_hidden_, n_embd].
  bool hidden_mode_ = false;
  std::vector<float> hidden_;
  int32_t n_hidden_ = 0;
  bool vocab_only_ = false;
};

// Largest number of tokens evaluated in one pass; longer batches are split.
constexpr int32_t kMaxChunk = 512;

}  // namespace fish
