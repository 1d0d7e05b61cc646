// The process's compute backend: the one place model code and the C API get it.
//
//   ComputeBackend* be = fish::backend::get();   // nullptr: CPU only
//
// The first call discovers the plugins (plugin_loader.h), ranks them
// (FISH_GPU / FISH_BACKEND / FISH_PLUGIN_DENY / scores), creates the best
// one's backend and opens its device, moving on to the next candidate when
// that fails; later calls return the same object. Thread-safe. The backend is
// never destroyed (it is leaked at exit on purpose, see plugin_abi/README.md).
// The variables come from EngineConfig::process(), or from the configuration
// last given to use_backend().
#pragma once
#include <memory>
#include <string>

#include "backend/compute_backend.h"
#include "backend/plugin_loader.h"
#include "common/engine_config.h"

namespace fish::backend {

ComputeBackend* get();

// The discovery report, final once get() has run (get() is run by it). The
// object lives for the whole process.
const BackendReport& report();

// Why the engine uses the backend it uses, or why it is CPU only.
std::string reason();

// Creates and opens the backend of rep.chosen; when that fails (backend_create
// or open), records why and tries the next candidate. nullptr: CPU only, with
// rep.reason saying why. fail_spec: FISH_BACKEND_FAIL for the adapter.
// device / budget: fish_backend_config's device_index (-1: the plugin's
// default) and memory_budget (bytes, 0: the plugin's own rule).
std::unique_ptr<ComputeBackend> open_chosen(BackendReport& rep, const std::string& fail_spec = "", int device = -1,
                                            uint64_t budget = 0);

// The backends of one model load's devices: one per entry of `devices`
// (indices into the chosen plugin's devices, as `fish devices` lists them;
// empty: the process's device alone), each with budgets_mb[k] MB (one value:
// every device's; none: the plugin's own rule). The same index twice gives
// two backends of that device (two logical devices). Backends live for the
// process: a later load asking for the same device and budget gets the same
// one, and get() is the first one opened. Empty without *err: CPU only; empty
// with *err: a device that does not exist or did not open, or budgets that do
// not match the devices (the message names the variable and the devices there are).
// used (optional): the device index of each backend returned.
std::vector<ComputeBackend*> open_devices(const std::vector<int>& devices, const std::vector<uint64_t>& budgets_mb,
                                          std::string* err, std::vector<int>* used = nullptr);

// From now on get() discovers again with `config` (its FISH_GPU, FISH_BACKEND,
// FISH_PLUGIN_*, FISH_GPU_VERBOSE and FISH_BACKEND_FAIL), using exactly the
// plugin file `path` when it is not "" (then FISH_GPU, FISH_BACKEND and
// FISH_PLUGIN_DENY are ignored and the folders are not searched). For tests and
// `fish plugin-test`. Models loaded earlier keep the backend they hold
// (backends are never destroyed).
void use_backend(const std::string& path, const EngineConfig& config);
// use_backend(path, EngineConfig::process()).
void use_plugin_file(const std::string& path);

}  // namespace fish::backend
