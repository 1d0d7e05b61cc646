// The backend area's environment knobs, read in this one place:
//   FISH_GPU=0|off|false|no   load no plugin (any other value is left to the plugins,
//                             e.g. FISH_GPU=cpu lets fish_vulkan use a CPU driver)
//   FISH_BACKEND=<name>       use the plugin file fish_<name> and no other
//   FISH_GPU_VERBOSE=1|2      loader decisions and plugin warnings (2: everything) on stderr
//   FISH_BACKEND_FAIL=<call>:<n>[,...]  test-only: the n-th call of that ComputeBackend
//                             method and every later one fail (see plugin_abi/README.md)
#pragma once
#include <string>

namespace fish::backend {

struct BackendEnv {
  bool gpu_off = false;       // FISH_GPU says off
  std::string gpu;            // FISH_GPU verbatim ("" when unset)
  std::string backend;        // FISH_BACKEND ("" when unset)
  int verbose = 0;            // FISH_GPU_VERBOSE
  std::string fail;           // FISH_BACKEND_FAIL verbatim
};

// Reads the variables now (not cached: tests change them between calls).
BackendEnv read_backend_env();

// true for 0/off/false/no (any case).
bool is_off_value(const std::string& v);

}  // namespace fish::backend
