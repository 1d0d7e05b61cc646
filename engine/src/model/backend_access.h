// How the model reaches the process's compute backend (the plugin chosen by
// discovery, or none: CPU only).
#pragma once

namespace fish {

class ComputeBackend;

// The chosen backend, loading plugins on first use; nullptr when there is none.
ComputeBackend* acquire_backend();

}  // namespace fish
