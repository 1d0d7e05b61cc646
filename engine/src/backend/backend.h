// The process's compute backend: the one place model code and the C API get it.
//
//   ComputeBackend* be = fish::backend::get();   // nullptr: CPU only
//
// The first call discovers the plugins (plugin_loader.h), ranks them
// (FISH_GPU / FISH_BACKEND / scores), creates the best one's backend and opens
// its device, moving on to the next candidate when that fails; later calls
// return the same object. Thread-safe. The backend is never destroyed (it is
// leaked at exit on purpose, see plugin_abi/README.md).
#pragma once
#include <memory>
#include <string>

#include "backend/compute_backend.h"
#include "backend/plugin_loader.h"

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
std::unique_ptr<ComputeBackend> open_chosen(BackendReport& rep, const std::string& fail_spec = "");

// Tests and `fish plugin-test`: from now on get() uses exactly this plugin file
// (FISH_GPU and FISH_BACKEND are ignored, the folders are not searched), or, for
// "", the normal discovery again. Models loaded earlier keep the backend they
// hold (backends are never destroyed).
void use_plugin_file(const std::string& path);

}  // namespace fish::backend
