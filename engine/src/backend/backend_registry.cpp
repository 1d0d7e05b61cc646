// The process-wide backend: discovery, then create + open the best candidate.
#include <algorithm>
#include <filesystem>
#include <memory>
#include <mutex>
#include <vector>

#include "backend/backend.h"
#include "backend/host_services.h"
#include "backend/plugin_adapter.h"

namespace fish::backend {

namespace {

struct Registry {
  std::mutex mu;
  bool ready = false;
  const BackendReport* rep = nullptr;
  ComputeBackend* backend = nullptr;
  std::string override_path;
  bool has_override = false;
  EngineConfig config;      // the configuration of the next discovery (when has_config)
  bool has_config = false;  // else EngineConfig::process()
  // Reports and backends are kept for the life of the process: callers may
  // hold references to older ones after use_plugin_file(). (Reachable from
  // here, so leak checkers see them as kept, not lost.)
  std::vector<std::unique_ptr<BackendReport>> reports;
  std::vector<ComputeBackend*> backends;
  // The chosen plugin's backends of this discovery by (device, budget), the
  // process's backend first: what open_devices hands out and reuses.
  struct Opened {
    int device;
    uint64_t budget;
    ComputeBackend* be;
  };
  std::vector<Opened> opened;
};

Registry& reg() {
  static Registry* r = new Registry();  // leaked: used until the very end
  return *r;
}

const char* record_state(const PluginRecord& r) {
  if (r.chosen) return "chosen";
  if (r.eligible) return "usable";
  if (r.loaded && r.probed) return "loaded";
  if (r.loaded) return "loaded, probe failed";
  return "refused";
}

// asked: the user named a plugin (FISH_BACKEND) or asked for the GPU
// (FISH_GPU=1|cpu): ending up on the CPU is then a warning, not news for
// FISH_GPU_VERBOSE only.
void log_report(const BackendReport& rep, bool asked, bool opened) {
  for (const auto& r : rep.plugins) {
    // A plugin refusing its configuration (a mistyped FISH_VK_* value) is the
    // user's to fix, one that crashed or hung in its probe is news: warnings,
    // shown without FISH_GPU_VERBOSE.
    if (r.config_error || r.faulty) host_log(FISH_LOG_WARN, "loader", r.path + ": " + r.reason + " - the plugin is not used");
    else host_log(FISH_LOG_INFO, "loader", r.path + ": " + record_state(r) + (r.reason.empty() ? "" : " - " + r.reason));
  }
  host_log(asked && !opened ? FISH_LOG_WARN : FISH_LOG_INFO, "loader", rep.reason);
}

// Caller holds mu.
void init_locked(Registry& g) {
  if (g.ready) return;
  const EngineConfig& cfg = g.has_config ? g.config : EngineConfig::process();
  set_log_verbosity(cfg.gpu_verbose);
  DiscoveryOptions opts;
  opts.isolate = cfg.plugin_isolate;
  opts.timeout_s = cfg.plugin_timeout_s;
  if (g.has_override) {
    opts.files.push_back(g.override_path);
    std::string name;
    const std::filesystem::path p(g.override_path);
    opts.only = plugin_name_from_file(p.filename().string(), &name) ? name : p.stem().string();
  } else {
    opts.folders = plugin_folders();
    opts.disabled = cfg.gpu_off;
    opts.disabled_by = cfg.gpu;
    opts.only = cfg.backend;
    opts.deny = cfg.plugin_deny;
  }
  auto rep = std::make_unique<BackendReport>(discover(opts));
  // The first listed device (FISH_GPU_DEVICE) with its budget (FISH_VRAM_BUDGET_MB).
  const int device = cfg.gpu_devices.empty() ? -1 : cfg.gpu_devices[0];
  const uint64_t budget = cfg.vram_budget_mb.empty() ? 0 : cfg.vram_budget_mb[0] << 20;
  std::unique_ptr<ComputeBackend> be = open_chosen(*rep, cfg.backend_fail, device, budget);
  const bool asked = !g.has_override && (!cfg.backend.empty() || (!cfg.gpu.empty() && !cfg.gpu_off));
  log_report(*rep, asked, be != nullptr);
  g.rep = rep.get();
  g.reports.push_back(std::move(rep));
  g.backend = be.release();  // never destroyed
  g.opened.clear();
  if (g.backend) {
    g.backends.push_back(g.backend);
    const int resolved = device >= 0 ? device : std::max(0, g.rep->plugins[size_t(g.rep->chosen)].default_device);
    g.opened.push_back({resolved, budget, g.backend});
  }
  g.ready = true;
}

}  // namespace

std::unique_ptr<ComputeBackend> open_chosen(BackendReport& rep, const std::string& fail_spec, int device,
                                            uint64_t budget) {
  for (size_t rank = 0; rep.chosen >= 0; choose_candidate(rep, ++rank)) {
    PluginRecord& rec = rep.plugins[size_t(rep.chosen)];
    fish_backend_config cfg{};
    cfg.struct_size = sizeof cfg;
    cfg.device_index = device;
    cfg.memory_budget = budget;
    std::string err;
    auto be = PluginBackend::create(rec.lib, rec.file_name, cfg, &err);
    if (be && !be->open()) err = "the device did not open: " + be->last_error();
    if (!be || !err.empty()) {
      rec.reason = "chosen (" + rec.reason + ") but failed: " + err;
      host_log(FISH_LOG_WARN, "loader", rec.path + ": " + rec.reason);
      continue;  // be (if any) is destroyed here: nothing of it is in use
    }
    if (!fail_spec.empty() && !be->set_fail_spec(fail_spec, &err)) host_log(FISH_LOG_ERROR, "loader", err);
    host_log(FISH_LOG_INFO, "loader", rec.file_name + ": " + be->status());
    return be;
  }
  // Every candidate failed (or there was none): say why, naming the failures.
  std::string failed;
  for (int i : rep.candidates) failed += (failed.empty() ? "" : "; ") + rep.plugins[size_t(i)].file_name + ": " + rep.plugins[size_t(i)].reason;
  if (!failed.empty()) rep.reason = "no plugin opened (" + failed + "): CPU only";
  return nullptr;
}

ComputeBackend* get() {
  Registry& g = reg();
  std::lock_guard<std::mutex> lk(g.mu);
  init_locked(g);
  return g.backend;
}

const BackendReport& report() {
  Registry& g = reg();
  std::lock_guard<std::mutex> lk(g.mu);
  init_locked(g);
  return *g.rep;
}

std::string reason() { return report().reason; }

std::vector<ComputeBackend*> open_devices(const std::vector<int>& devices, const std::vector<uint64_t>& budgets_mb,
                                          std::string* err, std::vector<int>* used) {
  err->clear();
  Registry& g = reg();
  std::lock_guard<std::mutex> lk(g.mu);
  init_locked(g);
  if (!g.backend) {
    // CPU only (the report says why); an error when devices were asked for and
    // a plugin was there but did not open them (FISH_GPU_DEVICE=5 on one device).
    if (!devices.empty() && !g.rep->candidates.empty()) *err = "FISH_GPU_DEVICE: " + g.rep->reason;
    return {};
  }
  const PluginRecord& rec = g.rep->plugins[size_t(g.rep->chosen)];
  std::vector<int> list = devices;
  if (list.empty()) list.push_back(g.opened[0].device);
  if (used) *used = list;
  auto text = [](const auto& v) {
    std::string s;
    for (const auto& x : v) {
      if (!s.empty()) s += ',';
      s += std::to_string(x);
    }
    return s;
  };
  if (budgets_mb.size() > 1 && budgets_mb.size() != list.size()) {
    *err = "FISH_VRAM_BUDGET_MB=" + text(budgets_mb) + " has " + std::to_string(budgets_mb.size()) +
           " budgets for " + std::to_string(list.size()) + " devices (FISH_GPU_DEVICE=" + text(list) +
           "): give one for every device, or one for all";
    return {};
  }
  std::vector<ComputeBackend*> out;
  std::vector<bool> taken(g.opened.size(), false);
  for (size_t k = 0; k < list.size(); ++k) {
    const int d = list[k];
    if (d < 0 || size_t(d) >= rec.devices.size()) {
      std::string names;
      for (size_t i = 0; i < rec.devices.size(); ++i)
        names += (i ? ", " : "") + std::to_string(i) + ": " + rec.devices[i].name;
      *err = "FISH_GPU_DEVICE=" + text(list) + ": device " + std::to_string(d) + " does not exist (fish_" +
             rec.file_name + " has " + std::to_string(rec.devices.size()) + " device" +
             (rec.devices.size() == 1 ? "" : "s") + (names.empty() ? "" : ": " + names) + "; see fish devices)";
      return {};
    }
    const uint64_t budget = budgets_mb.empty() ? 0 : (budgets_mb.size() == 1 ? budgets_mb[0] : budgets_mb[k]) << 20;
    // An opened backend of this device and budget not yet given to this load,
    // else a new one (the same device twice: two backends, two logical devices).
    size_t i = 0;
    while (i < g.opened.size() && (taken[i] || g.opened[i].device != d || g.opened[i].budget != budget)) ++i;
    if (i == g.opened.size()) {
      fish_backend_config cfg{};
      cfg.struct_size = sizeof cfg;
      cfg.device_index = d;
      cfg.memory_budget = budget;
      std::string why;
      auto be = PluginBackend::create(rec.lib, rec.file_name, cfg, &why);
      if (be && !be->open()) why = be->last_error();
      if (!be || !why.empty()) {
        *err = "FISH_GPU_DEVICE=" + text(list) + ": device " + std::to_string(d) + " of fish_" + rec.file_name +
               " did not open: " + why;
        return {};
      }
      host_log(FISH_LOG_INFO, "loader", rec.file_name + " device " + std::to_string(d) + ": " + be->status());
      g.backends.push_back(be.release());  // never destroyed
      g.opened.push_back({d, budget, g.backends.back()});
      taken.push_back(false);
    }
    taken[i] = true;
    out.push_back(g.opened[i].be);
  }
  return out;
}

void use_backend(const std::string& path, const EngineConfig& config) {
  Registry& g = reg();
  std::lock_guard<std::mutex> lk(g.mu);
  g.has_override = !path.empty();
  g.override_path = path;
  g.config = config;
  g.has_config = true;
  g.ready = false;
  g.backend = nullptr;  // the old one (if any) stays alive for whoever holds it
  g.opened.clear();
}

void use_plugin_file(const std::string& path) { use_backend(path, EngineConfig::process()); }

}  // namespace fish::backend
