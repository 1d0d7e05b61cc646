#include "model/backend_access.h"

#include "backend/backend.h"

namespace fish {

ComputeBackend* acquire_backend() { return backend::get(); }

std::vector<ComputeBackend*> acquire_backends(const std::vector<int>& devices, const std::vector<uint64_t>& budgets_mb,
                                              std::string* err, std::vector<int>* used) {
  return backend::open_devices(devices, budgets_mb, err, used);
}

}  // namespace fish
