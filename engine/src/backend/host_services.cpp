#include "backend/host_services.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <exception>
#include <mutex>

#include "common/error.h"
#include "common/ggml_type.h"
#include "cpu/thread_pool.h"
#include "quant/quant.h"

namespace fish::backend {

namespace {

std::atomic<int> g_verbose{0};
std::atomic<bool> g_child{false};  // enter_child_mode() was called: this is a probe's child process
std::mutex g_log_mu;
LogHook& log_hook() {
  static LogHook* h = new LogHook();  // leaked: plugins may log during exit
  return *h;
}

const char* level_name(int level) {
  switch (level) {
    case FISH_LOG_ERROR: return "error";
    case FISH_LOG_WARN: return "warning";
    case FISH_LOG_INFO: return "info";
    default: return "debug";
  }
}

// ---- thread pool ------------------------------------------------------------
// One pool for all plugins, created on first use and never destroyed (a plugin
// may still run work while the process exits). A parallel_for that finds the
// pool busy (another thread's call, or a nested call from inside a job) runs on
// the calling thread instead of waiting: correct, never deadlocks.
std::mutex g_pool_mu;
thread_local bool t_in_pool_job = false;

ThreadPool& pool() {
  static ThreadPool* p = new ThreadPool(0);
  return *p;
}

int32_t host_n_threads() {
  if (g_child.load()) return 1;
  try {
    return int32_t(pool().size());
  } catch (...) {
    return 1;
  }
}

void host_parallel_for(int64_t n, int64_t grain, fish_parallel_fn fn, void* ctx) {
  if (!fn || n <= 0) return;
  if (grain < 1) grain = 1;
  if (t_in_pool_job || g_child.load()) {  // nested, or a child process without the pool's threads
    fn(ctx, 0, n, 0);
    return;
  }
  std::unique_lock<std::mutex> lk(g_pool_mu, std::try_to_lock);
  if (!lk.owns_lock()) {
    fn(ctx, 0, n, 0);
    return;
  }
  try {
    pool().parallel_for(n, grain, [&](int64_t b, int64_t e, int ith) {
      t_in_pool_job = true;
      fn(ctx, b, e, int32_t(ith));
      t_in_pool_job = false;
    });
  } catch (...) {
    // Thread creation failed (resource limits): do the work here.
    fn(ctx, 0, n, 0);
  }
}

// ---- conversions ------------------------------------------------------------
bool row_ok(uint32_t type, int64_t n) { return n >= 0 && ggml_row_bytes(type, n).has_value(); }

fish_status host_dequant_row(uint32_t type, const void* src, float* dst, int64_t n) {
  auto info = ggml_type_info(type);
  if (!info) return FISH_E_UNSUPPORTED;
  if (!src || !dst || !row_ok(type, n)) return FISH_E_INVALID_ARGUMENT;
  try {
    if (!can_dequantize(GgmlType(type))) return FISH_E_UNSUPPORTED;
    dequant_row(GgmlType(type), src, dst, n);
    return FISH_OK;
  } catch (const Error&) {
    return FISH_E_UNSUPPORTED;
  } catch (...) {
    return FISH_E_INTERNAL;
  }
}

fish_status host_quantize_row(uint32_t type, const float* src, void* dst, int64_t n) {
  auto info = ggml_type_info(type);
  if (!info) return FISH_E_UNSUPPORTED;
  if (!src || !dst || !row_ok(type, n)) return FISH_E_INVALID_ARGUMENT;
  try {
    if (!can_quantize(GgmlType(type))) return FISH_E_UNSUPPORTED;
    quantize_row(GgmlType(type), src, dst, n);
    return FISH_OK;
  } catch (const Error&) {
    return FISH_E_UNSUPPORTED;
  } catch (...) {
    return FISH_E_INTERNAL;
  }
}

fish_status host_type_info(uint32_t type, fish_type_info* out) {
  if (!out || out->struct_size < offsetof(fish_type_info, name) + sizeof(out->name)) return FISH_E_INVALID_ARGUMENT;
  auto info = ggml_type_info(type);
  if (!info) return FISH_E_UNSUPPORTED;
  // Fill only what fits in the caller's struct_size (an older plugin's struct).
  fish_type_info full{};
  full.struct_size = out->struct_size;
  full.name = info->name;
  full.block_size = info->block_size;
  full.type_size = info->type_size;
  try {
    full.can_dequant = can_dequantize(GgmlType(type)) ? 1 : 0;
    full.can_quantize = can_quantize(GgmlType(type)) ? 1 : 0;
  } catch (...) {
  }
  const size_t n = std::min<size_t>(out->struct_size, sizeof full);
  std::memcpy(out, &full, n);
  return FISH_OK;
}

void host_log_c(int32_t level, const char* source, const char* message) {
  try {
    host_log(level, source ? source : "plugin", message ? message : "");
  } catch (...) {
  }
}

}  // namespace

void host_log(int level, const std::string& source, const std::string& message) {
  // In a probe's child, another thread of the parent may have held the lock
  // at fork time, and the hook is the parent's: straight to (captured) stderr.
  std::unique_lock<std::mutex> lk(g_log_mu, std::defer_lock);
  if (!g_child.load()) {
    lk.lock();
    if (log_hook()) {
      log_hook()(level, source, message);
      return;
    }
  }
  const int v = g_verbose.load();
  // Errors and warnings always; information with FISH_GPU_VERBOSE=1; debug with 2.
  const bool show = level <= FISH_LOG_WARN || (level <= FISH_LOG_INFO && v >= 1) || v >= 2;
  if (!show) return;
  if (level == FISH_LOG_INFO)
    std::fprintf(stderr, "fish [%s] %s\n", source.c_str(), message.c_str());
  else
    std::fprintf(stderr, "fish [%s] %s: %s\n", source.c_str(), level_name(level), message.c_str());
}

void set_log_verbosity(int verbose) { g_verbose.store(verbose); }
void enter_child_mode() { g_child.store(true); }
int log_verbosity() { return g_verbose.load(); }

void set_log_hook(LogHook hook) {
  std::lock_guard<std::mutex> lk(g_log_mu);
  log_hook() = std::move(hook);
}

const fish_host_api* host_api() {
  static const fish_host_api api = [] {
    fish_host_api a{};
    a.struct_size = sizeof(fish_host_api);
    a.abi_version = FISH_PLUGIN_ABI_VERSION;
    a.host_version = "fish 0.1.0";
    a.log = host_log_c;
    a.n_threads = host_n_threads;
    a.parallel_for = host_parallel_for;
    a.dequant_row = host_dequant_row;
    a.quantize_row = host_quantize_row;
    a.type_info = host_type_info;
    return a;
  }();
  return &api;
}

const char* status_name(fish_status s) {
  switch (s) {
    case FISH_OK: return "ok";
    case FISH_E_INVALID_ARGUMENT: return "invalid argument";
    case FISH_E_UNSUPPORTED: return "unsupported";
    case FISH_E_OUT_OF_MEMORY: return "out of memory";
    case FISH_E_NO_DEVICE: return "no device";
    case FISH_E_DEVICE: return "device error";
    case FISH_E_VERSION: return "ABI version refused";
    case FISH_E_RANGE: return "out of range";
    case FISH_E_INTERNAL: return "internal error";
    default: return "unknown status";
  }
}

}  // namespace fish::backend
