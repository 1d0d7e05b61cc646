// A plugin that takes the process down, for the containment tests. One build
// (build/test_plugins/libfish_faulty.so); the tests copy it under names that
// say where and how it fails: libfish_fault-<where>-<how>.so with
//   where: ctor (a library constructor: dlopen), query (fish_plugin_query),
//          probe, open (the device open, where Vulkan drivers crash most)
//   how:   segv (a write through a null pointer), abort, exit0, exit3 (exit()
//          with that status), hang (sleeps forever)
// Under any other name it is a well-behaved plugin with one CPU "device" that
// supports no weight type (so a model it is chosen for runs on the CPU).
#define FISH_PLUGIN_IMPLEMENTATION
#include <dlfcn.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "fish/plugin_abi.h"

namespace {

char g_where[16] = "", g_how[16] = "";

// From this file's own name (the constructor runs before anything else).
void read_name() {
  Dl_info info{};
  if (!dladdr(reinterpret_cast<void*>(&read_name), &info) || !info.dli_fname) return;
  const char* base = std::strrchr(info.dli_fname, '/');
  base = base ? base + 1 : info.dli_fname;
  std::sscanf(base, "libfish_fault-%15[a-z0-9]-%15[a-z0-9].so", g_where, g_how);
}

int* volatile g_null = nullptr;

void fail_here(const char* where) {
  if (std::strcmp(g_where, where) != 0) return;
  std::fprintf(stderr, "faulty test plugin: failing in %s with %s\n", where, g_how);
  std::fflush(stderr);
  if (!std::strcmp(g_how, "segv")) *g_null = 1;
  if (!std::strcmp(g_how, "abort")) std::abort();
  if (!std::strcmp(g_how, "exit0")) std::exit(0);
  if (!std::strcmp(g_how, "exit3")) std::exit(3);
  if (!std::strcmp(g_how, "hang"))
    for (;;) sleep(1000);
}

__attribute__((constructor)) void on_load() {
  read_name();
  fail_here("ctor");
}

struct Backend {
  int dummy = 0;
};

const char* plugin_error() { return "no error"; }

fish_status probe(fish_probe_result* out) {
  fail_here("probe");
  out->n_devices = 1;
  out->score = 100;
  out->default_device = 0;
  return FISH_OK;
}

fish_status device_info(uint32_t index, fish_device_info* out) {
  if (index != 0) return FISH_E_RANGE;
  out->kind = FISH_DEVICE_CPU;
  out->score = 100;
  out->memory_total = 1ull << 30;
  std::snprintf(out->name, sizeof out->name, "Faulty Test Device");
  std::snprintf(out->detail, sizeof out->detail, "fails in %s with %s", g_where, g_how);
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
const char* last_error(const fish_backend*) { return "no error"; }
fish_status open(fish_backend*) {
  fail_here("open");
  return FISH_OK;
}
fish_status describe(fish_backend*, uint32_t, const char** out) {
  *out = "faulty test plugin";
  return FISH_OK;
}
fish_status memory_free(fish_backend*, uint64_t* out) {
  *out = 1ull << 30;
  return FISH_OK;
}
fish_status bytes_resident(fish_backend*, uint64_t* out) {
  *out = 0;
  return FISH_OK;
}
fish_status supports(fish_backend*, uint32_t, int32_t* out) {
  *out = 0;
  return FISH_OK;
}
fish_status upload(fish_backend*, const fish_weight_desc*, fish_weight**) { return FISH_E_UNSUPPORTED; }
fish_status release(fish_backend*, fish_weight*) { return FISH_E_INVALID_ARGUMENT; }
fish_status matmul(fish_backend*, fish_weight*, const float*, int32_t, float*) { return FISH_E_UNSUPPORTED; }
fish_status matmul_group(fish_backend*, fish_weight* const*, int32_t, const float*, int32_t, float* const*) {
  return FISH_E_UNSUPPORTED;
}

}  // namespace

extern "C" FISH_PLUGIN_EXPORT fish_status fish_plugin_query(uint32_t host_abi_version, const fish_host_api*,
                                                            fish_plugin_api* out) {
  (void)host_abi_version;
  fail_here("query");
  fish_plugin_api t{};
  t.struct_size = out->struct_size < sizeof t ? out->struct_size : uint32_t(sizeof t);
  t.abi_version = FISH_PLUGIN_ABI_VERSION;
  t.name = "faulty";
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
  std::memcpy(out, &t, t.struct_size);
  return FISH_OK;
}
