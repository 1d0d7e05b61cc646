/* fish plugin ABI: the whole contract between the fish engine (the "host":
 * libfish) and a compute-backend plugin (fish_vulkan, fish_reference, a
 * vendor's own build). C99, no dependencies beyond <stddef.h>/<stdint.h>.
 * plugin_abi/README.md states the rules in prose; this header is normative.
 *
 * Shape of the contract
 *   - The plugin exports exactly one symbol, fish_plugin_query (FISH_PLUGIN_ENTRY).
 *     The host calls it once with the highest ABI version it speaks, its host
 *     services and a zeroed fish_plugin_api to fill. The plugin answers the
 *     version it will speak (same major, minor = min of both) or refuses with a
 *     status and a message. Everything else is reached through that table.
 *   - Every struct that crosses the boundary begins with uint32_t struct_size,
 *     set by whoever fills it. Structs and tables only grow at the end. A
 *     reader never touches a field that lies beyond the struct_size it was
 *     given (FISH_STRUCT_HAS) and treats such a field as 0/NULL, its default;
 *     a writer writes only the fields that fit wholly within struct_size.
 *   - Plugin objects are opaque handles: fish_backend, fish_weight, fish_span.
 *   - Every call returns a fish_status; after a failure the reason is readable
 *     through last_error(backend) (backend calls) or plugin_error() (plugin-level
 *     calls). Nothing crosses the boundary by exception, longjmp or exit().
 *
 * Versions are (major << 16) | minor. A major bump is the only way to remove,
 * reorder or change the meaning of anything; a minor may append fields to the
 * end of a struct/table, add status codes, type numbers, flags and selector
 * values. The entry point's signature and the first four fields of
 * fish_plugin_api (struct_size, abi_version, name, message) never change, so a
 * refusal can always be reported, whatever the two majors are. */
#ifndef FISH_PLUGIN_ABI_H
#define FISH_PLUGIN_ABI_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- versions --------------------------------------------------------------- */
#define FISH_PLUGIN_ABI_MAJOR 1
#define FISH_PLUGIN_ABI_MINOR 2
#define FISH_ABI_MAKE_VERSION(major, minor) ((((uint32_t)(major)) << 16) | ((uint32_t)(minor) & 0xffffu))
#define FISH_ABI_VERSION_MAJOR(v) (((uint32_t)(v)) >> 16)
#define FISH_ABI_VERSION_MINOR(v) (((uint32_t)(v)) & 0xffffu)
#define FISH_PLUGIN_ABI_VERSION FISH_ABI_MAKE_VERSION(FISH_PLUGIN_ABI_MAJOR, FISH_PLUGIN_ABI_MINOR)

/* The one exported symbol, as a string for dlsym/GetProcAddress. */
#define FISH_PLUGIN_ENTRY "fish_plugin_query"

/* Plugins are built with hidden visibility; only the entry point is exported. */
#if defined(_WIN32)
#define FISH_PLUGIN_EXPORT __declspec(dllexport)
#elif defined(__GNUC__) || defined(__clang__)
#define FISH_PLUGIN_EXPORT __attribute__((visibility("default")))
#else
#define FISH_PLUGIN_EXPORT
#endif

/* True when the struct at p (of type T, with p->struct_size set by its writer)
 * is large enough to hold `field`: check before reading any field that was
 * appended after version 1.0 of that struct. */
#define FISH_STRUCT_HAS(p, T, field) \
  ((p)->struct_size >= offsetof(T, field) + sizeof(((const T*)0)->field))

/* ---- status ----------------------------------------------------------------- */
typedef int32_t fish_status;
enum {
  FISH_OK = 0,
  FISH_E_INVALID_ARGUMENT = 1, /* NULL handle, bad shape, struct_size too small, n_tok < 1 ... */
  FISH_E_UNSUPPORTED = 2,      /* type, feature or selector this plugin does not implement */
  FISH_E_OUT_OF_MEMORY = 3,    /* the budget or the device refused an allocation */
  FISH_E_NO_DEVICE = 4,        /* no usable device (probe, lazy open) */
  FISH_E_DEVICE = 5,           /* device error or device lost: the backend is unusable afterwards */
  FISH_E_VERSION = 6,          /* ABI version refused by fish_plugin_query */
  FISH_E_RANGE = 7,            /* position/index out of range: a KV gap, beyond reserved capacity */
  FISH_E_INTERNAL = 8          /* a bug or an unexpected condition inside the plugin */
};

/* ---- GGUF tensor types (the GGUF file format's numbering) ----------------------
 * Weights carry their GGUF type number unchanged; these are the ones a plugin
 * is likely to implement. Any other number may appear (supports() says no). */
enum {
  FISH_TYPE_F32 = 0,
  FISH_TYPE_F16 = 1,
  FISH_TYPE_Q4_0 = 2,
  FISH_TYPE_Q4_1 = 3,
  FISH_TYPE_Q5_0 = 6,
  FISH_TYPE_Q5_1 = 7,
  FISH_TYPE_Q8_0 = 8,
  FISH_TYPE_Q2_K = 10,
  FISH_TYPE_Q3_K = 11,
  FISH_TYPE_Q4_K = 12,
  FISH_TYPE_Q5_K = 13,
  FISH_TYPE_Q6_K = 14,
  FISH_TYPE_BF16 = 30
};

/* ---- host services ---------------------------------------------------------- */
enum { FISH_LOG_ERROR = 0, FISH_LOG_WARN = 1, FISH_LOG_INFO = 2, FISH_LOG_DEBUG = 3 };

/* One range of a parallel_for: items [begin, end), run on thread `thread_index`
 * (0 <= thread_index < n_threads(); 0 is the calling thread). */
typedef void (*fish_parallel_fn)(void* ctx, int64_t begin, int64_t end, int32_t thread_index);

/* Geometry of a GGUF type as the host knows it. */
typedef struct fish_type_info {
  uint32_t struct_size;
  const char* name;    /* "Q4_K"; static storage */
  int32_t block_size;  /* elements per block (1 for F32/F16/BF16) */
  int32_t type_size;   /* bytes per block: a row of n elements is n / block_size * type_size bytes */
  int32_t can_dequant; /* 1 when dequant_row handles it */
  int32_t can_quantize;/* 1 when quantize_row handles it */
} fish_type_info;

/* Handed to fish_plugin_query. The host keeps it (and everything it points to)
 * alive and unchanged for the life of the process, so the plugin may keep the
 * pointer. Every function is thread-safe unless said otherwise. */
typedef struct fish_host_api {
  uint32_t struct_size;
  uint32_t abi_version;      /* the host's own version (same as passed to the entry point) */
  const char* host_version;  /* "fish 0.1.0" */

  /* Log a line (no trailing newline needed). source: the plugin's name. The
   * host decides what to show (FISH_GPU_VERBOSE=1: INFO and above on stderr,
   * 2: everything). */
  void (*log)(int32_t level, const char* source, const char* message);

  /* The engine's worker threads. parallel_for splits [0, n) into contiguous
   * ranges of at least `grain` items (grain < 1 means 1) and calls fn once per
   * range, on up to n_threads() threads, returning when all have finished.
   * fn must not throw, exit, or block on another parallel_for; a nested or
   * concurrent call is legal and simply runs on the calling thread. */
  int32_t (*n_threads)(void);
  void (*parallel_for)(int64_t n, int64_t grain, fish_parallel_fn fn, void* ctx);

  /* dst[0..n) = the values of one row of n elements of GGUF type `type`
   * (n a multiple of the type's block size). FISH_E_UNSUPPORTED for a type
   * the host cannot decode, FISH_E_INVALID_ARGUMENT for a bad n. Thread-safe
   * (callable from inside parallel_for). */
  fish_status (*dequant_row)(uint32_t type, const void* src, float* dst, int64_t n);
  /* The reverse, for the types whose type_info says can_quantize. */
  fish_status (*quantize_row)(uint32_t type, const float* src, void* dst, int64_t n);
  /* Geometry of a type; FISH_E_UNSUPPORTED for a number GGUF never assigned. */
  fish_status (*type_info)(uint32_t type, fish_type_info* out);
} fish_host_api;

/* ---- opaque handles --------------------------------------------------------- */
typedef struct fish_backend fish_backend; /* one opened (or lazily opening) device */
typedef struct fish_weight fish_weight;   /* a weight matrix resident on it */
typedef struct fish_span fish_span;       /* a contiguous range of layers resident on it, with its KV */

/* ---- plugin-level descriptions ---------------------------------------------- */
enum {
  FISH_DEVICE_OTHER = 0,
  FISH_DEVICE_DISCRETE_GPU = 1,
  FISH_DEVICE_INTEGRATED_GPU = 2,
  FISH_DEVICE_VIRTUAL_GPU = 3,
  FISH_DEVICE_CPU = 4
};

/* Plugin flags (fish_plugin_api.flags). */
enum {
  /* Never chosen automatically, only by name (FISH_BACKEND=<name>): for
   * reference/debug plugins that are slower than the engine's own CPU path. */
  FISH_PLUGIN_MANUAL_ONLY = 1u << 0
};

/* The result of a probe (cheap enough to run at discovery, see probe()). */
typedef struct fish_probe_result {
  uint32_t struct_size;
  uint32_t n_devices; /* usable devices; 0 with FISH_OK is legal (then never chosen) */
  int32_t score;      /* the best device's score; <= 0: never chosen automatically.
                       * Scale: discrete GPU ~300, integrated ~200, virtual ~100,
                       * a CPU implementation ~10; a vendor-specific build adds up
                       * to +50 over the portable plugin for the same device. */
  int32_t default_device; /* index the plugin opens when asked for device -1 */
} fish_probe_result;

typedef struct fish_device_info {
  uint32_t struct_size;
  uint32_t kind;          /* FISH_DEVICE_* */
  int32_t score;          /* as in fish_probe_result, for this device */
  int32_t reserved;       /* 0 */
  uint64_t memory_total;  /* bytes of device-local memory (0: unknown) */
  char name[256];         /* "NVIDIA H200"; NUL-terminated */
  char detail[256];       /* "Vulkan 1.3.289, driver 560.35, compute queue family 2" */
} fish_device_info;

/* How the host wants a backend opened. */
typedef struct fish_backend_config {
  uint32_t struct_size;
  int32_t device_index;   /* -1: the plugin's default (its best device, or its own env knob) */
  uint64_t memory_budget; /* 0: the plugin's own rule; else a ceiling in bytes on
                           * everything the backend allocates (weights, spans, scratch):
                           * an allocation past it fails with FISH_E_OUT_OF_MEMORY */
  uint32_t flags;         /* none defined in 1.0: pass 0 */
  uint32_t reserved;      /* 0 */
} fish_backend_config;

/* ---- weights ------------------------------------------------------------------ */
/* A weight matrix W in GGUF layout: n_out rows of n_in elements of GGUF type
 * `type`, row r at data + r * row_bytes (rows packed, row_bytes = n_in /
 * block_size * type_size). The products are y = x · Wᵀ. `data` and `name` are
 * valid only during upload(): the plugin copies what it needs. */
typedef struct fish_weight_desc {
  uint32_t struct_size;
  uint32_t type;
  const char* name; /* "blk.3.attn_q.weight", for messages and describe */
  int64_t n_in;
  int64_t n_out;
  const void* data;
  uint64_t nbytes;  /* n_out * row_bytes */
} fish_weight_desc;

/* ---- spans -------------------------------------------------------------------- *
 * A span runs layers [first_layer, first_layer + n_layers) of a Llama-family
 * decoder on the device. span_forward(x, n_tok, pos0) takes the residual stream
 * x [n_tok, n_embd] f32 (row t = position pos0 + t) entering the first layer
 * and replaces it with the stream leaving the last layer. Per layer:
 *
 *   a   = rmsnorm(x) * attn_norm                   rmsnorm(v) = v / sqrt(mean(v²) + rms_eps)
 *   q   = a·wqᵀ (+bq)   k = a·wkᵀ (+bk)   v = a·wvᵀ (+bv)
 *         q: [n_tok, n_head, head_dim], k/v: [n_tok, n_head_kv, head_dim]
 *   q_norm/k_norm (qwen3): each head's vector is rmsnorm'd and scaled by q_norm/k_norm [head_dim]
 *   RoPE on the first n_rot dims of each q/k head at position p:
 *         theta_i = p * rope_freq_base^(-2i/n_rot) / ff_i * rope_freq_scale,  i < n_rot/2
 *         (ff_i = rope_freqs[i] when given, else 1)
 *         NORMAL pairs (2i, 2i+1), NEOX pairs (i, i + n_rot/2);
 *         (a, b) -> (a cos - b sin, a sin + b cos)
 *   k, v stored in the KV cache at positions p (the cache's precision is the plugin's choice)
 *   attention: head h uses KV head h / (n_head / n_head_kv) over positions 0..p
 *         (causal), softmax(scale · q·k) with scale = attn_scale or 1/sqrt(head_dim)
 *   h   = x + o·woᵀ                                o: [n_tok, n_head * head_dim]
 *   n   = rmsnorm(h) * ffn_norm
 *   x   = h + (silu(n·w_gateᵀ) * (n·w_upᵀ))·w_downᵀ   silu(z) = z / (1 + e^-z)
 */
enum { FISH_ROPE_NORMAL = 0, FISH_ROPE_NEOX = 2 };

/* One layer. The weights were uploaded to the same backend and must stay alive
 * (not released) while the span exists. The f32 vectors are copied by
 * span_create (valid only during the call); optional ones are NULL. */
typedef struct fish_span_layer {
  uint32_t struct_size;
  fish_weight* wq;     /* [n_head * head_dim, n_embd]   (n_out, n_in) */
  fish_weight* wk;     /* [n_head_kv * head_dim, n_embd] */
  fish_weight* wv;     /* [n_head_kv * head_dim, n_embd] */
  fish_weight* wo;     /* [n_embd, n_head * head_dim] */
  fish_weight* w_gate; /* [n_ff, n_embd] */
  fish_weight* w_up;   /* [n_ff, n_embd] */
  fish_weight* w_down; /* [n_embd, n_ff] */
  const float* attn_norm; /* [n_embd] */
  const float* ffn_norm;  /* [n_embd] */
  const float* bq;        /* [n_head * head_dim] or NULL (qwen2) */
  const float* bk;        /* [n_head_kv * head_dim] or NULL */
  const float* bv;        /* [n_head_kv * head_dim] or NULL */
  const float* q_norm;    /* [head_dim] or NULL (qwen3) */
  const float* k_norm;    /* [head_dim] or NULL */
} fish_span_layer;

typedef struct fish_span_desc {
  uint32_t struct_size;
  int32_t first_layer;  /* model index of layers[0] (messages only) */
  int32_t n_layers;
  int32_t n_embd;
  int32_t n_head;
  int32_t n_head_kv;    /* divides n_head */
  int32_t head_dim;
  int32_t n_ff;
  int32_t n_ctx;        /* KV positions span_create reserves (span_kv_reserve may grow it) */
  float rms_eps;
  uint32_t rope_type;   /* FISH_ROPE_* */
  int32_t n_rot;        /* rotated dims per head, even, <= head_dim */
  float rope_freq_base;
  float rope_freq_scale;
  const float* rope_freqs; /* [n_rot / 2] frequency factors or NULL */
  float attn_scale;        /* 0: 1/sqrt(head_dim) */
  int32_t reserved;        /* 0 */
  /* n_layers pointers (an array of pointers, so fish_span_layer may grow). */
  const fish_span_layer* const* layers;
} fish_span_desc;

/* ---- describe() selectors ------------------------------------------------------ */
enum {
  FISH_DESCRIBE_SUMMARY = 0, /* one line: device, resident weights by type, spans */
  FISH_DESCRIBE_STATUS = 1,  /* one line: "not opened", "open: <device>", "failed: <why>" */
  FISH_DESCRIBE_PROFILE = 2  /* multi-line timing profile since the last call, or "" */
};

/* ---- the plugin's table ------------------------------------------------------- *
 * Filled by fish_plugin_query. Function pointers that a plugin does not
 * implement are NULL (the host treats NULL as FISH_E_UNSUPPORTED); the span
 * functions are optional as a group, everything else is required.
 *
 * Strings returned through `const char**` or as return values belong to the
 * plugin and stay valid until the next call on the same backend (plugin-level
 * strings: until the next plugin-level call). */
typedef struct fish_plugin_api {
  uint32_t struct_size; /* host: sizeof its struct; plugin: rewrites it to min(that, its own) */
  uint32_t abi_version; /* plugin: the version it speaks (on refusal: its own) */
  const char* name;     /* plugin: "vulkan" (static storage); the file is fish_<name> */
  const char* message;  /* plugin, on refusal: why (static storage) */
  const char* plugin_version; /* plugin: free-form, "0.1.0 (glslc 2023.2)" */
  uint32_t flags;       /* FISH_PLUGIN_* */
  uint32_t reserved;    /* 0 */

  /* Plugin level. No backend exists yet; reasons via plugin_error(). */
  const char* (*plugin_error)(void);
  /* Finds usable devices. May load the device driver/loader library and
   * enumerate devices; must not allocate device memory or compile pipelines.
   * A plugin may cache the result (the host probes once). FISH_E_NO_DEVICE:
   * none usable (the host stays quiet: most machines have none);
   * FISH_E_INVALID_ARGUMENT: out is NULL, or the plugin refuses its own
   * configuration (a bad environment variable, named by plugin_error()), which
   * the host reports to the user as a warning. */
  fish_status (*probe)(fish_probe_result* out);
  fish_status (*device_info)(uint32_t index, fish_device_info* out);
  /* Cheap: returns a handle; the device is opened on the first call that needs
   * it (memory_free, upload, ...) or by open(). */
  fish_status (*backend_create)(const fish_backend_config* config, fish_backend** out);
  /* Releases everything the backend holds (weights, spans, the device). The
   * host never calls it at process exit (it leaks the backend deliberately). */
  fish_status (*backend_destroy)(fish_backend* b);

  /* Backend level: calls on one backend come from one host thread at a time. */
  /* The reason for the last failed call on b; never NULL. */
  const char* (*last_error)(const fish_backend* b);
  /* Opens the device now (idempotent). A failure is sticky: every later call fails the same way. */
  fish_status (*open)(fish_backend* b);
  fish_status (*describe)(fish_backend* b, uint32_t what, const char** out);
  /* Bytes the backend could still allocate now (budget and device both considered). */
  fish_status (*memory_free)(fish_backend* b, uint64_t* out);
  /* Bytes it holds now: weights + spans + scratch, exact. */
  fish_status (*bytes_resident)(fish_backend* b, uint64_t* out);
  /* *out = 1 when upload() takes weights of this GGUF type, else 0. */
  fish_status (*supports)(fish_backend* b, uint32_t type, int32_t* out);

  fish_status (*upload)(fish_backend* b, const fish_weight_desc* desc, fish_weight** out);
  fish_status (*release)(fish_backend* b, fish_weight* w);

  /* y = x · Wᵀ. x: [n_tok, n_in] f32, y: [n_tok, n_out] f32, n_tok >= 1, host
   * memory (4-byte aligned, no more). */
  fish_status (*matmul)(fish_backend* b, fish_weight* w, const float* x, int32_t n_tok, float* y);
  /* Several weights with the same n_in on one input, one device submission.
   * ys[i]: [n_tok, n_out of ws[i]]. */
  fish_status (*matmul_group)(fish_backend* b, fish_weight* const* ws, int32_t n_w, const float* x,
                              int32_t n_tok, float* const* ys);

  /* Spans (optional). */
  /* Bytes a span of this shape needs beyond its weights: KV for desc->n_ctx
   * positions + work buffers + parameters. */
  fish_status (*span_bytes)(fish_backend* b, const fish_span_desc* desc, uint64_t* out);
  fish_status (*span_create)(fish_backend* b, const fish_span_desc* desc, fish_span** out);
  /* x: [n_tok, n_embd] f32 in/out, positions pos0 .. pos0+n_tok-1. Positions at
   * or after pos0 are replaced in the KV cache (its length becomes pos0+n_tok).
   * pos0 > KV length: FISH_E_RANGE (a gap is refused, never guessed);
   * pos0 + n_tok > reserved capacity: FISH_E_RANGE (call span_kv_reserve first).
   * On any failure x is left untouched; positions < pos0 stay valid, and the
   * KV length may drop to pos0 (later positions may have been overwritten). */
  fish_status (*span_forward)(fish_backend* b, fish_span* s, float* x, int32_t n_tok, int32_t pos0);
  /* Keeps positions < n (n <= KV length, else FISH_E_RANGE). */
  fish_status (*span_kv_truncate)(fish_backend* b, fish_span* s, int32_t n);
  /* Grows the KV capacity to at least n positions (kept contents intact). */
  fish_status (*span_kv_reserve)(fish_backend* b, fish_span* s, int32_t n);
  /* The current KV length (positions held). */
  fish_status (*span_kv_len)(fish_backend* b, fish_span* s, int32_t* out);
  fish_status (*span_destroy)(fish_backend* b, fish_span* s);

  /* ---- 1.1: the model's head in the span's submission (optional, with the
   * spans; the host uses them only when the negotiated minor is >= 1) ----
   * span_set_head attaches the output head to a span that ends at the model's
   * last layer: head [n_vocab, n_embd] uploaded to the same backend (alive
   * while attached: release() refuses it), norm [n_embd] f32 (copied; valid
   * only during the call). head = NULL detaches it. */
  fish_status (*span_set_head)(fish_backend* b, fish_span* s, fish_weight* head, const float* norm);
  /* span_forward, then for the last token only, in the same submission:
   *   logits[n_vocab] = (rmsnorm(x[n_tok - 1]) * norm) · headᵀ   (the span's rms_eps)
   * x is replaced as by span_forward. No head attached: FISH_E_INVALID_ARGUMENT.
   * On failure as span_forward; logits are written only on success. */
  fish_status (*span_forward_logits)(fish_backend* b, fish_span* s, float* x, int32_t n_tok, int32_t pos0,
                                     float* logits);

  /* ---- 1.2: the logits without a copy (optional; the host uses it only when
   * the negotiated minor is >= 2 and the pointer is set) ----
   * span_forward_logits, except that the plugin does not copy the logits into
   * a caller's buffer: on success *logits points at its own host-memory copy
   * (n_vocab floats), which stays valid and unchanged until the next call with
   * this span other than span_kv_len (or backend_destroy). On failure *logits
   * is left untouched, as x is. */
  fish_status (*span_forward_logits_view)(fish_backend* b, fish_span* s, float* x, int32_t n_tok, int32_t pos0,
                                          const float** logits);
} fish_plugin_api;

/* The entry point. host_abi_version: the host's version; host: its services
 * (lives forever); out: zeroed by the host, out->struct_size = sizeof the
 * host's fish_plugin_api. The plugin writes no byte at or past out->struct_size,
 * reads no host field past host->struct_size, sets out->struct_size to the size
 * it filled, and returns FISH_OK, or FISH_E_VERSION (major mismatch or a host
 * too old for it) / FISH_E_INVALID_ARGUMENT with out->message set. It must be
 * cheap: no device work here. The engine calls it once per loaded file; the
 * conformance suite calls it again with other versions and table sizes, so
 * every call must stand alone (same input, same answer). */
typedef fish_status (*fish_plugin_query_fn)(uint32_t host_abi_version, const fish_host_api* host,
                                            fish_plugin_api* out);

#ifdef FISH_PLUGIN_IMPLEMENTATION
/* A plugin defines FISH_PLUGIN_IMPLEMENTATION in the file that defines the entry
 * point, so the compiler checks it against this declaration. */
FISH_PLUGIN_EXPORT fish_status fish_plugin_query(uint32_t host_abi_version, const fish_host_api* host,
                                                 fish_plugin_api* out);
#endif

#ifdef __cplusplus
}
#endif

#endif /* FISH_PLUGIN_ABI_H */
