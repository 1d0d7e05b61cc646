#include "backend/backend_env.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>

namespace fish::backend {

static std::string env_or_empty(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::string(v) : std::string();
}

bool is_off_value(const std::string& v) {
  std::string s = v;
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  return s == "0" || s == "off" || s == "false" || s == "no";
}

BackendEnv read_backend_env() {
  BackendEnv e;
  e.gpu = env_or_empty("FISH_GPU");
  e.gpu_off = !e.gpu.empty() && is_off_value(e.gpu);
  e.backend = env_or_empty("FISH_BACKEND");
  const std::string v = env_or_empty("FISH_GPU_VERBOSE");
  e.verbose = v.empty() ? 0 : std::max(0, std::atoi(v.c_str()));
  if (!v.empty() && e.verbose == 0 && !is_off_value(v)) e.verbose = 1;  // "yes", "on"
  e.fail = env_or_empty("FISH_BACKEND_FAIL");
  return e;
}

}  // namespace fish::backend
