#include "model/backend_access.h"

namespace fish {

// Wired to plugin discovery once the loader lands (engine/src/backend/).
ComputeBackend* acquire_backend() { return nullptr; }

}  // namespace fish
