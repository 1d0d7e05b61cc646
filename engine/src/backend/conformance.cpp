// Conformance suite driver: loading, version negotiation, short structs, probe,
// backend lifecycle. The products and spans are in conformance_matmul.cpp and
// conformance_span.cpp.
#include "backend/conformance.h"

#include <atomic>
#include <cstring>
#include <filesystem>

#include "backend/conformance_internal.h"
#include "backend/host_services.h"

namespace fish::backend {

using namespace conf;

namespace {

// ---- host tables for negotiation ------------------------------------------------
// Plugins may keep the host pointer they were given, so every variant lives
// forever (leaked) and is fully functional within its struct_size. Slots past a
// shortened struct_size hold traps that count calls: a plugin that reads past
// struct_size and calls them is caught.
std::atomic<int> g_trap_calls{0};
fish_status trap_quantize_row(uint32_t, const float*, void*, int64_t) {
  ++g_trap_calls;
  return FISH_E_UNSUPPORTED;
}
fish_status trap_type_info(uint32_t, fish_type_info*) {
  ++g_trap_calls;
  return FISH_E_UNSUPPORTED;
}

const fish_host_api* short_host() {
  static const fish_host_api* h = [] {
    auto* t = new fish_host_api(*host_api());
    t->struct_size = uint32_t(offsetof(fish_host_api, quantize_row));
    t->quantize_row = trap_quantize_row;
    t->type_info = trap_type_info;
    return t;
  }();
  return h;
}

struct Answer {
  fish_status status = FISH_E_INTERNAL;
  fish_plugin_api api{};     // what the plugin wrote (within table_size)
  bool canary_ok = true;     // nothing written at or past table_size
  std::string message;
};

constexpr uint8_t kCanary = 0xA5;

// Calls the entry point with a table of table_size bytes followed by canaries.
Answer query(fish_plugin_query_fn q, uint32_t version, const fish_host_api* host, uint32_t table_size) {
  std::vector<uint8_t> buf(sizeof(fish_plugin_api) + 256, kCanary);
  std::memset(buf.data(), 0, table_size);
  std::memcpy(buf.data(), &table_size, sizeof table_size);
  Answer a;
  try {
    a.status = q(version, host, reinterpret_cast<fish_plugin_api*>(buf.data()));
  } catch (...) {
    a.status = FISH_E_INTERNAL;
    a.message = "(an exception crossed the boundary)";
  }
  for (size_t i = table_size; i < buf.size(); ++i) a.canary_ok = a.canary_ok && buf[i] == kCanary;
  std::memcpy(&a.api, buf.data(), std::min<size_t>(table_size, sizeof(fish_plugin_api)));
  if (table_size >= offsetof(fish_plugin_api, message) + sizeof(const char*) && a.api.message)
    a.message = std::string(a.api.message, strnlen(a.api.message, 4096));
  return a;
}

std::string ver(uint32_t v) {
  return std::to_string(FISH_ABI_VERSION_MAJOR(v)) + "." + std::to_string(FISH_ABI_VERSION_MINOR(v));
}

// Runs probe → create → upload → matmul → destroy through a raw table (the one
// a short host negotiated); returns "" or what went wrong.
std::string exercise_raw(const fish_plugin_api& api) {
  if (!api.probe || !api.backend_create || !api.upload || !api.matmul || !api.backend_destroy || !api.release)
    return "the table lacks required functions";
  fish_probe_result pr{};
  pr.struct_size = sizeof pr;
  const int32_t ps = api.probe(&pr);
  if (ps == FISH_E_NO_DEVICE) return "";  // a clean "no device": nothing more to try here
  if (ps != FISH_OK) return "probe failed";
  if (pr.n_devices == 0) return "";  // nothing more to try without a device
  fish_backend_config cfg{};
  cfg.struct_size = sizeof cfg;
  cfg.device_index = -1;
  fish_backend* b = nullptr;
  if (api.backend_create(&cfg, &b) != FISH_OK || !b) return "backend_create failed";
  std::mt19937_64 rng(7);
  TestWeight w = make_weight(GgmlType::F32, 8, 64, 0.5f, rng, "short_host.weight");
  fish_weight_desc d{};
  d.struct_size = sizeof d;
  d.type = FISH_TYPE_F32;
  d.name = w.name.c_str();
  d.n_in = w.n_in;
  d.n_out = w.n_out;
  d.data = w.bytes.data();
  d.nbytes = w.bytes.size();
  fish_weight* fw = nullptr;
  std::string err;
  int32_t sup = 0;
  if (api.supports(b, FISH_TYPE_F32, &sup) == FISH_OK && sup) {
    if (api.upload(b, &d, &fw) != FISH_OK) {
      err = std::string("upload failed: ") + api.last_error(b);
    } else {
      std::vector<float> x = random_vector(64, 1.0f, rng), y(8);
      if (api.matmul(b, fw, x.data(), 1, y.data()) != FISH_OK) err = std::string("matmul failed: ") + api.last_error(b);
      else if (bound_ratio(w, x.data(), 1, y.data(), nullptr) > 1.0) err = "matmul result out of bound";
      api.release(b, fw);
    }
  }
  api.backend_destroy(b);
  return err;
}

}  // namespace

ConformanceSummary run_conformance(const std::string& path, const ConformanceOptions& opts) {
  ConformanceSummary sum;
  Runner run(opts, sum);
  const uint32_t current = FISH_PLUGIN_ABI_VERSION;

  // ---- loading ----------------------------------------------------------------
  std::string err;
  fish_plugin_query_fn q = nullptr;
  if (void* h = open_library(path, &err)) q = find_entry(h, &err);
  run.check("load", [&]() -> std::string {
    expect(q != nullptr, path + ": " + err);
    return std::string("entry point ") + FISH_PLUGIN_ENTRY + " found";
  });
  if (!q) return sum;

  // ---- negotiation ------------------------------------------------------------
  const uint32_t full = sizeof(fish_plugin_api);
  const Answer cur = query(q, current, host_api(), full);
  run.check("negotiate: this host's version " + ver(current), [&]() -> std::string {
    expect(cur.status == FISH_OK, std::string("refused (") + status_name(cur.status) + "): " + cur.message);
    expect(cur.canary_ok, "the plugin wrote past the table's struct_size");
    expect(cur.api.struct_size >= offsetof(fish_plugin_api, span_bytes) && cur.api.struct_size <= full,
           "answered struct_size " + std::to_string(cur.api.struct_size) + " outside " +
               std::to_string(offsetof(fish_plugin_api, span_bytes)) + ".." + std::to_string(full));
    expect(FISH_ABI_VERSION_MAJOR(cur.api.abi_version) == FISH_PLUGIN_ABI_MAJOR &&
               FISH_ABI_VERSION_MINOR(cur.api.abi_version) <= FISH_PLUGIN_ABI_MINOR,
           "answered version " + ver(cur.api.abi_version));
    expect(cur.api.name && *cur.api.name, "no plugin name");
    const fish_plugin_api& a = cur.api;
    const bool all = a.plugin_error && a.probe && a.device_info && a.backend_create && a.backend_destroy &&
                     a.last_error && a.open && a.describe && a.memory_free && a.bytes_resident && a.supports &&
                     a.upload && a.release && a.matmul && a.matmul_group;
    expect(all, "a required function pointer is NULL");
    // The span group is all or nothing; only span_kv_copy may be missing from it.
    const bool spans = a.span_bytes && a.span_create && a.span_destroy && a.span_set_head && a.span_forward &&
                       a.span_kv_len && a.span_kv_truncate && a.span_kv_reserve;
    const bool no_spans = !a.span_bytes && !a.span_create && !a.span_destroy && !a.span_set_head && !a.span_forward &&
                          !a.span_kv_len && !a.span_kv_truncate && !a.span_kv_reserve && !a.span_kv_copy;
    expect(spans || no_spans, "the span functions must be all present or all NULL (span_kv_copy alone may be NULL)");
    return std::string(a.name) + " answers " + ver(a.abi_version) + ", table " + std::to_string(a.struct_size) +
           " bytes, spans " + (spans ? a.span_kv_copy ? "yes (with span_kv_copy)" : "yes (no span_kv_copy)" : "no");
  });

  const uint32_t newer_minor = FISH_ABI_MAKE_VERSION(FISH_PLUGIN_ABI_MAJOR, FISH_PLUGIN_ABI_MINOR + 7);
  run.check("negotiate: newer host minor " + ver(newer_minor), [&]() -> std::string {
    const Answer a = query(q, newer_minor, host_api(), full);
    expect(a.status == FISH_OK, std::string("refused (") + status_name(a.status) + "): " + a.message);
    expect(a.canary_ok, "the plugin wrote past the table's struct_size");
    expect(FISH_ABI_VERSION_MAJOR(a.api.abi_version) == FISH_PLUGIN_ABI_MAJOR &&
               FISH_ABI_VERSION_MINOR(a.api.abi_version) <= FISH_ABI_VERSION_MINOR(newer_minor) &&
               FISH_ABI_VERSION_MINOR(a.api.abi_version) >= FISH_ABI_VERSION_MINOR(cur.api.abi_version),
           "answered " + ver(a.api.abi_version) + " (must be " + std::to_string(FISH_PLUGIN_ABI_MAJOR) +
               ".x with x between its answer to this host and the offer)");
    return "answers " + ver(a.api.abi_version);
  });

  for (uint32_t v : {FISH_ABI_MAKE_VERSION(FISH_PLUGIN_ABI_MAJOR - 1, 9), FISH_ABI_MAKE_VERSION(FISH_PLUGIN_ABI_MAJOR + 1, 0)}) {
    run.check("negotiate: " + std::string(FISH_ABI_VERSION_MAJOR(v) < FISH_PLUGIN_ABI_MAJOR ? "older" : "newer") +
                  " host major " + ver(v),
              [&]() -> std::string {
                const Answer a = query(q, v, host_api(), full);
                expect(a.status == FISH_E_VERSION,
                       std::string("expected FISH_E_VERSION, got ") + status_name(a.status));
                expect(a.canary_ok, "the plugin wrote past the table's struct_size");
                expect(!a.message.empty(), "refused without a message");
                return "refused: " + a.message;
              });
  }

  // A host whose plugin table is only the frozen header (struct_size, version, name, message).
  const uint32_t header = uint32_t(offsetof(fish_plugin_api, plugin_version));
  run.check("negotiate: plugin table of " + std::to_string(header) + " bytes", [&]() -> std::string {
    const Answer a = query(q, current, host_api(), header);
    expect(a.canary_ok, "the plugin wrote past the " + std::to_string(header) + "-byte table");
    expect(a.api.struct_size <= header, "rewrote struct_size to " + std::to_string(a.api.struct_size));
    return std::string(status_name(a.status)) + ", nothing written past byte " + std::to_string(header);
  });
  const uint32_t no_spans = uint32_t(offsetof(fish_plugin_api, span_bytes));
  run.check("negotiate: plugin table without the span slots", [&]() -> std::string {
    const Answer a = query(q, current, host_api(), no_spans);
    expect(a.status == FISH_OK, std::string("refused (") + status_name(a.status) + "): " + a.message);
    expect(a.canary_ok, "the plugin wrote past the " + std::to_string(no_spans) + "-byte table");
    expect(a.api.struct_size <= no_spans && a.api.matmul_group, "struct_size or required slots wrong");
    return "filled " + std::to_string(a.api.struct_size) + " bytes";
  });

  run.check("negotiate: host services table without quantize_row/type_info", [&]() -> std::string {
    g_trap_calls = 0;
    const Answer a = query(q, current, short_host(), full);
    std::string detail;
    if (a.status == FISH_OK) {
      // Only a table of this major may be used (another major's has another layout).
      expect(FISH_ABI_VERSION_MAJOR(a.api.abi_version) == FISH_PLUGIN_ABI_MAJOR,
             "accepted the short host table answering ABI " + ver(a.api.abi_version));
      const std::string e = exercise_raw(a.api);
      expect(g_trap_calls == 0, "the plugin called a host service past the host's struct_size");
      expect(e.empty(), "accepted the short host table, then: " + e);
      detail = "accepted and works without the missing services";
    } else {
      expect(a.status == FISH_E_VERSION || a.status == FISH_E_INVALID_ARGUMENT,
             std::string("refusal status ") + status_name(a.status));
      expect(!a.message.empty(), "refused without a message");
      expect(g_trap_calls == 0, "the plugin called a host service past the host's struct_size");
      detail = "refused cleanly: " + a.message;
    }
    return detail;
  });
  // Plugins may keep the host pointer of their last query: give them the real one back.
  query(q, current, host_api(), full);

  // ---- probe and devices ------------------------------------------------------
  PluginRecord rec = load_plugin(path);
  const std::string name = rec.file_name.empty() ? std::filesystem::path(path).stem().string() : rec.file_name;
  run.check("probe", [&]() -> std::string {
    expect(rec.loaded, rec.reason);
    if (!rec.probed) skip("probe failed (no usable device here?): " + rec.reason);
    std::string d = std::to_string(rec.devices.size()) + " device(s), score " + std::to_string(rec.score);
    for (const auto& dev : rec.devices) d += "; " + dev.name;
    return d;
  });
  if (!rec.loaded || !rec.probed || rec.devices.empty()) {
    run.check("device checks", []() -> std::string { skip("no usable device: later checks not run"); });
    return sum;
  }
  const fish_plugin_api& api = rec.lib->api;

  run.check("short probe/device_info structs", [&]() -> std::string {
    std::vector<uint8_t> buf(sizeof(fish_device_info) + 64, kCanary);
    const uint32_t psz = uint32_t(offsetof(fish_probe_result, score));
    std::memset(buf.data(), 0, psz);
    std::memcpy(buf.data(), &psz, 4);
    expect(api.probe(reinterpret_cast<fish_probe_result*>(buf.data())) == FISH_OK, "probe with a short result failed");
    for (size_t i = psz; i < buf.size(); ++i) expect(buf[i] == kCanary, "probe wrote past a short struct_size");
    std::fill(buf.begin(), buf.end(), kCanary);
    const uint32_t dsz = uint32_t(offsetof(fish_device_info, name));
    std::memset(buf.data(), 0, dsz);
    std::memcpy(buf.data(), &dsz, 4);
    expect(api.device_info(0, reinterpret_cast<fish_device_info*>(buf.data())) == FISH_OK,
           "device_info with a short result failed");
    for (size_t i = dsz; i < buf.size(); ++i) expect(buf[i] == kCanary, "device_info wrote past a short struct_size");
    fish_device_info di{};
    di.struct_size = sizeof di;
    expect(api.device_info(uint32_t(rec.devices.size()) + 5, &di) != FISH_OK, "device_info accepted a bad index");
    return "nothing written past struct_size; bad device index refused";
  });

  run.check("short backend config (no memory_budget field)", [&]() -> std::string {
    fish_backend_config cfg{};
    cfg.struct_size = uint32_t(offsetof(fish_backend_config, memory_budget));
    cfg.device_index = -1;
    std::string e;
    auto be = PluginBackend::create(rec.lib, name, cfg, &e);
    expect(be != nullptr, e);
    expect(be->open(), "open: " + be->last_error());
    expect(be->memory_free() > 0, "memory_free is 0");
    return "created and opened";
  });

  run.check("backend lifecycle and describe strings", [&]() -> std::string {
    auto be = new_backend(rec.lib, name);
    auto raw_describe = [&](uint32_t what) {
      const char* out = nullptr;
      const fish_status s = api.describe(be->handle(), what, &out);
      expect(s == FISH_OK && out, "describe(" + std::to_string(what) + ") failed: " + api.last_error(be->handle()));
      return std::string(out);
    };
    const std::string st0 = raw_describe(FISH_DESCRIBE_STATUS);
    expect(!st0.empty(), "describe(STATUS) before open is empty");
    expect(be->open(), "open: " + be->last_error());
    expect(be->open(), "a second open failed: " + be->last_error());
    const std::string st1 = raw_describe(FISH_DESCRIBE_STATUS);
    const std::string summary = raw_describe(FISH_DESCRIBE_SUMMARY);
    raw_describe(FISH_DESCRIBE_PROFILE);  // may be empty, must not fail
    expect(!st1.empty() && st1.find('\n') == std::string::npos, "describe(STATUS) after open is not one line");
    expect(!summary.empty() && summary.find('\n') == std::string::npos, "describe(SUMMARY) is not one line");
    const uint64_t free_b = be->memory_free();
    expect(free_b > 0, "memory_free is 0 on a fresh backend: " + be->last_error());
    expect(be->bytes_resident() == 0, "a fresh backend holds " + std::to_string(be->bytes_resident()) + " bytes");
    const char* out = nullptr;
    const fish_status s = api.describe(be->handle(), 9999, &out);
    expect(s == FISH_OK || s == FISH_E_UNSUPPORTED, std::string("describe(9999) gave ") + status_name(s));
    if (s != FISH_OK) expect(api.last_error(be->handle()) && *api.last_error(be->handle()), "no message after a failure");
    return "before open: \"" + st0 + "\"; after: \"" + st1 + "\"; " + std::to_string(free_b >> 20) + " MiB free; \"" +
           summary + "\"";
  });

  run_matmul_checks(run, rec.lib, name);
  run_span_checks(run, rec.lib, name);
  return sum;
}

}  // namespace fish::backend
