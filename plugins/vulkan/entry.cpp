// fish_vulkan's entry point and function table (plugin_abi.h) over VulkanBackend.
//
// Loading the library does nothing (no static constructor touches Vulkan);
// fish_plugin_query fills the table and parses the plugin's FISH_* variables
// (VkConfig: every backend created afterwards uses them). probe() opens the Vulkan loader and
// enumerates devices with a short-lived instance; backend_create() is cheap and
// the device opens on the first call that needs it. Every entry point catches
// everything: no exception crosses the boundary.
//
// Device indices of device_info() / fish_backend_config.device_index count the
// usable devices in Vulkan enumeration order; each device's detail names its
// Vulkan index, which is what FISH_GPU_DEVICE takes.
#define FISH_PLUGIN_IMPLEMENTATION
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <new>
#include <string>

#include "backend.h"
#include "fish/plugin_abi.h"
#include "shaders.h"
#include "span_abi.h"

namespace fish::vk {
namespace {

constexpr uint32_t kMinor = FISH_PLUGIN_ABI_MINOR;

const fish_host_api*& host() {
  static const fish_host_api* h = nullptr;
  return h;
}

// The configuration parsed at the last fish_plugin_query.
std::mutex& config_mutex() {
  static std::mutex* m = new std::mutex;  // leaked: nothing runs at exit
  return *m;
}
VkConfig& config_storage() {
  static VkConfig* c = new VkConfig;
  return *c;
}
VkConfig config() {
  std::lock_guard<std::mutex> lock(config_mutex());
  return config_storage();
}

LogFn host_log() {
  const fish_host_api* h = host();
  if (!h || !FISH_STRUCT_HAS(h, fish_host_api, log) || !h->log) return nullptr;
  return [h](int level, const std::string& msg) { h->log(level, "vulkan", msg.c_str()); };
}

std::string& plugin_error_storage() {
  static std::string s = "no error";
  return s;
}

fish_status status_of(FailKind k) {
  switch (k) {
    case FailKind::NoDevice: return FISH_E_NO_DEVICE;
    case FailKind::Device: return FISH_E_DEVICE;
    case FailKind::OutOfMemory: return FISH_E_OUT_OF_MEMORY;
    case FailKind::Unsupported: return FISH_E_UNSUPPORTED;
    case FailKind::InvalidArgument: return FISH_E_INVALID_ARGUMENT;
    case FailKind::Range: return FISH_E_RANGE;
    case FailKind::Internal: return FISH_E_INTERNAL;
  }
  return FISH_E_INTERNAL;
}

// A backend handle: the C++ backend plus the strings handed out through the table.
struct Handle {
  explicit Handle(VulkanBackend::Options o) : be(std::move(o)) {}
  VulkanBackend be;
  std::string last_error = "no error";
  std::string out_string;
};

Handle* H(fish_backend* b) { return reinterpret_cast<Handle*>(b); }
Weight* W(fish_weight* w) { return reinterpret_cast<Weight*>(w); }

// Runs fn (returning bool, false = failure with be.error()) as one backend call.
template <class Fn>
fish_status call(fish_backend* b, const char* what, Fn&& fn) {
  if (!b) return FISH_E_INVALID_ARGUMENT;
  Handle* h = H(b);
  try {
    if (fn(h->be)) return FISH_OK;
    h->last_error = h->be.error().empty() ? std::string(what) + " failed" : h->be.error();
    return status_of(h->be.error_kind());
  } catch (const Failure& f) {  // refused before reaching the backend (span_abi.cpp)
    h->last_error = f.what();
    return status_of(f.kind());
  } catch (const std::bad_alloc&) {
    h->last_error = std::string(what) + ": out of host memory";
    return FISH_E_OUT_OF_MEMORY;
  } catch (const std::exception& e) {
    h->last_error = std::string(what) + ": " + e.what();
    return FISH_E_INTERNAL;
  } catch (...) {
    h->last_error = std::string(what) + ": unexpected internal error";
    return FISH_E_INTERNAL;
  }
}

template <class T>
void write_out(T* out, T full) {
  const size_t n = std::min<size_t>(out->struct_size, sizeof(T));
  full.struct_size = uint32_t(n);
  std::memcpy(out, &full, n);
}

// ---- the probe (cached per configuration: the host probes once, tests may query again with another) ----
struct ProbeCache {
  std::mutex mu;
  std::string key;
  bool valid = false;
  ProbeReport report;
  std::vector<size_t> usable;  // indices into report.devices
  std::string config_error;    // VkConfig's: a FISH_* variable it refused
};

ProbeCache& probe_cache() {
  static ProbeCache* c = new ProbeCache;  // leaked: nothing runs at exit
  return *c;
}

const ProbeCache& run_probe() {
  ProbeCache& c = probe_cache();
  std::lock_guard<std::mutex> lock(c.mu);
  const VkConfig cfg = config();
  const std::string key = std::to_string(int(cfg.gpu)) + "/" + std::to_string(cfg.device_index) + "/" +
                          std::to_string(cfg.queue_universal) + "/" + cfg.error;
  if (!c.valid || c.key != key) {
    c.report = probe_devices(cfg, host_log());
    c.config_error = cfg.error;
    c.usable.clear();
    for (size_t i = 0; i < c.report.devices.size(); ++i)
      if (c.report.devices[i].usable) c.usable.push_back(i);
    c.key = key;
    c.valid = true;
  }
  return c;
}

uint32_t kind_of(VkPhysicalDeviceType t) {
  switch (t) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return FISH_DEVICE_DISCRETE_GPU;
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return FISH_DEVICE_INTEGRATED_GPU;
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: return FISH_DEVICE_VIRTUAL_GPU;
    case VK_PHYSICAL_DEVICE_TYPE_CPU: return FISH_DEVICE_CPU;
    default: return FISH_DEVICE_OTHER;
  }
}

// ---- plugin level ----------------------------------------------------------------
const char* plugin_error() { return plugin_error_storage().c_str(); }

fish_status probe(fish_probe_result* out) {
  try {
    if (!out || out->struct_size < sizeof(uint32_t)) {
      plugin_error_storage() = "probe: no result struct";
      return FISH_E_INVALID_ARGUMENT;
    }
    const ProbeCache& c = run_probe();
    fish_probe_result r{};
    r.n_devices = uint32_t(c.usable.size());
    if (!c.config_error.empty()) {  // a bad FISH_* value: the user's to fix (the host says so)
      plugin_error_storage() = c.config_error;
      write_out(out, fish_probe_result{});
      return FISH_E_INVALID_ARGUMENT;
    }
    if (c.usable.empty()) {
      plugin_error_storage() = c.report.error.empty() ? "no usable Vulkan device" : c.report.error;
      write_out(out, r);
      return FISH_E_NO_DEVICE;
    }
    r.default_device = 0;
    for (size_t i = 0; i < c.usable.size(); ++i)
      if (int(c.usable[i]) == c.report.chosen) r.default_device = int32_t(i);
    r.score = c.report.chosen >= 0 ? c.report.devices[size_t(c.report.chosen)].score : 0;
    if (c.report.chosen < 0) plugin_error_storage() = c.report.error;
    write_out(out, r);
    return FISH_OK;
  } catch (const std::exception& e) {
    plugin_error_storage() = std::string("probe: ") + e.what();
    return FISH_E_INTERNAL;
  } catch (...) {
    plugin_error_storage() = "probe: unexpected internal error";
    return FISH_E_INTERNAL;
  }
}

fish_status device_info(uint32_t index, fish_device_info* out) {
  try {
    if (!out || out->struct_size < sizeof(uint32_t)) {
      plugin_error_storage() = "device_info: no result struct";
      return FISH_E_INVALID_ARGUMENT;
    }
    const ProbeCache& c = run_probe();
    if (index >= c.usable.size()) {
      plugin_error_storage() = "device_info: device " + std::to_string(index) + " does not exist (" +
                               std::to_string(c.usable.size()) + " usable Vulkan devices)";
      return FISH_E_RANGE;
    }
    const DeviceCandidate& d = c.report.devices[c.usable[index]];
    fish_device_info r{};
    r.kind = kind_of(d.type);
    r.score = d.score;
    r.memory_total = d.device_local_bytes;
    std::snprintf(r.name, sizeof r.name, "%s", d.name.c_str());
    std::snprintf(r.detail, sizeof r.detail, "Vulkan device #%u (FISH_GPU_DEVICE=%u), %s, Vulkan %u.%u.%u, queue family %d%s",
                  d.index, d.index, device_type_name(d.type), VK_API_VERSION_MAJOR(d.api_version),
                  VK_API_VERSION_MINOR(d.api_version), VK_API_VERSION_PATCH(d.api_version), d.queue_family,
                  d.queue_compute_only ? " (compute-only)" : " (universal)");
    write_out(out, r);
    return FISH_OK;
  } catch (const std::exception& e) {
    plugin_error_storage() = std::string("device_info: ") + e.what();
    return FISH_E_INTERNAL;
  } catch (...) {
    plugin_error_storage() = "device_info: unexpected internal error";
    return FISH_E_INTERNAL;
  }
}

fish_status backend_create(const fish_backend_config* cfg, fish_backend** out) {
  try {
    if (!out) {
      plugin_error_storage() = "backend_create: no output pointer";
      return FISH_E_INVALID_ARGUMENT;
    }
    VulkanBackend::Options o;
    o.config = config();
    o.log = host_log();
    if (cfg && FISH_STRUCT_HAS(cfg, fish_backend_config, memory_budget)) o.memory_budget = cfg->memory_budget;
    if (cfg && FISH_STRUCT_HAS(cfg, fish_backend_config, device_index) && cfg->device_index >= 0) {
      const ProbeCache& c = run_probe();
      if (size_t(cfg->device_index) >= c.usable.size()) {
        plugin_error_storage() = "backend_create: device " + std::to_string(cfg->device_index) + " does not exist (" +
                                 std::to_string(c.usable.size()) + " usable Vulkan devices)";
        return FISH_E_RANGE;
      }
      o.device_index = int(c.report.devices[c.usable[size_t(cfg->device_index)]].index);
    }
    *out = reinterpret_cast<fish_backend*>(new Handle(std::move(o)));  // opened lazily
    return FISH_OK;
  } catch (const std::bad_alloc&) {
    plugin_error_storage() = "backend_create: out of host memory";
    return FISH_E_OUT_OF_MEMORY;
  } catch (...) {
    plugin_error_storage() = "backend_create: unexpected internal error";
    return FISH_E_INTERNAL;
  }
}

fish_status backend_destroy(fish_backend* b) {
  try {
    delete H(b);
    return FISH_OK;
  } catch (...) {
    plugin_error_storage() = "backend_destroy: unexpected internal error";
    return FISH_E_INTERNAL;
  }
}

// ---- backend level -----------------------------------------------------------------
const char* last_error(const fish_backend* b) {
  return b ? reinterpret_cast<const Handle*>(b)->last_error.c_str() : "no backend";
}

fish_status open(fish_backend* b) {
  return call(b, "open", [](VulkanBackend& be) { return be.open(); });
}

fish_status describe(fish_backend* b, uint32_t what, const char** out) {
  if (!b || !out) return FISH_E_INVALID_ARGUMENT;
  Handle* h = H(b);
  if (what > FISH_DESCRIBE_PROFILE) {
    h->last_error = "describe: unknown selector " + std::to_string(what);
    return FISH_E_UNSUPPORTED;
  }
  return call(b, "describe", [&](VulkanBackend& be) {
    h->out_string = what == FISH_DESCRIBE_SUMMARY ? be.describe() : what == FISH_DESCRIBE_STATUS ? be.status() : be.profile();
    *out = h->out_string.c_str();
    return true;
  });
}

fish_status memory_free(fish_backend* b, uint64_t* out) {
  if (!out) return FISH_E_INVALID_ARGUMENT;
  return call(b, "memory_free", [&](VulkanBackend& be) { return be.memory_free(out); });
}

fish_status bytes_resident(fish_backend* b, uint64_t* out) {
  if (!out) return FISH_E_INVALID_ARGUMENT;
  return call(b, "bytes_resident", [&](VulkanBackend& be) { return be.bytes_resident(out); });
}

fish_status supports(fish_backend* b, uint32_t type, int32_t* out) {
  if (!out) return FISH_E_INVALID_ARGUMENT;
  return call(b, "supports", [&](VulkanBackend& be) {
    bool s = false;
    if (!be.supports(type, &s)) return false;
    *out = s ? 1 : 0;
    return true;
  });
}

fish_status upload(fish_backend* b, const fish_weight_desc* d, fish_weight** out) {
  if (!out) return FISH_E_INVALID_ARGUMENT;
  *out = nullptr;
  if (b && (!d || !FISH_STRUCT_HAS(d, fish_weight_desc, nbytes))) {
    H(b)->last_error = "upload: missing or short weight description";
    return FISH_E_INVALID_ARGUMENT;
  }
  return call(b, "upload", [&](VulkanBackend& be) {
    WeightUpload u;
    u.type = d->type;
    u.name = d->name ? d->name : "";
    u.n_in = d->n_in;
    u.n_out = d->n_out;
    u.n_mat = d->n_mat;
    u.data = d->data;
    u.nbytes = d->nbytes;
    Weight* w = be.upload(u);
    *out = reinterpret_cast<fish_weight*>(w);
    return w != nullptr;
  });
}

fish_status release(fish_backend* b, fish_weight* w) {
  return call(b, "release", [&](VulkanBackend& be) { return be.release(W(w)); });
}

fish_status matmul(fish_backend* b, fish_weight* w, const float* x, int32_t n_tok, float* y) {
  return call(b, "matmul", [&](VulkanBackend& be) { return be.matmul(W(w), x, n_tok, y); });
}

fish_status matmul_group(fish_backend* b, fish_weight* const* ws, int32_t n_w, const float* x, int32_t n_tok,
                         float* const* ys) {
  return call(b, "matmul_group", [&](VulkanBackend& be) {
    return be.matmul_group(reinterpret_cast<Weight* const*>(ws), n_w, x, n_tok, ys);
  });
}

// ---- spans ------------------------------------------------------------------------------
Span* SP(fish_span* s) { return reinterpret_cast<Span*>(s); }

fish_status span_bytes(fish_backend* b, const fish_span_desc* d, uint64_t* out) {
  if (!out) return FISH_E_INVALID_ARGUMENT;
  return call(b, "span_bytes", [&](VulkanBackend& be) { return be.span_bytes(span_in_from_abi(d, false), out); });
}

fish_status span_create(fish_backend* b, const fish_span_desc* d, fish_span** out) {
  if (!out) return FISH_E_INVALID_ARGUMENT;
  *out = nullptr;
  return call(b, "span_create", [&](VulkanBackend& be) {
    Span* s = be.span_create(span_in_from_abi(d, true));
    *out = reinterpret_cast<fish_span*>(s);
    return s != nullptr;
  });
}

fish_status span_forward(fish_backend* b, fish_span* s, fish_span_batch* batch) {
  return call(b, "span_forward", [&](VulkanBackend& be) {
    const Span::Forward f = forward_from_abi(batch);
    const float* logits = nullptr;
    if (!be.span_forward(SP(s), f, &logits)) return false;
    if (!logits) return true;
    if (batch->flags & FISH_FORWARD_LOGITS_VIEW) batch->logits_view = logits;
    else std::memcpy(batch->logits, logits, size_t(SP(s)->logits_count()) * size_t(SP(s)->head_rows()) * sizeof(float));
    return true;
  });
}

fish_status span_set_head(fish_backend* b, fish_span* s, fish_weight* head, const float* norm) {
  return call(b, "span_set_head", [&](VulkanBackend& be) { return be.span_set_head(SP(s), W(head), norm); });
}

fish_status span_kv_truncate(fish_backend* b, fish_span* s, int32_t seq, int32_t n) {
  return call(b, "span_kv_truncate", [&](VulkanBackend& be) { return be.span_kv_truncate(SP(s), seq, n); });
}

fish_status span_kv_copy(fish_backend* b, fish_span* s, int32_t src, int32_t dst, int32_t p0, int32_t p1) {
  return call(b, "span_kv_copy", [&](VulkanBackend& be) { return be.span_kv_copy(SP(s), src, dst, p0, p1); });
}

fish_status span_kv_reserve(fish_backend* b, fish_span* s, int32_t n) {
  return call(b, "span_kv_reserve", [&](VulkanBackend& be) { return be.span_kv_reserve(SP(s), n); });
}

fish_status span_kv_len(fish_backend* b, fish_span* s, int32_t seq, int32_t* out) {
  if (!out) return FISH_E_INVALID_ARGUMENT;
  return call(b, "span_kv_len", [&](VulkanBackend& be) {
    int n = 0;
    if (!be.span_kv_len(SP(s), seq, &n)) return false;
    *out = n;
    return true;
  });
}

fish_status span_destroy(fish_backend* b, fish_span* s) {
  return call(b, "span_destroy", [&](VulkanBackend& be) { return be.span_destroy(SP(s)); });
}

fish_plugin_api full_table(uint32_t version) {
  static const std::string version_text = std::string("0.1.0 (SPIR-V: ") + shaders_compiler() + ")";
  fish_plugin_api t{};
  t.abi_version = version;
  t.name = "vulkan";
  t.plugin_version = version_text.c_str();
  t.flags = 0;
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
}  // namespace fish::vk

// Negotiation: same major, minor = min(host's, ours). fish_vulkan needs no host
// service (log is used when present), so any 2.x host is accepted. Each query
// parses the plugin's FISH_* variables again (the host queries once per
// process; a test may query again after changing them).
extern "C" FISH_PLUGIN_EXPORT fish_status fish_plugin_query(uint32_t host_abi_version, const fish_host_api* host_api,
                                                            fish_plugin_api* out) {
  using namespace fish::vk;
  if (!out || out->struct_size < offsetof(fish_plugin_api, plugin_version)) return FISH_E_INVALID_ARGUMENT;
  static char message[256];
  fish_plugin_api t{};
  fish_status st = FISH_OK;
  if (FISH_ABI_VERSION_MAJOR(host_abi_version) != FISH_PLUGIN_ABI_MAJOR) {
    std::snprintf(message, sizeof message, "fish_vulkan speaks plugin ABI %u.x; the host offers %u.%u",
                  unsigned(FISH_PLUGIN_ABI_MAJOR), unsigned(FISH_ABI_VERSION_MAJOR(host_abi_version)),
                  unsigned(FISH_ABI_VERSION_MINOR(host_abi_version)));
    t.abi_version = FISH_PLUGIN_ABI_VERSION;
    t.name = "vulkan";
    t.message = message;
    st = FISH_E_VERSION;
  } else {
    const uint32_t minor = std::min<uint32_t>(FISH_ABI_VERSION_MINOR(host_abi_version), kMinor);
    t = full_table(FISH_ABI_MAKE_VERSION(FISH_PLUGIN_ABI_MAJOR, minor));
    if (host_api && host_api->struct_size >= sizeof(uint32_t)) host() = host_api;
    VkConfig parsed = VkConfig::from_env();
    std::lock_guard<std::mutex> lock(config_mutex());
    config_storage() = std::move(parsed);
  }
  write_out(out, t);
  return st;
}
