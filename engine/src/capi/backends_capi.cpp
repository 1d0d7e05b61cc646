// fish_backends.h: the discovery report, the active backend, the conformance suite.
#include <algorithm>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/conformance.h"
#include "capi/capi_util.h"
#include "common/error.h"
#include "common/engine_config.h"
#include "fish/plugin_abi.h"

namespace {

const char* kind_name(uint32_t k) {
  switch (k) {
    case FISH_DEVICE_DISCRETE_GPU: return "discrete GPU";
    case FISH_DEVICE_INTEGRATED_GPU: return "integrated GPU";
    case FISH_DEVICE_VIRTUAL_GPU: return "virtual GPU";
    case FISH_DEVICE_CPU: return "CPU";
    default: return "other";
  }
}

// Copies only what fits in the caller's struct (an older caller's is shorter).
template <class T>
int write_out(T* out, T full) {
  if (!out || out->struct_size < sizeof(uint32_t)) return -1;
  const size_t n = std::min<size_t>(out->struct_size, sizeof(T));
  full.struct_size = uint32_t(n);
  std::memcpy(out, &full, n);
  return 0;
}

std::mutex g_str_mu;
std::string g_reason, g_status, g_summary;

const char* keep(std::string& slot, std::string v) {
  std::lock_guard<std::mutex> lk(g_str_mu);
  slot = std::move(v);
  return slot.c_str();
}

}  // namespace

extern "C" {

FISH_API int32_t fish_backend_count(void) {
  try {
    return int32_t(fish::backend::report().plugins.size());
  } catch (...) {
    return 0;
  }
}

FISH_API int fish_backend_get_info(int32_t i, fish_backend_info* out) {
  try {
    const auto& rep = fish::backend::report();
    if (i < 0 || size_t(i) >= rep.plugins.size()) return -1;
    const auto& r = rep.plugins[size_t(i)];
    fish_backend_info v{};
    v.path = r.path.c_str();
    v.name = r.file_name.c_str();
    v.reported_name = r.name.c_str();
    v.plugin_version = r.plugin_version.c_str();
    v.loaded = r.loaded;
    v.abi_version = r.abi_version;
    v.probed = r.probed;
    v.score = r.score;
    v.flags = r.flags;
    v.n_devices = int32_t(r.devices.size());
    v.chosen = r.chosen;
    v.reason = r.reason.c_str();
    return write_out(out, v);
  } catch (...) {
    return -1;
  }
}

FISH_API int fish_backend_get_device(int32_t i, int32_t device, fish_backend_device* out) {
  try {
    const auto& rep = fish::backend::report();
    if (i < 0 || size_t(i) >= rep.plugins.size()) return -1;
    const auto& r = rep.plugins[size_t(i)];
    if (device < 0 || size_t(device) >= r.devices.size()) return -1;
    const auto& d = r.devices[size_t(device)];
    fish_backend_device v{};
    v.name = d.name.c_str();
    v.detail = d.detail.c_str();
    v.kind = kind_name(d.kind);
    v.score = d.score;
    v.memory_total = d.memory_total;
    return write_out(out, v);
  } catch (...) {
    return -1;
  }
}

FISH_API int32_t fish_backend_folder_count(void) {
  try {
    return int32_t(fish::backend::report().folders.size());
  } catch (...) {
    return 0;
  }
}

FISH_API const char* fish_backend_folder(int32_t i) {
  try {
    const auto& f = fish::backend::report().folders;
    return i >= 0 && size_t(i) < f.size() ? f[size_t(i)].c_str() : nullptr;
  } catch (...) {
    return nullptr;
  }
}

FISH_API int fish_backend_disabled(void) {
  try {
    return fish::backend::report().disabled ? 1 : 0;
  } catch (...) {
    return 0;
  }
}

FISH_API const char* fish_backend_active(void) {
  try {
    fish::ComputeBackend* be = fish::backend::get();
    if (!be) return nullptr;
    // The name lives in the report (process lifetime), not in a temporary.
    const auto& rep = fish::backend::report();
    return rep.chosen >= 0 ? rep.plugins[size_t(rep.chosen)].file_name.c_str() : nullptr;
  } catch (...) {
    return nullptr;
  }
}

FISH_API const char* fish_backend_reason(void) {
  try {
    return keep(g_reason, fish::backend::reason());
  } catch (...) {
    return "";
  }
}

FISH_API const char* fish_backend_status(void) {
  try {
    fish::ComputeBackend* be = fish::backend::get();
    return keep(g_status, be ? be->status() : std::string());
  } catch (...) {
    return "";
  }
}

FISH_API const char* fish_backend_summary(void) {
  try {
    fish::ComputeBackend* be = fish::backend::get();
    return keep(g_summary, be ? be->describe() : std::string());
  } catch (...) {
    return "";
  }
}

FISH_API uint64_t fish_backend_memory_free(void) {
  try {
    fish::ComputeBackend* be = fish::backend::get();
    return be ? be->memory_free() : 0;
  } catch (...) {
    return 0;
  }
}

FISH_API uint64_t fish_backend_device_memory_free(int32_t device, const char** why) {
  static std::string g_why;
  try {
    std::string err;
    // Each device with the process's budget when it is one value for all (FISH_VRAM_BUDGET_MB=n).
    std::vector<uint64_t> budget = fish::EngineConfig::process().vram_budget_mb;
    if (budget.size() != 1) budget.clear();
    const std::vector<fish::ComputeBackend*> bes = fish::backend::open_devices({int(device)}, budget, &err);
    g_why = err.empty() && bes.empty() ? "CPU only: " + fish::backend::reason() : err;
    if (why) *why = g_why.c_str();
    return bes.empty() ? 0 : bes[0]->memory_free();
  } catch (...) {
    if (why) *why = "unexpected error";
    return 0;
  }
}

FISH_API void fish_backend_use_file(const char* path) {
  try {
    fish::backend::use_plugin_file(path ? path : "");
  } catch (...) {
  }
}

FISH_API int fish_backend_use_file_config(const char* path, const char* config, fish_error** err) {
  return fish::capi::guarded(err, [&] {
    std::string why;
    const fish::EngineConfig cfg = fish::EngineConfig::process().with(config ? config : "", &why);
    if (!why.empty()) throw fish::Error("fish_backend_use_file_config: " + why);
    fish::backend::use_backend(path ? path : "", cfg);
  }) ? 0 : -1;
}

FISH_API fish_plugin_test_params fish_plugin_test_default_params(void) {
  fish_plugin_test_params p{};
  p.struct_size = sizeof p;
  return p;
}

FISH_API int32_t fish_plugin_test(const char* path, const fish_plugin_test_params* params, fish_plugin_check_fn fn,
                                  void* ctx, fish_error** err) {
  int32_t failed = -1;
  fish::capi::guarded(err, [&] {
    if (!path || !*path) throw fish::Error("fish_plugin_test: no plugin file given");
    fish::backend::ConformanceOptions opts;
    if (params && FISH_STRUCT_HAS(params, fish_plugin_test_params, seed) && params->seed) opts.seed = params->seed;
    if (params && FISH_STRUCT_HAS(params, fish_plugin_test_params, filter) && params->filter) opts.filter = params->filter;
    opts.on_result = [&](const fish::backend::CheckResult& r) {
      if (!fn) return;
      fish_plugin_check c{};
      c.struct_size = sizeof c;
      c.name = r.name.c_str();
      c.outcome = r.outcome == fish::backend::CheckOutcome::Pass   ? FISH_CHECK_PASS
                  : r.outcome == fish::backend::CheckOutcome::Fail ? FISH_CHECK_FAIL
                                                                   : FISH_CHECK_SKIP;
      c.detail = r.detail.c_str();
      fn(&c, ctx);
    };
    failed = int32_t(fish::backend::run_conformance(path, opts).failed);
  });
  return failed;
}

}  // extern "C"
