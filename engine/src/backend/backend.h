// The process's compute backend: the one place model code and the C API get it.
//
//   ComputeBackend* be = fish::backend::get();   // nullptr: CPU only
//
// The first call discovers the plugins (plugin_loader.h), picks one
// (FISH_GPU / FISH_BACKEND / scores), creates its backend and opens the device;
// later calls return the same object. Thread-safe. The backend is never
// destroyed (it is leaked at exit on purpose, see plugin_abi/README.md).
#pragma once
#include <string>

#include "backend/compute_backend.h"
#include "backend/plugin_loader.h"

namespace fish::backend {

ComputeBackend* get();

// The discovery report (runs discovery, without opening the device, if it has
// not run yet). The object lives for the whole process.
const BackendReport& report();

// Why the engine uses the backend it uses, or why it is CPU only (after get():
// includes a failure to open the device).
std::string reason();

// Tests and `fish plugin-test`: from now on get() uses exactly this plugin file
// (FISH_GPU and FISH_BACKEND are ignored, the folders are not searched), or, for
// "", the normal discovery again. Models loaded earlier keep the backend they
// hold (backends are never destroyed).
void use_plugin_file(const std::string& path);

}  // namespace fish::backend
