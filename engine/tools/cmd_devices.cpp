// fish devices: every plugin file found, whether it loaded, its ABI version,
// its devices, the chosen one and why, and the reason for every refusal.
#include <cstdio>
#include <string>

#include "args.h"
#include "command.h"
#include "fish/fish.h"

using namespace fish::cli;

namespace {

std::string version_text(uint32_t v) { return std::to_string(v >> 16) + "." + std::to_string(v & 0xffff); }

std::string bytes_text(uint64_t b) {
  char buf[64];
  if (b >= (1ull << 30)) std::snprintf(buf, sizeof buf, "%.1f GiB", double(b) / double(1ull << 30));
  else std::snprintf(buf, sizeof buf, "%.0f MiB", double(b) / double(1ull << 20));
  return buf;
}

}  // namespace

static int cmd_devices(int argc, char** argv) {
  Args a(argc, argv);
  if (a.flag("-h", "--help")) {
    std::printf("usage: fish devices\n"
                "  Lists the compute-backend plugins found next to the fish executable and next to\n"
                "  libfish: whether each loaded, its ABI version, its devices, which one the engine\n"
                "  uses and why, and the reason for every refusal. The chosen backend's device is\n"
                "  opened (as a model load would) to show its status and free memory. Each plugin\n"
                "  is first loaded, probed and opened in a child process: one that crashes, exits\n"
                "  or hangs there is listed as refused, with what happened and where.\n"
                "  Environment: FISH_GPU=0 loads no plugin; FISH_BACKEND=<name> picks one;\n"
                "  FISH_PLUGIN_DENY=a,b skips some; FISH_PLUGIN_ISOLATE=0 probes without the child;\n"
                "  FISH_GPU_VERBOSE=1 prints the loader's decisions on stderr (2: every call).\n"
                "  Every device of the plugin in use is opened to show its free memory; FISH_GPU_DEVICE=0,1\n"
                "  (or --gpu-device 0,1 on the commands that load a model) splits a model across them.\n");
    return 0;
  }
  if (!a.positional().empty()) a.fail("unexpected argument");

  const int32_t n_folders = fish_backend_folder_count();
  std::printf("plugin folders (the fish executable's and libfish's; never the current directory or PATH):\n");
  for (int32_t i = 0; i < n_folders; ++i) std::printf("  %s\n", fish_backend_folder(i));
  if (fish_backend_disabled()) std::printf("plugin loading is off (FISH_GPU)\n");

  const int32_t n = fish_backend_count();
  std::printf("plugin files: %d\n", n);
  for (int32_t i = 0; i < n; ++i) {
    fish_backend_info info{};
    info.struct_size = sizeof info;
    if (fish_backend_get_info(i, &info) != 0) continue;
    std::printf("  %s%s\n", info.path, info.chosen ? "   <- chosen" : "");
    if (info.loaded) {
      std::printf("    loaded: ABI %s, plugin \"%s\" %s%s, score %d\n", version_text(info.abi_version).c_str(),
                  info.reported_name, info.plugin_version, (info.flags & 1) ? ", manual only" : "", info.score);
      if (info.probed) {
        std::printf("    devices: %d\n", info.n_devices);
        for (int32_t d = 0; d < info.n_devices; ++d) {
          fish_backend_device dev{};
          dev.struct_size = sizeof dev;
          if (fish_backend_get_device(i, d, &dev) != 0) continue;
          std::printf("      %d: %s (%s, score %d%s%s)\n", d, dev.name, dev.kind, dev.score,
                      dev.memory_total ? ", " : "", dev.memory_total ? bytes_text(dev.memory_total).c_str() : "");
          if (dev.detail && *dev.detail) std::printf("         %s\n", dev.detail);
          if (info.chosen) {  // each device of the plugin in use, opened: its free memory (FISH_GPU_DEVICE=i uses it)
            const char* why = nullptr;
            const uint64_t free_bytes = fish_backend_device_memory_free(d, &why);
            if (why && *why) std::printf("         memory free: unknown (%s)\n", why);
            else std::printf("         memory free: %s\n", bytes_text(free_bytes).c_str());
          }
        }
      }
    } else {
      std::printf("    not loaded\n");
    }
    if (info.reason && *info.reason) std::printf("    %s\n", info.reason);
  }

  const char* active = fish_backend_active();
  if (active) {
    std::printf("backend: %s\n  %s\n  status: %s\n  memory free: %s\n", active, fish_backend_reason(),
                fish_backend_status(), bytes_text(fish_backend_memory_free()).c_str());
  } else {
    std::printf("backend: none, CPU only\n  %s\n", fish_backend_reason());
  }
  return 0;
}

static const Command reg{"devices", "list compute-backend plugins, their devices, and the one in use", &cmd_devices};
