/* libfish public C API: compute-backend plugins. Included by fish.h.
 *
 * Plugins are found in the folder of the running executable and the folder of
 * libfish (never the current directory, PATH or LD_LIBRARY_PATH), loaded once,
 * and never unloaded; FISH_GPU=0 loads none, FISH_BACKEND=<name> picks one,
 * otherwise the highest-scoring usable plugin is used (plugin_abi/README.md).
 * Discovery runs on the first call of any function below (or on the first model
 * load that wants a GPU). Strings returned here stay valid for the life of the
 * process, except those of fish_backend_reason/status/summary: until the next
 * call of the same function. */
#ifndef FISH_FISH_BACKENDS_H
#define FISH_FISH_BACKENDS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#ifndef FISH_API
#if defined(_WIN32)
#define FISH_API __declspec(dllexport)
#else
#define FISH_API __attribute__((visibility("default")))
#endif
#endif

/* One plugin file found by discovery. */
typedef struct fish_backend_info {
  uint32_t struct_size;
  const char* path;           /* the file */
  const char* name;           /* <name> from fish_<name> */
  const char* reported_name;  /* the name the plugin reports ("" when it did not load) */
  const char* plugin_version; /* free-form, "" when unknown */
  int32_t loaded;             /* 1: opened and accepted the ABI */
  uint32_t abi_version;       /* (major << 16) | minor it speaks; 0 when it did not load */
  int32_t probed;             /* 1: its probe succeeded */
  int32_t score;              /* probe score (<= 0: never chosen automatically) */
  uint32_t flags;             /* 1: manual only (chosen only by FISH_BACKEND) */
  int32_t n_devices;
  int32_t chosen;             /* 1: this is the engine's backend */
  const char* reason;         /* why refused / not chosen / chosen */
} fish_backend_info;

typedef struct fish_backend_device {
  uint32_t struct_size;
  const char* name;
  const char* detail;
  const char* kind;           /* "discrete GPU", "integrated GPU", "virtual GPU", "CPU", "other" */
  int32_t score;
  uint64_t memory_total;      /* bytes, 0 when unknown */
} fish_backend_device;

/* Number of plugin files found (runs discovery). */
FISH_API int32_t fish_backend_count(void);
/* Fills *out (set out->struct_size first); 0 or -1 for a bad index/struct. */
FISH_API int fish_backend_get_info(int32_t i, fish_backend_info* out);
FISH_API int fish_backend_get_device(int32_t i, int32_t device, fish_backend_device* out);
/* The folders that were searched. */
FISH_API int32_t fish_backend_folder_count(void);
FISH_API const char* fish_backend_folder(int32_t i);
/* 1 when FISH_GPU turned plugin loading off. */
FISH_API int fish_backend_disabled(void);

/* Opens the chosen backend (if not yet) and returns its name, or NULL when the
 * engine is CPU only; fish_backend_reason() says why either way. */
FISH_API const char* fish_backend_active(void);
FISH_API const char* fish_backend_reason(void);
/* The active backend's status line ("open: <device>") and summary line
 * (resident weights), or "" when CPU only. */
FISH_API const char* fish_backend_status(void);
FISH_API const char* fish_backend_summary(void);
FISH_API uint64_t fish_backend_memory_free(void);
/* The chosen plugin's device `device` (as fish_backend_get_device numbers
 * them), opened as a model load with FISH_GPU_DEVICE listing it would:
 * the bytes it could still allocate, or 0 with *why (optional; valid until the
 * next call) set when it does not exist or did not open. */
FISH_API uint64_t fish_backend_device_memory_free(int32_t device, const char** why);

/* Use exactly this plugin file from now on (models loaded later use it), or,
 * with NULL/"", the normal discovery again. For tests and `fish plugin-test`. */
FISH_API void fish_backend_use_file(const char* path);
/* The same, discovering and opening with these engine variables ("NAME=VALUE"
 * items separated by spaces or newlines, on top of the process's environment;
 * e.g. "FISH_BACKEND_FAIL=span_forward:5" or "FISH_PLUGIN_DENY=vulkan").
 * Returns 0, or -1 with *err naming the item it refuses (nothing changes). */
FISH_API int fish_backend_use_file_config(const char* path, const char* config, struct fish_error** err);

/* ---- conformance --------------------------------------------------------- */
enum { FISH_CHECK_PASS = 0, FISH_CHECK_FAIL = 1, FISH_CHECK_SKIP = 2 };

typedef struct fish_plugin_check {
  uint32_t struct_size;
  const char* name;    /* "matmul Q4_K [67x512] n_tok=37" */
  int32_t outcome;     /* FISH_CHECK_* */
  const char* detail;  /* figures, or why it failed / was skipped */
} fish_plugin_check;

typedef void (*fish_plugin_check_fn)(const fish_plugin_check* check, void* ctx);

typedef struct fish_plugin_test_params {
  uint32_t struct_size;
  uint64_t seed;       /* 0: the suite's default */
  const char* filter;  /* run only checks whose name contains this; NULL: all */
} fish_plugin_test_params;
FISH_API fish_plugin_test_params fish_plugin_test_default_params(void);

/* Runs the plugin conformance suite on one plugin file, calling fn after each
 * check. Returns the number of failed checks (0: conforms), or -1 with *err
 * set when the suite itself could not run. */
FISH_API int32_t fish_plugin_test(const char* path, const fish_plugin_test_params* params, fish_plugin_check_fn fn,
                                  void* ctx, struct fish_error** err);

#ifdef __cplusplus
}
#endif
#endif
