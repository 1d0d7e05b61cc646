// Plugin discovery and loading (plugin_abi/README.md, "Discovery and selection").
//
// The engine looks for files named fish_<name> (and lib fish_<name>) with the
// platform's shared-library suffix in exactly two folders: the folder of the
// running executable and the folder of libfish, both asked of the OS. Never the
// current directory, PATH or LD_LIBRARY_PATH. Files are opened with
// RTLD_NOW | RTLD_LOCAL and never closed. Every refusal keeps its reason.
//
// By default each plugin is first loaded, queried, probed and its default
// device opened in a short-lived child process (child_process.h); only a
// plugin whose child came back is loaded into the engine. One that crashed,
// aborted, exited or hung there is refused with what happened and where
// (FISH_PLUGIN_ISOLATE=0 turns this off, FISH_PLUGIN_TIMEOUT bounds it).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "fish/plugin_abi.h"

namespace fish::backend {

// A loaded plugin file: the library stays open and this object alive for the
// life of the process (plugins are never unloaded).
struct PluginLibrary {
  std::string path;
  void* handle = nullptr;
  fish_plugin_query_fn query = nullptr;
  fish_plugin_api api{};  // as answered to this host's version; struct_size = what the plugin filled
};

struct PluginDevice {
  uint32_t kind = FISH_DEVICE_OTHER;
  int32_t score = 0;
  uint64_t memory_total = 0;
  std::string name, detail;
};

// What discovery learned about one plugin file.
struct PluginRecord {
  std::string path;            // full path of the file
  std::string file_name;       // <name> taken from the file name
  std::string name;            // the name the plugin reports ("" if it did not load)
  std::string plugin_version;  // free-form version the plugin reports
  bool loaded = false;         // opened, entry point found, ABI accepted
  uint32_t abi_version = 0;    // the version it answered (0: none)
  bool probed = false;         // probe() succeeded
  bool config_error = false;   // probe() refused the plugin's own configuration (a bad FISH_* variable)
  bool faulty = false;         // crashed, aborted, exited or hung in its child process (reason says how)
  int32_t score = 0;
  uint32_t flags = 0;          // FISH_PLUGIN_*
  int32_t default_device = -1;
  std::vector<PluginDevice> devices;
  bool eligible = false;       // may be chosen (by name, or automatically)
  bool chosen = false;
  std::string reason;          // why it was refused / not chosen; for the chosen one: why chosen
  const PluginLibrary* lib = nullptr;  // set when loaded
};

// The result of one discovery pass: what `fish devices` prints.
struct BackendReport {
  std::vector<std::string> folders;  // where plugins were looked for
  std::vector<PluginRecord> plugins; // every file found, in search order
  bool disabled = false;             // FISH_GPU=off: nothing was loaded
  std::vector<int> candidates;       // usable plugins, best first (score, then search order)
  int chosen = -1;                   // index into plugins, -1: CPU only
  std::string reason;                // why that plugin (or why CPU only)
};

// The folder of the running executable and the folder of the binary holding
// this code (libfish, or a test executable that links the engine statically),
// deduplicated, in that order.
std::vector<std::string> plugin_folders();

// If fname (no folder) is a plugin file name for this platform, its <name>.
bool plugin_name_from_file(const std::string& fname, std::string* name);

// Plugin files in one folder, sorted by file name.
std::vector<std::string> list_plugin_files(const std::string& folder);

// Opens path (once per canonical path: later calls reuse the library) and
// negotiates the ABI; then probes it and lists its devices. Never throws:
// every failure is a reason in the record.
PluginRecord load_plugin(const std::string& path);

// load_plugin() after the same steps (and backend_create + open of the
// default device when the probe found one) came through in a child process;
// when they did not, a record with faulty set and the reason ("probed in a
// child process: crashed (SIGSEGV, segmentation fault) in open"), and the file
// is never loaded here. A file already loaded into this process skips the
// child; the child's verdict is kept per file (path, size, modification time).
PluginRecord load_plugin_isolated(const std::string& path, double timeout_s);

// Opens a plugin file without negotiating (the conformance suite negotiates
// itself); nullptr with *err set on failure. Never closed.
void* open_library(const std::string& path, std::string* err);
fish_plugin_query_fn find_entry(void* handle, std::string* err);

struct DiscoveryOptions {
  std::vector<std::string> folders;  // where to look (plugin_folders() for the real thing)
  std::vector<std::string> files;    // extra explicit files (tests, `fish plugin-test`)
  bool disabled = false;             // FISH_GPU=off
  std::string disabled_by;           // the variable's text, for the reason
  std::string only;                  // FISH_BACKEND: load/choose only this name
  std::vector<std::string> deny;     // FISH_PLUGIN_DENY: never load these names
  bool isolate = true;               // FISH_PLUGIN_ISOLATE: load_plugin_isolated (else load_plugin)
  double timeout_s = 10.0;           // FISH_PLUGIN_TIMEOUT: the child's time
};

// Finds, loads and probes the plugins and ranks the usable ones (see the
// README's rule); `chosen` is the first candidate. Opening it is the caller's
// job (backend.h: open_chosen), which moves on to the next candidate when the
// first one's device does not open.
BackendReport discover(const DiscoveryOptions& opts);

// Makes candidates[rank] the chosen plugin (rank past the end: none, CPU only).
void choose_candidate(BackendReport& rep, size_t rank);

}  // namespace fish::backend
