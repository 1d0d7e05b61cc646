// Reads fish_vulkan's FISH_* environment knobs (see vk_config.h).
#include "vk_config.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>

namespace fish::vk {
namespace {

std::string lower(const char* s) {
  std::string r(s);
  for (char& c : r) c = char(std::tolower(static_cast<unsigned char>(c)));
  return r;
}

// A non-negative integer, or -1 when s is not one.
long long parse_count(const char* s) {
  if (!s || !*s) return -1;
  char* end = nullptr;
  long long v = std::strtoll(s, &end, 10);
  if (*end != '\0' || v < 0) return -1;
  return v;
}

}  // namespace

VkConfig VkConfig::from_env() {
  VkConfig c;
  auto bad = [&c](const std::string& name, const char* value, const char* want) {
    if (c.error.empty()) c.error = name + "='" + value + "' is not " + want;
  };
  if (const char* v = std::getenv("FISH_GPU")) {
    const std::string s = lower(v);
    if (s == "0" || s == "off" || s == "false" || s == "no") c.gpu = GpuMode::Off;
    else if (s == "cpu") c.gpu = GpuMode::Cpu;
  }
  if (const char* v = std::getenv("FISH_GPU_DEVICE"); v && *v) {
    const long long i = parse_count(v);
    if (i < 0 || i > 1000000) bad("FISH_GPU_DEVICE", v, "a device index");
    else c.device_index = int(i);
  }
  if (const char* v = std::getenv("FISH_VK_QUEUE"); v && *v) {
    const std::string s = lower(v);
    if (s == "universal") c.queue_universal = true;
    else if (s != "compute") bad("FISH_VK_QUEUE", v, "'universal' or 'compute'");
  }
  if (const char* v = std::getenv("FISH_VK_VALIDATE")) c.validate = parse_count(v) > 0;
  if (const char* v = std::getenv("FISH_GPU_VERBOSE")) c.verbose = int(parse_count(v) > 0 ? parse_count(v) : 0);
  if (const char* v = std::getenv("FISH_VRAM_BUDGET_MB"); v && *v) {
    const long long mb = parse_count(v);
    if (mb <= 0) bad("FISH_VRAM_BUDGET_MB", v, "a positive number of MB");
    else c.budget_bytes = uint64_t(mb) << 20;
  }
  if (const char* v = std::getenv("FISH_GPU_PROFILE")) {
    c.profile_level = int(std::max<long long>(0, std::min<long long>(2, parse_count(v))));
    c.profile = c.profile_level > 0;
  }
  auto ranged = [&](const char* name, long long lo, long long hi, int* out) {
    const char* v = std::getenv(name);
    if (!v || !*v) return;
    const long long n = parse_count(v);
    if (n < lo || n > hi) bad(name, v, ("a number from " + std::to_string(lo) + " to " + std::to_string(hi)).c_str());
    else *out = int(n);
  };
  int fuse = 1, spin = 1;
  ranged("FISH_VK_SPAN_FUSE", 0, 1, &fuse);
  ranged("FISH_VK_SPAN_TOKENS", 8, 1024, &c.span_tokens);
  ranged("FISH_VK_ATTN_SPLIT", 16, 1 << 20, &c.attn_split);
  ranged("FISH_VK_ATTN_HEADS", 0, 32, &c.attn_heads);
  ranged("FISH_VK_ATTN_MAX_SPLITS", 1, 128, &c.attn_max_splits);
  ranged("FISH_VK_SPIN", 0, 1, &spin);
  ranged("FISH_VK_ATTN_VLATE", 0, 1, &c.attn_vlate);
  ranged("FISH_VK_SPAN_QSG", 0, 1, &c.span_qsg);
  ranged("FISH_VK_SPAN_GU", 0, 1, &c.span_gu);
  ranged("FISH_VK_INT8", 0, 1, &c.int8);
  ranged("FISH_VK_SPAN_NORM", 0, 1, &c.span_norm);
  ranged("FISH_VK_SPAN_QFOLD", 0, 63, &c.span_qfold);
  ranged("FISH_VK_SPAN_I8", 0, 255, &c.span_i8);
  ranged("FISH_VK_SPAN_U64", 0, 31, &c.span_u64);
  if (const char* v = std::getenv("FISH_VK_SPAN_MV"); v && *v) {
    std::string why;
    if (!parse_span_mv(v, c.span_mv, &why)) bad("FISH_VK_SPAN_MV", v, why.c_str());
  }
  int fill = 0;
  ranged("FISH_VK_BENCH_FILL_KV", 0, 1, &fill);
  c.bench_fill_kv = fill != 0;
  c.span_fuse = fuse != 0;
  c.spin = spin != 0;
  if (const char* v = std::getenv("FISH_VK_MV_ROWS"); v && *v) {
    const long long r = parse_count(v);
    if (r != 1 && r != 2 && r != 4) bad("FISH_VK_MV_ROWS", v, "1, 2 or 4");
    else c.mv_rows = int(r);
  }
  if (const char* v = std::getenv("FISH_VK_MV_WG"); v && *v) {
    const long long w = parse_count(v);
    if (w != 32 && w != 64 && w != 128 && w != 256 && w != 512) bad("FISH_VK_MV_WG", v, "32, 64, 128, 256 or 512");
    else c.mv_wg = int(w);
  }
  return c;
}

bool VkConfig::parse_span_mv(const std::string& spec, SpanMvShape* out, std::string* why) {
  *why = "a list of [q|o|gu|d=]ROWS[xWG] (ROWS 1, 2, 4, 8 or 16; WG 32, 64, 128 or 256)";
  SpanMvShape parsed[kRoles];
  size_t at = 0;
  while (at <= spec.size()) {
    const size_t comma = spec.find(',', at);
    const std::string item = spec.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
    at = comma == std::string::npos ? spec.size() + 1 : comma + 1;
    if (item.empty()) return false;
    std::string role, shape = item;
    if (const size_t eq = item.find('='); eq != std::string::npos) role = item.substr(0, eq), shape = item.substr(eq + 1);
    SpanMvShape s;
    const size_t x = shape.find('x');
    const long long rows = parse_count(shape.substr(0, x).c_str());
    const long long wg = x == std::string::npos ? 0 : parse_count(shape.substr(x + 1).c_str());
    if (rows != 1 && rows != 2 && rows != 4 && rows != 8 && rows != 16) return false;
    if (x != std::string::npos && wg != 32 && wg != 64 && wg != 128 && wg != 256) return false;
    s.rows = uint32_t(rows), s.wg = uint32_t(wg);
    if (role.empty()) {
      for (uint32_t r = 0; r < kRoles; ++r) parsed[r] = s;
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
  for (uint32_t r = 0; r < kRoles; ++r) out[r] = parsed[r];
  return true;
}

}  // namespace fish::vk
