// The strict parser of fish_vulkan's FISH_* variables (see vk_config.h).
#include "vk_config.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <vector>

#if defined(_WIN32)
#define FISH_ENVIRON _environ
#else
extern char** environ;
#define FISH_ENVIRON environ
#endif

namespace fish::vk {
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

// One variable: what it accepts (for the message) and how it sets the config.
struct Variable {
  const char* name;
  const char* accepts;
  std::function<bool(const std::string&, VkConfig&)> set;
};

// A number in [lo, hi] into an int field.
std::function<bool(const std::string&, VkConfig&)> number(int VkConfig::*field, long long lo, long long hi) {
  return [=](const std::string& v, VkConfig& c) {
    long long n = 0;
    if (!integer(v, lo, hi, &n)) return false;
    c.*field = int(n);
    return true;
  };
}
// 0 or 1 into a bool field.
std::function<bool(const std::string&, VkConfig&)> flag(bool VkConfig::*field) {
  return [=](const std::string& v, VkConfig& c) {
    if (v != "0" && v != "1") return false;
    c.*field = v == "1";
    return true;
  };
}
// One of the listed numbers into an int field.
std::function<bool(const std::string&, VkConfig&)> one_of(int VkConfig::*field, std::vector<int> values) {
  return [=](const std::string& v, VkConfig& c) {
    long long n = 0;
    if (!integer(v, 0, 1 << 20, &n) || std::find(values.begin(), values.end(), int(n)) == values.end()) return false;
    c.*field = int(n);
    return true;
  };
}

const std::vector<Variable>& variables() {
  static const std::vector<Variable> vars = {
      {"FISH_GPU", "0, off, false, no, 1, on, true, yes or cpu",
       [](const std::string& v, VkConfig& c) {
         const std::string s = lower(v);
         if (s == "0" || s == "off" || s == "false" || s == "no") c.gpu = VkConfig::GpuMode::Off;
         else if (s == "cpu") c.gpu = VkConfig::GpuMode::Cpu;
         else if (s == "1" || s == "on" || s == "true" || s == "yes") c.gpu = VkConfig::GpuMode::Default;
         else return false;
         return true;
       }},
      // A list (0,1) is the engine's: one backend per listed device, each
      // created with its index (fish devices' numbering); the plugin's own
      // choice then stays automatic (a Vulkan index forced here could name an
      // unusable device, lavapipe before the GPU, and leave the plugin unchosen).
      {"FISH_GPU_DEVICE", "a device index (0, 1, ...) or a comma list of them",
       [](const std::string& v, VkConfig& c) {
         long long n = 0, first = -1;
         for (size_t at = 0;;) {
           const size_t comma = v.find(',', at);
           if (!integer(v.substr(at, comma == std::string::npos ? std::string::npos : comma - at), 0, 1 << 20, &n))
             return false;
           if (first < 0) first = n;
           if (comma == std::string::npos) break;
           at = comma + 1;
         }
         c.device_index = v.find(',') == std::string::npos ? int(first) : -1;
         return true;
       }},
      {"FISH_GPU_VERBOSE", "0, 1 or 2", number(&VkConfig::verbose, 0, 2)},
      {"FISH_GPU_PROFILE", "0, 1 or 2", number(&VkConfig::profile_level, 0, 2)},
      // A list (one per device of FISH_GPU_DEVICE) is the engine's, which
      // passes each backend its own (fish_backend_config.memory_budget).
      {"FISH_VRAM_BUDGET_MB", "a positive number of MB or a comma list of them",
       [](const std::string& v, VkConfig& c) {
         long long mb = 0, first = -1;
         for (size_t at = 0;;) {
           const size_t comma = v.find(',', at);
           if (!integer(v.substr(at, comma == std::string::npos ? std::string::npos : comma - at), 1, int64_t(1) << 40, &mb))
             return false;
           if (first < 0) first = mb;
           if (comma == std::string::npos) break;
           at = comma + 1;
         }
         c.budget_bytes = uint64_t(first) << 20;
         return true;
       }},
      {"FISH_VK_QUEUE", "compute or universal",
       [](const std::string& v, VkConfig& c) {
         const std::string s = lower(v);
         if (s != "compute" && s != "universal") return false;
         c.queue_universal = s == "universal";
         return true;
       }},
      {"FISH_VK_VALIDATE", "0 or 1", flag(&VkConfig::validate)},
      {"FISH_VK_SPIN", "0 or 1", flag(&VkConfig::spin)},
      {"FISH_VK_INT8", "0 or 1", number(&VkConfig::int8, 0, 1)},
      {"FISH_VK_COOPMAT", "0 or 1", flag(&VkConfig::coopmat)},
      {"FISH_VK_SPAN_QFOLD", "0 (Q8_K / Q8_0 rows from quantise steps) or 15 (B32 rows written by their producers)",
       [](const std::string& v, VkConfig& c) {
         if (v != "0" && v != "15") return false;
         c.decode_rows = v == "0" ? DecodeRows::Q8K : DecodeRows::B32;
         return true;
       }},
      {"FISH_VK_MV_ROWS", "1, 2 or 4", one_of(&VkConfig::mv_rows, {1, 2, 4})},
      {"FISH_VK_MV_WG", "32, 64, 128, 256 or 512", one_of(&VkConfig::mv_wg, {32, 64, 128, 256, 512})},
      {"FISH_VK_SPAN_MV", "a list of [q|o|gu|d=]ROWS[xWG] (ROWS 1, 2, 4, 8 or 16; WG 32, 64, 128 or 256)",
       [](const std::string& v, VkConfig& c) { return VkConfig::parse_span_mv(v, c.span_mv); }},
      {"FISH_VK_SPAN_TOKENS", "a number from 8 to 1024", number(&VkConfig::span_tokens, 8, 1024)},
      {"FISH_VK_ATTN_SPLIT", "a number from 16 to 1048576", number(&VkConfig::attn_split, 16, 1 << 20)},
      {"FISH_VK_ATTN_MAX_SPLITS", "a number from 1 to 128", number(&VkConfig::attn_max_splits, 1, 128)},
      {"FISH_VK_BENCH_FILL_KV", "0 or 1", flag(&VkConfig::bench_fill_kv)},
      {"FISH_VK_PIPELINE_STATS", "0 or 1", flag(&VkConfig::pipeline_stats)},
  };
  return vars;
}

}  // namespace

VkConfig VkConfig::parse(const std::map<std::string, std::string>& env) {
  VkConfig c;
  const auto& vars = variables();
  for (const auto& [name, value] : env) {
    const std::string& key = name;  // a plain reference: clang 14 cannot capture a structured binding
    const auto it = std::find_if(vars.begin(), vars.end(), [&](const Variable& v) { return key == v.name; });
    if (it == vars.end()) {
      // A FISH_VK_* name the plugin does not know (a typo, or a knob that was removed).
      if (name.rfind("FISH_VK_", 0) == 0 && c.error.empty()) {
        std::string known;
        for (const Variable& v : vars)
          if (std::strncmp(v.name, "FISH_VK_", 8) == 0) known += std::string(known.empty() ? "" : ", ") + v.name;
        c.error = name + " is not a fish_vulkan variable (it reads " + known + ")";
      }
      continue;
    }
    if (value.empty()) continue;  // set but empty: as if unset
    if (!it->set(value, c) && c.error.empty()) c.error = name + "='" + value + "' is not " + it->accepts;
  }
  return c;
}

std::vector<std::string> VkConfig::variable_names() {
  std::vector<std::string> names;
  for (const Variable& v : variables()) names.push_back(v.name);
  return names;
}

VkConfig VkConfig::from_env() {
  std::map<std::string, std::string> env;
  for (char** e = FISH_ENVIRON; e && *e; ++e) {
    const char* eq = std::strchr(*e, '=');
    if (eq && std::strncmp(*e, "FISH_", 5) == 0) env[std::string(*e, size_t(eq - *e))] = eq + 1;
  }
  return parse(env);
}

bool VkConfig::parse_span_mv(const std::string& spec, SpanMvShape* out) {
  SpanMvShape parsed[kRoles];
  size_t at = 0;
  while (at <= spec.size()) {
    const size_t comma = spec.find(',', at);
    const std::string item = spec.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
    at = comma == std::string::npos ? spec.size() + 1 : comma + 1;
    std::string role, shape = item;
    if (const size_t eq = item.find('='); eq != std::string::npos) role = item.substr(0, eq), shape = item.substr(eq + 1);
    const size_t x = shape.find('x');
    long long rows = 0, wg = 0;
    if (!integer(shape.substr(0, x), 1, 16, &rows) || (rows & (rows - 1)) != 0) return false;
    if (x != std::string::npos && (!integer(shape.substr(x + 1), 32, 256, &wg) || (wg & (wg - 1)) != 0)) return false;
    const SpanMvShape s{uint32_t(rows), uint32_t(wg)};
    if (role.empty()) {
      for (SpanMvShape& p : parsed) p = s;
    } else if (role == "q") {
      parsed[kRoleQkv] = s;
    } else if (role == "o") {
      parsed[kRoleWo] = s;
    } else if (role == "gu") {
      parsed[kRoleGateUp] = s;
    } else if (role == "d") {
      parsed[kRoleDown] = s;
    } else {
      return false;
    }
  }
  std::copy(parsed, parsed + kRoles, out);
  return true;
}

}  // namespace fish::vk
