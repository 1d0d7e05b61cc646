#include "model/backend_access.h"

#include "backend/backend.h"

namespace fish {

ComputeBackend* acquire_backend() { return backend::get(); }

}  // namespace fish
