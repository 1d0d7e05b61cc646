// The process-wide backend: discovery, then create + open the best candidate.
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
  bool ready = false;
  const BackendReport* rep = nullptr;
  ComputeBackend* backend = nullptr;
  std::string override_path;
  bool has_override = false;
  // Reports and backends are kept for the life of the process: callers may
  // hold references to older ones after use_plugin_file(). (Reachable from
  // here, so leak checkers see them as kept, not lost.)
  std::vector<std::unique_ptr<BackendReport>> reports;
  std::vector<ComputeBackend*> backends;
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
  for (const auto& r : rep.plugins) {
    // A plugin refusing its configuration (a mistyped FISH_VK_* value) is the
    // user's to fix: a warning, shown without FISH_GPU_VERBOSE.
    if (r.config_error) host_log(FISH_LOG_WARN, "loader", r.path + ": " + r.reason + " - the plugin is not used");
    else host_log(FISH_LOG_INFO, "loader", r.path + ": " + record_state(r) + (r.reason.empty() ? "" : " - " + r.reason));
  }
  host_log(FISH_LOG_INFO, "loader", rep.reason);
}

// Caller holds mu.
void init_locked(Registry& g) {
  if (g.ready) return;
  const BackendEnv env = read_backend_env();
  set_log_verbosity(env.verbose);
  DiscoveryOptions opts;
  if (g.has_override) {
    opts.files.push_back(g.override_path);
    std::string name;
    const std::filesystem::path p(g.override_path);
    opts.only = plugin_name_from_file(p.filename().string(), &name) ? name : p.stem().string();
  } else {
    opts.folders = plugin_folders();
    opts.disabled = env.gpu_off;
    opts.disabled_by = env.gpu;
    opts.only = env.backend;
  }
  auto rep = std::make_unique<BackendReport>(discover(opts));
  std::unique_ptr<ComputeBackend> be = open_chosen(*rep, env.fail);
  log_report(*rep);
  g.rep = rep.get();
  g.reports.push_back(std::move(rep));
  g.backend = be.release();  // never destroyed
  if (g.backend) g.backends.push_back(g.backend);
  g.ready = true;
}

}  // namespace

std::unique_ptr<ComputeBackend> open_chosen(BackendReport& rep, const std::string& fail_spec) {
  for (size_t rank = 0; rep.chosen >= 0; choose_candidate(rep, ++rank)) {
    PluginRecord& rec = rep.plugins[size_t(rep.chosen)];
    fish_backend_config cfg{};
    cfg.struct_size = sizeof cfg;
    cfg.device_index = -1;
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

void use_plugin_file(const std::string& path) {
  Registry& g = reg();
  std::lock_guard<std::mutex> lk(g.mu);
  g.has_override = !path.empty();
  g.override_path = path;
  g.ready = false;
  g.backend = nullptr;  // the old one (if any) stays alive for whoever holds it
}

}  // namespace fish::backend
