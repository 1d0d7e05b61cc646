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
 *   - One growth mechanism: every struct that crosses the boundary begins with
 *     uint32_t struct_size, set by whoever fills it, and structs and tables
 *     only grow at the end. A reader never touches a field that lies beyond
 *     the struct_size it was given (FISH_STRUCT_HAS) and treats such a field
 *     as 0/NULL, its default; a writer writes only the fields that fit wholly
 *     within struct_size. An array of such structs is laid out at a stride of
 *     its first element's struct_size (FISH_ARRAY_AT). A table slot is usable
 *     when it lies within the table's struct_size and is not NULL
 *     (FISH_API_HAS): that is the only feature test, whatever the minor.
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
#define FISH_PLUGIN_ABI_MAJOR 2
#define FISH_PLUGIN_ABI_MINOR 1
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
 * appended after version 2.0 of that struct. */
#define FISH_STRUCT_HAS(p, T, field) \
  ((p)->struct_size >= offsetof(T, field) + sizeof(((const T*)0)->field))
/* Element i of an array of T whose elements are base->struct_size bytes apart. */
#define FISH_ARRAY_AT(T, base, i) ((const T*)((const char*)(base) + (size_t)(i) * (base)->struct_size))
/* True when the plugin's table `api` (a fish_plugin_api*) has the slot and fills it. */
#define FISH_API_HAS(api, slot) (FISH_STRUCT_HAS(api, fish_plugin_api, slot) && (api)->slot != NULL)

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
  FISH_TYPE_BF16 = 30,
  /* fish's own layouts (2.1): never found in a GGUF file; the host makes them
   * when it re-quantises a weight for a device (FISH_GPU_REQUANT) and uploads
   * them only to a plugin whose supports() says yes. Geometry, dequant_row and
   * quantize_row come from the host services like any other type.
   * FQ3: 3-bit, 112 bytes per 256 values: f16 d, f16 dmin, Q4_K's 12-byte
   * 6-bit scale/min packing, then per 32-value group s three uint32 words A, B,
   * C; value 4j+i of the group (j = 0..7, i = 0..3) has the 3-bit code
   * ((((j < 4 ? A : B) >> (2 * (j & 3) + 8 * i)) & 3) | (((C >> (j + 8 * i)) & 1) << 2)),
   * and the value d * sc_s * q - dmin * m_s. */
  FISH_TYPE_FQ3 = 1000
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
  uint32_t flags;         /* none defined in 2.0: pass 0 */
} fish_backend_config;

/* ---- weights ------------------------------------------------------------------ */
/* A weight matrix W in GGUF layout: n_out rows of n_in elements of GGUF type
 * `type`, row r at data + r * row_bytes (rows packed, row_bytes = n_in /
 * block_size * type_size). The products are y = x · Wᵀ. n_mat > 1: n_mat such
 * matrices one after another (a GGUF 3-D tensor [n_in, n_out, n_mat]: the
 * experts of an MoE layer); matmul() takes only single matrices. `data` and
 * `name` are valid only during upload(): the plugin copies what it needs. */
typedef struct fish_weight_desc {
  uint32_t struct_size;
  uint32_t type;
  const char* name; /* "blk.3.attn_q.weight", for messages and describe */
  int64_t n_in;
  int64_t n_out;
  int64_t n_mat;    /* matrices (>= 1; 0 is read as 1) */
  const void* data;
  uint64_t nbytes;  /* n_mat * n_out * row_bytes */
} fish_weight_desc;

/* ---- spans -------------------------------------------------------------------- *
 * A span runs layers [first_layer, first_layer + n_layers) of a decoder on the
 * device, with its own KV cache for up to n_seq sequences. A forward takes the
 * residual stream x [n_tok, n_embd] f32 entering the first layer, row t being
 * sequence seq[t] at position pos[t], and computes the stream leaving the last
 * layer. The layers are described by role (which tensor does what) and by an
 * architecture block (fish_arch), so a new architecture appends roles and
 * enum values, not calls. For the roles and values of 2.0, per layer:
 *
 *   a   = norm(x) * ATTN_NORM                      norm: FISH_NORM_RMS, v / sqrt(mean(v²) + norm_eps)
 *   q   = a·ATTN_Qᵀ (+ATTN_Q_BIAS)  k = a·ATTN_Kᵀ (+ATTN_K_BIAS)  v = a·ATTN_Vᵀ (+ATTN_V_BIAS)
 *         q: [n_tok, n_head, head_dim], k/v: [n_tok, n_head_kv, head_dim]
 *   ATTN_Q_NORM / ATTN_K_NORM (qwen3): each head's vector is rms-normed and scaled by them [head_dim]
 *   RoPE on the first n_rot dims of each q/k head at the row's position p:
 *         theta_i = p * rope_freq_base^(-2i/n_rot) / ff_i * rope_freq_scale,  i < n_rot/2
 *         (ff_i = rope_freqs[i] when given, else 1)
 *         FISH_ROPE_NORMAL pairs (2i, 2i+1), FISH_ROPE_NEOX pairs (i, i + n_rot/2);
 *         (a, b) -> (a cos - b sin, a sin + b cos)
 *   k, v stored in the row's sequence's KV cache at position p (precision: the plugin's choice)
 *   attention: head h uses KV head h / (n_head / n_head_kv) over the positions 0..p
 *         of the row's own sequence (causal), softmax(scale · q·k), scale = attn_scale or 1/sqrt(head_dim)
 *   h   = x + o·ATTN_OUTᵀ                          o: [n_tok, n_head * head_dim]
 *   n   = norm(h) * FFN_NORM
 *   dense FFN (n_expert = 0, FISH_ACT_SILU):
 *   x   = h + (silu(n·FFN_GATEᵀ) * (n·FFN_UPᵀ))·FFN_DOWNᵀ   silu(z) = z / (1 + e^-z)
 *   MoE FFN (n_expert > 0): r = softmax(n·FFN_ROUTERᵀ) over the n_expert experts; the
 *         n_expert_used largest, weights w_e = r_e (FISH_GATING_SOFTMAX_TOPK) or
 *         r_e / Σ of the chosen r (FISH_GATING_SOFTMAX_TOPK_NORM);
 *   x   = h + Σ_e w_e · expert_e(n) [+ sigmoid(n·FFN_SHEXP_GATE) · shared(n)]
 *         expert_e(n) = (silu(n·GATE_EXPS[e]ᵀ) * (n·UP_EXPS[e]ᵀ))·DOWN_EXPS[e]ᵀ, shared likewise
 *
 * A plugin that meets a role, an enum value or a field it does not implement
 * refuses span_create with FISH_E_UNSUPPORTED and a message naming it; the host
 * then runs those layers itself. */
enum { FISH_ROPE_NORMAL = 0, FISH_ROPE_NEOX = 2 };
enum { FISH_NORM_RMS = 0 };
enum { FISH_ACT_SILU = 0 }; /* the FFN is gated: act(gate) * up */
enum { FISH_GATING_SOFTMAX_TOPK = 0, FISH_GATING_SOFTMAX_TOPK_NORM = 1 };

/* What a tensor of a layer is. M: a matrix uploaded to the span's backend
 * (fish_weight*, shapes as (n_out, n_in)); V: an f32 vector (copied by
 * span_create). QD = n_head * head_dim, KD = n_head_kv * head_dim. */
enum {
  FISH_ROLE_ATTN_NORM = 1,       /* V [n_embd] */
  FISH_ROLE_ATTN_Q = 2,          /* M [QD, n_embd] */
  FISH_ROLE_ATTN_K = 3,          /* M [KD, n_embd] */
  FISH_ROLE_ATTN_V = 4,          /* M [KD, n_embd] */
  FISH_ROLE_ATTN_OUT = 5,        /* M [n_embd, QD] */
  FISH_ROLE_ATTN_Q_BIAS = 6,     /* V [QD] (qwen2) */
  FISH_ROLE_ATTN_K_BIAS = 7,     /* V [KD] */
  FISH_ROLE_ATTN_V_BIAS = 8,     /* V [KD] */
  FISH_ROLE_ATTN_Q_NORM = 9,     /* V [head_dim] (qwen3) */
  FISH_ROLE_ATTN_K_NORM = 10,    /* V [head_dim] */
  FISH_ROLE_FFN_NORM = 11,       /* V [n_embd] */
  FISH_ROLE_FFN_GATE = 12,       /* M [n_ff, n_embd] */
  FISH_ROLE_FFN_UP = 13,         /* M [n_ff, n_embd] */
  FISH_ROLE_FFN_DOWN = 14,       /* M [n_embd, n_ff] */
  FISH_ROLE_FFN_ROUTER = 15,     /* M [n_expert, n_embd] (GGUF ffn_gate_inp) */
  FISH_ROLE_FFN_GATE_EXPS = 16,  /* M n_expert x [n_ff_expert, n_embd] (n_mat = n_expert) */
  FISH_ROLE_FFN_UP_EXPS = 17,    /* M n_expert x [n_ff_expert, n_embd] */
  FISH_ROLE_FFN_DOWN_EXPS = 18,  /* M n_expert x [n_embd, n_ff_expert] */
  FISH_ROLE_FFN_GATE_SHEXP = 19, /* M [n_ff_shexp, n_embd] (qwen2moe's shared expert) */
  FISH_ROLE_FFN_UP_SHEXP = 20,   /* M [n_ff_shexp, n_embd] */
  FISH_ROLE_FFN_DOWN_SHEXP = 21, /* M [n_embd, n_ff_shexp] */
  FISH_ROLE_FFN_SHEXP_GATE = 22  /* V [n_embd]: the shared expert's sigmoid gate */
};

/* One tensor of a layer: weight for a matrix role, data + n for a vector role. */
typedef struct fish_layer_tensor {
  uint32_t struct_size;
  uint32_t role;       /* FISH_ROLE_* */
  fish_weight* weight; /* M roles: uploaded to the same backend, alive while the span exists */
  const float* data;   /* V roles: n floats, valid only during span_create */
  int64_t n;
} fish_layer_tensor;

/* One layer: its tensors, in any order, each role at most once. */
typedef struct fish_span_layer {
  uint32_t struct_size;
  uint32_t n_tensors;
  const fish_layer_tensor* tensors; /* n_tensors, stride tensors->struct_size */
} fish_span_layer;

/* What the layers compute besides their tensors (the same for every layer of a span). */
typedef struct fish_arch {
  uint32_t struct_size;
  uint32_t norm;           /* FISH_NORM_* */
  float norm_eps;
  uint32_t activation;     /* FISH_ACT_* */
  uint32_t rope;           /* FISH_ROPE_* */
  int32_t n_rot;           /* rotated dims per head, even, <= head_dim */
  float rope_freq_base;
  float rope_freq_scale;
  const float* rope_freqs; /* [n_rot / 2] frequency factors or NULL (valid during span_create) */
  float attn_scale;        /* 0: 1/sqrt(head_dim) */
  int32_t n_expert;        /* 0: a dense FFN (FFN_GATE/UP/DOWN) */
  int32_t n_expert_used;   /* experts per token (MoE) */
  uint32_t gating;         /* FISH_GATING_* (MoE) */
  int32_t n_ff_expert;     /* rows of each expert's gate/up (MoE) */
  int32_t n_ff_shexp;      /* rows of the shared expert's gate/up; 0: none */
} fish_arch;

typedef struct fish_span_desc {
  uint32_t struct_size;
  int32_t first_layer;  /* model index of layers[0] (messages only) */
  int32_t n_layers;
  int32_t n_embd;
  int32_t n_head;
  int32_t n_head_kv;    /* divides n_head */
  int32_t head_dim;
  int32_t n_ff;         /* dense FFN rows (0 with experts) */
  int32_t n_ctx;        /* KV positions per sequence span_create reserves (span_kv_reserve grows it) */
  int32_t n_seq;        /* sequence ids 0 .. n_seq-1 the span holds (>= 1) */
  const fish_arch* arch;
  const fish_span_layer* layers; /* n_layers, stride layers->struct_size */
} fish_span_desc;

/* Flags of a forward. */
enum {
  FISH_FORWARD_X_OUT = 1u << 0,      /* write the stream leaving the last layer back into x */
  FISH_FORWARD_LOGITS_VIEW = 1u << 1 /* the logits stay in the plugin's memory: logits_view */
};

/* One forward: n_tok rows, each of a sequence at a position. Per sequence its
 * rows come in order of position, consecutive (else the batch is malformed:
 * FISH_E_INVALID_ARGUMENT), the first at or before that sequence's KV length
 * (a gap is refused: FISH_E_RANGE); its positions at or after the first row's are replaced (its KV length
 * becomes the last row's position + 1). Rows of several sequences may be
 * mixed in one batch; a plugin that cannot run them in one forward refuses
 * such a batch with FISH_E_UNSUPPORTED, and the host then sends one forward
 * per sequence.
 * Logits (needs span_set_head): for each row with logits_rows[t] != 0, in row
 * order, logits = (norm(x_t) * head_norm) · headᵀ over the last layer's x_t.
 * A plugin that cannot give the logits of the rows asked for (e.g. its head
 * gives only the last row's) refuses with FISH_E_UNSUPPORTED; the host then
 * asks for x (FISH_FORWARD_X_OUT) and runs the head itself. */
typedef struct fish_span_batch {
  uint32_t struct_size;
  uint32_t flags;             /* FISH_FORWARD_* */
  int32_t n_tok;              /* >= 1 */
  float* x;                   /* [n_tok, n_embd] in; out with FISH_FORWARD_X_OUT */
  const int32_t* seq;         /* [n_tok] sequence ids; NULL: every row is sequence 0 */
  const int32_t* pos;         /* [n_tok] positions */
  const uint8_t* logits_rows; /* [n_tok] nonzero: this row's logits are wanted; NULL: none */
  float* logits;              /* [n_wanted, n_vocab], written on success (without LOGITS_VIEW) */
  const float* logits_view;   /* out, with LOGITS_VIEW: the plugin's [n_wanted, n_vocab] host copy,
                               * valid and unchanged until the next call with this span other
                               * than span_kv_len (or until backend_destroy) */
} fish_span_batch;

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

  /* Spans (optional, as a group; span_kv_copy alone may be NULL). A sequence
   * id outside 0 .. n_seq-1 is FISH_E_INVALID_ARGUMENT. */
  /* Bytes a span of this shape needs beyond its weights: KV for desc->n_ctx
   * positions of desc->n_seq sequences + work buffers + parameters. The host
   * asks before it uploads anything: the matrix tensors' weight may be NULL. */
  fish_status (*span_bytes)(fish_backend* b, const fish_span_desc* desc, uint64_t* out);
  fish_status (*span_create)(fish_backend* b, const fish_span_desc* desc, fish_span** out);
  fish_status (*span_destroy)(fish_backend* b, fish_span* s);
  /* Attaches the model's output head to a span that ends at the model's last
   * layer, so a forward's logits come out of its own submission: head
   * [n_vocab, n_embd] uploaded to the same backend (alive while attached:
   * release() refuses it), norm [n_embd] f32 (copied; valid during the call),
   * applied with the arch's norm. head = NULL detaches it. */
  fish_status (*span_set_head)(fish_backend* b, fish_span* s, fish_weight* head, const float* norm);
  /* Runs the batch (fish_span_batch says what it computes). On any failure x
   * and the logits are left untouched; each sequence's positions before its
   * first row stay valid, and its KV length may drop to that first position. */
  fish_status (*span_forward)(fish_backend* b, fish_span* s, fish_span_batch* batch);
  /* The positions sequence `seq` holds. */
  fish_status (*span_kv_len)(fish_backend* b, fish_span* s, int32_t seq, int32_t* out);
  /* Keeps positions < n of sequence seq (n <= its length, else FISH_E_RANGE);
   * n = 0 drops the sequence (its memory may serve others). */
  fish_status (*span_kv_truncate)(fish_backend* b, fish_span* s, int32_t seq, int32_t n);
  /* Sequence dst's positions [p0, p1) become a copy of sequence src's (a
   * shared prefix): p1 <= src's length and p0 <= dst's length, else
   * FISH_E_RANGE; dst's length becomes p1. src == dst is a no-op. */
  fish_status (*span_kv_copy)(fish_backend* b, fish_span* s, int32_t src, int32_t dst, int32_t p0, int32_t p1);
  /* Lets every sequence grow to n positions (contents kept). A plugin may
   * take the memory for positions as they are written (paged KV): a later
   * span_forward then fails with FISH_E_OUT_OF_MEMORY, changing nothing,
   * when the device has no room left for them. */
  fish_status (*span_kv_reserve)(fish_backend* b, fish_span* s, int32_t n);
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
