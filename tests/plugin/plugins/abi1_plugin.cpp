// A plugin built for plugin ABI 1.2, as every plugin was before 2.0: the
// engine must refuse it with a reason saying it speaks 1.x and must be rebuilt
// against 2.0, never read its table past the four fields every major keeps
// (struct_size, abi_version, name, message), and go on on the CPU.
//   ABI1_ACCEPTS undefined: a well-behaved 1.x plugin: it refuses the 2.0 host
//                           (FISH_E_VERSION) answering its own version, 1.2.
//   ABI1_ACCEPTS:           a careless one that answers 1.2 with FISH_OK and
//                           fills its 1.2 table.
// The table below is ABI 1.2's layout, written out here because the header
// now describes 2.0; its function slots are traps the host must never call.
#define FISH_PLUGIN_IMPLEMENTATION
#include <cstdio>
#include <cstring>

#include "fish/plugin_abi.h"

namespace {

using Slot = void (*)();

// fish_plugin_api of ABI 1.2: the frozen header, then 1.x's own fields and slots.
struct PluginApiV1_2 {
  uint32_t struct_size;
  uint32_t abi_version;
  const char* name;
  const char* message;
  const char* plugin_version;
  uint32_t flags;
  uint32_t reserved;
  Slot slots[25];  // plugin_error .. span_forward_logits_view
};

constexpr uint32_t kVersion = FISH_ABI_MAKE_VERSION(1, 2);

#if defined(ABI1_ACCEPTS)
void trap() { std::fputs("fish_abi1: the host called a slot of a 1.x table\n", stderr); }
#endif

}  // namespace

extern "C" FISH_PLUGIN_EXPORT fish_status fish_plugin_query(uint32_t host_abi_version, const fish_host_api*,
                                                            fish_plugin_api* out) {
  PluginApiV1_2 t{};
  t.abi_version = kVersion;
  t.name = "abi1";
#if defined(ABI1_ACCEPTS)
  (void)host_abi_version;
  t.plugin_version = "1.2 (accepts any host)";
  for (Slot& s : t.slots) s = trap;
  const fish_status st = FISH_OK;
#else
  static char msg[128];
  std::snprintf(msg, sizeof msg, "fish_abi1 speaks plugin ABI 1.x; the host offers %u.%u", host_abi_version >> 16,
                host_abi_version & 0xffff);
  t.message = msg;
  const fish_status st = FISH_E_VERSION;
#endif
  t.struct_size = out->struct_size < sizeof t ? out->struct_size : uint32_t(sizeof t);
  std::memcpy(out, &t, t.struct_size);
  return st;
}
