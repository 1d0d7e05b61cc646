/* libfish: the public C API. The `fish` command line is built on this alone.
 *
 * Conventions: every struct passed in begins with struct_size (set it with the
 * *_default_params() functions); functions that can fail return a status (0 =
 * ok) or NULL and leave a message readable through fish_last_error() on the
 * object (or a fish_error for constructors). Nothing aborts the process. */
#ifndef FISH_FISH_H
#define FISH_FISH_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_WIN32)
#define FISH_API __declspec(dllexport)
#else
#define FISH_API __attribute__((visibility("default")))
#endif

/* ---- errors --------------------------------------------------------------- */
typedef struct fish_error fish_error;
FISH_API const char* fish_error_message(const fish_error* e);
FISH_API void fish_error_free(fish_error* e);

/* ---- model ---------------------------------------------------------------- */
typedef struct fish_model fish_model;

/* Progress of a long step (loading, synthesis): what runs ("repacking CPU
 * weights") and the fraction done in [0, 1], or < 0 when it is not known.
 * Called on the thread that made the call, from inside it. */
typedef void (*fish_progress_fn)(void* user, const char* phase, float fraction);

typedef struct fish_model_params {
  uint32_t struct_size;
  int32_t n_threads;   /* <= 0: one per physical core */
  int32_t n_ctx;       /* <= 0: the model's context length */
  int32_t gpu_layers;  /* -1: auto (FISH_GPU_LAYERS or as many as fit); 0: CPU only */
  int32_t gpu_span;    /* -1: default (FISH_GPU_SPAN, on unless set off); 0: per-matmul; 1: span */
  int32_t verbose;     /* progress and placement on stderr */
  int32_t vocab_only;  /* 1: load only the tokenizer (any GGUF with tokenizer metadata); no eval */
  fish_progress_fn progress; /* optional: the load's steps (upload, repack) as they run */
  void* progress_user;
  /* Optional: engine variables for this load, "NAME=VALUE" items separated by
   * spaces or newlines (e.g. "FISH_GPU_SPAN_HEAD=0 FISH_CPU_REPACK=0"), on top
   * of the process's environment (read once). Any variable of the README's
   * configuration table; those that choose the backend (FISH_GPU=off aside)
   * take effect through fish_backend_use_file_config. A malformed item, an
   * unknown name or a refused value fails the load, naming it. NULL: none. */
  const char* config;
  /* Smaller re-quantised copies of the weights on the device (the GGUF and
   * the CPU path untouched): -1 (default) FISH_GPU_REQUANT, which is off
   * unless set; 0 off; 1 every K-quant matrix of the GPU layers to FQ3; 2 Q6_K
   * and Q5_K to Q4_K; 3 Q4_K to FQ3 and Q6_K / Q5_K to Q4_K; 4 auto (the
   * mildest that puts every layer and the output on the device). Any other
   * value fails the load. A caller built before this field gets -1. */
  int32_t gpu_requant;
  /* Sequences the model holds at once (ids 0..n_seq-1, fish_decode); 0 or
   * absent: 1. Each has its own positions in a paged KV cache; prefixes copied
   * with fish_seq_copy share their pages. */
  int32_t n_seq;
  /* Bound of the prefix cache (fish_seq_release), MB; 0: keep nothing; absent: 256. */
  int32_t prefix_cache_mb;
  /* Mixture-of-experts models: the layers, from the first, whose experts stay
   * in host memory (their attention and router still run on the device, per
   * matmul; the later layers' experts go into the device span, as llama.cpp's
   * --n-cpu-moe). -1 (default, or absent): as many layers' experts on the
   * device as fit, the first layers' kept on the host first. Ignored for
   * dense models. */
  int32_t n_cpu_moe;
  /* Several GPUs: the devices to use, as `fish devices` numbers them ("0,1";
   * the same index twice, "0,0", opens one device as two logical devices),
   * one backend and one span (with its own KV) per device, the layers split
   * into consecutive ranges, the first device the first range. NULL (or
   * absent): FISH_GPU_DEVICE, else the plugin's best device. A malformed
   * list or an index the plugin does not have fails the load, naming it. */
  const char* gpu_devices;
  /* The layers' proportions per device ("3,1": three quarters on the first),
   * as llama.cpp's --tensor-split; one value >= 0 per device, not all 0.
   * NULL (or absent): FISH_TENSOR_SPLIT, else each device's free memory. */
  const char* tensor_split;
} fish_model_params;

FISH_API fish_model_params fish_model_default_params(void);

/* Loads a GGUF model. On failure returns NULL and, when err is not NULL, sets
 * *err to an error naming the file and reason (free it with fish_error_free). */
FISH_API fish_model* fish_model_load(const char* path, const fish_model_params* params, fish_error** err);
FISH_API void fish_model_free(fish_model* m);
FISH_API const char* fish_last_error(const fish_model* m);

typedef struct fish_model_info {
  uint32_t struct_size;
  const char* arch;      /* "llama", "qwen2", "qwen3", "qwen2moe", "qwen3moe" */
  const char* name;      /* general.name or "" */
  const char* tokenizer; /* "spm" or "bpe" */
  int32_t n_vocab, n_ctx_train, n_ctx, n_embd, n_layer, n_head, n_head_kv, head_dim, n_ff;
  int64_t n_params;
  uint64_t file_bytes;
  int32_t bos, eos;
  int32_t n_threads;
  int32_t gpu_layers;    /* layers whose work runs on a backend */
  int32_t gpu_output;    /* 1 when the output projection is on the backend */
  int32_t gpu_span;      /* 1 when the GPU layers run as one span */
  const char* backend;   /* "cpu" or the plugin name */
  const char* gpu_detail;/* the backend's describe() line, or "" */
  const char* cpu_kernels; /* "avx512-vnni", "avx2" or "scalar" */
  /* Re-quantised device copies (fish_model_params.gpu_requant): */
  const char* gpu_requant;     /* the mode in effect, auto resolved: "0", "1", "2", "3" */
  const char* requant_detail;  /* what the placed weights became, e.g. "134 x Q4_K->FQ3 1740 MB (from
                                  2236), 21 x Q6_K->Q4_K 619 MB (from 903)", or "" */
  int32_t requant_converted;   /* matrices converted at this load */
  int32_t requant_cached;      /* matrices read from the disk cache instead */
  int32_t requant_rejected;    /* cache entries found stale, truncated or corrupt, and rebuilt */
  double requant_seconds;      /* wall time of the conversions */
  double requant_ns_per_weight;
  /* Mixture of experts (0 for a dense model): experts per layer, used per
   * token, rows of each; MoE layers in the span (experts on the device) and
   * MoE layers whose experts are in host memory (per matmul or on the CPU). */
  int32_t n_expert, n_expert_used, n_ff_expert;
  int32_t gpu_span_layers;
  int32_t cpu_moe_layers;
  /* The devices holding layers or the output projection (0: CPU only), and
   * each one's layers on it as "device:first-last" separated by spaces
   * ("0:0-13 0:14-27" for two logical devices of device 0; "1:-" for none). */
  int32_t n_gpu_devices;
  const char* gpu_device_layers;
} fish_model_info;
FISH_API void fish_model_get_info(const fish_model* m, fish_model_info* out);

/* ---- tokens --------------------------------------------------------------- */
/* Returns the number of ids; when that exceeds cap, nothing is written and the
 * negative count is returned. -INT32_MAX on error. */
FISH_API int32_t fish_tokenize(const fish_model* m, const char* text, size_t len, int add_special,
                               int parse_special, int32_t* out, int32_t cap);
/* Writes the token's bytes (not NUL-terminated); returns their count, or the
 * negative count when cap is too small. */
FISH_API int32_t fish_token_to_piece(const fish_model* m, int32_t token, char* buf, int32_t cap, int special);
FISH_API int32_t fish_detokenize(const fish_model* m, const int32_t* ids, int32_t n, char* buf, int32_t cap,
                                 int special);
FISH_API int fish_token_is_eog(const fish_model* m, int32_t token);

/* ---- evaluation ----------------------------------------------------------- */
/* Evaluates n tokens at positions pos..pos+n-1 (pos <= the KV length: positions
 * at or past pos are replaced). all_logits: keep the logits of every token,
 * else only of the last. Returns 0 or a non-zero status (fish_last_error). */
FISH_API int fish_eval(fish_model* m, const int32_t* tokens, int32_t n, int32_t pos, int all_logits);
/* Logits [n_vocab] of token i of the last batch (i = -1: the last token).
 * Read-only; the pointer is valid until the next fish_eval, fish_kv_truncate
 * or fish_model_free on m (with a GPU span it may point into the plugin's
 * host-visible memory: call again after a truncate rather than keep it). */
FISH_API const float* fish_get_logits(fish_model* m, int32_t i);
FISH_API int32_t fish_kv_len(const fish_model* m);
/* Keeps positions < n of the KV cache (CPU and device). */
FISH_API int fish_kv_truncate(fish_model* m, int32_t n);

/* ---- several sequences ---------------------------------------------------
 * A batch: row i is token[i] of sequence seq_id[i] (NULL: all 0) at position
 * pos[i]. Per sequence the rows are consecutive positions, the first at or
 * before its length (later positions are replaced); rows of different
 * sequences may interleave. One forward for all rows (the weights are read
 * once), so N sequences decoding together cost little more than one.
 * logits[i] nonzero keeps row i's logits (NULL: the last row's only).
 * fish_eval / fish_kv_* are sequence 0.
 * Thread safety: a fish_model is used by one thread at a time (calls on
 * different models may run concurrently). */
typedef struct fish_batch {
  uint32_t struct_size;
  int32_t n_tokens;
  const int32_t* token;
  const int32_t* pos;
  const int32_t* seq_id;
  const int8_t* logits;
} fish_batch;
/* Returns 0 or a non-zero status (fish_last_error); on failure no sequence changed. */
FISH_API int fish_decode(fish_model* m, const fish_batch* batch);
/* Logits [n_vocab] of row i of the last fish_decode (NULL: not kept); valid as fish_get_logits. */
FISH_API const float* fish_get_logits_ith(fish_model* m, int32_t i);
FISH_API int32_t fish_n_seq(const fish_model* m);
/* Positions sequence seq holds (-1 for an id out of range). */
FISH_API int32_t fish_seq_len(const fish_model* m, int32_t seq);
/* Keeps positions < n of sequence seq; n = 0 drops it. */
FISH_API int fish_seq_truncate(fish_model* m, int32_t seq, int32_t n);
/* Sequence dst (its old positions dropped) = the first n positions of src,
 * sharing src's KV pages until either writes into them (copy on write). */
FISH_API int fish_seq_copy(fish_model* m, int32_t src, int32_t dst, int32_t n);
/* The prefix cache. fish_seq_release drops seq but keeps its positions for
 * reuse (within prefix_cache_mb, least recently used out first; a model whose
 * layers run in a GPU span keeps none). fish_seq_reuse makes dst the longest
 * prefix of tokens[0..n) held by a live or released sequence (sharing its
 * pages; at most n - 1 positions) and returns that length (-1 on error):
 * evaluate tokens from there. */
FISH_API int fish_seq_release(fish_model* m, int32_t seq);
FISH_API int32_t fish_seq_reuse(fish_model* m, int32_t dst, const int32_t* tokens, int32_t n);
FISH_API uint64_t fish_prefix_cache_bytes(const fish_model* m);
/* Bytes of CPU KV pages allocated, and pages in use (shared pages count once). */
FISH_API uint64_t fish_kv_bytes(const fish_model* m);
FISH_API int32_t fish_kv_pages(const fish_model* m);

/* ---- embeddings ------------------------------------------------------------
 * One vector [n_embd] per input, as llama-server's --embeddings and ollama's
 * /api/embed give: the stream leaving the last layer after the output norm
 * (the LM head's input; no logits are computed), pooled over the input's
 * tokens, then (by default) scaled to unit L2 length. Each input is evaluated
 * on a sequence of its own from position 0: up to params.n_seq inputs at a
 * time on sequences params.seq .. params.seq + n_seq - 1, their rows in the
 * same forwards (pieces of at most 512 rows in all; a longer input goes on in
 * the next piece), so the weights are read once for several short inputs.
 * Each vector is the one the input gets alone (bit for bit on the CPU). The
 * sequences used (the first min(n_seq, n_inputs)) lose what they held and are
 * left empty afterwards, also on failure; the other sequences keep their KV.
 * With layers in a GPU span the stream comes back through the span's x
 * (the span's own head is not used) and the norm and pooling run on the CPU.
 * Thread safety: as fish_decode (one thread at a time per model). */
enum {
  FISH_POOLING_MEAN = 0,  /* the mean over the input's tokens (BOS included when it has one) */
  FISH_POOLING_LAST = 1,  /* the last token's (what a causal model has read the whole input at) */
  FISH_POOLING_FIRST = 2  /* the first token's ("cls"); with a causal model it sees that token alone,
                             so inputs that begin with BOS all get the same vector */
};
typedef struct fish_embed_params {
  uint32_t struct_size;
  int32_t pooling;    /* FISH_POOLING_*; default MEAN */
  int32_t normalize;  /* nonzero (default): unit L2 length; 0: as pooled */
  int32_t seq;        /* the first sequence evaluated on (default 0) */
  /* Consecutive sequences from seq the call may use, one input on each at a
   * time (1..fish_n_seq - seq; default 1: one input after another). A caller
   * built before this field gets 1. */
  int32_t n_seq;
} fish_embed_params;
FISH_API fish_embed_params fish_embed_default_params(void);
/* The length of an embedding (the model's n_embd); 0 for NULL. */
FISH_API int32_t fish_n_embd(const fish_model* m);
/* Input i is tokens[i][0 .. n_tokens[i]), 1 to n_ctx ids; out [n_inputs * n_embd]
 * gets the vectors row by row. Every input is checked before any is evaluated.
 * Returns 0 or a non-zero status (fish_last_error names the input). */
FISH_API int fish_embed_tokens(fish_model* m, const int32_t* const* tokens, const int32_t* n_tokens,
                               int32_t n_inputs, const fish_embed_params* params, float* out);
/* The same for texts (NUL-terminated), tokenized as fish_tokenize with
 * add_special 1 and parse_special 0; n_tokens_out (NULL: not wanted) gets
 * each input's token count. An input that tokenizes to nothing fails. */
FISH_API int fish_embed_texts(fish_model* m, const char* const* texts, int32_t n_inputs,
                              const fish_embed_params* params, float* out, int32_t* n_tokens_out);

typedef struct fish_stats {
  uint32_t struct_size;
  int64_t n_prompt_tokens;   /* tokens evaluated in batches of > 1 */
  int64_t n_gen_tokens;      /* tokens evaluated one at a time */
  double prompt_seconds;
  double gen_seconds;
  int64_t gpu_submits;       /* backend calls that ran device work */
  int64_t gpu_fallbacks;     /* span/matmul failures handled on the CPU */
} fish_stats;
FISH_API void fish_get_stats(const fish_model* m, fish_stats* out);
FISH_API void fish_reset_stats(fish_model* m);

/* ---- sampling ------------------------------------------------------------- */
typedef struct fish_sampler fish_sampler;
typedef struct fish_sampler_params {
  uint32_t struct_size;
  float temp;            /* <= 0: greedy */
  int32_t top_k;         /* <= 0: off */
  float top_p;           /* >= 1: off */
  float min_p;           /* <= 0: off */
  float repeat_penalty;  /* 1: off */
  int32_t repeat_last_n;
  uint64_t seed;
  /* A token seen c > 0 times in the last repeat_last_n has its logit lowered by
   * c * frequency_penalty + presence_penalty (after repeat_penalty); 0: off.
   * Callers built before these fields (a smaller struct_size) get 0. */
  float presence_penalty;
  float frequency_penalty;
} fish_sampler_params;
FISH_API fish_sampler_params fish_sampler_default_params(void);
/* The first parameter outside its range, as "top_p = 2: expected a number in
 * [0, 1]" (static storage until the next call on this thread), or NULL when all
 * are valid: temp >= 0, top_p and min_p in [0, 1], repeat_penalty > 0,
 * presence_penalty and frequency_penalty in [-2, 2] (OpenAI's range), all
 * finite; repeat_last_n >= -1. */
FISH_API const char* fish_sampler_params_check(const fish_sampler_params* p);
/* NULL when fish_sampler_params_check refuses p. */
FISH_API fish_sampler* fish_sampler_new(const fish_sampler_params* p);
FISH_API int32_t fish_sampler_sample(fish_sampler* s, const float* logits, int32_t n_vocab);
FISH_API void fish_sampler_accept(fish_sampler* s, int32_t token);
FISH_API void fish_sampler_free(fish_sampler* s);
/* JSON mode (llama-server's response_format json_object, ollama's format
 * "json"): from now on fish_sampler_sample returns only tokens whose text
 * keeps what it has returned a prefix of one JSON object (leading whitespace,
 * then an object: nesting up to 64, whitespace runs up to 32), and once the
 * object is closed only end-of-generation tokens. A drawn token that does not
 * fit is dropped and the draw repeated (greedy: the likeliest that fits). The
 * caller must take every token the sampler returns. m gives the tokens' texts
 * (built once per model). 0, or non-zero with *err set. */
FISH_API int fish_sampler_constrain_json(fish_sampler* s, const fish_model* m, fish_error** err);
/* Structured outputs (llama-server's and OpenAI's response_format
 * json_schema, ollama's format <schema>): as fish_sampler_constrain_json, but
 * the text is one JSON value (leading whitespace, then the value, any type
 * the schema allows) valid under schema_json, a JSON Schema as text. Enforced:
 * type (names or a list), properties, required, additionalProperties (false,
 * true, a schema; absent beside "properties": no other keys), items,
 * minItems, maxItems, minLength, maxLength (code points), enum and const (as
 * compact JSON), anyOf and oneOf (oneOf taken as anyOf), $ref inside the
 * document (recursion allowed). Annotations (title, description, default,
 * examples, format, ...) are ignored; any other keyword (pattern, minimum,
 * allOf, ...) is refused with *err naming it and its JSON pointer, as is a
 * schema no value satisfies or one past the bounds of
 * engine/src/model/json_schema.h. A refused schema leaves the sampler as it
 * was. 0, or non-zero with *err set. */
FISH_API int fish_sampler_constrain_json_schema(fish_sampler* s, const fish_model* m, const char* schema_json,
                                                fish_error** err);
/* Whether fish_sampler_constrain_json_schema takes schema_json, without a
 * model: 0, or non-zero with *err saying why not. */
FISH_API int fish_json_schema_check(const char* schema_json, fish_error** err);

/* ---- tools ---------------------------------------------------------------- */
/* A one-shot description of a GGUF file (architecture, hyper-parameters, tensor
 * count per type, sizes) without loading the model; free with fish_free. */
FISH_API char* fish_describe_file(const char* path, fish_error** err);
/* fish quantize: type is "Q8_0", "Q4_0", "Q4_K_M", "Q5_K_M" or "Q6_K" (llama.cpp's mixes). */
FISH_API int fish_quantize_file(const char* in, const char* out, const char* type, int n_threads, fish_error** err);
/* fish synth: shape "tiny", "llama-1b", "llama-8b", "qwen2-0.5b", "qwen3-0.6b";
 * type "F32", "F16", "Q8_0", "Q4_0", "Q4_K_M", "Q5_K_M", "Q6_K". */
FISH_API int fish_synth_file(const char* shape, const char* type, const char* out, uint64_t seed, int n_threads,
                             fish_error** err);
/* The same, reporting the bytes written as phase "synthesising" (progress may be NULL). */
FISH_API int fish_synth_file_progress(const char* shape, const char* type, const char* out, uint64_t seed,
                                      int n_threads, fish_progress_fn progress, void* user, fish_error** err);
FISH_API void fish_free(void* p);

FISH_API const char* fish_version(void);

/* ---- GPU validation (fish test-gpu) ----------------------------------------- */
/* Bytes the active backend holds now (0 when CPU only). */
FISH_API uint64_t fish_backend_bytes_resident(void);
/* The active backend's timing profile since the last call (multi-line; with
 * FISH_GPU_PROFILE set for fish_vulkan), or "". malloc'd: free with fish_free. */
FISH_API char* fish_backend_profile(void);
struct fish_plugin_check;
/* Kernel checks on a model's blk.0 projections: each matrix the active backend
 * supports is uploaded and multiplied with n_tok 1/3/37/256 random inputs, every
 * element within the spec's bound 1e-3 * sum|w||x| / n_out of the CPU f32
 * reference. Calls fn per check; returns the number of failures, or -1 with *err
 * set when there is no backend or the model cannot be read. */
FISH_API int32_t fish_test_gpu_kernels(const char* model_path,
                                       void (*fn)(const struct fish_plugin_check* check, void* ctx), void* ctx,
                                       fish_error** err);
/* Re-quantisation checks (FISH_GPU_REQUANT): mode -1 takes FISH_GPU_REQUANT,
 * 0 does nothing, 1/2/3 that mode, 4 (auto) every conversion any mode makes.
 * Each matrix the mode converts is converted as a load converts it; checked:
 * its relative RMS error against the GGUF's own values (failed past 20% for
 * FQ3, 10% for Q4_K), and for blk.0's the backend takes, the kernel on the
 * converted bytes against the CPU's decode of the same bytes (the bound of
 * fish_test_gpu_kernels); then one line per conversion (count, error range,
 * ns per weight). Returns the number of failures, or -1 with *err set. */
FISH_API int32_t fish_test_gpu_requant(const char* model_path, int32_t mode,
                                       void (*fn)(const struct fish_plugin_check* check, void* ctx), void* ctx,
                                       fish_error** err);

#ifdef __cplusplus
}
#endif

#include "fish/fish_backends.h"

#endif /* FISH_FISH_H */
