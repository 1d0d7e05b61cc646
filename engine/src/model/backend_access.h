// How the model reaches the process's compute backend (the plugin chosen by
// discovery, or none: CPU only).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace fish {

class ComputeBackend;

// The chosen backend, loading plugins on first use; nullptr when there is none.
ComputeBackend* acquire_backend();
// One backend per listed device (backend.h open_devices); empty: CPU only, or
// *err says why the devices asked for cannot be used.
std::vector<ComputeBackend*> acquire_backends(const std::vector<int>& devices, const std::vector<uint64_t>& budgets_mb,
                                              std::string* err, std::vector<int>* used);

}  // namespace fish
