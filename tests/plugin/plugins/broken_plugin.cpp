// Deliberately broken plugins for the loader tests, one per BROKEN_* macro
// (tests/plugin/CMakeLists.txt builds each into build/test_plugins/, never into
// build/bin, so normal runs never see them):
//   BROKEN_NOENTRY     exports no fish_plugin_query
//   BROKEN_WRONGMAJOR  accepts, but answers ABI 3.0 (built against a future header)
//   BROKEN_REFUSES     refuses the host's version with a message
//   BROKEN_PROBEFAIL   probe fails: no device
//   BROKEN_BADCONFIG   probe refuses its configuration (as fish_vulkan does a bad FISH_VK_* value)
//   BROKEN_ALLERRORS   probe finds a "discrete GPU" (score 100), every backend call fails, open included
//   BROKEN_CALLERRORS  as ALLERRORS but open succeeds: every later call fails
//   BROKEN_THROWS      probe lets a C++ exception cross the boundary
//   BROKEN_MARKER      writes $FISH_TEST_MARKER from a library constructor (proves it was loaded); else CALLERRORS
#define FISH_PLUGIN_IMPLEMENTATION
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

#include "fish/plugin_abi.h"

#if defined(BROKEN_MARKER)
#define BROKEN_CALLERRORS 1
__attribute__((constructor)) static void mark_loaded() {
  if (const char* p = std::getenv("FISH_TEST_MARKER")) {
    if (FILE* f = std::fopen(p, "w")) {
      std::fputs("loaded\n", f);
      std::fclose(f);
    }
  }
}
#endif

namespace {

struct Backend {
  int dummy = 0;
};

const char* plugin_error() {
#if defined(BROKEN_PROBEFAIL)
  return "no test device present (broken test plugin)";
#elif defined(BROKEN_BADCONFIG)
  return "FISH_TEST_KNOB='x' is not a number (broken test plugin)";
#else
  return "no error";
#endif
}

fish_status probe(fish_probe_result* out) {
#if defined(BROKEN_PROBEFAIL)
  (void)out;
  return FISH_E_NO_DEVICE;
#elif defined(BROKEN_BADCONFIG)
  (void)out;
  return FISH_E_INVALID_ARGUMENT;
#elif defined(BROKEN_THROWS)
  (void)out;
  throw std::runtime_error("broken test plugin: exception from probe");
#else
  out->n_devices = 1;
  out->score = 100;
  out->default_device = 0;
  return FISH_OK;
#endif
}

fish_status device_info(uint32_t index, fish_device_info* out) {
  if (index != 0) return FISH_E_RANGE;
  out->kind = FISH_DEVICE_DISCRETE_GPU;
  out->score = 100;
  out->memory_total = 1ull << 30;
  std::snprintf(out->name, sizeof out->name, "Broken Test GPU");
  std::snprintf(out->detail, sizeof out->detail, "fails every call");
  return FISH_OK;
}

fish_status backend_create(const fish_backend_config*, fish_backend** out) {
  *out = reinterpret_cast<fish_backend*>(new Backend());
  return FISH_OK;
}
fish_status backend_destroy(fish_backend* b) {
  delete reinterpret_cast<Backend*>(b);
  return FISH_OK;
}
const char* last_error(const fish_backend*) { return "every call fails (broken test plugin)"; }
fish_status open(fish_backend*) {
#if defined(BROKEN_CALLERRORS)
  return FISH_OK;
#else
  return FISH_E_DEVICE;
#endif
}
fish_status describe(fish_backend*, uint32_t, const char**) { return FISH_E_DEVICE; }
fish_status memory_free(fish_backend*, uint64_t*) { return FISH_E_DEVICE; }
fish_status bytes_resident(fish_backend*, uint64_t*) { return FISH_E_DEVICE; }
fish_status supports(fish_backend*, uint32_t, int32_t*) { return FISH_E_DEVICE; }
fish_status upload(fish_backend*, const fish_weight_desc*, fish_weight**) { return FISH_E_DEVICE; }
fish_status release(fish_backend*, fish_weight*) { return FISH_E_DEVICE; }
fish_status matmul(fish_backend*, fish_weight*, const float*, int32_t, float*) { return FISH_E_DEVICE; }
fish_status matmul_group(fish_backend*, fish_weight* const*, int32_t, const float*, int32_t, float* const*) {
  return FISH_E_DEVICE;
}
fish_status span_bytes(fish_backend*, const fish_span_desc*, uint64_t*) { return FISH_E_DEVICE; }
fish_status span_create(fish_backend*, const fish_span_desc*, fish_span**) { return FISH_E_DEVICE; }
fish_status span_destroy(fish_backend*, fish_span*) { return FISH_E_DEVICE; }
fish_status span_set_head(fish_backend*, fish_span*, fish_weight*, const float*) { return FISH_E_DEVICE; }
fish_status span_forward(fish_backend*, fish_span*, fish_span_batch*) { return FISH_E_DEVICE; }
fish_status span_kv_len(fish_backend*, fish_span*, int32_t, int32_t*) { return FISH_E_DEVICE; }
fish_status span_kv_truncate(fish_backend*, fish_span*, int32_t, int32_t) { return FISH_E_DEVICE; }
fish_status span_kv_reserve(fish_backend*, fish_span*, int32_t) { return FISH_E_DEVICE; }

}  // namespace

#if defined(BROKEN_NOENTRY)
// Looks like a plugin, but the entry point has the wrong name.
extern "C" FISH_PLUGIN_EXPORT int fish_plugin_query_v0(void) { return 0; }
#else
extern "C" FISH_PLUGIN_EXPORT fish_status fish_plugin_query(uint32_t host_abi_version, const fish_host_api*,
                                                            fish_plugin_api* out) {
  static char msg[128];
  fish_plugin_api t{};
  t.struct_size = out->struct_size < sizeof t ? out->struct_size : uint32_t(sizeof t);
  t.name = "broken";
#if defined(BROKEN_REFUSES)
  std::snprintf(msg, sizeof msg, "this test plugin needs ABI 7.x, the host offers %u.%u", host_abi_version >> 16,
                host_abi_version & 0xffff);
  t.abi_version = FISH_ABI_MAKE_VERSION(7, 0);
  t.message = msg;
  std::memcpy(out, &t, t.struct_size);
  return FISH_E_VERSION;
#else
  (void)msg;
  (void)host_abi_version;
#if defined(BROKEN_WRONGMAJOR)
  t.abi_version = FISH_ABI_MAKE_VERSION(FISH_PLUGIN_ABI_MAJOR + 1, 0);
#else
  t.abi_version = FISH_PLUGIN_ABI_VERSION;
#endif
  t.plugin_version = "test";
  t.plugin_error = plugin_error;
  t.probe = probe;
  t.device_info = device_info;
  t.backend_create = backend_create;
  t.backend_destroy = backend_destroy;
  t.last_error = last_error;
  t.open = open;
  t.describe = describe;
  t.memory_free = memory_free;
  t.bytes_resident = bytes_resident;
  t.supports = supports;
  t.upload = upload;
  t.release = release;
  t.matmul = matmul;
  t.matmul_group = matmul_group;
  t.span_bytes = span_bytes;
  t.span_create = span_create;
  t.span_destroy = span_destroy;
  t.span_set_head = span_set_head;
  t.span_forward = span_forward;
  t.span_kv_len = span_kv_len;
  t.span_kv_truncate = span_kv_truncate;
  t.span_kv_reserve = span_kv_reserve;
  std::memcpy(out, &t, t.struct_size);
  return FISH_OK;
#endif
}
#endif
