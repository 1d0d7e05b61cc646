// The process-wide backend: discovery once, then create + open the chosen plugin.
#include <filesystem>
#include <memory>
#include <mutex>
#include <vector>

#include "backend/backend.h"
#include "backend/backend_env.h"
#include "backend/host_services.h"
#include "backend/plugin_adapter.h"

namespace fish::backend {

namespace {

struct Registry {
  std::mutex mu;
  bool discovered = false;
  bool opened = false;
  const BackendReport* rep = nullptr;
  ComputeBackend* backend = nullptr;
  std::string reason;
  std::string override_path;
  bool has_override = false;
  // Reports and backends are kept for the life of the process: callers may
  // hold references to older ones after use_plugin_file().
  std::vector<std::unique_ptr<BackendReport>> reports;
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

void log_report(const BackendReport& rep) {
  for (const auto& r : rep.plugins)
    host_log(FISH_LOG_INFO, "loader", r.path + ": " + record_state(r) + (r.reason.empty() ? "" : " - " + r.reason));
  host_log(FISH_LOG_INFO, "loader", rep.reason);
}

// Caller holds mu.
void discover_locked(Registry& g) {
  if (g.discovered) return;
  const BackendEnv env = read_backend_env();
  set_log_verbosity(env.verbose);
  DiscoveryOptions opts;
  if (g.has_override) {
    opts.files.push_back(g.override_path);
    std::string name;
    plugin_name_from_file(std::filesystem::path(g.override_path).filename().string(), &name);
    opts.only = name.empty() ? std::filesystem::path(g.override_path).stem().string() : name;
  } else {
    opts.folders = plugin_folders();
    opts.disabled = env.gpu_off;
    opts.disabled_by = env.gpu;
    opts.only = env.backend;
  }
  auto rep = std::make_unique<BackendReport>(discover(opts));
  g.rep = rep.get();
  g.reports.push_back(std::move(rep));
  g.reason = g.rep->reason;
  g.discovered = true;
  log_report(*g.rep);
}

void open_locked(Registry& g) {
  discover_locked(g);
  if (g.opened) return;
  g.opened = true;
  if (g.rep->chosen < 0) return;
  const PluginRecord& rec = g.rep->plugins[size_t(g.rep->chosen)];
  fish_backend_config cfg{};
  cfg.struct_size = sizeof cfg;
  cfg.device_index = -1;
  std::string err;
  auto be = PluginBackend::create(rec.lib, rec.file_name, cfg, &err);
  if (!be) {
    g.reason = rec.file_name + ": " + err + "; CPU only";
    host_log(FISH_LOG_WARN, "loader", g.reason);
    return;
  }
  const BackendEnv env = read_backend_env();
  if (!env.fail.empty() && !be->set_fail_spec(env.fail, &err)) host_log(FISH_LOG_ERROR, "loader", err);
  if (!be->open()) {
    g.reason = rec.file_name + ": the device did not open (" + be->last_error() + "); CPU only";
    host_log(FISH_LOG_WARN, "loader", g.reason);
    return;  // be is destroyed: nothing of it is in use
  }
  host_log(FISH_LOG_INFO, "loader", rec.file_name + ": " + be->status());
  g.backend = be.release();  // never destroyed
}

}  // namespace

ComputeBackend* get() {
  Registry& g = reg();
  std::lock_guard<std::mutex> lk(g.mu);
  open_locked(g);
  return g.backend;
}

const BackendReport& report() {
  Registry& g = reg();
  std::lock_guard<std::mutex> lk(g.mu);
  discover_locked(g);
  return *g.rep;
}

std::string reason() {
  Registry& g = reg();
  std::lock_guard<std::mutex> lk(g.mu);
  discover_locked(g);
  return g.reason;
}

void use_plugin_file(const std::string& path) {
  Registry& g = reg();
  std::lock_guard<std::mutex> lk(g.mu);
  g.has_override = !path.empty();
  g.override_path = path;
  g.discovered = false;
  g.opened = false;
  g.backend = nullptr;  // the old one (if any) stays alive for whoever holds it
}

}  // namespace fish::backend
