#include "backend/plugin_loader.h"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <filesystem>
#include <map>
#include <mutex>
#include <system_error>

#include "backend/child_process.h"
#include "backend/host_services.h"

#if defined(_WIN32)
#include <windows.h>
#else
#include <dlfcn.h>
#include <unistd.h>
#if defined(__linux__)
#include <link.h>
#elif defined(__APPLE__)
#include <mach-o/dyld.h>
#endif
#endif

namespace fish::backend {

namespace fs = std::filesystem;

namespace {

#if defined(_WIN32)
constexpr const char* kPrefixes[] = {"fish_"};
constexpr const char* kSuffix = ".dll";
#elif defined(__APPLE__)
constexpr const char* kPrefixes[] = {"libfish_", "fish_"};
constexpr const char* kSuffix = ".dylib";
#else
constexpr const char* kPrefixes[] = {"libfish_", "fish_"};
constexpr const char* kSuffix = ".so";
#endif

std::string canonical_or_same(const std::string& p) {
  std::error_code ec;
  fs::path c = fs::canonical(p, ec);
  return ec ? p : c.string();
}

std::string parent_folder(const std::string& file) {
  if (file.empty()) return {};
  return fs::path(canonical_or_same(file)).parent_path().string();
}

// ---- where am I --------------------------------------------------------------
std::string executable_path() {
#if defined(_WIN32)
  wchar_t buf[32768];
  DWORD n = GetModuleFileNameW(nullptr, buf, DWORD(std::size(buf)));
  if (n == 0 || n >= std::size(buf)) return {};
  return fs::path(std::wstring(buf, n)).string();
#elif defined(__linux__)
  std::error_code ec;
  fs::path p = fs::read_symlink("/proc/self/exe", ec);
  return ec ? std::string() : p.string();
#elif defined(__APPLE__)
  uint32_t size = 0;
  _NSGetExecutablePath(nullptr, &size);
  std::string buf(size, '\0');
  if (_NSGetExecutablePath(buf.data(), &size) != 0) return {};
  return canonical_or_same(buf.c_str());
#else
  return {};
#endif
}

#if defined(__linux__)
// dladdr() names the main program by argv[0], which must not be trusted; walk
// the loaded objects instead: the one whose segments contain `addr`. The main
// program has an empty name there (then /proc/self/exe is the answer).
struct FindObject {
  uintptr_t addr = 0;
  bool found = false;
  std::string name;
};

int find_object_cb(struct dl_phdr_info* info, size_t, void* data) {
  auto* f = static_cast<FindObject*>(data);
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const auto& ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_LOAD) continue;
    const uintptr_t lo = uintptr_t(info->dlpi_addr + ph.p_vaddr);
    if (f->addr >= lo && f->addr < lo + ph.p_memsz) {
      f->found = true;
      f->name = info->dlpi_name ? info->dlpi_name : "";
      return 1;
    }
  }
  return 0;
}
#endif

std::string this_module_path() {
#if defined(_WIN32)
  HMODULE mod = nullptr;
  if (!GetModuleHandleExW(GET_MODULE_HANDLE_EX_FLAG_FROM_ADDRESS | GET_MODULE_HANDLE_EX_FLAG_UNCHANGED_REFCOUNT,
                          reinterpret_cast<LPCWSTR>(&this_module_path), &mod))
    return {};
  wchar_t buf[32768];
  DWORD n = GetModuleFileNameW(mod, buf, DWORD(std::size(buf)));
  if (n == 0 || n >= std::size(buf)) return {};
  return fs::path(std::wstring(buf, n)).string();
#elif defined(__linux__)
  FindObject f;
  f.addr = reinterpret_cast<uintptr_t>(&this_module_path);
  dl_iterate_phdr(find_object_cb, &f);
  if (!f.found || f.name.empty()) return executable_path();
  return canonical_or_same(f.name);
#else
  Dl_info info{};
  if (!dladdr(reinterpret_cast<void*>(&this_module_path), &info) || !info.dli_fname) return {};
  return canonical_or_same(info.dli_fname);
#endif
}

// The step about to run on a plugin: in a probe's child, what a crash or hang
// is reported "in"; in the engine, a debug line (FISH_GPU_VERBOSE=2).
void stage(const std::string& path, const char* what) {
  child_stage(what);
  host_log(FISH_LOG_DEBUG, "loader", path + ": calling " + what);
}

// ---- the library cache: every path opened once, never closed ------------------
struct LibEntry {
  PluginLibrary* lib = nullptr;  // leaked on purpose
  std::string error;             // why it could not be opened
};
std::mutex g_libs_mu;
std::map<std::string, LibEntry>& libs() {
  static auto* m = new std::map<std::string, LibEntry>();
  return *m;
}

// Calls into a plugin are fenced: an exception thrown across the C boundary
// (a contract violation) becomes FISH_E_INTERNAL instead of taking us down.
template <class F>
fish_status fenced(F&& f) {
  try {
    return f();
  } catch (...) {
    return FISH_E_INTERNAL;
  }
}

std::string plugin_error_text(const fish_plugin_api& api) {
  if (!api.plugin_error) return "";
  try {
    const char* m = api.plugin_error();
    return m ? std::string(m) : std::string();
  } catch (...) {
    return "(plugin_error threw)";
  }
}

std::string version_text(uint32_t v) {
  return std::to_string(FISH_ABI_VERSION_MAJOR(v)) + "." + std::to_string(FISH_ABI_VERSION_MINOR(v));
}

// Why a plugin of another major is not loaded (majors never mix: a 1.x table
// has another layout and other meanings).
std::string other_major_text(uint32_t theirs) {
  const uint32_t major = FISH_ABI_VERSION_MAJOR(theirs);
  const std::string ours = version_text(FISH_PLUGIN_ABI_VERSION);
  if (major < FISH_PLUGIN_ABI_MAJOR)
    return "the plugin speaks ABI " + version_text(theirs) + " (ABI " + std::to_string(major) +
           ".x), which this engine no longer loads: rebuild it against plugin ABI " + ours;
  return "the plugin speaks ABI " + version_text(theirs) + ", newer than this engine's " + ours +
         ": use a newer fish, or a build of the plugin for ABI " + ours;
}

// The slots every plugin must fill (the span group is optional).
const char* missing_required(const fish_plugin_api& a) {
  if (!a.plugin_error) return "plugin_error";
  if (!a.probe) return "probe";
  if (!a.device_info) return "device_info";
  if (!a.backend_create) return "backend_create";
  if (!a.backend_destroy) return "backend_destroy";
  if (!a.last_error) return "last_error";
  if (!a.open) return "open";
  if (!a.describe) return "describe";
  if (!a.memory_free) return "memory_free";
  if (!a.bytes_resident) return "bytes_resident";
  if (!a.supports) return "supports";
  if (!a.upload) return "upload";
  if (!a.release) return "release";
  if (!a.matmul) return "matmul";
  if (!a.matmul_group) return "matmul_group";
  return nullptr;
}

std::string safe_string(const char* s, size_t cap) {
  if (!s) return {};
  return std::string(s, strnlen(s, cap));
}

// Opens + negotiates once; the result (success or reason) is cached by path.
LibEntry& open_and_negotiate(const std::string& canon) {
  std::lock_guard<std::mutex> lk(g_libs_mu);
  auto it = libs().find(canon);
  if (it != libs().end()) return it->second;
  LibEntry& e = libs()[canon];
  std::string err;
  stage(canon, "dlopen (the library's constructors)");
  void* h = open_library(canon, &err);
  if (!h) {
    e.error = "cannot open: " + err;
    return e;
  }
  fish_plugin_query_fn q = find_entry(h, &err);
  if (!q) {
    e.error = err;
    return e;
  }
  fish_plugin_api api{};
  api.struct_size = sizeof api;
  stage(canon, FISH_PLUGIN_ENTRY);
  const fish_status st = fenced([&] { return q(FISH_PLUGIN_ABI_VERSION, host_api(), &api); });
  // Only the frozen header (struct_size, abi_version, name, message) means the
  // same in every major: nothing else is read before the major is known.
  const std::string msg = api.message ? safe_string(api.message, 4096) : "";
  const uint32_t major = FISH_ABI_VERSION_MAJOR(api.abi_version);
  if (api.abi_version != 0 && major != FISH_PLUGIN_ABI_MAJOR) {
    e.error = other_major_text(api.abi_version) + (msg.empty() ? "" : " (it says: " + msg + ")");
    return e;
  }
  if (st != FISH_OK) {
    e.error = std::string("refused ABI ") + version_text(FISH_PLUGIN_ABI_VERSION) + " (" + status_name(st) + ")";
    if (!msg.empty()) e.error += ": " + msg;
    return e;
  }
  if (FISH_ABI_VERSION_MINOR(api.abi_version) > FISH_PLUGIN_ABI_MINOR) {
    e.error = "ABI version mismatch: the plugin answered " + version_text(api.abi_version) + " to this engine's " +
              version_text(FISH_PLUGIN_ABI_VERSION) + " (a plugin answers at most the host's minor)";
    return e;
  }
  if (api.struct_size > sizeof api || api.struct_size < offsetof(fish_plugin_api, span_bytes)) {
    e.error = "answered a table of " + std::to_string(api.struct_size) + " bytes (this engine expects " +
              std::to_string(offsetof(fish_plugin_api, span_bytes)) + ".." + std::to_string(sizeof api) + ")";
    return e;
  }
  if (!api.name || !*api.name) {
    e.error = "the plugin reports no name";
    return e;
  }
  if (const char* m = missing_required(api)) {
    e.error = std::string("required function '") + m + "' is missing from the plugin's table";
    return e;
  }
  auto* lib = new PluginLibrary();
  lib->path = canon;
  lib->handle = h;
  lib->query = q;
  lib->api = api;
  e.lib = lib;
  return e;
}

std::string join(const std::vector<std::string>& v, const char* sep) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? sep : "") + v[i];
  return s;
}

}  // namespace

void* open_library(const std::string& path, std::string* err) {
#if defined(_WIN32)
  // A full path plus these flags: dependencies from the plugin's folder and
  // System32 only, never the current directory or PATH.
  HMODULE h = LoadLibraryExW(fs::path(path).wstring().c_str(), nullptr,
                             LOAD_LIBRARY_SEARCH_DLL_LOAD_DIR | LOAD_LIBRARY_SEARCH_SYSTEM32);
  if (!h && err) *err = "LoadLibraryEx failed with error " + std::to_string(GetLastError());
  return reinterpret_cast<void*>(h);
#else
  dlerror();
  void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h && err) {
    const char* m = dlerror();
    *err = m ? m : "dlopen failed";
  }
  return h;
#endif
}

fish_plugin_query_fn find_entry(void* handle, std::string* err) {
#if defined(_WIN32)
  auto* f = reinterpret_cast<fish_plugin_query_fn>(
      reinterpret_cast<void*>(GetProcAddress(reinterpret_cast<HMODULE>(handle), FISH_PLUGIN_ENTRY)));
#else
  dlerror();
  auto* f = reinterpret_cast<fish_plugin_query_fn>(dlsym(handle, FISH_PLUGIN_ENTRY));
#endif
  if (!f && err) *err = std::string("no entry symbol '") + FISH_PLUGIN_ENTRY + "' (not a fish plugin, or built without exporting it)";
  return f;
}

std::vector<std::string> plugin_folders() {
  std::vector<std::string> out;
  for (const std::string& file : {executable_path(), this_module_path()}) {
    const std::string dir = parent_folder(file);
    if (!dir.empty() && std::find(out.begin(), out.end(), dir) == out.end()) out.push_back(dir);
  }
  return out;
}

bool plugin_name_from_file(const std::string& fname, std::string* name) {
  const std::string suffix = kSuffix;
  if (fname.size() <= suffix.size() || fname.compare(fname.size() - suffix.size(), suffix.size(), suffix) != 0)
    return false;
  for (const char* prefix : kPrefixes) {
    const std::string p = prefix;
    if (fname.rfind(p, 0) != 0) continue;
    std::string n = fname.substr(p.size(), fname.size() - p.size() - suffix.size());
    if (n.empty()) return false;
    for (char c : n)
      if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-')) return false;
    if (name) *name = n;
    return true;
  }
  return false;
}

std::vector<std::string> list_plugin_files(const std::string& folder) {
  std::vector<std::string> out;
  std::error_code ec;
  fs::directory_iterator it(folder, ec), end;
  for (; !ec && it != end; it.increment(ec)) {
    std::error_code ec2;
    if (!it->is_regular_file(ec2) && !it->is_symlink(ec2)) continue;
    if (plugin_name_from_file(it->path().filename().string(), nullptr)) out.push_back(it->path().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

PluginRecord load_plugin(const std::string& path) {
  PluginRecord rec;
  rec.path = path;
  plugin_name_from_file(fs::path(path).filename().string(), &rec.file_name);
  LibEntry& e = open_and_negotiate(canonical_or_same(path));
  if (!e.lib) {
    rec.reason = e.error;
    return rec;
  }
  const fish_plugin_api& api = e.lib->api;
  rec.lib = e.lib;
  rec.loaded = true;
  rec.abi_version = api.abi_version;
  rec.name = api.name;
  rec.plugin_version = safe_string(api.plugin_version, 256);
  rec.flags = api.flags;

  fish_probe_result pr{};
  pr.struct_size = sizeof pr;
  stage(path, "probe");
  const fish_status st = fenced([&] { return api.probe(&pr); });
  if (st != FISH_OK) {
    const std::string why = plugin_error_text(api);
    rec.reason = std::string("probe failed (") + status_name(st) + ")" + (why.empty() ? "" : ": " + why);
    rec.config_error = st == FISH_E_INVALID_ARGUMENT;
    return rec;
  }
  rec.probed = true;
  rec.score = pr.score;
  rec.default_device = pr.default_device;
  const uint32_t n_dev = std::min<uint32_t>(pr.n_devices, 64);
  if (n_dev) stage(path, "device_info");
  for (uint32_t i = 0; i < n_dev; ++i) {
    fish_device_info di{};
    di.struct_size = sizeof di;
    PluginDevice d;
    if (fenced([&] { return api.device_info(i, &di); }) == FISH_OK) {
      d.kind = di.kind;
      d.score = di.score;
      d.memory_total = di.memory_total;
      d.name = safe_string(di.name, sizeof di.name);
      d.detail = safe_string(di.detail, sizeof di.detail);
    } else {
      d.name = "(device_info failed: " + plugin_error_text(api) + ")";
    }
    rec.devices.push_back(std::move(d));
  }
  return rec;
}

namespace {

// The children's verdicts, per canonical path, valid while the file's size and
// modification time stay the same.
struct Verdict {
  std::uintmax_t size = 0;
  fs::file_time_type mtime{};
  ChildOutcome outcome;
};
std::mutex g_verdicts_mu;
std::map<std::string, Verdict>& verdicts() {
  static auto* m = new std::map<std::string, Verdict>();
  return *m;
}

bool file_stamp(const std::string& path, std::uintmax_t* size, fs::file_time_type* mtime) {
  std::error_code ec1, ec2;
  *size = fs::file_size(path, ec1);
  *mtime = fs::last_write_time(path, ec2);
  return !ec1 && !ec2;
}

// The child's whole job: what the engine does with a plugin up to an open
// device (discovery, then open_chosen), with the stages reported.
void probe_body(const std::string& path) {
  enter_child_mode();
  const PluginRecord rec = load_plugin(path);
  if (!rec.probed || rec.devices.empty()) return;  // a clean refusal: the engine finds it again itself
  const fish_plugin_api& api = rec.lib->api;
  fish_backend_config cfg{};
  cfg.struct_size = sizeof cfg;
  cfg.device_index = -1;
  fish_backend* b = nullptr;
  stage(path, "backend_create");
  if (fenced([&] { return api.backend_create(&cfg, &b); }) != FISH_OK || !b) return;
  stage(path, "open");
  fenced([&] { return api.open(b); });
  // Not destroyed: the engine never destroys an open backend either, and the
  // child ends with _exit.
}

}  // namespace

PluginRecord load_plugin_isolated(const std::string& path, double timeout_s) {
  const std::string canon = canonical_or_same(path);
  bool in_process = false;  // already loaded here (or refused here cleanly): nothing left to risk
  {
    std::lock_guard<std::mutex> lk(g_libs_mu);
    in_process = libs().count(canon) != 0;
  }
  if (in_process) return load_plugin(path);
  std::uintmax_t size = 0;
  fs::file_time_type mtime{};
  const bool stamped = file_stamp(canon, &size, &mtime);
  ChildOutcome out;
  bool cached = false;
  if (stamped) {
    std::lock_guard<std::mutex> lk(g_verdicts_mu);
    auto it = verdicts().find(canon);
    if (it != verdicts().end() && it->second.size == size && it->second.mtime == mtime) {
      out = it->second.outcome;
      cached = true;
    }
  }
  if (!cached) {
    host_log(FISH_LOG_INFO, "loader", path + ": probing in a child process first");
    out = run_in_child([&] { probe_body(canon); }, timeout_s);
    if (out.isolated) {
      char secs[32];
      std::snprintf(secs, sizeof secs, "%.3f", out.seconds);
      host_log(FISH_LOG_INFO, "loader", path + ": the child " + (out.completed ? "came back" : out.describe()) +
                                            " after " + secs + " s");
    }
    if (stamped) {
      std::lock_guard<std::mutex> lk(g_verdicts_mu);
      verdicts()[canon] = Verdict{size, mtime, out};
    }
  }
  if (!out.isolated) {  // no fork on this platform, or no process or pipe to spare: as before isolation
    if (!out.what.empty() && !cached) host_log(FISH_LOG_WARN, "loader", path + ": " + out.what + "; loaded in this process");
    return load_plugin(path);
  }
  if (out.completed) return load_plugin(path);
  PluginRecord rec;
  rec.path = path;
  plugin_name_from_file(fs::path(path).filename().string(), &rec.file_name);
  rec.faulty = true;
  rec.reason = "probed in a child process: " + out.describe();
  return rec;
}

void choose_candidate(BackendReport& rep, size_t rank) {
  if (rep.chosen >= 0) rep.plugins[size_t(rep.chosen)].chosen = false;
  rep.chosen = -1;
  if (rank >= rep.candidates.size()) return;
  rep.chosen = rep.candidates[rank];
  auto& c = rep.plugins[size_t(rep.chosen)];
  c.chosen = true;
  rep.reason = "using " + c.file_name + " (" + c.path + "): " + c.reason;
}

BackendReport discover(const DiscoveryOptions& opts) {
  BackendReport rep;
  rep.folders = opts.folders;
  rep.disabled = opts.disabled;

  std::vector<std::string> files;
  for (const auto& folder : opts.folders)
    for (auto& f : list_plugin_files(folder)) files.push_back(f);
  for (const auto& f : opts.files) files.push_back(f);
  std::vector<std::string> seen;  // canonical paths
  for (const auto& f : files) {
    const std::string canon = canonical_or_same(f);
    if (std::find(seen.begin(), seen.end(), canon) != seen.end()) continue;
    seen.push_back(canon);

    PluginRecord rec;
    rec.path = f;
    if (!plugin_name_from_file(fs::path(f).filename().string(), &rec.file_name))
      rec.file_name = fs::path(f).stem().string();
    const PluginRecord* same = nullptr;
    for (const auto& r : rep.plugins)
      if (r.file_name == rec.file_name && (r.loaded || !r.reason.empty())) same = &r;
    if (opts.disabled) {
      rec.reason = "not loaded: GPU offload is off (FISH_GPU=" + opts.disabled_by + ")";
    } else if (std::find(opts.deny.begin(), opts.deny.end(), rec.file_name) != opts.deny.end()) {
      rec.reason = "not loaded: denied by FISH_PLUGIN_DENY";
    } else if (!opts.only.empty() && rec.file_name != opts.only) {
      rec.reason = "not loaded: FISH_BACKEND=" + opts.only + " selects another plugin";
    } else if (same && same->loaded) {
      rec.reason = "not loaded: shadowed by " + same->path + " (same name, found first)";
    } else {
      std::string file_name = rec.file_name;
      host_log(FISH_LOG_INFO, "loader", f + ": loading" + (opts.isolate ? "" : " in this process (FISH_PLUGIN_ISOLATE=0)"));
      rec = opts.isolate ? load_plugin_isolated(f, opts.timeout_s) : load_plugin(f);
      rec.file_name = file_name;
    }
    rep.plugins.push_back(std::move(rec));
  }

  const std::string where = opts.folders.empty() ? std::string("(no folder)") : join(opts.folders, ", ");
  if (opts.disabled) {
    rep.reason = "GPU offload is off (FISH_GPU=" + opts.disabled_by + "): CPU only";
    return rep;
  }
  // Mark who may be chosen and why not.
  for (auto& r : rep.plugins) {
    if (!r.loaded) continue;
    if (!r.probed) continue;  // reason already says why
    if (r.devices.empty()) {
      r.reason = "probe found no usable device";
      continue;
    }
    if (!opts.only.empty()) {
      r.eligible = true;
    } else if (r.flags & FISH_PLUGIN_MANUAL_ONLY) {
      r.reason = "not chosen automatically: manual-only plugin (use it with FISH_BACKEND=" + r.file_name + ")";
    } else if (r.score <= 0) {
      r.reason = "not chosen automatically: score " + std::to_string(r.score) + " (use it with FISH_BACKEND=" +
                 r.file_name + ")";
    } else {
      r.eligible = true;
    }
  }
  for (int i = 0; i < int(rep.plugins.size()); ++i)
    if (rep.plugins[size_t(i)].eligible) rep.candidates.push_back(i);
  // Best score first; equal scores keep the search order (exe folder first, then by name).
  std::stable_sort(rep.candidates.begin(), rep.candidates.end(), [&](int a, int b) {
    return rep.plugins[size_t(a)].score > rep.plugins[size_t(b)].score;
  });
  if (rep.candidates.empty()) {
    if (!opts.only.empty()) {
      const PluginRecord* named = nullptr;
      for (const auto& r : rep.plugins)
        if (r.file_name == opts.only && r.reason.rfind("not loaded: shadowed", 0) != 0) named = &r;
      rep.reason = named ? "FISH_BACKEND=" + opts.only + ": " + named->path + ": " + named->reason + "; CPU only"
                         : "FISH_BACKEND=" + opts.only + ": no plugin file named fish_" + opts.only + " in " + where +
                               "; CPU only";
    } else if (rep.plugins.empty()) {
      rep.reason = "no plugin files in " + where + ": CPU only";
    } else {
      rep.reason = "no usable plugin among " + std::to_string(rep.plugins.size()) + " file(s) in " + where +
                   ": CPU only";
    }
    return rep;
  }
  const int n_usable = int(rep.candidates.size());
  for (int rank = 0; rank < n_usable; ++rank) {
    auto& r = rep.plugins[size_t(rep.candidates[size_t(rank)])];
    if (!opts.only.empty())
      r.reason = "named by FISH_BACKEND=" + opts.only;
    else if (n_usable == 1)
      r.reason = "the only usable plugin (score " + std::to_string(r.score) + ")";
    else if (rank == 0)
      r.reason = "highest score (" + std::to_string(r.score) + ") of " + std::to_string(n_usable) + " usable plugins";
    else
      r.reason = "usable, score " + std::to_string(r.score) + " (rank " + std::to_string(rank + 1) + " of " +
                 std::to_string(n_usable) + ")";
  }
  choose_candidate(rep, 0);
  return rep;
}

}  // namespace fish::backend
