// fish_reference's entry point and function table. Every function here is a
// thin fence: it checks the handle, runs the C++ code, and turns any Failure
// (or other exception) into a fish_status plus a last_error() message, so that
// nothing thrown inside the plugin ever reaches the host.
#define FISH_PLUGIN_IMPLEMENTATION
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <new>
#include <string>

#include "fish/plugin_abi.h"
#include "host.h"
#include "ref_backend.h"
#include "ref_span.h"
#include "ref_span_desc.h"

namespace fish::reference {
namespace {

constexpr uint32_t kMinor = FISH_PLUGIN_ABI_MINOR;  // the newest 2.x this plugin implements

// The loader tests build this plugin again under other names, as a plugin that
// may be chosen automatically with a given score (tests/plugin/CMakeLists.txt).
#ifndef FISH_REFERENCE_NAME
#define FISH_REFERENCE_NAME "reference"
#endif
#ifndef FISH_REFERENCE_SCORE
#define FISH_REFERENCE_SCORE 0
#endif
#ifdef FISH_REFERENCE_AUTO
constexpr uint32_t kFlags = 0;
#else
constexpr uint32_t kFlags = FISH_PLUGIN_MANUAL_ONLY;  // slower than the engine's CPU path: only by name
#endif

// ---- plugin-level error (plugin-level calls come one at a time) --------------
std::string& plugin_error_storage() {
  static std::string s = "no error";
  return s;
}

Backend* B(fish_backend* b) { return reinterpret_cast<Backend*>(b); }

// Runs fn for a backend call: Failure/exceptions -> status + b->last_error.
template <class Fn>
fish_status guarded(fish_backend* b, const char* what, Fn&& fn) {
  if (!b) return FISH_E_INVALID_ARGUMENT;  // no backend: nowhere to keep a message
  Backend* be = B(b);
  try {
    fn(*be);
    return FISH_OK;
  } catch (const Failure& f) {
    be->last_error = f.message;
    return f.status;
  } catch (const std::bad_alloc&) {
    be->last_error = std::string(what) + ": out of host memory";
    return FISH_E_OUT_OF_MEMORY;
  } catch (...) {
    be->last_error = std::string(what) + ": unexpected internal error";
    return FISH_E_INTERNAL;
  }
}

// The same for plugin-level calls.
template <class Fn>
fish_status guarded_plugin(const char* what, Fn&& fn) {
  try {
    fn();
    return FISH_OK;
  } catch (const Failure& f) {
    plugin_error_storage() = f.message;
    return f.status;
  } catch (const std::bad_alloc&) {
    plugin_error_storage() = std::string(what) + ": out of host memory";
    return FISH_E_OUT_OF_MEMORY;
  } catch (...) {
    plugin_error_storage() = std::string(what) + ": unexpected internal error";
    return FISH_E_INTERNAL;
  }
}

// Writes only what fits in the caller's struct (it may come from an older host).
template <class T>
void write_out(T* out, T full) {
  const size_t n = std::min<size_t>(out->struct_size, sizeof(T));
  full.struct_size = uint32_t(n);
  std::memcpy(out, &full, n);
}

// ---- plugin level ------------------------------------------------------------
const char* plugin_error() { return plugin_error_storage().c_str(); }

fish_status probe(fish_probe_result* out) {
  return guarded_plugin("probe", [&] {
    if (!out || out->struct_size < sizeof(uint32_t)) fail(FISH_E_INVALID_ARGUMENT, "probe: no result struct");
    fish_probe_result r{};
    r.n_devices = 1;  // the host CPU
    r.score = FISH_REFERENCE_SCORE;  // 0: never chosen automatically (also flagged FISH_PLUGIN_MANUAL_ONLY)
    r.default_device = 0;
    write_out(out, r);
  });
}

fish_status device_info(uint32_t index, fish_device_info* out) {
  return guarded_plugin("device_info", [&] {
    if (!out || out->struct_size < sizeof(uint32_t)) fail(FISH_E_INVALID_ARGUMENT, "device_info: no result struct");
    if (index != 0) fail(FISH_E_RANGE, "device_info: device " + std::to_string(index) + " does not exist");
    fish_device_info d{};
    d.kind = FISH_DEVICE_CPU;
    d.score = FISH_REFERENCE_SCORE;
    d.memory_total = host_memory_total();
    std::snprintf(d.name, sizeof d.name, "CPU (reference implementation, f32 math)");
    std::snprintf(d.detail, sizeof d.detail, "host memory, %d host threads, weights decoded by the host's dequant_row",
                  int(host()->n_threads()));
    write_out(out, d);
  });
}

fish_status backend_create(const fish_backend_config* cfg, fish_backend** out) {
  return guarded_plugin("backend_create", [&] {
    if (!out) fail(FISH_E_INVALID_ARGUMENT, "backend_create: no output pointer");
    *out = reinterpret_cast<fish_backend*>(new Backend(cfg));  // opened lazily
  });
}

fish_status backend_destroy(fish_backend* b) {
  return guarded_plugin("backend_destroy", [&] { delete B(b); });
}

// ---- backend level -----------------------------------------------------------
const char* last_error(const fish_backend* b) {
  return b ? reinterpret_cast<const Backend*>(b)->last_error.c_str() : "no backend";
}

fish_status open(fish_backend* b) {
  return guarded(b, "open", [&](Backend& be) { be.open(); });
}

fish_status describe(fish_backend* b, uint32_t what, const char** out) {
  return guarded(b, "describe", [&](Backend& be) {
    if (!out) fail(FISH_E_INVALID_ARGUMENT, "describe: no output pointer");
    be.out_string = be.describe(what);
    *out = be.out_string.c_str();
  });
}

fish_status memory_free(fish_backend* b, uint64_t* out) {
  return guarded(b, "memory_free", [&](Backend& be) {
    if (!out) fail(FISH_E_INVALID_ARGUMENT, "memory_free: no output pointer");
    be.open();
    *out = be.memory_free();
  });
}

fish_status bytes_resident(fish_backend* b, uint64_t* out) {
  return guarded(b, "bytes_resident", [&](Backend& be) {
    if (!out) fail(FISH_E_INVALID_ARGUMENT, "bytes_resident: no output pointer");
    *out = be.bytes_resident();
  });
}

fish_status supports(fish_backend* b, uint32_t type, int32_t* out) {
  return guarded(b, "supports", [&](Backend& be) {
    if (!out) fail(FISH_E_INVALID_ARGUMENT, "supports: no output pointer");
    *out = be.supports(type) ? 1 : 0;
  });
}

fish_status upload(fish_backend* b, const fish_weight_desc* d, fish_weight** out) {
  return guarded(b, "upload", [&](Backend& be) {
    if (!out) fail(FISH_E_INVALID_ARGUMENT, "upload: no output pointer");
    be.open();
    *out = reinterpret_cast<fish_weight*>(be.upload(d));
  });
}

fish_status release(fish_backend* b, fish_weight* w) {
  return guarded(b, "release", [&](Backend& be) { be.release(be.weight(w)); });
}

fish_status matmul(fish_backend* b, fish_weight* w, const float* x, int32_t n_tok, float* y) {
  return guarded(b, "matmul", [&](Backend& be) { be.matmul(*be.weight(w), x, n_tok, y); });
}

fish_status matmul_group(fish_backend* b, fish_weight* const* ws, int32_t n_w, const float* x, int32_t n_tok,
                         float* const* ys) {
  return guarded(b, "matmul_group", [&](Backend& be) {
    if (!ws || !ys || n_w < 1) fail(FISH_E_INVALID_ARGUMENT, "matmul_group: needs n_w >= 1 weights and outputs");
    const int64_t n_in = be.weight(ws[0])->n_in;
    for (int32_t i = 0; i < n_w; ++i)
      if (be.weight(ws[i])->n_in != n_in)
        fail(FISH_E_INVALID_ARGUMENT, "matmul_group: weight " + std::to_string(i) + " has n_in " +
                                          std::to_string(be.weight(ws[i])->n_in) + ", weight 0 has " + std::to_string(n_in));
    // "One submission" means nothing on the host: the products simply run in turn.
    for (int32_t i = 0; i < n_w; ++i) be.matmul(*be.weight(ws[i]), x, n_tok, ys[i]);
  });
}

fish_status span_bytes(fish_backend* b, const fish_span_desc* d, uint64_t* out) {
  return guarded(b, "span_bytes", [&](Backend& be) {
    if (!out) fail(FISH_E_INVALID_ARGUMENT, "span_bytes: no output pointer");
    // The host may ask before it uploads the weights: they may be NULL here.
    const SpanIn in = read_span_desc(be, d, false);
    *out = Span::bytes_for(in, in.n_ctx);
  });
}

fish_status span_create(fish_backend* b, const fish_span_desc* d, fish_span** out) {
  return guarded(b, "span_create", [&](Backend& be) {
    if (!out) fail(FISH_E_INVALID_ARGUMENT, "span_create: no output pointer");
    be.open();
    auto* s = new Span(be, d);
    be.add_span(s);
    *out = reinterpret_cast<fish_span*>(s);
  });
}

fish_status span_set_head(fish_backend* b, fish_span* s, fish_weight* head, const float* norm) {
  return guarded(b, "span_set_head",
                 [&](Backend& be) { be.span(s)->set_head(head ? be.weight(head) : nullptr, norm); });
}

fish_status span_forward(fish_backend* b, fish_span* s, fish_span_batch* batch) {
  return guarded(b, "span_forward", [&](Backend& be) { be.span(s)->forward(batch); });
}

fish_status span_kv_len(fish_backend* b, fish_span* s, int32_t seq, int32_t* out) {
  return guarded(b, "span_kv_len", [&](Backend& be) {
    if (!out) fail(FISH_E_INVALID_ARGUMENT, "span_kv_len: no output pointer");
    *out = be.span(s)->kv_len(seq);
  });
}

fish_status span_kv_truncate(fish_backend* b, fish_span* s, int32_t seq, int32_t n) {
  return guarded(b, "span_kv_truncate", [&](Backend& be) { be.span(s)->truncate(seq, n); });
}

fish_status span_kv_copy(fish_backend* b, fish_span* s, int32_t src, int32_t dst, int32_t p0, int32_t p1) {
  return guarded(b, "span_kv_copy", [&](Backend& be) { be.span(s)->copy(src, dst, p0, p1); });
}

fish_status span_kv_reserve(fish_backend* b, fish_span* s, int32_t n) {
  return guarded(b, "span_kv_reserve", [&](Backend& be) { be.span(s)->reserve(n); });
}

fish_status span_destroy(fish_backend* b, fish_span* s) {
  return guarded(b, "span_destroy", [&](Backend& be) {
    Span* sp = be.span(s);
    be.remove_span(sp);
    delete sp;
  });
}

fish_plugin_api full_table(uint32_t version) {
  fish_plugin_api t{};
  t.abi_version = version;
  t.name = FISH_REFERENCE_NAME;
  t.plugin_version = "0.1.0";
  t.flags = kFlags;
  t.plugin_error = plugin_error;
  t.probe = probe;
  t.device_info = device_info;
  t.backend_create = backend_create;
  t.backend_destroy = backend_destroy;
  t.last_error = last_error;
  t.open = open;
  t.describe = describe;
  t.memory_free = memory_free;
  t.bytes_resident = bytes_resident;
  t.supports = supports;
  t.upload = upload;
  t.release = release;
  t.matmul = matmul;
  t.matmul_group = matmul_group;
  t.span_bytes = span_bytes;
  t.span_create = span_create;
  t.span_destroy = span_destroy;
  t.span_set_head = span_set_head;
  t.span_forward = span_forward;
  t.span_kv_len = span_kv_len;
  t.span_kv_truncate = span_kv_truncate;
  t.span_kv_copy = span_kv_copy;
  t.span_kv_reserve = span_kv_reserve;
  return t;
}

}  // namespace
}  // namespace fish::reference

using namespace fish::reference;

// The negotiation: same major, minor = min(host's, ours); the host's services
// must reach at least type_info. The table is the whole of what this plugin
// implements, cut to the host's struct_size (write_out): the host tells which
// slots it can use by FISH_API_HAS, never by the minor. Nothing heavy happens here.
extern "C" FISH_PLUGIN_EXPORT fish_status fish_plugin_query(uint32_t host_abi_version, const fish_host_api* host_api,
                                                            fish_plugin_api* out) {
  // Without room for the four frozen header fields there is nowhere to answer.
  if (!out || out->struct_size < offsetof(fish_plugin_api, plugin_version)) return FISH_E_INVALID_ARGUMENT;
  static char message[256];
  fish_plugin_api t{};
  fish_status st = FISH_OK;
  if (FISH_ABI_VERSION_MAJOR(host_abi_version) != FISH_PLUGIN_ABI_MAJOR) {
    std::snprintf(message, sizeof message, "fish_reference speaks plugin ABI %u.x; the host offers %u.%u",
                  unsigned(FISH_PLUGIN_ABI_MAJOR), unsigned(FISH_ABI_VERSION_MAJOR(host_abi_version)),
                  unsigned(FISH_ABI_VERSION_MINOR(host_abi_version)));
    t.abi_version = FISH_PLUGIN_ABI_VERSION;
    st = FISH_E_VERSION;
  } else if (!host_api || !FISH_STRUCT_HAS(host_api, fish_host_api, type_info) || !host_api->parallel_for ||
             !host_api->n_threads || !host_api->dequant_row || !host_api->type_info) {
    std::snprintf(message, sizeof message,
                  "the host's services table (%u bytes) lacks services that fish_reference needs "
                  "(parallel_for, n_threads, dequant_row, type_info)",
                  host_api ? unsigned(host_api->struct_size) : 0u);
    t.abi_version = FISH_PLUGIN_ABI_VERSION;
    st = FISH_E_VERSION;
  } else {
    const uint32_t minor = std::min<uint32_t>(FISH_ABI_VERSION_MINOR(host_abi_version), kMinor);
    t = full_table(FISH_ABI_MAKE_VERSION(FISH_PLUGIN_ABI_MAJOR, minor));
    host() = host_api;
  }
  if (st != FISH_OK) {
    t.name = FISH_REFERENCE_NAME;
    t.message = message;
  }
  write_out(out, t);
  return st;
}
