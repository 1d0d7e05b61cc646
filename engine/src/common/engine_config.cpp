// The strict parser of the engine's FISH_* variables (see engine_config.h).
#include "common/engine_config.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#if defined(_WIN32)
#define FISH_ENVIRON _environ
#else
extern char** environ;
#define FISH_ENVIRON environ
#endif

namespace fish {
namespace {

std::string lower(std::string s) {
  for (char& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// A decimal integer in [lo, hi], or false.
bool integer(const std::string& s, long long lo, long long hi, long long* out) {
  if (s.empty() || s.size() > 18) return false;
  for (char c : s)
    if (c < '0' || c > '9') return false;
  const long long v = std::strtoll(s.c_str(), nullptr, 10);
  if (v < lo || v > hi) return false;
  *out = v;
  return true;
}

// 0|off|false|no or 1|on|true|yes, any case.
bool boolean(const std::string& v, bool* out) {
  const std::string s = lower(v);
  if (s == "0" || s == "off" || s == "false" || s == "no") *out = false;
  else if (s == "1" || s == "on" || s == "true" || s == "yes") *out = true;
  else return false;
  return true;
}

// A plugin name as it appears in fish_<name>: letters, digits, '_' and '-'.
bool plugin_name(const std::string& s) {
  if (s.empty() || s.size() > 200) return false;
  for (char c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-')) return false;
  return true;
}

// Comma-separated items (empty items skipped); false when there are none.
bool comma_list(const std::string& s, std::vector<std::string>* out) {
  std::vector<std::string> items;
  size_t at = 0;
  while (at <= s.size()) {
    const size_t comma = s.find(',', at);
    const std::string item = s.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
    if (!item.empty()) items.push_back(item);
    at = comma == std::string::npos ? s.size() + 1 : comma + 1;
  }
  if (items.empty()) return false;
  *out = std::move(items);
  return true;
}

// Comma-separated items, none of them empty ("0,,1" and "0," are refused: a
// list of devices or proportions with a hole in it is a typo, not a default).
bool strict_list(const std::string& s, std::vector<std::string>* out) {
  std::vector<std::string> items;
  size_t at = 0;
  for (;;) {
    const size_t comma = s.find(',', at);
    items.push_back(s.substr(at, comma == std::string::npos ? std::string::npos : comma - at));
    if (items.back().empty()) return false;
    if (comma == std::string::npos) break;
    at = comma + 1;
  }
  *out = std::move(items);
  return true;
}

using Setter = std::function<bool(const std::string&, EngineConfig&)>;

// One variable: what it accepts and its default (for the warning), and how it sets the config.
struct Variable {
  const char* name;
  const char* accepts;
  const char* default_text;
  Setter set;
};

Setter flag(bool EngineConfig::*field) {
  return [=](const std::string& v, EngineConfig& c) { return boolean(v, &(c.*field)); };
}
Setter number(int EngineConfig::*field, long long lo, long long hi) {
  return [=](const std::string& v, EngineConfig& c) {
    long long n = 0;
    if (!integer(v, lo, hi, &n)) return false;
    c.*field = int(n);
    return true;
  };
}

constexpr const char* kOnOff = "0, off, false, no, 1, on, true or yes";

const std::vector<Variable>& variables() {
  static const std::vector<Variable> vars = {
      {"FISH_GPU", "0, off, false, no, 1, on, true, yes or cpu", "on",
       [](const std::string& v, EngineConfig& c) {
         bool on = true;
         if (lower(v) != "cpu" && !boolean(v, &on)) return false;
         c.gpu_off = !on;
         c.gpu = v;
         return true;
       }},
      {"FISH_BACKEND", "a plugin name (letters, digits, '_' and '-': fish_<name>)", "the best plugin",
       [](const std::string& v, EngineConfig& c) {
         if (!plugin_name(v)) return false;
         c.backend = v;
         return true;
       }},
      {"FISH_GPU_LAYERS", "a number of layers (0, 1, ...)", "as many as fit",
       number(&EngineConfig::gpu_layers, 0, 1 << 20)},
      {"FISH_GPU_DEVICE", "a device index or a comma list of them (0,1; 0,0: one device opened twice)",
       "the plugin's best device",
       [](const std::string& v, EngineConfig& c) {
         std::vector<std::string> items;
         if (!strict_list(v, &items) || items.size() > 64) return false;
         std::vector<int> ids;
         for (const std::string& item : items) {
           long long n = 0;
           if (!integer(item, 0, 1 << 20, &n)) return false;
           ids.push_back(int(n));
         }
         c.gpu_devices = std::move(ids);
         return true;
       }},
      {"FISH_TENSOR_SPLIT", "a comma list of proportions >= 0, one per device, not all 0 (3,1)",
       "by each device's free memory",
       [](const std::string& v, EngineConfig& c) {
         std::vector<std::string> items;
         if (!strict_list(v, &items) || items.size() > 64) return false;
         std::vector<double> parts;
         double sum = 0;
         for (const std::string& item : items) {
           if (item.size() > 24 || item.find_first_not_of("0123456789.") != std::string::npos) return false;
           char* end = nullptr;
           errno = 0;
           const double x = std::strtod(item.c_str(), &end);
           if (errno || !end || *end || !std::isfinite(x) || x < 0) return false;
           parts.push_back(x);
           sum += x;
         }
         if (!(sum > 0)) return false;
         c.tensor_split = std::move(parts);
         return true;
       }},
      {"FISH_VRAM_BUDGET_MB", "a positive number of MB, or a comma list of them (one per device)",
       "the plugin's own rule",
       [](const std::string& v, EngineConfig& c) {
         std::vector<std::string> items;
         if (!strict_list(v, &items) || items.size() > 64) return false;
         std::vector<uint64_t> mb;
         for (const std::string& item : items) {
           long long n = 0;
           if (!integer(item, 1, 1ll << 40, &n)) return false;
           mb.push_back(uint64_t(n));
         }
         c.vram_budget_mb = std::move(mb);
         return true;
       }},
      {"FISH_GPU_SPAN", kOnOff, "on", flag(&EngineConfig::gpu_span)},
      {"FISH_GPU_SPAN_HEAD", kOnOff, "on", flag(&EngineConfig::gpu_span_head)},
      {"FISH_GPU_LOGITS_VIEW", kOnOff, "on", flag(&EngineConfig::gpu_logits_view)},
      {"FISH_GPU_VERBOSE", "0, 1 or 2", "0", number(&EngineConfig::gpu_verbose, 0, 2)},
      {"FISH_GPU_REQUANT", kRequantModeValues, "0",
       [](const std::string& v, EngineConfig& c) { return parse_requant_mode(lower(v), &c.gpu_requant); }},
      {"FISH_GPU_REQUANT_CACHE", kOnOff, "on", flag(&EngineConfig::gpu_requant_cache)},
      {"FISH_CPU_REPACK", kOnOff, "on", flag(&EngineConfig::cpu_repack)},
      {"FISH_CPU_KERNELS", "scalar, avx2, avxvnni or avx512", "the widest this CPU runs",
       [](const std::string& v, EngineConfig& c) {
         if (v == "scalar") c.cpu_kernels = CpuKernels::Scalar;
         else if (v == "avx2") c.cpu_kernels = CpuKernels::Avx2;
         else if (v == "avxvnni") c.cpu_kernels = CpuKernels::AvxVnni;
         else if (v == "avx512") c.cpu_kernels = CpuKernels::Avx512;
         else return false;
         return true;
       }},
      {"FISH_PLUGIN_DENY", "a comma list of plugin names (fish_<name>)", "none",
       [](const std::string& v, EngineConfig& c) {
         std::vector<std::string> names;
         if (!comma_list(v, &names) || !std::all_of(names.begin(), names.end(), plugin_name)) return false;
         c.plugin_deny = std::move(names);
         return true;
       }},
      {"FISH_PLUGIN_ISOLATE", kOnOff, "on", flag(&EngineConfig::plugin_isolate)},
      {"FISH_PLUGIN_TIMEOUT", "a number of seconds from 0.1 to 3600 (e.g. 10 or 0.5)", "10",
       [](const std::string& v, EngineConfig& c) {
         if (v.empty() || v.size() > 12 || v.find_first_not_of("0123456789.") != std::string::npos) return false;
         char* end = nullptr;
         errno = 0;
         const double s = std::strtod(v.c_str(), &end);
         if (errno || !end || *end || !std::isfinite(s) || s < 0.1 || s > 3600) return false;
         c.plugin_timeout_s = s;
         return true;
       }},
      {"FISH_BACKEND_FAIL", "a comma list of CALL or CALL:N (a backend method, N >= 1)", "none",
       [](const std::string& v, EngineConfig& c) {
         std::vector<std::string> items;
         if (!comma_list(v, &items)) return false;
         for (const std::string& item : items) {
           const size_t colon = item.find(':');
           long long n = 0;
           if (!plugin_name(item.substr(0, colon))) return false;
           if (colon != std::string::npos && !integer(item.substr(colon + 1), 1, 1ll << 40, &n)) return false;
         }
         c.backend_fail = v;
         return true;
       }},
      {"FISH_TEST_SPAN_FAIL_AT", "a position (0, 1, ...), optionally @ the device's place in FISH_GPU_DEVICE (12@1)",
       "never",
       [](const std::string& v, EngineConfig& c) {
         const size_t at = v.find('@');
         long long pos = 0, dev = -1;
         if (!integer(v.substr(0, at), 0, 1 << 30, &pos)) return false;
         if (at != std::string::npos && !integer(v.substr(at + 1), 0, 63, &dev)) return false;
         c.test_span_fail_at = int(pos);
         c.test_span_fail_device = int(dev);
         return true;
       }},
      {"FISH_TEST_REQUANT_HOST_EXPERTS", kOnOff, "off", flag(&EngineConfig::test_requant_host_experts)},
  };
  return vars;
}

const Variable* find(const std::string& name) {
  for (const Variable& v : variables())
    if (name == v.name) return &v;
  return nullptr;
}

std::string known_names() {
  std::string s;
  for (const Variable& v : variables()) s += std::string(s.empty() ? "" : ", ") + v.name;
  return s;
}

std::string refusal(const Variable& v, const std::string& value) {
  return std::string(v.name) + "='" + value + "' is not " + v.accepts;
}

bool engine_prefix(const std::string& name) {
  for (const char* p : {"FISH_CPU_", "FISH_PLUGIN_", "FISH_BACKEND_"})
    if (name.rfind(p, 0) == 0) return true;
  return false;
}

}  // namespace

EngineConfig EngineConfig::parse(const std::map<std::string, std::string>& vars, const WarnSink& warn) {
  EngineConfig c;
  for (const auto& [name, value] : vars) {
    const Variable* v = find(name);
    if (!v) {
      if (engine_prefix(name) && warn) warn(name + " is not a fish variable (the engine reads " + known_names() + "); ignored");
      continue;
    }
    if (value.empty()) continue;  // set but empty: as if unset
    EngineConfig trial = c;       // a refused value leaves nothing half set
    if (v->set(value, trial)) c = std::move(trial);
    else if (warn) warn(refusal(*v, value) + "; using the default (" + v->default_text + ")");
  }
  return c;
}

EngineConfig EngineConfig::from_env(const WarnSink& warn) {
  std::map<std::string, std::string> vars;
  for (char** e = FISH_ENVIRON; e && *e; ++e) {
    const char* eq = std::strchr(*e, '=');
    if (eq && std::strncmp(*e, "FISH_", 5) == 0) vars[std::string(*e, size_t(eq - *e))] = eq + 1;
  }
  return parse(vars, warn);
}

const EngineConfig& EngineConfig::process() {
  // Leaked: plugins and late destructors may still ask during exit.
  static const EngineConfig* c = new EngineConfig(from_env([](const std::string& m) {
    std::fprintf(stderr, "fish: warning: %s\n", m.c_str());
  }));
  return *c;
}

EngineConfig EngineConfig::with(const std::string& items, std::string* err) const {
  EngineConfig c = *this;
  size_t at = 0;
  const char* space = " \t\r\n";
  while ((at = items.find_first_not_of(space, at)) != std::string::npos) {
    const size_t end = std::min(items.find_first_of(space, at), items.size());
    const std::string item = items.substr(at, end - at);
    at = end;
    const size_t eq = item.find('=');
    const std::string name = item.substr(0, eq);
    const Variable* v = find(name);
    std::string why;
    if (eq == std::string::npos) why = "'" + item + "' is not NAME=VALUE";
    else if (!v) why = name + " is not an engine variable (the engine reads " + known_names() + ")";
    else if (eq + 1 < item.size() && !v->set(item.substr(eq + 1), c)) why = refusal(*v, item.substr(eq + 1));
    if (!why.empty()) {
      if (err) *err = why;
      return *this;
    }
  }
  if (err) err->clear();
  return c;
}

std::vector<std::string> EngineConfig::variable_names() {
  std::vector<std::string> names;
  for (const Variable& v : variables()) names.push_back(v.name);
  return names;
}

}  // namespace fish
